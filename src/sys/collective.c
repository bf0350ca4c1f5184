/* -fsdp_debug_collectives, at the door of each collective call: before its
   work, a call that the reference pages say is collective checks that every
   rank of its communicator entered it too, and the same call.  A rank that
   skipped the call, or called another, then gets a named error within
   -fsdp_collective_timeout instead of waiting forever inside MPI.

   The check is a nonblocking reduction on a duplicate of the communicator
   (kept as an MPI attribute of it, as PETSc keeps its inner communicators),
   so that it never matches the program's own collectives.  The duplicate is
   made the first time, with MPI_Comm_idup: a collective on the communicator
   itself, as the Create calls' own MPI_Comm_dup is.  A check that timed out
   leaves its reduction (or the idup) pending, which breaks that duplicate
   for good: later checks on it say so at once, and its buffers are never
   freed, since MPI may still write them.  Destroy and Finalize skip the
   check on a broken duplicate, so that what is left can still be freed. */
#include <stdlib.h>
#include <string.h>

#include "fsdpimpl.h"

bool FSDPCollectiveChecks_Private;
static double check_timeout = 600;

typedef struct Inner {
  MPI_Comm inner;
  int64_t mine[2], all[2]; /* the reduction's buffers: MPI owns them while it is pending */
  MPI_Request req;
  char broken_by[64]; /* the call whose check never completed; "" while the duplicate works */
} Inner;

static int keyval = MPI_KEYVAL_INVALID;

static int delete_inner(MPI_Comm comm, int key, void *value, void *extra)
{
  Inner *in = value;
  (void)comm, (void)key, (void)extra;
  /* A broken duplicate still has an operation pending, which may complete
     (a late rank) and write into it: left to MPI, never freed. */
  if (in->broken_by[0]) return MPI_SUCCESS;
  if (in->inner != MPI_COMM_NULL) MPI_Comm_free(&in->inner);
  free(in);
  return MPI_SUCCESS;
}

/* At FSDPInitialize, on its thread: the keyval exists before any check can race to make it. */
FSDPErrorCode FSDPCollectiveChecksSet_Private(bool on, double timeout)
{
  if (on && keyval == MPI_KEYVAL_INVALID)
    FSDPCallMPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_inner, &keyval, NULL));
  FSDPCollectiveChecks_Private = on;
  check_timeout = timeout;
  return FSDP_SUCCESS;
}

void FSDPCollectiveChecksFinalize_Private(void)
{
  if (keyval != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&keyval);
  FSDPCollectiveChecks_Private = false;
}

/* Wait for the check's pending operation until the deadline; one that does
   not complete breaks the duplicate. */
static FSDPErrorCode wait_for_all(Inner *in, double deadline, const char *func, int size)
{
  int done = 0;
  long nap = 1000; /* ns, doubling to 1 ms: the ranks being waited for may need this core */
  for (;;) {
    FSDPCallMPI(MPI_Test(&in->req, &done, MPI_STATUS_IGNORE));
    if (done || FSDPTime_Private() > deadline) break;
    FSDPNap_Private(&nap, 1000000);
  }
  if (!done) snprintf(in->broken_by, sizeof in->broken_by, "%s", func);
  FSDPCheck(done, MPI_COMM_SELF, FSDP_ERR_TIMEOUT,
            "%s is collective on a communicator of %d ranks, and not every one of them called it within %g s "
            "(-fsdp_debug_collectives, -fsdp_collective_timeout): a rank that skips a collective call, or makes "
            "collective calls in another order, leaves the others waiting",
            func, size, check_timeout);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPCollectiveEnter_Private(MPI_Comm comm, const char *func, bool teardown)
{
  Inner *in = NULL;
  int size, found = 0;
  double deadline = FSDPTime_Private() + check_timeout;

  if (comm == MPI_COMM_NULL || keyval == MPI_KEYVAL_INVALID) return FSDP_SUCCESS; /* nothing to check on */
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  if (size == 1) return FSDP_SUCCESS;
  FSDPCallMPI(MPI_Comm_get_attr(comm, keyval, &in, &found));
  if (found && in->broken_by[0] && teardown) return FSDP_SUCCESS;
  if (!found) {
    /* The duplicate itself is made without blocking: a rank that never comes is caught here too. */
    FSDPCheck((in = calloc(1, sizeof *in)), MPI_COMM_SELF, FSDP_ERR_MEM, "%s: out of memory", func);
    in->inner = MPI_COMM_NULL;
    FSDPCallMPI(MPI_Comm_set_attr(comm, keyval, in));
    FSDPCallMPI(MPI_Comm_idup(comm, &in->inner, &in->req));
    FSDPCall(wait_for_all(in, deadline, func, size));
    FSDPCallMPI(MPI_Comm_set_errhandler(in->inner, MPI_ERRORS_RETURN));
  }
  FSDPCheck(!in->broken_by[0], MPI_COMM_SELF, FSDP_ERR_STATE,
            "%s: an earlier collective call on this communicator (%s) did not complete on every rank "
            "(-fsdp_debug_collectives): its ranks no longer agree on the order of collective calls",
            func, in->broken_by);
  /* Every rank's call, as a hash: the maximum of h and of -h are h and -h only if all are h. */
  in->mine[0] = (int64_t)(FSDPHashBytes_Private(FSDP_HASH_INIT, func, strlen(func)) >> 2);
  in->mine[1] = -in->mine[0];
  FSDPCallMPI(MPI_Iallreduce(in->mine, in->all, 2, MPI_INT64_T, MPI_MAX, in->inner, &in->req));
  FSDPCall(wait_for_all(in, deadline, func, size));
  FSDPCheck(in->all[0] == in->mine[0] && in->all[1] == in->mine[1], MPI_COMM_SELF, FSDP_ERR_STATE,
            "collective mismatch (-fsdp_debug_collectives): this rank called %s, and another rank of its "
            "communicator (%d ranks) called a different collective libfsdp call at the same point",
            func, size);
  return FSDP_SUCCESS;
}
