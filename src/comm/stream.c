/* The communication stream (doc/overlap.md): a ring of collectives, run in
   submission order by an engine, waited for by ticket under a watchdog.
   The engines, one file each:
     thread.c       a thread of the context's runs the queue with blocking
                    collectives (needs MPI_THREAD_MULTIPLE)
     nonblocking.c  MPI_I* collectives, progressed inside the library's calls
     sync.c         the collective runs inside Submit: the reference path
     gpu.c          a context's GPU (doc/cuda.md): NCCL (nccl.c) or MPI
                    through pinned staging, ordered after the compute stream
   Adding one is a file with a CommEngineOps and a line in `engines` below.
   Operations are queued in a ring of fixed size allocated at creation, so a
   step allocates nothing here. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"

/* The engines, by name. */
static const CommEngineOps *const engines[] = {
    &CommEngineThread_Private,
    &CommEngineNonblocking_Private,
    &CommEngineSync_Private,
#ifdef FSDP_HAVE_CUDA
    &CommEngineCUDA_Private,
#endif
};

static const char *const kind_names[COMM_NUM_KINDS] = {"AllGather", "ReduceScatter", "AllReduce"};
const char *CommKindName(CommKind kind) { return kind >= 0 && kind < COMM_NUM_KINDS ? kind_names[kind] : "?"; }

int CommRunBlocking(const CommOp *op)
{
  switch (op->kind) {
  case COMM_ALLGATHER: return MPI_Allgather(op->send, op->count, op->type, op->recv, op->count, op->type, op->comm);
  case COMM_REDUCE_SCATTER: return MPI_Reduce_scatter_block(op->send, op->recv, op->count, op->type, op->op, op->comm);
  default: return MPI_Allreduce(op->send, op->recv, op->count, op->type, op->op, op->comm);
  }
}

/* The first pause is short, as a collective on a busy node often finishes
   within a scheduler tick; the longest keeps a finished collective from
   waiting long for its rank to notice. */
#define BACKOFF_FIRST_NS 1000L
#define BACKOFF_MAX_NS 32000L

void CommBackoffPause(CommBackoff *b)
{
  if (!b->sleep) return;
  if (!b->ns) b->ns = BACKOFF_FIRST_NS;
  FSDPNap_Private(&b->ns, BACKOFF_MAX_NS);
}

int CommRun(CommStream s, const CommOp *op)
{
  MPI_Request req = MPI_REQUEST_NULL;
  CommShmState st;
  CommBackoff b = CommBackoffStart(s);
  int flag = 0, err;

  if (!s->sleep && !op->shm) return CommRunBlocking(op);
  if ((err = CommStart(op, &req, &st))) return err;
  while (!(err = CommTest(op, &req, &st, &flag)) && !flag) CommBackoffPause(&b);
  return err;
}

int CommStart(const CommOp *op, MPI_Request *req, CommShmState *st)
{
  return op->shm ? CommShmStart(op, st) : CommStartNonblocking(op, req);
}

int CommTest(const CommOp *op, MPI_Request *req, CommShmState *st, int *flag)
{
  return op->shm ? CommShmTest(op, st, req, flag) : MPI_Test(req, flag, MPI_STATUS_IGNORE);
}

int CommStartNonblocking(const CommOp *op, MPI_Request *req)
{
  switch (op->kind) {
  case COMM_ALLGATHER:
    return MPI_Iallgather(op->send, op->count, op->type, op->recv, op->count, op->type, op->comm, req);
  case COMM_REDUCE_SCATTER:
    return MPI_Ireduce_scatter_block(op->send, op->recv, op->count, op->type, op->op, op->comm, req);
  default: return MPI_Iallreduce(op->send, op->recv, op->count, op->type, op->op, op->comm, req);
  }
}

void CommAccount(CommStream s, Slot *sl)
{
  double t = sl->end - sl->start;
  s->comm_time += t;
  s->ncollectives++;
  if (sl->op.event >= 0) (void)FSDPLogEventAdd_Private(sl->op.event, 1, t, sl->op.bytes);
  if (sl->op.unit_event >= 0) (void)FSDPLogEventAdd_Private(sl->op.unit_event, 1, t, sl->op.bytes);
  if (FSDPTraceOn_Private()) {
    char name[64];
    snprintf(name, sizeof name, "%s %s", CommKindName(sl->op.kind), sl->op.unit ? sl->op.unit : "");
    FSDPTraceSpan_Private(name, 1, sl->start, sl->end, sl->op.bytes);
  }
}

void CommWaitBlocked(CommStream s, bool blocked, double t0)
{
  if (!blocked) return;
  (void)FSDPLogEventEnd(s->ev_wait, 0);
  s->exposed_time += FSDPTime_Private() - t0;
}

FSDPErrorCode CommStreamCreate(const char *engine, double timeout, MPI_Comm abort_comm, Device dev, CommNCCL nccl,
                               CommStream *stream)
{
  const CommEngineOps *ops = NULL;
  CommStream s;
  FSDPLogEvent ev_wait;

  for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++)
    if (!strcmp(engines[i]->name, engine)) ops = engines[i];
  FSDPCheck(ops, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "no communication engine is called '%s' in this build", engine);
  FSDPCall(FSDPLogEventRegister("CommWait", &ev_wait));
  FSDPCall(FSDPLogEventSetKind_Private(ev_wait, FSDP_LOG_KIND_EXPOSED));
  FSDPCall(FSDPCalloc(1, sizeof *s, FSDP_MEM_OTHER, &s));
  s->ops = ops;
  s->ev_wait = ev_wait;
  s->timeout = timeout;
  s->signal_grace = 5;
  s->signal_wait = -1;
  s->abort_comm = abort_comm;
  s->next_run = 1;
  for (int i = 0; i < RING; i++) s->ring[i].request = MPI_REQUEST_NULL;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->done, NULL);
  s->dev = dev;
  s->nccl = nccl;
  if (ops->start) {
    FSDPErrorCode ierr = ops->start(s);
    if (ierr) {
      (void)CommStreamDestroy(&s);
      return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
    }
  }
  *stream = s;
  return FSDP_SUCCESS;
}

FSDPErrorCode CommStreamSubmit(CommStream s, const CommOp *op, uint64_t *ticket)
{
  uint64_t t = s->submitted + 1;
  Slot *sl = CommSlot(s, t);

  FSDPCheck(!sl->queued, MPI_COMM_SELF, FSDP_ERR_INTERNAL,
            "the communication stream has %d operations not waited for: one leaks", RING);
  pthread_mutex_lock(&s->lock);
  sl->op = *op;
  sl->ticket = t;
  sl->queued = true;
  sl->started = sl->done = false;
  sl->mpierr = MPI_SUCCESS;
  s->submitted = t;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  FSDPCall(s->ops->submit(s, sl));
  *ticket = t;
  return FSDP_SUCCESS;
}

void CommWatchdogFire(CommStream s, const char *what, double waited)
{
  int rank = -1, signo = FSDPPendingSignal_Private();
  MPI_Comm_rank(s->abort_comm, &rank);
  if (s->by_signal)
    fprintf(stderr,
            "[%d] libfsdp: signal %d (%s) received while waiting for %s; it has not completed %.1f s later "
            "(-fsdp_signal_grace %g) at step %lld: another rank is not taking part in it. Aborting the job.\n",
            rank, signo,
            signo == SIGTERM   ? "SIGTERM"
            : signo == SIGUSR1 ? "SIGUSR1"
            : signo == SIGINT  ? "SIGINT"
                               : "a signal",
            what, FSDPTime_Private() - s->signal_seen, s->signal_grace, (long long)s->step);
  else
    fprintf(stderr,
            "[%d] libfsdp watchdog: %s has not completed after %.1f s (-fsdp_collective_timeout %g) at step %lld; "
            "another rank is not taking part in it: it skipped it, waits in a different collective, or died. "
            "Aborting the job.\n",
            rank, what, waited, s->timeout, (long long)s->step);
  fflush(stderr);
  /* NCCL kernels waiting for a peer would keep the GPU busy through the abort. */
  if (s->nccl) CommNCCLAbort(s->nccl);
  FSDPAbortJob_Private(MPI_COMM_WORLD, FSDP_ERR_TIMEOUT);
}

/* A wait that goes on `signal_grace` seconds after the program was
   signalled will not end (a collective takes milliseconds). */
bool CommOverdue(CommStream s, double t0, double *waited)
{
  double now = FSDPTime_Private();
  *waited = now - t0;
  if (s->signal_grace > 0 && FSDPPendingSignal_Private()) {
    if (s->signal_wait != t0) { /* this wait saw it first now */
      s->signal_wait = t0;
      s->signal_seen = now;
    } else if (now - s->signal_seen > s->signal_grace) return (s->by_signal = true);
  }
  return s->timeout > 0 && *waited > s->timeout;
}

void CommStreamSetSignalGrace(CommStream s, double seconds) { s->signal_grace = seconds; }

void CommStreamSetSleep(CommStream s, bool sleep) { s->sleep = sleep; }

void CommDescribe(const Slot *sl, char *buf, size_t len)
{
  char b[32];
  int size = 0;
  FSDPFormatBytes(b, sizeof b, (double)sl->op.bytes);
  MPI_Comm_size(sl->op.comm, &size);
  snprintf(buf, len, "the %s of unit '%s' (%s, on a communicator of %d ranks)", CommKindName(sl->op.kind),
           sl->op.unit ? sl->op.unit : "?", b, size);
}

const Slot *CommOldestPending(CommStream s, const Slot *waited)
{
  for (uint64_t t = CommFirstTicket(s); t <= s->submitted; t++) {
    const Slot *sl = CommSlot(s, t);
    if (sl->ticket == t && sl->queued && sl->started && !sl->done) return sl;
  }
  return waited;
}

FSDPErrorCode CommStreamWait(CommStream s, uint64_t ticket)
{
  Slot *sl;
  FSDPErrorCode ierr;
  int err;

  FSDPCheck(ticket >= 1 && ticket <= s->submitted, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "no operation has ticket %llu",
            (unsigned long long)ticket);
  sl = CommSlot(s, ticket);
  FSDPCheck(sl->queued && sl->ticket == ticket, MPI_COMM_SELF, FSDP_ERR_INTERNAL,
            "operation %llu was waited for already", (unsigned long long)ticket);
  ierr = s->ops->wait(s, sl);
  err = sl->mpierr;
  sl->queued = false;
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  if (err != MPI_SUCCESS) FSDPCallMPI(err);
  return FSDP_SUCCESS;
}

FSDPErrorCode CommStreamWaitRequest(CommStream s, MPI_Request *request, const char *what)
{
  double t0 = FSDPTime_Private(), waited;
  int flag = 0;
  CommBackoff b = CommBackoffStart(s);
  FSDPErrorCode engine_err =
      FSDP_SUCCESS; /* returned once the request, which writes into the caller's buffer, is done */
  while (!flag) {
    FSDPCallMPI(MPI_Test(request, &flag, MPI_STATUS_IGNORE));
    if (s->ops->progress) {
      FSDPErrorCode e = s->ops->progress(s);
      if (!engine_err) engine_err = e;
    }
    if (!flag && CommOverdue(s, t0, &waited)) CommWatchdogFire(s, what, waited);
    if (!flag) CommBackoffPause(&b);
  }
  if (engine_err) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, engine_err);
  return FSDP_SUCCESS;
}

void CommStreamSetStep(CommStream s, int64_t step) { s->step = step; }

void CommStreamGetTimes(CommStream s, double *comm_time, double *exposed_time, int64_t *ncollectives)
{
  pthread_mutex_lock(&s->lock);
  if (comm_time) *comm_time = s->comm_time;
  if (exposed_time) *exposed_time = s->exposed_time;
  if (ncollectives) *ncollectives = s->ncollectives;
  pthread_mutex_unlock(&s->lock);
}

FSDPErrorCode CommStreamDestroy(CommStream *stream)
{
  CommStream s = *stream;
  FSDPErrorCode ierr = FSDP_SUCCESS;
  if (!s) return FSDP_SUCCESS;
  /* Nothing may be left running on buffers about to be freed (after a
     GPU failure, the engine saw to that). */
  for (int i = 0; i < RING; i++)
    if (s->failed) s->ring[i].queued = false;
    else if (s->ring[i].queued) {
      FSDPErrorCode e = CommStreamWait(s, s->ring[i].ticket);
      if (!ierr) ierr = e;
    }
  if (s->ops->stop) s->ops->stop(s);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->done);
  pthread_mutex_destroy(&s->lock);
  FSDPCall(FSDPFree(stream));
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}
