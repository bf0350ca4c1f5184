/* deviceimpl.h: where a context's buffers live, and the operations the
   runtime does on them (doc/cuda.md).  A Device is a context's GPU: its
   ordinal, a compute stream (the user's, or one of its own), a
   communication stream, NCCL communicators and pinned staging.  NULL is the
   host: every call then runs the plain loops on host memory, so the host
   backend and the CUDA one share one runtime.  Operations on device memory
   are ordered on the compute stream; the *Host* calls return when the bytes
   have arrived. */
#ifndef FSDP_DEVICEIMPL_H
#define FSDP_DEVICEIMPL_H

#include "fsdpimpl.h"

typedef struct Device_s *Device;

/* A CUDA runtime call that must succeed (in files that include cuda_runtime.h). */
#define CHECK_CUDA(call, what)                                                                                         \
  do {                                                                                                                 \
    cudaError_t e_ = (cudaError_t)(call);                                                                              \
    FSDPCheck(e_ == cudaSuccess, MPI_COMM_SELF, FSDP_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e_),            \
              cudaGetErrorName(e_));                                                                                   \
  } while (0)

/* ------------------------------------------------------------------ set-up (cuda.c) */

/* Binds this rank to a GPU: the one at PCI bus id `busid` (the ShardGroup's
   hwloc choice) when CUDA sees it, else local_rank modulo the visible GPUs.
   `stream` is the user's cudaStream_t (NULL: the context makes its own).
   Without a usable GPU this fails with a message that says why. */
FSDPErrorCode DeviceCreate_Private(const char *busid, int local_rank, void *stream, Device *dev);
FSDPErrorCode DeviceDestroy_Private(Device *dev);
/* At each public call that works on the GPU: makes the context's GPU the
   calling thread's current device (the caller may have switched), and
   fails, naming it, on a sticky CUDA error left by earlier work, after which
   nothing can run on this GPU.  A launch error the caller left pending and
   did not read is cleared, so that it is not blamed on libfsdp's next kernel.
   NULL (the host) does nothing. */
FSDPErrorCode DeviceEnter_Private(Device dev);
/* "GPU 0 (0000:18:00.0, NVIDIA H200)": what views print. */
const char *DeviceDescribe_Private(Device dev);
int DeviceOrdinal_Private(Device dev);
/* The GPUs this process sees (0 without CUDA, a driver or a usable GPU). */
int DeviceCount_Private(void);
/* PCI bus id of the GPU ("0000:18:00.0"), and its communication stream (a
   cudaStream_t), for NCCL (src/comm/nccl.c). */
const char *DeviceBusId_Private(Device dev);
void *DeviceCommStream_Private(Device dev);
/* Pinned host memory for the MPI path, at least `bytes`; allocated once. */
FSDPErrorCode DeviceReservePinned_Private(Device dev, size_t bytes);
void *DevicePinned_Private(Device dev);

/* ------------------------------------------------------------------ memory (device.c) */

FSDPErrorCode DeviceAlloc_Private(Device dev, size_t bytes, FSDPMemCategory category, void *ptr);
FSDPErrorCode DeviceCalloc_Private(Device dev, size_t bytes, FSDPMemCategory category, void *ptr);
/* ptr is the address of the pointer; bytes and category as allocated (device memory has no header). */
FSDPErrorCode DeviceFree_Private(Device dev, void *ptr, size_t bytes, FSDPMemCategory category);
FSDPErrorCode DeviceZero_Private(Device dev, void *p, size_t bytes);
FSDPErrorCode DeviceCopy_Private(Device dev, void *dst, const void *src, size_t bytes);
/* Between device memory and the host; synchronous. */
FSDPErrorCode DeviceToHost_Private(Device dev, void *host, const void *src, size_t bytes);
FSDPErrorCode DeviceFromHost_Private(Device dev, void *dst, const void *host, size_t bytes);
/* The compute stream (a cudaStream_t), for the kernels' launches. */
void *DeviceStream_Private(Device dev);
/* Returns when everything queued on the device's streams has run. */
FSDPErrorCode DeviceSynchronize_Private(Device dev);

/* ------------------------------------------------------------------ arithmetic (device.c, kernels.cu) */

/* dst[i] = src[i] * scale, converted from `from` to `to` (fp32 <-> bf16,
   fp16, fp64).  dst may be src when narrowing fp32 to 16 bits: the 16-bit
   values land behind the fp32 ones still to be read. */
FSDPErrorCode DeviceConvert_Private(Device dev, FSDPDataType to, void *dst, FSDPDataType from, const void *src,
                                    int64_t n, double scale);
/* dst[i] = (assign ? 0 : dst[i]) + src[i] / divisor; dst in `to` (fp32 or
   fp64), src in `to` or, for fp32, bf16 or fp16. */
FSDPErrorCode DeviceAccumulate_Private(Device dev, FSDPDataType to, void *dst, FSDPDataType from, const void *src,
                                       int64_t n, double divisor, bool assign);

/* The optimizer's passes over shard segments on a GPU (cuda.c; the host
   loops are optimizer.c's).  x *= factor, remembering with `check` whether
   a result is not finite; x^2 added to a running sum; both read (and reset)
   by DeviceTakeReductions_Private, which waits for the compute stream. */
FSDPErrorCode DeviceScale_Private(Device dev, FSDPDataType dtype, void *x, int64_t n, double factor, bool check);
FSDPErrorCode DeviceSumSquares_Private(Device dev, FSDPDataType dtype, const void *x, int64_t n);
FSDPErrorCode DeviceTakeReductions_Private(Device dev, bool *nonfinite, double *sumsq);
/* One SGD or AdamW update of a segment (buf, m, v may be NULL as on the host). */
typedef struct {
  double lr, weight_decay, momentum, beta1, beta2, eps, step_size, bc2_sqrt;
  bool nesterov, first;
} DeviceHyper;
FSDPErrorCode DeviceSGD_Private(Device dev, FSDPDataType dtype, void *p, const void *g, void *buf, int64_t n,
                                const DeviceHyper *h);
FSDPErrorCode DeviceAdamW_Private(Device dev, FSDPDataType dtype, void *p, const void *g, void *m, void *v, int64_t n,
                                  const DeviceHyper *h);

/* ------------------------------------------------------------------ the layer library on a GPU (cuda.c, layers.cu)
   The host kernels are src/nn/'s (linear.c, layernorm.c, activation.c, loss.c); these follow their formulas. */

/* Whether the GPU reads p where it is: device or managed memory, not host memory. */
bool DeviceHolds_Private(Device dev, const void *p);
/* C[m, n] = alpha op(A) op(B) + beta C, row-major, by cuBLAS; k > 0.  C is
   fp32; A and B are both `ab`: fp32 (on TF32 tensor cores when tf32), or
   bf16 or fp16, multiplied with fp32 accumulation. */
FSDPErrorCode DeviceGemm_Private(Device dev, FSDPDataType ab, bool tf32, bool ta, bool tb, int64_t m, int64_t n,
                                 int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                                 float beta, float *c, int64_t ldc);
/* `batch` fp32 GEMMs as DeviceGemm_Private's, the i-th on a + i sa, b + i sb
   and c + i sc (strides in floats): one launch for many small products. */
FSDPErrorCode DeviceGemmBatched_Private(Device dev, bool tf32, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                        float alpha, const float *a, int64_t lda, int64_t sa, const float *b,
                                        int64_t ldb, int64_t sb, float beta, float *c, int64_t ldc, int64_t sc,
                                        int64_t batch);
FSDPErrorCode DeviceAddBias_Private(Device dev, int64_t n, int64_t out, const float *bias, float *y);
FSDPErrorCode DeviceBiasGrad_Private(Device dev, int64_t n, int64_t out, const float *dy, float *dbias);
/* act is an FSDPActivation: out = act(x), or (backward) out = dy act'(x). */
FSDPErrorCode DeviceActivation_Private(Device dev, int act, bool backward, int64_t n, const float *x, const float *dy,
                                       float *out);
FSDPErrorCode DeviceLayerNormForward_Private(Device dev, int64_t n, int64_t h, const float *x, const float *weight,
                                             const float *bias, float *y, float *mean, float *rstd);
FSDPErrorCode DeviceLayerNormBackward_Private(Device dev, int64_t n, int64_t h, const float *x, const float *weight,
                                              const float *mean, const float *rstd, const float *dy, float *dx,
                                              float *dweight, float *dbias);
/* A GPT's embedding over rows = sequences x seq positions (token ids as
   floats): forward y = wte[token] + wpe[position]; backward adds dy into
   dwte and dwpe (either NULL to skip). */
FSDPErrorCode DeviceEmbedding_Private(Device dev, bool backward, int64_t rows, int64_t seq, int64_t c, int64_t vocab,
                                      const float *tokens, const float *wte, const float *wpe, float *y,
                                      const float *dy, float *dwte, float *dwpe);
/* Causal attention's softmax in place of s [rows, t] (row i of each t x t
   matrix over columns 0..i), and its backward in place of dp from the
   probabilities p, over rows / t matrices p_stride and dp_stride floats apart. */
FSDPErrorCode DeviceCausalSoftmax_Private(Device dev, int64_t rows, int64_t t, float *s);
FSDPErrorCode DeviceCausalSoftmaxBackward_Private(Device dev, int64_t rows, int64_t t, const float *p, int64_t p_stride,
                                                  float *dp, int64_t dp_stride);
/* MSE over y, target [n, m] (floats), or cross-entropy over logits y [n, m]
   and int64 labels `target` [n]: *sum is the sum of the terms (read back),
   dy (may be NULL) the mean's gradient times scale.  *bad_row is -1, or a
   row whose label is outside [0, m) (that row is skipped). */
FSDPErrorCode DeviceLoss_Private(Device dev, bool cross_entropy, int64_t n, int64_t m, const float *y,
                                 const void *target, double scale, double *sum, int64_t *bad_row, float *dy);

/* ------------------------------------------------------------------ the communication stream (cuda.c, for src/comm/gpu.c) */

/* Events mark points on the streams; each slot of the stream has its own. */
FSDPErrorCode DeviceEventCreate_Private(Device dev, void **event);
void DeviceEventDestroy_Private(void *event);
/* Records `ready` on the compute stream: what the collective reads is written. */
FSDPErrorCode DeviceMarkReady_Private(Device dev, void *ready);
/* On the communication stream, after `ready` (if not NULL): copies bytes, records `done`. */
FSDPErrorCode DeviceCommCopy_Private(Device dev, void *dst, const void *src, size_t bytes, void *ready, void *done);
/* Whether `event` has passed; a CUDA error is returned. */
FSDPErrorCode DeviceEventDone_Private(void *event, bool *done);
/* The same without raising an error, for waits that already have one:
   1 passed, 0 not yet, -1 it never will (CUDA failed). */
int DeviceEventPoll_Private(void *event);
/* The compute stream waits for `done` (what the collective wrote). */
FSDPErrorCode DeviceComputeWaits_Private(Device dev, void *done);

#endif
