/* elementwise.h: the per-element arithmetic that the host loops and the CUDA
   kernels share, so that both backends round the same way, bit for bit:
   float32 to and from bfloat16 and float16 with round to nearest even.
   Plain C11 for the host compiler, __host__ __device__ under nvcc. */
#ifndef FSDP_ELEMENTWISE_H
#define FSDP_ELEMENTWISE_H

#include <stdint.h>

#ifdef __CUDACC__
#define FSDP_EW static __host__ __device__ __forceinline__
#define FSDP_EW_VECTORIZE
#else
#include <string.h>
/* GCC vectorizes the host loops only under its dynamic cost model (-O3's);
   the loops ask for it, and the helpers must carry the same options or GCC
   would not inline them. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__INTEL_COMPILER)
#define FSDP_EW_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define FSDP_EW_VECTORIZE
#endif
#define FSDP_EW FSDP_EW_VECTORIZE static inline
#endif

FSDP_EW uint32_t fsdp_bits_of(float f)
{
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

FSDP_EW float fsdp_float_of(uint32_t u)
{
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/* bfloat16 is the top half of a float32: add half an ulp of the result
   (less one when the kept part is even, so that ties go to even) and cut.
   A NaN keeps its sign and becomes quiet, whatever its payload: cutting
   alone could turn it into an infinity. */
FSDP_EW uint16_t fsdp_bf16_from_f32(float f)
{
  uint32_t u = fsdp_bits_of(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t nan = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

FSDP_EW float fsdp_f32_from_bf16(uint16_t h) { return fsdp_float_of((uint32_t)h << 16); }

/* float16: let the FPU round.  Scaling |f| up by 2^112 and down by 2^-110
   overflows exactly the values above the float16 range to infinity; adding
   a power of two chosen from f's exponent (never below the subnormal
   threshold) leaves the float16 mantissa in the low bits of the sum,
   rounded to nearest even by the addition itself.  Needs the default
   rounding mode and no flush-to-zero (nvcc's default without fast math). */
FSDP_EW uint16_t fsdp_f16_from_f32(float f)
{
  uint32_t u = fsdp_bits_of(f), twice = u + u, sign = u & 0x80000000u;
  uint32_t bias = twice & 0xff000000u;
  float base = (fsdp_float_of(u & 0x7fffffffu) * 0x1.0p+112f) * 0x1.0p-110f;
  uint32_t b;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = fsdp_float_of((bias >> 1) + 0x07800000u) + base;
  b = fsdp_bits_of(base);
  b = ((b >> 13) & 0x00007c00u) + (b & 0x00000fffu);
  return (uint16_t)((sign >> 16) | (twice > 0xff000000u ? 0x7e00u : b));
}

/* float16 to float32 is exact: normals by moving the exponent, subnormals by
   building 0.5 + m 2^-24 and subtracting 0.5. */
FSDP_EW float fsdp_f32_from_f16(uint16_t h)
{
  uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, twice = w + w;
  float normal = fsdp_float_of((twice >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
  float subnormal = fsdp_float_of((twice >> 17) | (126u << 23)) - 0.5f;
  return fsdp_float_of(sign | (twice < (1u << 27) ? fsdp_bits_of(subnormal) : fsdp_bits_of(normal)));
}

/* A 16-bit value (bf16 when `bf16`, else fp16) to float32, and back. */
FSDP_EW float fsdp_widen16(uint16_t h, int bf16) { return bf16 ? fsdp_f32_from_bf16(h) : fsdp_f32_from_f16(h); }
FSDP_EW uint16_t fsdp_narrow16(float f, int bf16) { return bf16 ? fsdp_bf16_from_f32(f) : fsdp_f16_from_f32(f); }

/* The layer library's constants, defined once for src/nn (activation.c, layernorm.c) and src/device/layers.cu. */
#define FSDP_SQRT1_2 0.70710678118654752440      /* 1/sqrt(2) */
#define FSDP_INV_SQRT_2PI 0.39894228040143267794 /* 1/sqrt(2 pi) */
#define FSDP_LAYERNORM_EPS 1e-5

#endif
