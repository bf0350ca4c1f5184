/* The losses: MSE and softmax cross-entropy, each the mean over the batch
   and its gradient, summed in double; FSDPModelLoss (model.c) runs them on
   a model's output, or their CUDA kernels on a GPU. */
#include <math.h>

#include "nnimpl.h"
#include "simd.h"

FSDPErrorCode FSDPMSELoss(int64_t n, int64_t m, const float *y, const float *target, double *loss, float *dy)
{
  CHECK_DIMS(n > 0 && m > 0, "FSDPMSELoss: n is %lld and m %lld: both must be positive", (long long)n, (long long)m);
  CHECK_DIMS(y && target && loss, "FSDPMSELoss: y, target and loss must not be NULL");
  FSDPMSELoss_Private(n, m, y, target, 1.0, loss, dy);
  return FSDP_SUCCESS;
}

void FSDPMSELoss_Private(int64_t n, int64_t m, const float *y, const float *target, double scale, double *loss,
                         float *dy)
{
  double s = 0, count = (double)n * (double)m;
  for (int64_t i = 0; i < n * m; i++) {
    double d = (double)y[i] - target[i];
    s += d * d;
    if (dy) dy[i] = (float)(2.0 * d / count * scale);
  }
  *loss = s / count;
}

FSDPErrorCode FSDPCrossEntropyLoss(int64_t n, int64_t classes, const float *logits, const int64_t *labels, double *loss,
                                   float *dlogits)
{
  CHECK_DIMS(n > 0 && classes > 0, "FSDPCrossEntropyLoss: n is %lld and classes %lld: both must be positive",
             (long long)n, (long long)classes);
  CHECK_DIMS(logits && labels && loss, "FSDPCrossEntropyLoss: logits, labels and loss must not be NULL");
  FSDPCall(FSDPCheckLabels_Private("FSDPCrossEntropyLoss", n, classes, labels));
  FSDPCrossEntropyLoss_Private(n, classes, logits, labels, 1.0, loss, dlogits);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPCheckLabels_Private(const char *caller, int64_t n, int64_t classes, const int64_t *labels)
{
  for (int64_t i = 0; i < n; i++)
    CHECK_DIMS(labels[i] >= 0 && labels[i] < classes, "%s: label %lld of row %lld is not in [0, %lld)", caller,
               (long long)labels[i], (long long)i, (long long)classes);
  return FSDP_SUCCESS;
}

/* Rows whose logits span more than this many units (a -inf logit, say)
   take libm's exp a value at a time; the others keep fsdp_exp's arguments
   in [-SPAN - log(classes), 0], far from its clamps, which the compiler may
   evaluate past (computing on the unclamped value and choosing the result
   after), raising exceptions a program that traps them would die of. */
#define CROSS_ENTROPY_SPAN 600.0

/* One row's log-sum-exp into *lse, and (dz not NULL) its gradient k
   (softmax(z) - e_label) into dz, in double: fsdp_exp's exponentials,
   vectorized, the sum in FSDP_LANE_SUM's fixed order, so every SIMD path
   gives the same bits.  False, with nothing written, for a row whose logits
   span more than CROSS_ENTROPY_SPAN. */
FSDP_INLINE bool cross_entropy_row_body(int64_t classes, const float *z, int64_t label, double k, float *dz,
                                        double *lse)
{
  float zmax = z[0], zmin = z[0];
  FSDP_PRAGMA(omp simd reduction(max : zmax) reduction(min : zmin))
  for (int64_t c = 1; c < classes; c++) {
    zmax = z[c] > zmax ? z[c] : zmax;
    zmin = z[c] < zmin ? z[c] : zmin;
  }
  if (!((double)zmax - zmin <= CROSS_ENTROPY_SPAN)) return false;
#define E(c) fsdp_exp((double)z[c] - zmax)
  double l = zmax + log(FSDP_LANE_SUM(classes, E));
#undef E
  if (dz) {
    FSDP_SIMD_LOOP
    for (int64_t c = 0; c < classes; c++) dz[c] = (float)((fsdp_exp(z[c] - l) - (c == label ? 1.0 : 0.0)) * k);
  }
  *lse = l;
  return true;
}
FSDP_SIMD_KERNEL_RET(bool, cross_entropy_row,
                     (int64_t classes, const float *z, int64_t label, double k, float *dz, double *lse),
                     (classes, z, label, k, dz, lse))

/* The same row with libm's exp, a value at a time: every exponent is at
   most 0 (no overflow), and exp(-inf) is 0. */
static double cross_entropy_row_libm(int64_t classes, const float *z, int64_t label, double k, float *dz)
{
  double zmax = z[0], sum = 0, lse;
  for (int64_t c = 1; c < classes; c++) zmax = z[c] > zmax ? z[c] : zmax;
  for (int64_t c = 0; c < classes; c++) sum += exp(z[c] - zmax);
  lse = zmax + log(sum);
  for (int64_t c = 0; dz && c < classes; c++) dz[c] = (float)((exp(z[c] - lse) - (c == label ? 1.0 : 0.0)) * k);
  return lse;
}

void FSDPCrossEntropyLoss_Private(int64_t n, int64_t classes, const float *logits, const int64_t *labels, double scale,
                                  double *loss, float *dlogits)
{
  double total = 0, k = scale / (double)n;
  for (int64_t i = 0; i < n; i++) {
    const float *z = logits + i * classes;
    float *dz = dlogits ? dlogits + i * classes : NULL;
    double target = z[labels[i]], lse; /* read before dz is written: dlogits may be logits */
    if (!cross_entropy_row(classes, z, labels[i], k, dz, &lse))
      lse = cross_entropy_row_libm(classes, z, labels[i], k, dz);
    total += lse - target;
  }
  *loss = total / (double)n;
}
