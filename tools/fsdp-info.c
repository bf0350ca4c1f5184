/* fsdp-info: what libfsdp was built with and where each rank runs.
   mpiexec -n 4 fsdp-info [-fsdp_* options] */
#include <unistd.h>

#include "fsdp.h"

int main(int argc, char **argv)
{
  FSDPViewer out;
  char host[MPI_MAX_PROCESSOR_NAME];
  int rank, size, len;

  FSDPCall(FSDPInitialize(&argc, &argv));
  FSDPCall(FSDPViewerASCIIOpen(MPI_COMM_WORLD, "stdout", &out));
  FSDPCall(FSDPConfigView(out));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &len);
  FSDPCall(FSDPViewerASCIIPrintf(out, "ranks: %d\n", size));
  FSDPCall(FSDPViewerASCIIPushTab(out));
  FSDPCall(FSDPViewerASCIISynchronizedPrintf(out, "rank %d of %d on %s (pid %ld)\n", rank, size, host, (long)getpid()));
  FSDPCall(FSDPViewerFlush(out));
  FSDPCall(FSDPViewerASCIIPopTab(out));
  FSDPCall(FSDPViewerDestroy(&out));
  FSDPCall(FSDPFinalize());
  return 0;
}
