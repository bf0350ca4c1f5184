/* kernels.h: the CUDA kernels' launchers, callable from C.  Types are
   FSDPDataType values as ints, streams cudaStream_t as void *; each returns
   the cudaError_t of its launch (0: launched). */
#ifndef FSDP_KERNELS_H
#define FSDP_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst = src * scale from type `from` to type `to`; dst == src allowed when
   narrowing 4 bytes to 2 (then one block walks the buffer in order). */
int FSDPKernelConvert(int to, void *dst, int from, const void *src, int64_t n, double scale, void *stream);
/* dst = (assign ? 0 : dst) + src / divisor; dst fp32 or fp64, src the same or (fp32) bf16, fp16. */
int FSDPKernelAccumulate(int to, void *dst, int from, const void *src, int64_t n, double divisor, int assign,
                         void *stream);

/* The optimizer on shards (optimizer.c has the host loops and the formulas).
   x *= factor; *flag (device memory) set to 1 if a result is not finite. */
int FSDPKernelScale(int dtype, void *x, int64_t n, double factor, int *flag, void *stream);
/* *sum (device memory, a double) += the sum of x[i]^2. */
int FSDPKernelSumSquares(int dtype, const void *x, int64_t n, double *sum, void *stream);
typedef struct {
  double lr, weight_decay, momentum, beta1, beta2, eps;
  double step_size, bc2_sqrt; /* AdamW's bias corrections, from the host */
  int nesterov, first;        /* SGD: the first step sets the momentum buffer */
} FSDPKernelHyper;
int FSDPKernelSGD(int dtype, void *p, const void *g, void *buf, int64_t n, const FSDPKernelHyper *h, void *stream);
int FSDPKernelAdamW(int dtype, void *p, const void *g, void *m, void *v, int64_t n, const FSDPKernelHyper *h,
                    void *stream);

/* The layer library (layers.cu; src/nn/linear.c, layernorm.c, activation.c
   and loss.c have the host loops and the formulas), float32, row-major.  y[i, j] += bias[j]; dbias[j] += column sums of dy. */
int FSDPKernelAddBias(int64_t n, int64_t out, const float *bias, float *y, void *stream);
int FSDPKernelBiasGrad(int64_t n, int64_t out, const float *dy, float *dbias, void *stream);
/* act an FSDPActivation; forward writes out = act(x), backward out = dy act'(x). */
int FSDPKernelActivation(int act, int backward, int64_t n, const float *x, const float *dy, float *out, void *stream);
int FSDPKernelLayerNormForward(int64_t n, int64_t h, const float *x, const float *weight, const float *bias, float *y,
                               float *mean, float *rstd, void *stream);
int FSDPKernelLayerNormBackward(int64_t n, int64_t h, const float *x, const float *weight, const float *mean,
                                const float *rstd, const float *dy, float *dx, float *dweight, float *dbias,
                                void *stream);
/* A GPT's embedding (embedding.c): rows = sequences x seq positions, token ids
   as floats.  Forward y = wte[token] + wpe[position]; backward adds dy into
   dwte (atomically: rows that share a token, in no fixed order) and dwpe
   (summed in double), either NULL to skip.  A token outside [0, vocab)
   (ids in device memory are not checked on the host) gives NaN outputs,
   hence a NaN loss, and adds nothing to wte's gradient. */
int FSDPKernelEmbeddingForward(int64_t rows, int64_t seq, int64_t c, int64_t vocab, const float *tokens,
                               const float *wte, const float *wpe, float *y, void *stream);
int FSDPKernelEmbeddingBackward(int64_t rows, int64_t seq, int64_t c, int64_t vocab, const float *tokens,
                                const float *dy, float *dwte, float *dwpe, void *stream);
/* Causal attention's softmax over rows of t scores (row i of each t x t
   matrix keeps columns 0..i) in place of s, and its backward in place of dp
   from the probabilities p, their t x t matrices p_stride and dp_stride
   floats apart (transformer.c). */
int FSDPKernelCausalSoftmax(int64_t rows, int64_t t, float *s, void *stream);
int FSDPKernelCausalSoftmaxBackward(int64_t rows, int64_t t, const float *p, int64_t p_stride, float *dp,
                                    int64_t dp_stride, void *stream);
/* *sum (device memory) += the loss terms; dy = the mean loss's gradient times scale. */
int FSDPKernelMSELoss(int64_t count, const float *y, const float *target, double scale, double *sum, float *dy,
                      void *stream);
/* *bad_row (device memory) becomes row + 1 of a label outside [0, classes) (the last such row). */
int FSDPKernelCrossEntropyLoss(int64_t n, int64_t classes, const float *logits, const int64_t *labels, double scale,
                               double *sum, unsigned long long *bad_row, float *dlogits, void *stream);

#ifdef __cplusplus
}
#endif

#endif
