/* grid.cuh: how the kernel files (kernels.cu, layers.cu) launch and reduce:
   THREADS per block, grid-stride loops over any n, and a block's sum. */
#ifndef FSDP_GRID_CUH
#define FSDP_GRID_CUH

#include <cuda_runtime.h>
#include <stdint.h>

static const int THREADS = 256;

static inline unsigned blocks_for(int64_t n)
{
  int64_t b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 65535 * 8 ? (b > 0 ? b : 1) : 65535 * 8); /* grid-stride loops cover the rest */
}

#define GRID_STRIDE(i, n)                                                                                              \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* The block's sum of v, in every thread; part has THREADS doubles in shared
   memory.  Every thread of the block must call it. */
static __device__ __forceinline__ double block_sum(double v, double *part)
{
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = THREADS / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  v = part[0];
  __syncthreads(); /* part is free for the next sum */
  return v;
}

#endif
