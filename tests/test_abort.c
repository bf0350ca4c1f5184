/* Driven by tests/abort.sh: rank 1 hits an error, and the program reacts as
   argv[1] says.  Not run on its own (no mpitest line). */
#include "fsdp.h"

#include <string.h>

static FSDPErrorCode fail_on_rank_one(int rank)
{
  FSDPCheck(rank != 1, MPI_COMM_SELF, FSDP_ERR_USER, "rank %d was told to fail", rank);
  return FSDP_SUCCESS;
}

static FSDPErrorCode step(int rank)
{
  FSDPCall(fail_on_rank_one(rank));
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  const char *how = argc > 1 ? argv[1] : "continue";
  FSDPErrorCode err;
  int rank;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (strcmp(how, "callabort") == 0) FSDPCallAbort(MPI_COMM_WORLD, step(rank));
  else if (strcmp(how, "main") == 0) FSDPCall(step(rank)); /* rank 1 leaves main with the error code */
  else {
    err = step(rank);
    printf("rank %d continues after error code %d\n", rank, (int)err);
    fflush(stdout);
  }
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
