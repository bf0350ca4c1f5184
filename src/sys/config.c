/* FSDPConfigView: what this build is and which libraries it runs with. */
#include <string.h>

#include "fsdpimpl.h"

#ifdef FSDP_HAVE_HWLOC
#include <hwloc.h>
#endif
#ifdef FSDP_HAVE_HDF5
#include <hdf5.h>
#endif
#ifdef FSDP_HAVE_OPENBLAS_GET_CONFIG
char *openblas_get_config(void);
#endif
#ifdef FSDP_HAVE_FFTW
#include <fftw3.h>
#endif
#ifdef FSDP_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#ifdef FSDP_HAVE_NCCL
#include <nccl.h>
#endif

static FSDPErrorCode view_mpi(FSDPViewer v)
{
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0, version, subversion, provided;
  FSDPCallMPI(MPI_Get_library_version(lib, &len));
  FSDPCallMPI(MPI_Get_version(&version, &subversion));
  FSDPCallMPI(MPI_Query_thread(&provided));
  lib[strcspn(lib, "\n")] = '\0'; /* the first line names the library and version */
  for (char *c = lib; *c; c++)
    if (*c == '\t') *c = ' ';
  FSDPCall(FSDPViewerASCIIPrintf(v, "MPI: %s (standard %d.%d, thread level %s)\n", lib, version, subversion,
                                 provided == MPI_THREAD_MULTIPLE ? "multiple" : "below multiple"));
  return FSDP_SUCCESS;
}

static FSDPErrorCode view_cuda(FSDPViewer v)
{
#ifdef FSDP_HAVE_CUDA
  int runtime = 0, driver = 0, ndev = 0;
  cudaError_t err;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  err = cudaGetDeviceCount(&ndev);
  FSDPCall(FSDPViewerASCIIPrintf(v, "CUDA: runtime %d.%d, ", runtime / 1000, runtime % 1000 / 10));
  if (driver) FSDPCall(FSDPViewerASCIIPrintf(v, "driver %d.%d, ", driver / 1000, driver % 1000 / 10));
  else FSDPCall(FSDPViewerASCIIPrintf(v, "no driver, "));
  if (err == cudaSuccess)
    FSDPCall(FSDPViewerASCIIPrintf(v, "%d device%s visible to rank 0\n", ndev, ndev == 1 ? "" : "s"));
  else FSDPCall(FSDPViewerASCIIPrintf(v, "no usable device on rank 0 (%s)\n", cudaGetErrorString(err)));
#else
  FSDPCall(FSDPViewerASCIIPrintf(v, "CUDA: not built (configure --with-cuda)\n"));
#endif
  return FSDP_SUCCESS;
}

static FSDPErrorCode config_view(FSDPViewer viewer, void *ctx)
{
  (void)ctx;
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "libfsdp %s\n", FSDP_VERSION_STRING));
  FSDPCall(FSDPViewerASCIIPushTab(viewer));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "backends: host%s\n",
#ifdef FSDP_HAVE_CUDA
                                 " cuda"
#else
                                 ""
#endif
                                 ));
  FSDPCall(view_mpi(viewer));
#ifdef FSDP_HAVE_HWLOC
  {
    unsigned api = hwloc_get_api_version();
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "hwloc: API %u.%u.%u\n", api >> 16, (api >> 8) & 0xff, api & 0xff));
  }
#else
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "hwloc: not built (topology from MPI only)\n"));
#endif
#ifdef FSDP_HAVE_HDF5
  {
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "HDF5: %u.%u.%u (parallel)\n", maj, min, rel));
  }
#else
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "HDF5: not built (no checkpoints)\n"));
#endif
#if defined(FSDP_HAVE_OPENBLAS_GET_CONFIG)
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "BLAS: %s\n", openblas_get_config()));
#elif defined(FSDP_HAVE_BLAS)
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "BLAS: CBLAS\n"));
#else
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "BLAS: not built\n"));
#endif
#ifdef FSDP_HAVE_FFTW
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "FFTW: %s (single precision)\n", fftwf_version));
#else
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "FFTW: not built (no fno: models)\n"));
#endif
  FSDPCall(view_cuda(viewer));
#ifdef FSDP_HAVE_NCCL
  {
    int nv = 0;
    ncclGetVersion(&nv);
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "NCCL: %d.%d.%d\n", nv / 10000, nv / 100 % 100, nv % 100));
  }
#else
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "NCCL: not built\n"));
#endif
  FSDPCall(FSDPViewerASCIIPopTab(viewer));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPConfigView(FSDPViewer viewer)
{
  FSDPCall(FSDPViewerApply_Private(__func__, viewer, MPI_COMM_NULL, config_view, NULL));
  return FSDP_SUCCESS;
}
