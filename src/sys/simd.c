/* Which SIMD path the host kernels take (src/include/simd.h): the best this
   CPU runs, or the one -fsdp_simd / FSDPSetSimd asks for.  Every path gives
   the same bits: the kernels add and multiply in one fixed order, and the
   library is built without contraction into FMA (-ffp-contract=off). */
#include "fsdpimpl.h"
#include "simd.h"

static const char *const simd_names[] = {"generic", "avx2", "avx512", NULL};
static int simd_level = -1; /* -1: not chosen yet (the best) */

const char *FSDPSimdName(FSDPSimd level)
{
  return (int)level >= 0 && level < FSDP_NUM_SIMD ? simd_names[level] : "unknown SIMD level";
}

static FSDPSimd best_level(void)
{
#if FSDP_SIMD_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma"))
    return FSDP_SIMD_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return FSDP_SIMD_AVX2;
#endif
  return FSDP_SIMD_GENERIC;
}

FSDPSimd FSDPSimdLevel_Private(void)
{
  if (simd_level < 0) simd_level = (int)best_level();
  return (FSDPSimd)simd_level;
}

FSDPErrorCode FSDPSetSimd(FSDPSimd level)
{
  FSDPSimd best = best_level();
  FSDPCheck((int)level >= 0 && level < FSDP_NUM_SIMD, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPSetSimd: %d is not an FSDPSimd (generic, avx2, avx512)", (int)level);
  FSDPCheck(level <= best, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "-fsdp_simd %s: this CPU (or this build) runs at most %s kernels", simd_names[level], simd_names[best]);
  simd_level = (int)level;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPGetSimd(FSDPSimd *level, FSDPSimd *best)
{
  if (level) *level = FSDPSimdLevel_Private();
  if (best) *best = best_level();
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPSimdSetFromOptions_Private(void)
{
  int choice;
  bool set;
  FSDPCall(FSDPOptionsGetEnum("-fsdp_simd", "the SIMD path of the host kernels (default: the best this CPU runs)",
                              simd_names, (int)FSDPSimdLevel_Private(), &choice, &set));
  if (set) FSDPCall(FSDPSetSimd((FSDPSimd)choice));
  return FSDP_SUCCESS;
}
