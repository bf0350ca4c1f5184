/* hello.c: the smallest libfsdp program.  Build it against an installed libfsdp:
     mpicc hello.c $(pkg-config --cflags --libs fsdp) -o hello && mpiexec -n 2 ./hello */
#include <fsdp.h>

int main(int argc, char **argv)
{
  FSDPViewer out;
  int rank, size, major, minor, patch;

  FSDPCall(FSDPInitialize(&argc, &argv));
  FSDPCall(FSDPGetVersion(&major, &minor, &patch));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  FSDPCall(FSDPViewerASCIIOpen(MPI_COMM_WORLD, "stdout", &out));
  FSDPCall(
      FSDPViewerASCIISynchronizedPrintf(out, "rank %d of %d: libfsdp %d.%d.%d\n", rank, size, major, minor, patch));
  FSDPCall(FSDPViewerFlush(out));
  FSDPCall(FSDPViewerDestroy(&out));
  FSDPCall(FSDPFinalize());
  return 0;
}
