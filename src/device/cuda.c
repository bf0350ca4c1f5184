/* A context's GPU (deviceimpl.h): device choice, streams, events, pinned
   staging (doc/cuda.md); its NCCL communicators are src/comm/nccl.c's.  Built without CUDA, only
   DeviceCreate_Private exists, and it says so. */
#include <stdio.h>
#include <string.h>

#include "deviceimpl.h"

#ifndef FSDP_HAVE_CUDA

FSDPErrorCode DeviceCreate_Private(const char *busid, int local_rank, void *stream, Device *dev)
{
  (void)busid;
  (void)local_rank;
  (void)stream;
  *dev = NULL;
  FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "-fsdp_device cuda: this libfsdp was built without CUDA (configure --with-cuda and --with-nccl)");
}
FSDPErrorCode DeviceDestroy_Private(Device *dev)
{
  *dev = NULL;
  return FSDP_SUCCESS;
}
FSDPErrorCode DeviceEnter_Private(Device dev)
{
  (void)dev;
  return FSDP_SUCCESS;
}
const char *DeviceDescribe_Private(Device dev)
{
  (void)dev;
  return "the host";
}
void *DeviceStream_Private(Device dev)
{
  (void)dev;
  return NULL;
}
int DeviceOrdinal_Private(Device dev)
{
  (void)dev;
  return -1;
}
int DeviceCount_Private(void) { return 0; }
/* Without CUDA no Device exists (DeviceCreate_Private fails), so nothing
   calls these; they are here for the linker. */
#define UNREACHABLE(name) FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "%s in a libfsdp built without CUDA", name)
FSDPErrorCode DeviceReservePinned_Private(Device dev, size_t bytes)
{
  (void)dev, (void)bytes;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceScale_Private(Device dev, FSDPDataType dtype, void *x, int64_t n, double factor, bool check)
{
  (void)dev, (void)dtype, (void)x, (void)n, (void)factor, (void)check;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceSumSquares_Private(Device dev, FSDPDataType dtype, const void *x, int64_t n)
{
  (void)dev, (void)dtype, (void)x, (void)n;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceTakeReductions_Private(Device dev, bool *nonfinite, double *sumsq)
{
  (void)dev, (void)nonfinite, (void)sumsq;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceSGD_Private(Device dev, FSDPDataType dtype, void *p, const void *g, void *buf, int64_t n,
                                const DeviceHyper *h)
{
  (void)dev, (void)dtype, (void)p, (void)g, (void)buf, (void)n, (void)h;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceAdamW_Private(Device dev, FSDPDataType dtype, void *p, const void *g, void *m, void *v, int64_t n,
                                  const DeviceHyper *h)
{
  (void)dev, (void)dtype, (void)p, (void)g, (void)m, (void)v, (void)n, (void)h;
  UNREACHABLE(__func__);
}

bool DeviceHolds_Private(Device dev, const void *p)
{
  (void)dev, (void)p;
  return false;
}
FSDPErrorCode DeviceSynchronize_Private(Device dev)
{
  (void)dev;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceGemm_Private(Device dev, FSDPDataType ab, bool tf32, bool ta, bool tb, int64_t m, int64_t n,
                                 int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                                 float beta, float *c, int64_t ldc)
{
  (void)dev, (void)ab, (void)tf32, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
  (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceGemmBatched_Private(Device dev, bool tf32, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                        float alpha, const float *a, int64_t lda, int64_t sa, const float *b,
                                        int64_t ldb, int64_t sb, float beta, float *c, int64_t ldc, int64_t sc,
                                        int64_t batch)
{
  (void)dev, (void)tf32, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)sa;
  (void)b, (void)ldb, (void)sb, (void)beta, (void)c, (void)ldc, (void)sc, (void)batch;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceAddBias_Private(Device dev, int64_t n, int64_t out, const float *bias, float *y)
{
  (void)dev, (void)n, (void)out, (void)bias, (void)y;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceBiasGrad_Private(Device dev, int64_t n, int64_t out, const float *dy, float *dbias)
{
  (void)dev, (void)n, (void)out, (void)dy, (void)dbias;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceActivation_Private(Device dev, int act, bool backward, int64_t n, const float *x, const float *dy,
                                       float *out)
{
  (void)dev, (void)act, (void)backward, (void)n, (void)x, (void)dy, (void)out;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceLayerNormForward_Private(Device dev, int64_t n, int64_t h, const float *x, const float *weight,
                                             const float *bias, float *y, float *mean, float *rstd)
{
  (void)dev, (void)n, (void)h, (void)x, (void)weight, (void)bias, (void)y, (void)mean, (void)rstd;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceLayerNormBackward_Private(Device dev, int64_t n, int64_t h, const float *x, const float *weight,
                                              const float *mean, const float *rstd, const float *dy, float *dx,
                                              float *dweight, float *dbias)
{
  (void)dev, (void)n, (void)h, (void)x, (void)weight, (void)mean, (void)rstd, (void)dy, (void)dx, (void)dweight;
  (void)dbias;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceLoss_Private(Device dev, bool cross_entropy, int64_t n, int64_t m, const float *y,
                                 const void *target, double scale, double *sum, int64_t *bad_row, float *dy)
{
  (void)dev, (void)cross_entropy, (void)n, (void)m, (void)y, (void)target, (void)scale, (void)sum, (void)bad_row;
  (void)dy;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceEmbedding_Private(Device dev, bool backward, int64_t rows, int64_t seq, int64_t c, int64_t vocab,
                                      const float *tokens, const float *wte, const float *wpe, float *y,
                                      const float *dy, float *dwte, float *dwpe)
{
  (void)dev, (void)backward, (void)rows, (void)seq, (void)c, (void)vocab, (void)tokens, (void)wte, (void)wpe, (void)y,
      (void)dy;
  (void)dwte, (void)dwpe;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceCausalSoftmax_Private(Device dev, int64_t rows, int64_t t, float *s)
{
  (void)dev, (void)rows, (void)t, (void)s;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceCausalSoftmaxBackward_Private(Device dev, int64_t rows, int64_t t, const float *p, int64_t p_stride,
                                                  float *dp, int64_t dp_stride)
{
  (void)dev, (void)rows, (void)t, (void)p, (void)p_stride, (void)dp, (void)dp_stride;
  UNREACHABLE(__func__);
}

#else

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels.h"

struct Device_s {
  int ordinal;
  char busid[32], desc[sizeof((struct cudaDeviceProp *)0)->name + 64];
  cudaStream_t compute, comm;
  bool own_compute;
  cublasHandle_t blas; /* the layer library's GEMMs, on the compute stream; made at the first */
  void *pinned;
  size_t pinned_bytes;
  /* the optimizer's reductions: a flag (int) and a sum (double), in device memory */
  struct Scratch {
    double sum;
    int flag;
    unsigned long long bad_row; /* a loss's bad label: its row + 1 (the last such row), or 0 */
  } * scratch;
};

FSDPErrorCode DeviceCreate_Private(const char *busid, int local_rank, void *stream, Device *dev)
{
  Device d;
  int n = 0, ordinal = -1;
  cudaError_t e;
  struct cudaDeviceProp prop;

  *dev = NULL;
  e = cudaGetDeviceCount(&n);
  FSDPCheck(e == cudaSuccess && n > 0, MPI_COMM_SELF, FSDP_ERR_CUDA,
            "-fsdp_device cuda: no CUDA device is visible to this process (cudaGetDeviceCount: %s%s%s): run on a "
            "node with a GPU, check CUDA_VISIBLE_DEVICES, or use -fsdp_device host",
            e == cudaSuccess ? "0 devices" : cudaGetErrorString(e), e == cudaSuccess ? "" : ", ",
            e == cudaSuccess ? "" : cudaGetErrorName(e));
  /* hwloc's choice when CUDA sees it (CUDA_VISIBLE_DEVICES may hide it). */
  if (busid && cudaDeviceGetByPCIBusId(&ordinal, busid) != cudaSuccess) {
    (void)cudaGetLastError();
    ordinal = -1;
  }
  if (ordinal < 0) ordinal = local_rank % n;
  CHECK_CUDA(cudaSetDevice(ordinal), "cudaSetDevice");
  CHECK_CUDA(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  FSDPCall(FSDPCalloc(1, sizeof *d, FSDP_MEM_OTHER, &d));
  d->ordinal = ordinal;
  if (cudaDeviceGetPCIBusId(d->busid, (int)sizeof d->busid, ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(d->busid, sizeof d->busid, "?");
  }
  snprintf(d->desc, sizeof d->desc, "GPU %d (%s, %s)", ordinal, d->busid, prop.name);
  /* A stream of its own synchronizes with the legacy default stream, so
     that kernels launched without a stream are ordered with the runtime's. */
  if (stream) d->compute = (cudaStream_t)stream;
  else {
    e = cudaStreamCreate(&d->compute);
    d->own_compute = e == cudaSuccess;
  }
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->comm, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMalloc((void **)&d->scratch, sizeof *d->scratch);
  if (e == cudaSuccess) e = cudaMemset(d->scratch, 0, sizeof *d->scratch);
  if (e != cudaSuccess) {
    (void)DeviceDestroy_Private(&d);
    CHECK_CUDA(e, "creating the device's streams and scratch");
  }
  *dev = d;
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceEnter_Private(Device d)
{
  int current = -1;
  cudaError_t e;
  if (!d) return FSDP_SUCCESS;
  if (cudaGetDevice(&current) != cudaSuccess || current != d->ordinal)
    CHECK_CUDA(cudaSetDevice(d->ordinal), "cudaSetDevice to the context's GPU");
  /* The thread's last error may be the caller's unread launch error, or
     another GPU's: not this GPU's business.  A fault already seen on this
     GPU is returned by any call on it, such as a query of the stream. */
  (void)cudaGetLastError();
  e = cudaStreamQuery(d->compute);
  if (e == cudaErrorNotReady) (void)cudaGetLastError(); /* not an error: nothing must read it as one */
  else
    FSDPCheck(e == cudaSuccess, MPI_COMM_SELF, FSDP_ERR_CUDA,
              "the query of the compute stream on %s failed before any work of this call: %s (%s). Either "
              "earlier work faulted on the GPU (a kernel of the caller's or of libfsdp's), which leaves it unusable "
              "for the process, or the stream given to FSDPContextSetCUDAStream is no longer usable (destroyed, "
              "or being captured into a CUDA graph)",
              d->desc, cudaGetErrorString(e), cudaGetErrorName(e));
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceDestroy_Private(Device *dev)
{
  Device d = *dev;
  if (!d) return FSDP_SUCCESS;
  (void)DeviceEnter_Private(d); /* what is freed belongs to this GPU, error or not */
  if (d->comm) (void)cudaStreamSynchronize(d->comm);
  if (d->compute) (void)cudaStreamSynchronize(d->compute);
  if (d->pinned) {
    (void)cudaFreeHost(d->pinned);
    FSDPMemoryCount_Private(FSDP_MEM_COMM_STAGING, d->pinned_bytes, true);
  }
  if (d->blas) (void)cublasDestroy(d->blas);
  if (d->scratch) (void)cudaFree(d->scratch);
  if (d->comm) (void)cudaStreamDestroy(d->comm);
  if (d->own_compute) (void)cudaStreamDestroy(d->compute);
  FSDPCall(FSDPFree(dev));
  return FSDP_SUCCESS;
}

const char *DeviceDescribe_Private(Device dev) { return dev ? dev->desc : "the host"; }
int DeviceOrdinal_Private(Device dev) { return dev ? dev->ordinal : -1; }

int DeviceCount_Private(void)
{
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* no driver, or none usable: not an error of anyone's call */
    n = 0;
  }
  return n;
}
void *DeviceStream_Private(Device dev) { return dev ? (void *)dev->compute : NULL; }
const char *DeviceBusId_Private(Device dev) { return dev->busid; }
void *DeviceCommStream_Private(Device dev) { return (void *)dev->comm; }

FSDPErrorCode DeviceReservePinned_Private(Device d, size_t bytes)
{
  if (bytes <= d->pinned_bytes) return FSDP_SUCCESS;
  if (d->pinned) {
    CHECK_CUDA(cudaFreeHost(d->pinned), "cudaFreeHost");
    FSDPMemoryCount_Private(FSDP_MEM_COMM_STAGING, d->pinned_bytes, true);
    d->pinned = NULL;
    d->pinned_bytes = 0;
  }
  {
    cudaError_t e = cudaMallocHost(&d->pinned, bytes);
    FSDPCheck(e == cudaSuccess, MPI_COMM_SELF, FSDP_ERR_MEM, "cudaMallocHost of %zu bytes of pinned staging: %s", bytes,
              cudaGetErrorString(e));
  }
  d->pinned_bytes = bytes;
  /* Page-locked host memory: the host's, not the GPU's (whose staging the memory plan's formula counts). */
  FSDPMemoryCount_Private(FSDP_MEM_COMM_STAGING, bytes, false);
  return FSDP_SUCCESS;
}

void *DevicePinned_Private(Device d) { return d->pinned; }

/* ------------------------------------------------------------------ the optimizer's passes */

FSDPErrorCode DeviceScale_Private(Device d, FSDPDataType dtype, void *x, int64_t n, double factor, bool check)
{
  CHECK_CUDA((cudaError_t)FSDPKernelScale((int)dtype, x, n, factor, check ? &d->scratch->flag : NULL, d->compute),
             "the scaling kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceSumSquares_Private(Device d, FSDPDataType dtype, const void *x, int64_t n)
{
  CHECK_CUDA((cudaError_t)FSDPKernelSumSquares((int)dtype, x, n, &d->scratch->sum, d->compute),
             "the sum-of-squares kernel");
  return FSDP_SUCCESS;
}

/* The scratch's values once the compute stream reaches this point; the scratch is then zero again. */
static FSDPErrorCode take_scratch(Device d, struct Scratch *got)
{
  CHECK_CUDA(cudaMemcpyAsync(got, d->scratch, sizeof *got, cudaMemcpyDeviceToHost, d->compute),
             "cudaMemcpyAsync of the device's reductions");
  CHECK_CUDA(cudaMemsetAsync(d->scratch, 0, sizeof *d->scratch, d->compute), "cudaMemsetAsync");
  CHECK_CUDA(cudaStreamSynchronize(d->compute), "cudaStreamSynchronize after the device's reductions");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceTakeReductions_Private(Device d, bool *nonfinite, double *sumsq)
{
  struct Scratch got;
  FSDPCall(take_scratch(d, &got));
  if (nonfinite) *nonfinite = got.flag != 0;
  if (sumsq) *sumsq = got.sum;
  return FSDP_SUCCESS;
}

static FSDPKernelHyper kernel_hyper(const DeviceHyper *h)
{
  FSDPKernelHyper k = {h->lr,  h->weight_decay, h->momentum, h->beta1,    h->beta2,
                       h->eps, h->step_size,    h->bc2_sqrt, h->nesterov, h->first};
  return k;
}

FSDPErrorCode DeviceSGD_Private(Device d, FSDPDataType dtype, void *p, const void *g, void *buf, int64_t n,
                                const DeviceHyper *h)
{
  FSDPKernelHyper k = kernel_hyper(h);
  CHECK_CUDA((cudaError_t)FSDPKernelSGD((int)dtype, p, g, buf, n, &k, d->compute), "the SGD kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceAdamW_Private(Device d, FSDPDataType dtype, void *p, const void *g, void *m, void *v, int64_t n,
                                  const DeviceHyper *h)
{
  FSDPKernelHyper k = kernel_hyper(h);
  CHECK_CUDA((cudaError_t)FSDPKernelAdamW((int)dtype, p, g, m, v, n, &k, d->compute), "the AdamW kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceSynchronize_Private(Device d)
{
  CHECK_CUDA(cudaStreamSynchronize(d->compute), "cudaStreamSynchronize of the compute stream");
  CHECK_CUDA(cudaStreamSynchronize(d->comm), "cudaStreamSynchronize of the communication stream");
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ the layer library */

bool DeviceHolds_Private(Device d, const void *p)
{
  struct cudaPointerAttributes at;
  (void)d;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* not an error to keep: p is simply not CUDA's */
    return false;
  }
  return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
}

/* cuBLAS's handle, made at the first product: its memory only for contexts that multiply. */
static FSDPErrorCode start_blas(Device d)
{
  cublasStatus_t st;
  if (d->blas) return FSDP_SUCCESS;
  st = cublasCreate(&d->blas);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(d->blas, d->compute);
  FSDPCheck(st == CUBLAS_STATUS_SUCCESS, MPI_COMM_SELF, FSDP_ERR_CUDA, "cublasCreate on %s: %s", d->desc,
            cublasGetStatusString(st));
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceGemm_Private(Device d, FSDPDataType ab, bool tf32, bool ta, bool tb, int64_t m, int64_t n,
                                 int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                                 float beta, float *c, int64_t ldc)
{
  cudaDataType_t t = ab == FSDP_BFLOAT16 ? CUDA_R_16BF : ab == FSDP_FLOAT16 ? CUDA_R_16F : CUDA_R_32F;
  cublasComputeType_t compute = ab == FSDP_FLOAT32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasStatus_t st;
  if (m == 0 || n == 0) return FSDP_SUCCESS;
  FSDPCall(start_blas(d));
  FSDPCheck(k > 0 && m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_INTERNAL,
            "DeviceGemm: m %lld, n %lld, k %lld", (long long)m, (long long)n, (long long)k);
  /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands. */
  st = cublasGemmEx(d->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k,
                    &alpha, b, t, (int)ldb, a, t, (int)lda, &beta, c, CUDA_R_32F, (int)ldc, compute,
                    CUBLAS_GEMM_DEFAULT);
  FSDPCheck(st == CUBLAS_STATUS_SUCCESS, MPI_COMM_SELF, FSDP_ERR_CUDA,
            "cublasGemmEx (%s inputs, m %lld, n %lld, k %lld) on %s: %s", FSDPDataTypeName(ab), (long long)m,
            (long long)n, (long long)k, d->desc, cublasGetStatusString(st));
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceGemmBatched_Private(Device d, bool tf32, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                        float alpha, const float *a, int64_t lda, int64_t sa, const float *b,
                                        int64_t ldb, int64_t sb, float beta, float *c, int64_t ldc, int64_t sc,
                                        int64_t batch)
{
  cublasStatus_t st;
  if (m == 0 || n == 0 || batch == 0) return FSDP_SUCCESS;
  FSDPCall(start_blas(d));
  FSDPCheck(k > 0 && m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && batch <= INT32_MAX, MPI_COMM_SELF,
            FSDP_ERR_INTERNAL, "DeviceGemmBatched: m %lld, n %lld, k %lld, batch %lld", (long long)m, (long long)n,
            (long long)k, (long long)batch);
  /* Row-major, as DeviceGemm_Private: the operands swap. */
  st = cublasGemmStridedBatchedEx(d->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n,
                                  (int)m, (int)k, &alpha, b, CUDA_R_32F, (int)ldb, sb, a, CUDA_R_32F, (int)lda, sa,
                                  &beta, c, CUDA_R_32F, (int)ldc, sc, (int)batch,
                                  tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  FSDPCheck(st == CUBLAS_STATUS_SUCCESS, MPI_COMM_SELF, FSDP_ERR_CUDA,
            "cublasGemmStridedBatchedEx (m %lld, n %lld, k %lld, %lld products) on %s: %s", (long long)m, (long long)n,
            (long long)k, (long long)batch, d->desc, cublasGetStatusString(st));
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceAddBias_Private(Device d, int64_t n, int64_t out, const float *bias, float *y)
{
  CHECK_CUDA((cudaError_t)FSDPKernelAddBias(n, out, bias, y, d->compute), "the bias kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceBiasGrad_Private(Device d, int64_t n, int64_t out, const float *dy, float *dbias)
{
  CHECK_CUDA((cudaError_t)FSDPKernelBiasGrad(n, out, dy, dbias, d->compute), "the bias gradient kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceActivation_Private(Device d, int act, bool backward, int64_t n, const float *x, const float *dy,
                                       float *out)
{
  CHECK_CUDA((cudaError_t)FSDPKernelActivation(act, backward, n, x, dy, out, d->compute), "the activation kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceLayerNormForward_Private(Device d, int64_t n, int64_t h, const float *x, const float *weight,
                                             const float *bias, float *y, float *mean, float *rstd)
{
  CHECK_CUDA((cudaError_t)FSDPKernelLayerNormForward(n, h, x, weight, bias, y, mean, rstd, d->compute),
             "the LayerNorm kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceLayerNormBackward_Private(Device d, int64_t n, int64_t h, const float *x, const float *weight,
                                              const float *mean, const float *rstd, const float *dy, float *dx,
                                              float *dweight, float *dbias)
{
  CHECK_CUDA((cudaError_t)FSDPKernelLayerNormBackward(n, h, x, weight, mean, rstd, dy, dx, dweight, dbias, d->compute),
             "the LayerNorm backward kernels");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceEmbedding_Private(Device d, bool backward, int64_t rows, int64_t seq, int64_t c, int64_t vocab,
                                      const float *tokens, const float *wte, const float *wpe, float *y,
                                      const float *dy, float *dwte, float *dwpe)
{
  if (backward)
    CHECK_CUDA((cudaError_t)FSDPKernelEmbeddingBackward(rows, seq, c, vocab, tokens, dy, dwte, dwpe, d->compute),
               "the embedding backward kernels");
  else
    CHECK_CUDA((cudaError_t)FSDPKernelEmbeddingForward(rows, seq, c, vocab, tokens, wte, wpe, y, d->compute),
               "the embedding kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceCausalSoftmax_Private(Device d, int64_t rows, int64_t t, float *s)
{
  CHECK_CUDA((cudaError_t)FSDPKernelCausalSoftmax(rows, t, s, d->compute), "the attention softmax kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceCausalSoftmaxBackward_Private(Device d, int64_t rows, int64_t t, const float *p, int64_t p_stride,
                                                  float *dp, int64_t dp_stride)
{
  CHECK_CUDA((cudaError_t)FSDPKernelCausalSoftmaxBackward(rows, t, p, p_stride, dp, dp_stride, d->compute),
             "the attention softmax backward kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceLoss_Private(Device d, bool cross_entropy, int64_t n, int64_t m, const float *y, const void *target,
                                 double scale, double *sum, int64_t *bad_row, float *dy)
{
  struct Scratch got;
  if (cross_entropy)
    CHECK_CUDA((cudaError_t)FSDPKernelCrossEntropyLoss(n, m, y, (const int64_t *)target, scale, &d->scratch->sum,
                                                       &d->scratch->bad_row, dy, d->compute),
               "the cross-entropy kernel");
  else
    CHECK_CUDA((cudaError_t)FSDPKernelMSELoss(n * m, y, (const float *)target, scale, &d->scratch->sum, dy, d->compute),
               "the MSE kernel");
  FSDPCall(take_scratch(d, &got));
  *sum = got.sum;
  *bad_row = (int64_t)got.bad_row - 1;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ the communication stream */

FSDPErrorCode DeviceEventCreate_Private(Device d, void **event)
{
  cudaEvent_t ev;
  (void)d;
  CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  *event = (void *)ev;
  return FSDP_SUCCESS;
}

void DeviceEventDestroy_Private(void *event)
{
  if (event) (void)cudaEventDestroy((cudaEvent_t)event);
}

FSDPErrorCode DeviceMarkReady_Private(Device d, void *ready)
{
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)ready, d->compute), "cudaEventRecord on the compute stream");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceCommCopy_Private(Device d, void *dst, const void *src, size_t bytes, void *ready, void *done)
{
  if (ready) CHECK_CUDA(cudaStreamWaitEvent(d->comm, (cudaEvent_t)ready, 0), "cudaStreamWaitEvent");
  if (bytes) CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, d->comm), "cudaMemcpyAsync (staging)");
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)done, d->comm), "cudaEventRecord on the communication stream");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceEventDone_Private(void *event, bool *done)
{
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  *done = e == cudaSuccess;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError(); /* not an error: the next launch's check must not read it as one */
    return FSDP_SUCCESS;
  }
  CHECK_CUDA(e, "cudaEventQuery");
  return FSDP_SUCCESS;
}

int DeviceEventPoll_Private(void *event)
{
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaSuccess) return 1;
  (void)cudaGetLastError();
  return e == cudaErrorNotReady ? 0 : -1;
}

FSDPErrorCode DeviceComputeWaits_Private(Device d, void *done)
{
  CHECK_CUDA(cudaStreamWaitEvent(d->compute, (cudaEvent_t)done, 0), "cudaStreamWaitEvent on the compute stream");
  return FSDP_SUCCESS;
}

#endif /* FSDP_HAVE_CUDA */
