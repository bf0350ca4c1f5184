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

#ifdef __cplusplus
}
#endif

#endif
