/* The runtime's operations on buffers (deviceimpl.h): the host loops, and
   the same operations on the device's compute stream when the context has a
   GPU.  A NULL Device is the host. */
#include <string.h>

#include "deviceimpl.h"
#include "elementwise.h"
#include "simd.h"

#ifdef FSDP_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels.h"

#endif

/* ------------------------------------------------------------------ memory */

/* Device memory is counted by category as host memory is, in its own
   totals (FSDPGetDeviceMemoryStats).  No header can sit in front of it: the
   caller gives the size and category back when it frees. */

FSDPErrorCode DeviceAlloc_Private(Device dev, size_t bytes, FSDPMemCategory category, void *ptr)
{
  if (!dev) return FSDPMalloc(bytes, category, ptr);
#ifdef FSDP_HAVE_CUDA
  {
    void *p = NULL;
    cudaError_t e;
    memset(ptr, 0, sizeof p);
    /* cudaMalloc of 0 bytes returns NULL, which reads as "not allocated". */
    e = cudaMalloc(&p, bytes ? bytes : 1);
    FSDPCheck(e == cudaSuccess, MPI_COMM_SELF, FSDP_ERR_MEM, "cudaMalloc of %zu bytes of %s on %s: %s", bytes,
              FSDPMemCategoryName(category), DeviceDescribe_Private(dev), cudaGetErrorString(e));
    FSDPDeviceMemoryCount_Private(category, bytes, false);
    memcpy(ptr, &p, sizeof p);
    return FSDP_SUCCESS;
  }
#else
  FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED, "DeviceAlloc: libfsdp was built without CUDA");
#endif
}

FSDPErrorCode DeviceCalloc_Private(Device dev, size_t bytes, FSDPMemCategory category, void *ptr)
{
  void *p;
  FSDPCall(DeviceAlloc_Private(dev, bytes, category, &p));
  FSDPCall(DeviceZero_Private(dev, p, bytes));
  memcpy(ptr, &p, sizeof p);
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceFree_Private(Device dev, void *ptr, size_t bytes, FSDPMemCategory category)
{
  if (!dev) return FSDPFree(ptr);
#ifdef FSDP_HAVE_CUDA
  {
    void *p;
    memcpy(&p, ptr, sizeof p);
    if (!p) return FSDP_SUCCESS;
    /* Only a GPU that failed refuses a valid pointer, and its memory goes
       with the process's context: freeing must not stop a destroy. */
    if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
    FSDPDeviceMemoryCount_Private(category, bytes, true);
    memset(ptr, 0, sizeof p);
  }
#else
  (void)bytes;
  (void)category;
#endif
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceZero_Private(Device dev, void *p, size_t bytes)
{
  if (!bytes) return FSDP_SUCCESS;
  if (!dev) {
    memset(p, 0, bytes);
    return FSDP_SUCCESS;
  }
#ifdef FSDP_HAVE_CUDA
  CHECK_CUDA(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)DeviceStream_Private(dev)), "cudaMemsetAsync");
#endif
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceCopy_Private(Device dev, void *dst, const void *src, size_t bytes)
{
  if (!bytes || dst == src) return FSDP_SUCCESS;
  if (!dev) {
    memmove(dst, src, bytes);
    return FSDP_SUCCESS;
  }
#ifdef FSDP_HAVE_CUDA
  CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)DeviceStream_Private(dev)),
             "cudaMemcpyAsync (device to device)");
#endif
  return FSDP_SUCCESS;
}

/* A copy across the host-device boundary, done when this returns: the host
   side may be read or reused at once. */
static FSDPErrorCode copy_across(Device dev, void *dst, const void *src, size_t bytes, bool to_host)
{
  if (!dev) return DeviceCopy_Private(dev, dst, src, bytes);
#ifdef FSDP_HAVE_CUDA
  {
    cudaStream_t s = (cudaStream_t)DeviceStream_Private(dev);
    if (!bytes) return FSDP_SUCCESS;
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s),
               to_host ? "cudaMemcpyAsync (device to host)" : "cudaMemcpyAsync (host to device)");
    CHECK_CUDA(cudaStreamSynchronize(s), "cudaStreamSynchronize after a copy across");
  }
#else
  (void)to_host;
#endif
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceToHost_Private(Device dev, void *host, const void *src, size_t bytes)
{
  return copy_across(dev, host, src, bytes, true);
}

FSDPErrorCode DeviceFromHost_Private(Device dev, void *dst, const void *host, size_t bytes)
{
  return copy_across(dev, dst, host, bytes, false);
}

/* ------------------------------------------------------------------ arithmetic */

/* Elements converted at a time through a buffer on the stack. */
#define CHUNK 1024

static bool is16(FSDPDataType t) { return t == FSDP_BFLOAT16 || t == FSDP_FLOAT16; }

FSDPErrorCode DeviceConvert_Private(Device dev, FSDPDataType to, void *dst, FSDPDataType from, const void *src,
                                    int64_t n, double scale)
{
  FSDPCheck(from == FSDP_FLOAT32 || to == FSDP_FLOAT32, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "DeviceConvert: %s to %s",
            FSDPDataTypeName(from), FSDPDataTypeName(to));
  if (dev) {
#ifdef FSDP_HAVE_CUDA
    if (to == from && scale == 1) return DeviceCopy_Private(dev, dst, src, (size_t)n * FSDPDataTypeSize(to));
    CHECK_CUDA(FSDPKernelConvert((int)to, dst, (int)from, src, n, scale, DeviceStream_Private(dev)),
               "the conversion kernel");
#endif
    return FSDP_SUCCESS;
  }
  /* In place goes through the stack below even unscaled: fp32 and 16-bit
     pointers into one buffer must not alias in the conversion loops. */
  if (scale == 1 && dst != src) return FSDPDataTypeConvert(to, dst, from, src, n);
  FSDPCheck(from == FSDP_FLOAT32 && is16(to), MPI_COMM_SELF, FSDP_ERR_INTERNAL, "DeviceConvert: scaled %s to %s",
            FSDPDataTypeName(from), FSDPDataTypeName(to));
  {
    /* Chunk by chunk through the stack: in place, the 16-bit results land
       behind the fp32 values still to be read. */
    float tmp[CHUNK], s = (float)scale;
    for (int64_t i = 0; i < n; i += CHUNK) {
      int64_t m = n - i < CHUNK ? n - i : CHUNK;
      memcpy(tmp, (const float *)src + i, (size_t)m * sizeof *tmp);
      for (int64_t k = 0; k < m; k++) tmp[k] *= s;
      FSDPCall(FSDPDataTypeConvert(to, (uint16_t *)dst + i, FSDP_FLOAT32, tmp, m));
    }
  }
  return FSDP_SUCCESS;
}

/* The fp32 gradient's averaging after a reduction (every step, over every
   shard), for each SIMD path: in place (dst == src, which `restrict` rules
   out below), assigned, or added. */
FSDP_INLINE void divide_f32_body(int64_t n, float w, float *restrict d)
{
  FSDP_SIMD_LOOP
  for (int64_t i = 0; i < n; i++) d[i] = d[i] / w;
}
FSDP_SIMD_KERNEL(divide_f32, (int64_t n, float w, float *restrict d), (n, w, d))
FSDP_INLINE void assign_divided_f32_body(int64_t n, float w, const float *restrict s, float *restrict d)
{
  FSDP_SIMD_LOOP
  for (int64_t i = 0; i < n; i++) d[i] = s[i] / w;
}
FSDP_SIMD_KERNEL(assign_divided_f32, (int64_t n, float w, const float *restrict s, float *restrict d), (n, w, s, d))
FSDP_INLINE void add_divided_f32_body(int64_t n, float w, const float *restrict s, float *restrict d)
{
  FSDP_SIMD_LOOP
  for (int64_t i = 0; i < n; i++) d[i] = d[i] + s[i] / w;
}
FSDP_SIMD_KERNEL(add_divided_f32, (int64_t n, float w, const float *restrict s, float *restrict d), (n, w, s, d))

FSDP_EW_VECTORIZE FSDPErrorCode DeviceAccumulate_Private(Device dev, FSDPDataType to, void *dst, FSDPDataType from,
                                                         const void *src, int64_t n, double divisor, bool assign)
{
  FSDPCheck(to == from || (to == FSDP_FLOAT32 && is16(from)), MPI_COMM_SELF, FSDP_ERR_INTERNAL,
            "DeviceAccumulate: %s into %s", FSDPDataTypeName(from), FSDPDataTypeName(to));
  if (dev) {
#ifdef FSDP_HAVE_CUDA
    CHECK_CUDA(FSDPKernelAccumulate((int)to, dst, (int)from, src, n, divisor, assign, DeviceStream_Private(dev)),
               "the accumulation kernel");
#endif
    return FSDP_SUCCESS;
  }
  /* A division, not a multiplication by 1/divisor: an average of exactly
     representable values is exact.  Assigned, not added to 0: -0 stays -0. */
  if (to == FSDP_FLOAT64) {
    double *d = dst;
    const double *s = src;
    for (int64_t i = 0; i < n; i++) d[i] = assign ? s[i] / divisor : d[i] + s[i] / divisor;
  } else if (to == from) {
    float *d = dst, w = (float)divisor;
    const float *s = src;
    if (dst == src && assign) divide_f32(n, w, d);
    else if (dst == src)
      for (int64_t i = 0; i < n; i++) d[i] = d[i] + d[i] / w;
    else if (assign) assign_divided_f32(n, w, s, d);
    else add_divided_f32(n, w, s, d);
  } else {
    /* One loop per type, so that GCC vectorizes each (as in dtype.c). */
    float *d = dst, w = (float)divisor;
    const uint16_t *s = src;
    if (from == FSDP_BFLOAT16)
      for (int64_t i = 0; i < n; i++)
        d[i] = assign ? fsdp_f32_from_bf16(s[i]) / w : d[i] + fsdp_f32_from_bf16(s[i]) / w;
    else
      for (int64_t i = 0; i < n; i++) d[i] = assign ? fsdp_f32_from_f16(s[i]) / w : d[i] + fsdp_f32_from_f16(s[i]) / w;
  }
  return FSDP_SUCCESS;
}
