/* kernels.cu: the CUDA kernels of the runtime's arithmetic on buffers
   (deviceimpl.h).  The per-element rounding is elementwise.h's, shared with
   the host loops, so the two backends agree bit for bit. */
#include "elementwise.h"
#include "grid.cuh"
#include "kernels.h"

/* The FSDPDataType values (fsdp.h), which this file does not include. */
enum { T_F32 = 0, T_F64 = 1, T_BF16 = 2, T_F16 = 3 };

__global__ void narrow16(uint16_t *dst, const float *src, int64_t n, float scale, int bf16)
{
  GRID_STRIDE(i, n) dst[i] = fsdp_narrow16(src[i] * scale, bf16);
}

/* In place: element i's two bytes overlap the float that element i/2 reads.
   The first IN_PLACE_FIRST elements: one block converts a chunk into
   registers, synchronizes, then writes it, so the writes of chunk k end
   before chunk k+1's floats begin.  Then [B 2^k, B 2^(k+1)) in one parallel
   launch each: its writes land on floats [B 2^(k-1), B 2^k), which earlier
   launches on the stream have read, and it reads no float it writes. */
static const int64_t IN_PLACE_FIRST = 1024;

__global__ void narrow16_in_place(void *buf, int64_t n, float scale, int bf16)
{
  const float *src = (const float *)buf;
  uint16_t *dst = (uint16_t *)buf;
  for (int64_t base = 0; base < n; base += blockDim.x) {
    int64_t i = base + threadIdx.x;
    uint16_t h = i < n ? fsdp_narrow16(src[i] * scale, bf16) : 0;
    __syncthreads();
    if (i < n) dst[i] = h;
    __syncthreads();
  }
}

__global__ void widen16(float *dst, const uint16_t *src, int64_t n, float scale, int bf16)
{
  GRID_STRIDE(i, n) dst[i] = fsdp_widen16(src[i], bf16) * scale;
}

template <typename To, typename From> __global__ void cast(To *dst, const From *src, int64_t n, double scale)
{
  GRID_STRIDE(i, n) dst[i] = scale == 1 ? (To)src[i] : (To)((double)src[i] * scale);
}

/* A division, not a multiplication by 1/divisor: averages of exactly
   representable values stay exact, as on the host. */
template <typename T> __global__ void accumulate(T *dst, const T *src, int64_t n, T divisor, int assign)
{
  GRID_STRIDE(i, n) dst[i] = assign ? src[i] / divisor : dst[i] + src[i] / divisor;
}

__global__ void accumulate16(float *dst, const uint16_t *src, int64_t n, float divisor, int assign, int bf16)
{
  GRID_STRIDE(i, n)
  dst[i] = assign ? fsdp_widen16(src[i], bf16) / divisor : dst[i] + fsdp_widen16(src[i], bf16) / divisor;
}

extern "C" int FSDPKernelConvert(int to, void *dst, int from, const void *src, int64_t n, double scale, void *stream)
{
  cudaStream_t s = (cudaStream_t)stream;
  if (n <= 0) return cudaSuccess;
  if (from == T_F32 && (to == T_BF16 || to == T_F16)) {
    if (dst == src) {
      int64_t first = n < IN_PLACE_FIRST ? n : IN_PLACE_FIRST;
      narrow16_in_place<<<1, (unsigned)IN_PLACE_FIRST, 0, s>>>(dst, first, (float)scale, to == T_BF16);
      for (int64_t lo = first; lo < n; lo *= 2) {
        int64_t hi = 2 * lo < n ? 2 * lo : n;
        narrow16<<<blocks_for(hi - lo), THREADS, 0, s>>>((uint16_t *)dst + lo, (const float *)src + lo, hi - lo,
                                                         (float)scale, to == T_BF16);
      }
    } else
      narrow16<<<blocks_for(n), THREADS, 0, s>>>((uint16_t *)dst, (const float *)src, n, (float)scale, to == T_BF16);
  } else if (to == T_F32 && (from == T_BF16 || from == T_F16))
    widen16<<<blocks_for(n), THREADS, 0, s>>>((float *)dst, (const uint16_t *)src, n, (float)scale, from == T_BF16);
  else if (to == T_F64 && from == T_F32)
    cast<double, float><<<blocks_for(n), THREADS, 0, s>>>((double *)dst, (const float *)src, n, scale);
  else if (to == T_F32 && from == T_F64)
    cast<float, double><<<blocks_for(n), THREADS, 0, s>>>((float *)dst, (const double *)src, n, scale);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

extern "C" int FSDPKernelAccumulate(int to, void *dst, int from, const void *src, int64_t n, double divisor, int assign,
                                    void *stream)
{
  cudaStream_t s = (cudaStream_t)stream;
  if (n <= 0) return cudaSuccess;
  if (to == T_F64 && from == T_F64)
    accumulate<double><<<blocks_for(n), THREADS, 0, s>>>((double *)dst, (const double *)src, n, divisor, assign);
  else if (to == T_F32 && from == T_F32)
    accumulate<float><<<blocks_for(n), THREADS, 0, s>>>((float *)dst, (const float *)src, n, (float)divisor, assign);
  else if (to == T_F32 && (from == T_BF16 || from == T_F16))
    accumulate16<<<blocks_for(n), THREADS, 0, s>>>((float *)dst, (const uint16_t *)src, n, (float)divisor, assign,
                                                   from == T_BF16);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

/* ------------------------------------------------------------------ the optimizer
   The same formulas, in the same types and order, as optimizer.c's loops;
   nvcc builds this file without FMA contraction (-fmad=false), so the device
   rounds each operation as the host does. */

template <typename T> __device__ bool is_finite_value(T x)
{
  return fabs((double)x) <= (sizeof(T) == 8 ? 1.7976931348623157e308 : 3.4028234663852886e38);
}

template <typename T> __global__ void scale_k(T *x, int64_t n, T factor, int *flag)
{
  int bad = 0;
  GRID_STRIDE(i, n)
  {
    x[i] *= factor;
    bad |= !is_finite_value(x[i]);
  }
  if (flag && bad) atomicOr(flag, 1);
}

template <typename T> __global__ void sumsq_k(const T *x, int64_t n, double *sum)
{
  __shared__ double part[THREADS];
  double s = 0;
  GRID_STRIDE(i, n) s += (double)x[i] * x[i];
  s = block_sum(s, part);
  if (threadIdx.x == 0) atomicAdd(sum, s);
}

template <typename T> __global__ void sgd_k(T *p, const T *g, T *buf, int64_t n, FSDPKernelHyper h)
{
  const T wd = (T)h.weight_decay, mom = (T)h.momentum, rate = (T)h.lr;
  GRID_STRIDE(i, n)
  {
    T d = g[i];
    if (wd != 0) d += wd * p[i];
    if (buf) {
      buf[i] = h.first ? d : mom * buf[i] + d;
      d = h.nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] -= rate * d;
  }
}

template <typename T> __global__ void adamw_k(T *p, const T *g, T *m, T *v, int64_t n, FSDPKernelHyper h)
{
  /* As the host kernel (src/optim/optimizer.c): 1 - beta rounded from double,
     the update in T, in PyTorch's order. */
  const T decay = (T)(1.0 - h.lr * h.weight_decay), one_b1 = (T)(1.0 - h.beta1), b2 = (T)h.beta2,
          one_b2 = (T)(1.0 - h.beta2), eps = (T)h.eps;
  const T step_size = (T)h.step_size, bc2_sqrt = (T)h.bc2_sqrt;
  GRID_STRIDE(i, n)
  {
    T gi = g[i], mi = m[i] + one_b1 * (gi - m[i]), vi = b2 * v[i] + one_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * (mi / (sqrt(vi) / bc2_sqrt + eps));
  }
}

extern "C" int FSDPKernelScale(int dtype, void *x, int64_t n, double factor, int *flag, void *stream)
{
  cudaStream_t s = (cudaStream_t)stream;
  if (n <= 0) return cudaSuccess;
  if (dtype == T_F64) scale_k<double><<<blocks_for(n), THREADS, 0, s>>>((double *)x, n, factor, flag);
  else scale_k<float><<<blocks_for(n), THREADS, 0, s>>>((float *)x, n, (float)factor, flag);
  return cudaGetLastError();
}

extern "C" int FSDPKernelSumSquares(int dtype, const void *x, int64_t n, double *sum, void *stream)
{
  cudaStream_t s = (cudaStream_t)stream;
  if (n <= 0) return cudaSuccess;
  if (dtype == T_F64) sumsq_k<double><<<blocks_for(n), THREADS, 0, s>>>((const double *)x, n, sum);
  else sumsq_k<float><<<blocks_for(n), THREADS, 0, s>>>((const float *)x, n, sum);
  return cudaGetLastError();
}

extern "C" int FSDPKernelSGD(int dtype, void *p, const void *g, void *buf, int64_t n, const FSDPKernelHyper *h,
                             void *stream)
{
  cudaStream_t s = (cudaStream_t)stream;
  if (n <= 0) return cudaSuccess;
  if (dtype == T_F64)
    sgd_k<double><<<blocks_for(n), THREADS, 0, s>>>((double *)p, (const double *)g, (double *)buf, n, *h);
  else sgd_k<float><<<blocks_for(n), THREADS, 0, s>>>((float *)p, (const float *)g, (float *)buf, n, *h);
  return cudaGetLastError();
}

extern "C" int FSDPKernelAdamW(int dtype, void *p, const void *g, void *m, void *v, int64_t n, const FSDPKernelHyper *h,
                               void *stream)
{
  cudaStream_t s = (cudaStream_t)stream;
  if (n <= 0) return cudaSuccess;
  if (dtype == T_F64)
    adamw_k<double><<<blocks_for(n), THREADS, 0, s>>>((double *)p, (const double *)g, (double *)m, (double *)v, n, *h);
  else adamw_k<float><<<blocks_for(n), THREADS, 0, s>>>((float *)p, (const float *)g, (float *)m, (float *)v, n, *h);
  return cudaGetLastError();
}
