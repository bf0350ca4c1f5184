/** @file fsdp_cuda.h
    The CUDA-specific calls of libfsdp, with CUDA's own types
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

/** Sets the stream the caller computes on, before FSDPContextSetUp.
    Default: one of the context's own, which FSDPContextGetCUDAStream returns.  The context orders
    its kernels and collectives after the caller's work on it.  The stream must stay usable while the
    context runs; it is used on a CUDA context (FSDPContextSetDevice) only.
    @collective Not collective: each rank may call it alone, with its own stream.
    @param[in,out] ctx  the context, not set up
    @param[in] stream   the caller's stream; NULL: one of the context's own (the default)
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is set up, or its FSDPContextSetUp failed
    @see FSDPContextGetCUDAStream, FSDPContextSetDevice, FSDPContextSynchronize */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCUDAStream(FSDPContext ctx, cudaStream_t stream);
/** Gets the compute stream and the GPU's CUDA ordinal, after FSDPContextSetUp.
    The compute stream is the one given to FSDPContextSetCUDAStream, or one of the context's own.  On a
    host context the stream is NULL and the ordinal -1.
    @collective Not collective: each rank may call it alone.
    @param[in] ctx       the context, set up
    @param[out] stream   the compute stream; NULL if not wanted
    @param[out] ordinal  the GPU's CUDA device ordinal (-1 on the host); NULL if not wanted
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed
    @see FSDPContextSetCUDAStream, FSDPContextSynchronize */
FSDP_EXTERN FSDPErrorCode FSDPContextGetCUDAStream(FSDPContext ctx, cudaStream_t *stream, int *ordinal);
/** Sets whether MPI may be given device pointers, before FSDPContextSetUp.
    Default: what MPI says (MPIX_Query_cuda_support), if it can tell; else false: MPI
    collectives go through pinned host staging.  -fsdp_mpi_cuda_aware sets it (FSDPContextSetFromOptions).
    Ranks may differ: the collectives are the same.
    @collective Not collective: each rank may call it alone.
    @param[in,out] ctx  the context, not set up
    @param[in] aware    true: MPI gets device pointers; false: host staging
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is set up, or its FSDPContextSetUp failed
    @see FSDPContextSetFromOptions, FSDPContextSetDevice */
FSDP_EXTERN FSDPErrorCode FSDPContextSetMPICUDAAware(FSDPContext ctx, bool aware);

#ifdef __cplusplus
}
#endif

#endif /* FSDP_CUDA_H */
