/* The nonblocking engine: the submitting thread starts MPI_I* collectives;
   MPI progresses only inside MPI calls, which the library makes at each
   submit and wait (and while waiting for a request of its own). */
#include "engine.h"

/* Starts queued operations whose predecessor allows, and tests the started ones. */
static FSDPErrorCode progress(CommStream s)
{
  CommShm shm_busy = NULL; /* the window of a shared-memory operation under way */
  for (uint64_t t = CommFirstTicket(s); t <= s->submitted; t++) {
    Slot *sl = CommSlot(s, t);
    if (!sl->queued || sl->done) continue;
    if (!sl->started) {
      const Slot *prev = t > 1 ? CommSlot(s, t - 1) : NULL;
      if (sl->op.after_previous && prev && prev->ticket == t - 1 && prev->queued && !prev->done) break;
      /* One shared-memory operation at a time per window (engine.h), and the order kept. */
      if (shm_busy && sl->op.shm == shm_busy) break;
      sl->start = FSDPTime_Private();
      sl->mpierr = CommStart(&sl->op, &sl->request, &sl->shm);
      sl->started = true;
      if (sl->mpierr) {
        sl->done = true;
        sl->end = sl->start;
        continue;
      }
    }
    int flag = 0;
    sl->mpierr = CommTest(&sl->op, &sl->request, &sl->shm, &flag);
    if (flag || sl->mpierr) {
      sl->done = true;
      sl->end = FSDPTime_Private();
      CommAccount(s, sl);
    } else if (sl->op.shm) shm_busy = sl->op.shm;
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode nonblocking_submit(CommStream s, Slot *sl)
{
  (void)sl;
  return progress(s);
}

static FSDPErrorCode nonblocking_wait(CommStream s, Slot *sl)
{
  double t0 = FSDPTime_Private(), waited;
  bool blocked;
  char what[256];
  CommBackoff b = CommBackoffStart(s);

  if (!sl->done) (void)progress(s);
  blocked = !sl->done;
  if (blocked) (void)FSDPLogEventBegin(s->ev_wait);
  while (!sl->done) {
    (void)progress(s);
    if (!sl->done && CommOverdue(s, t0, &waited)) {
      CommDescribe(CommOldestPending(s, sl), what, sizeof what);
      CommWatchdogFire(s, what, waited);
    }
    if (!sl->done) CommBackoffPause(&b);
  }
  CommWaitBlocked(s, blocked, t0);
  return FSDP_SUCCESS;
}

const CommEngineOps CommEngineNonblocking_Private = {
    .name = "nonblocking", .submit = nonblocking_submit, .wait = nonblocking_wait, .progress = progress};
