/* simd.h: host kernels compiled once per SIMD path and chosen at run time
   (src/sys/simd.c), so that one binary runs on any x86-64 and uses AVX-512
   where the CPU has it.  A kernel is an always-inline body; FSDP_SIMD_KERNEL
   compiles it for each path and defines a dispatcher.  Loops in the bodies
   carry `#pragma omp simd` (-fopenmp-simd: no OpenMP runtime), and add in an
   order that does not depend on the vector width, so every path gives the
   same bits as the generic one.  The library is built with -fno-math-errno
   and -fno-trapping-math (configure.ac): sqrtf and comparisons may then be
   vectorized; values are unchanged. */
#ifndef FSDP_SIMD_H
#define FSDP_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fsdp.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define FSDP_SIMD_X86 1
#define FSDP_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define FSDP_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#else
#define FSDP_SIMD_X86 0
#endif

#define FSDP_INLINE static inline __attribute__((always_inline))
#define FSDP_PRAGMA(x) _Pragma(#x)
#define FSDP_SIMD_LOOP FSDP_PRAGMA(omp simd)

FSDPSimd FSDPSimdLevel_Private(void);
FSDPErrorCode FSDPSimdSetFromOptions_Private(void);

/* static void name(params): name##_body(args) on the chosen path. */
#if FSDP_SIMD_X86
#define FSDP_SIMD_KERNEL(name, params, args)                                                                           \
  static void name##_generic params { name##_body args; }                                                              \
  FSDP_TARGET_AVX2 static void name##_avx2 params { name##_body args; }                                                \
  FSDP_TARGET_AVX512 static void name##_avx512 params { name##_body args; }                                            \
  static void name params                                                                                              \
  {                                                                                                                    \
    switch (FSDPSimdLevel_Private()) {                                                                                 \
    case FSDP_SIMD_AVX512: name##_avx512 args; break;                                                                  \
    case FSDP_SIMD_AVX2: name##_avx2 args; break;                                                                      \
    default: name##_generic args; break;                                                                               \
    }                                                                                                                  \
  }
/* The same for a kernel that returns a value of type. */
#define FSDP_SIMD_KERNEL_RET(type, name, params, args)                                                                 \
  static type name##_generic params { return name##_body args; }                                                       \
  FSDP_TARGET_AVX2 static type name##_avx2 params { return name##_body args; }                                         \
  FSDP_TARGET_AVX512 static type name##_avx512 params { return name##_body args; }                                     \
  static type name params                                                                                              \
  {                                                                                                                    \
    switch (FSDPSimdLevel_Private()) {                                                                                 \
    case FSDP_SIMD_AVX512: return name##_avx512 args;                                                                  \
    case FSDP_SIMD_AVX2: return name##_avx2 args;                                                                      \
    default: return name##_generic args;                                                                               \
    }                                                                                                                  \
  }
#else
#define FSDP_SIMD_KERNEL(name, params, args)                                                                           \
  static void name params { name##_body args; }
#define FSDP_SIMD_KERNEL_RET(type, name, params, args)                                                                 \
  static type name params { return name##_body args; }
#endif

/* sum_{j < h} term(j) in double, in FSDP_LANES interleaved partial sums
   added in a fixed order: vectorizes, and gives the same bits on every SIMD
   path.  term is the name of a function-like macro of the index. */
#define FSDP_LANES 8
#define FSDP_LANE_SUM(h, term)                                                                                         \
  ({                                                                                                                   \
    double acc_[FSDP_LANES] = {0};                                                                                     \
    int64_t j = 0;                                                                                                     \
    for (; j + FSDP_LANES <= (h); j += FSDP_LANES) {                                                                   \
      FSDP_SIMD_LOOP                                                                                                   \
      for (int l_ = 0; l_ < FSDP_LANES; l_++) acc_[l_] += term(j + l_);                                                \
    }                                                                                                                  \
    for (int l_ = 0; j + l_ < (h); l_++) acc_[l_] += term(j + l_);                                                     \
    ((acc_[0] + acc_[1]) + (acc_[2] + acc_[3])) + ((acc_[4] + acc_[5]) + (acc_[6] + acc_[7]));                         \
  })

/* ---- vectorizable float math: basic operations only, so every path rounds alike */

FSDP_INLINE float fsdp_bits_float(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* e^x for x in [-87.3, 88.7] (clamped), relative error below 2e-7: x = k ln2 + r,
   |r| <= ln2/2 (ln2 in two parts, Cody and Waite), e^r by its Taylor polynomial
   to degree 7, and 2^k built in the exponent bits.  k is rounded by adding and
   subtracting 1.5 2^23 (no reassociation without -ffast-math). */
FSDP_INLINE float fsdp_expf(float x)
{
  x = x < -87.3f ? -87.3f : x > 88.7f ? 88.7f : x;
  float k = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  float r = (x - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * fsdp_bits_float((uint32_t)((int32_t)k + 127) << 23);
}

/* e^x in double for x in [-708, 709] (clamped; a caller that may pass
   more keeps it away: the compiler may compute on the unclamped value and
   choose the result after), within 1 ulp of libm's exp over that range (a
   scan of 2e7 points): x = k ln2 + r as fsdp_expf does (ln2 in fdlibm's two
   parts, whose first makes k ln2 exact), e^r by its Taylor polynomial to
   degree 13 (the remainder below 5e-18 for |r| <= ln2/2), and 2^k from the
   integer k that adding 1.5 2^52 leaves in the low bits: 64-bit integer
   additions and shifts, which AVX2 has too. */
FSDP_INLINE double fsdp_exp(double x)
{
  double shifted, k, r, p, scale;
  uint64_t bits;
  x = x < -708.0 ? -708.0 : x > 709.0 ? 709.0 : x;
  shifted = x * 1.4426950408889634 + 6755399441055744.0;
  k = shifted - 6755399441055744.0;
  r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  p = 1.0 / 6227020800;
  p = p * r + 1.0 / 479001600;
  p = p * r + 1.0 / 39916800;
  p = p * r + 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  memcpy(&bits, &shifted, sizeof bits);
  bits = (bits - 0x4338000000000000ull + 1023) << 52;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/* erf(x / sqrt 2) given e = exp(-x^2 / 2), which GELU's backward needs too:
   Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7, as PyTorch's
   vectorized CPU erf). */
FSDP_INLINE float fsdp_erf_scaled(float x, float e)
{
  float z = fabsf(x) * 0.70710678f;
  float t = 1.0f / (1.0f + 0.3275911f * z);
  float q = 1.061405429f;
  q = q * t - 1.453152027f;
  q = q * t + 1.421413741f;
  q = q * t - 0.284496736f;
  q = q * t + 0.254829592f;
  return copysignf(1.0f - q * t * e, x);
}

#endif
