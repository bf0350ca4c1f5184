/* FSDPInitialize starts MPI when nobody has, at MPI_THREAD_MULTIPLE, and
   FSDPFinalize ends it.
   mpitest: -n 1
   mpitest: -n 2 */
#include "testutil.h"

int main(int argc, char **argv)
{
  int up, down, provided;
  bool initialized;

  TEST_OK(FSDPInitialized(&initialized));
  TEST_ASSERT(!initialized, "initialized before FSDPInitialize");
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  TEST_CODE(FSDP_ERR_STATE, FSDPLogView(NULL)); /* stdout on MPI_COMM_WORLD needs MPI */
  TEST_MESSAGE_HAS("needs FSDPInitialize() first");
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_PRINT));
  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Initialized(&up);
  TEST_ASSERT(up, "FSDPInitialize must initialize MPI");
  MPI_Query_thread(&provided);
  TEST_ASSERT(provided == MPI_THREAD_MULTIPLE, "thread level %d", provided);
  TEST_OK(FSDPInitialized(&initialized));
  TEST_ASSERT(initialized, "FSDPInitialized after FSDPInitialize");
  TEST_OK(FSDPInitialize(&argc, &argv)); /* a second call does nothing */
  TEST_OK(FSDPFinalize());
  MPI_Finalized(&down);
  TEST_ASSERT(down, "FSDPFinalize must finalize the MPI it initialized");
  TEST_OK(FSDPInitialized(&initialized));
  TEST_ASSERT(!initialized, "still initialized after FSDPFinalize");

  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  TEST_CODE(FSDP_ERR_STATE, FSDPFinalize());
  TEST_MESSAGE_HAS("FSDPFinalize() called without FSDPInitialize()");
  TEST_CODE(FSDP_ERR_STATE, FSDPInitialize(&argc, &argv));
  TEST_MESSAGE_HAS("MPI has been finalized already");
  return 0;
}
