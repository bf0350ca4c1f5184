/* With MPI started by the program: FSDPInitialize leaves MPI alone, says when
   the thread level is too low, can run more than once, and fails cleanly on a
   malformed FSDP_OPTIONS.
   mpitest: -n 2 */
#include "testutil.h"

int main(int argc, char **argv)
{
  int provided, rank, down, one = 1, sum = 0;
  Capture cap;
  char *err;

  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided == MPI_THREAD_MULTIPLE) {
    /* Some MPIs always give MULTIPLE; nothing to warn about then. */
    MPI_Finalize();
    return 77;
  }

  capture_begin(&cap, 2);
  TEST_OK(FSDPInitialize(&argc, &argv));
  err = capture_end(&cap);
  if (rank == 0)
    TEST_ASSERT(strstr(err, "libfsdp WARNING: MPI provides MPI_THREAD_") &&
                    strstr(err, "but libfsdp needs MPI_THREAD_MULTIPLE"),
                "no thread-level warning:\n%s", err);
  else TEST_ASSERT(err[0] == '\0', "rank %d warned too:\n%s", rank, err);
  free(err);
  TEST_OK(FSDPFinalize());
  MPI_Finalized(&down);
  TEST_ASSERT(!down, "FSDPFinalize finalized an MPI it did not initialize");
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  TEST_ASSERT(sum == 2, "MPI still works after FSDPFinalize");

  /* A second life, with a bad FSDP_OPTIONS: an error that names the token. */
  setenv("FSDP_OPTIONS", "log_view", 1);
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  capture_begin(&cap, 2);
  TEST_CODE(FSDP_ERR_OPTION, FSDPInitialize(&argc, &argv));
  free(capture_end(&cap));
  TEST_MESSAGE_HAS("FSDP_OPTIONS: 'log_view' is not a libfsdp option");
  TEST_OK(FSDPFinalize());
  unsetenv("FSDP_OPTIONS");
  /* ... and a third, clean one. */
  setenv("FSDP_OPTIONS", "-fsdp_options_left false -fsdp_not_read 1", 1);
  capture_begin(&cap, 1);
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPFinalize());
  err = capture_end(&cap);
  TEST_ASSERT(!strstr(err, "WARNING: 1 libfsdp option"), "-fsdp_options_left false still reported:\n%s", err);
  free(err);

  MPI_Finalize();
  return 0;
}
