/* The sync engine: each collective runs, blocking, inside Submit: no
   overlap, the reference the other engines are compared with. */
#include "engine.h"

static FSDPErrorCode sync_submit(CommStream s, Slot *sl)
{
  sl->start = FSDPTime_Private();
  sl->mpierr = CommRun(s, &sl->op);
  sl->end = FSDPTime_Private();
  sl->done = sl->started = true;
  CommAccount(s, sl);
  /* The caller waited for all of it. */
  s->exposed_time += sl->end - sl->start;
  (void)FSDPLogEventAdd_Private(s->ev_wait, 1, sl->end - sl->start, 0);
  return FSDP_SUCCESS;
}

/* Done in Submit. */
static FSDPErrorCode sync_wait(CommStream s, Slot *sl)
{
  (void)s;
  (void)sl;
  return FSDP_SUCCESS;
}

const CommEngineOps CommEngineSync_Private = {.name = "sync", .submit = sync_submit, .wait = sync_wait};
