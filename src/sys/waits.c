/* The library's own small blocking collectives (agreeing on errors and
   settings, broadcasting a path or a checksum), which give the core back
   while they wait where ranks outnumber CPUs.  MPICH's blocking collectives
   spin: on a node with more ranks than CPUs the spinning rank holds the core
   that the rank it waits for needs, and each one costs scheduler ticks (a
   checkpoint of a few KB makes some twenty of them).  Here a sleeping wait
   tests the nonblocking collective and naps between tests, as the context's
   collectives do under -fsdp_wait sleep (comm/stream.c). */
#include <time.h>

#include "fsdpimpl.h"

static bool sleep_waits;

void FSDPSetSleepWaits_Private(bool sleep) { sleep_waits = sleep; }

void FSDPNap_Private(long *ns, long most)
{
  nanosleep(&(struct timespec){0, *ns}, NULL);
  if (*ns < most) *ns = 2 * *ns < most ? 2 * *ns : most;
}

/* Nonblocking collectives always, whatever the wait: a blocking collective
   on one rank does not match a nonblocking one on another, and ranks decide
   how to wait each for its own node (and a rank without a context keeps
   MPI's).  MPI_Wait, or tests with naps of 1 us at first, doubling to 32 us:
   most of these finish within a tick, and a short nap notices soon after. */
int FSDPWaitRequests_Private(int n, MPI_Request *req, bool sleep)
{
  int err = MPI_SUCCESS;
  for (int i = 0; i < n; i++) {
    long ns = 1000;
    int done = 0, e;
    if (!sleep) e = MPI_Wait(&req[i], MPI_STATUS_IGNORE);
    else
      while ((e = MPI_Test(&req[i], &done, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !done) FSDPNap_Private(&ns, 32000);
    if (err == MPI_SUCCESS) err = e; /* the rest are still waited for */
  }
  return err;
}

static int wait_for(MPI_Request *req) { return FSDPWaitRequests_Private(1, req, sleep_waits); }

int FSDPAllreduce_Private(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
  MPI_Request req;
  int err = MPI_Iallreduce(send, recv, count, type, op, comm, &req);
  return err == MPI_SUCCESS ? wait_for(&req) : err;
}

int FSDPBcast_Private(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
  MPI_Request req;
  int err = MPI_Ibcast(buf, count, type, root, comm, &req);
  return err == MPI_SUCCESS ? wait_for(&req) : err;
}

int FSDPAllgather_Private(const void *send, int scount, MPI_Datatype stype, void *recv, int rcount, MPI_Datatype rtype,
                          MPI_Comm comm)
{
  MPI_Request req;
  int err = MPI_Iallgather(send, scount, stype, recv, rcount, rtype, comm, &req);
  return err == MPI_SUCCESS ? wait_for(&req) : err;
}

int FSDPBarrier_Private(MPI_Comm comm)
{
  MPI_Request req;
  int err = MPI_Ibarrier(comm, &req);
  return err == MPI_SUCCESS ? wait_for(&req) : err;
}
