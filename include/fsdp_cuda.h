/* fsdp_cuda.h: the CUDA-specific calls of libfsdp, with CUDA's own types
   (as hwloc's cudart.h).  Installed by CUDA builds only (FSDP_WITH_CUDA);
   include it after the CUDA runtime's headers are on the include path.
   doc/cuda.md describes the streams and what runs on them. */
#ifndef FSDP_CUDA_H
#define FSDP_CUDA_H

#include <cuda_runtime_api.h>

#include "fsdp.h"

#if !FSDP_WITH_CUDA
#error "fsdp_cuda.h: this libfsdp was built without CUDA (FSDP_WITH_CUDA is 0 in fsdpconf.h)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Before SetUp: the stream the caller computes on (default: one of the
   context's own, which FSDPContextGetCUDAStream returns).  The context orders
   its kernels and collectives after the caller's work on it. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCUDAStream(FSDPContext ctx, cudaStream_t stream);
/* After SetUp: the compute stream, and the GPU's CUDA ordinal (-1 on the host). */
FSDP_EXTERN FSDPErrorCode FSDPContextGetCUDAStream(FSDPContext ctx, cudaStream_t *stream, int *ordinal);
/* Before SetUp: whether MPI may be given device pointers (default: what MPI
   says, if it can tell; else false: MPI collectives go through pinned host
   staging). */
FSDP_EXTERN FSDPErrorCode FSDPContextSetMPICUDAAware(FSDPContext ctx, bool aware); /* -fsdp_mpi_cuda_aware */

#ifdef __cplusplus
}
#endif

#endif /* FSDP_CUDA_H */
