/* Driven by tests/abort.sh: rank 1 hits an error, and the program reacts as
   argv[1] says; or ("hang") rank 1 never joins an all-gather that rank 0
   waits in, and the job is then signalled.  Not run on its own (no mpitest
   line). */
#include "fsdp.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void on_signal(int signo) { FSDPNotifySignal(signo); }

/* Rank 0 waits in an all-gather that rank 1 skips (it sleeps 60 s instead):
   only the signal the test sends gets rank 0 out before the watchdog. */
static FSDPErrorCode hang(int rank)
{
  FSDPContext ctx;
  FlatParam unit;
  FSDPParamId id;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  FSDPCall(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  FSDPCall(FSDPContextSetFromOptions(ctx));
  FSDPCall(FSDPContextAddUnit(ctx, "lonely", &unit));
  FSDPCall(FlatParamAddParam(unit, "w", 1, (int64_t[]){1000}, &id));
  FSDPCall(FSDPContextSetUp(ctx));
  if (rank == 0) {
    printf("rank 0 waits in the all-gather\n");
    fflush(stdout);
    FSDPCall(FlatParamUnshard(unit));
  } else
    for (time_t end = time(NULL) + 60; time(NULL) < end;) sleep(1); /* a signal cuts one sleep short, not the wait */
  FSDPCall(FSDPContextDestroy(&ctx));
  return FSDP_SUCCESS;
}

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
  if (strcmp(how, "hang") == 0) FSDPCallAbort(MPI_COMM_WORLD, hang(rank));
  else if (strcmp(how, "callabort") == 0) FSDPCallAbort(MPI_COMM_WORLD, step(rank));
  else if (strcmp(how, "main") == 0) FSDPCall(step(rank)); /* rank 1 leaves main with the error code */
  else {
    err = step(rank);
    printf("rank %d continues after error code %d\n", rank, (int)err);
    fflush(stdout);
  }
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
