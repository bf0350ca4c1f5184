/* nnimpl.h: what the layer library's files share. */
#ifndef FSDP_NNIMPL_H
#define FSDP_NNIMPL_H

#include "fsdpimpl.h"
#include "fsdp_nn.h"

#include "elementwise.h" /* the constants, shared with the GPU's kernels */

/* C[m, n] = alpha op(A) op(B) + beta C, row-major: OpenBLAS when built with it. */
void FSDPGemm_Private(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* The losses without their checks; dy is the mean's gradient times scale. */
void FSDPMSELoss_Private(int64_t n, int64_t m, const float *y, const float *target, double scale, double *loss,
                         float *dy);
void FSDPCrossEntropyLoss_Private(int64_t n, int64_t classes, const float *logits, const int64_t *labels, double scale,
                                  double *loss, float *dlogits);
/* Every label in [0, classes), or an error naming the first that is not. */
FSDPErrorCode FSDPCheckLabels_Private(const char *caller, int64_t n, int64_t classes, const int64_t *labels);

#endif
