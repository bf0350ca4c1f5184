/* The host communication stream (doc/overlap.md).  Three engines:
   thread       a thread of the context's runs the queue with blocking
                collectives (needs MPI_THREAD_MULTIPLE); MPI progresses while
                the computing thread computes.
   nonblocking  the submitting thread starts MPI_I* collectives; MPI
                progresses only inside MPI calls (waits and tests).
   sync         the collective runs inside Submit: the reference path.
   Operations are queued in a ring of fixed size allocated at creation, so a
   step allocates nothing here.
   With a Device the stream is the GPU's (doc/cuda.md): each operation waits
   on the compute stream through an event, NCCL ones run on the device's
   communication stream, MPI ones one at a time through pinned staging
   (copied out, MPI_I*, copied back) or on device pointers (CUDA-aware MPI),
   progressed inside the library's calls as the nonblocking engine is.  In a
   group of one rank the result is the input: a copy on the communication
   stream. */
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "commimpl.h"

#define RING 64 /* operations queued and not yet waited for, at most */

/* Where a device operation on MPI is (NCCL ones go from QUEUED to DONE). */
typedef enum { DEV_QUEUED = 0, DEV_STAGING, DEV_RUNNING, DEV_LANDING, DEV_DONE } DevPhase;

typedef struct {
  CommOp op;
  uint64_t ticket;
  void *ready, *staged, *landed; /* device events: the compute stream's point, staging out, the result in */
  DevPhase phase;
  size_t send_off, in_bytes; /* device MPI: where the send block sits in the staging, the bytes coming back */
  bool local;   /* device, a group of one: a copy on the communication stream, no MPI */
  bool queued;  /* submitted and not retired (waited for) */
  bool started; /* nonblocking: the MPI_I* call is made */
  bool done;
  int mpierr;
  MPI_Request request;
  double start, end;
} Slot;

struct CommStream_s {
  FSDPCommEngine engine;
  double timeout;
  double signal_grace;           /* seconds after FSDPNotifySignal; 0: no limit */
  double signal_wait, signal_seen; /* the wait (its start) that saw the signal, and when */
  bool by_signal;                /* the watchdog fires for the signal, not the timeout */
  MPI_Comm abort_comm;
  int64_t step;
  Slot ring[RING];
  uint64_t submitted; /* tickets handed out */
  uint64_t next_run;  /* thread: the next ticket the thread runs */
  pthread_t thread;
  bool have_thread, quit;
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  double comm_time, exposed_time;
  int64_t ncollectives;
  FSDPLogEvent ev_wait;
  Device dev;          /* NULL: the host engines */
  uint64_t mpi_active; /* device: the MPI operation using the pinned staging (0: none) */
  bool failed;         /* device: a CUDA call failed under the stream, which runs nothing more */
};

static const char *const kind_names[COMM_NUM_KINDS] = {"AllGather", "ReduceScatter", "AllReduce"};
const char *CommKindName(CommKind kind) { return kind >= 0 && kind < COMM_NUM_KINDS ? kind_names[kind] : "?"; }

static Slot *slot_of(CommStream s, uint64_t ticket) { return &s->ring[(ticket - 1) % RING]; }
/* The oldest ticket whose slot may still hold its operation. */
static uint64_t first_ticket(CommStream s) { return s->submitted >= RING ? s->submitted - RING + 1 : 1; }

static int run_blocking(const CommOp *op)
{
  switch (op->kind) {
  case COMM_ALLGATHER: return MPI_Allgather(op->send, op->count, op->type, op->recv, op->count, op->type, op->comm);
  case COMM_REDUCE_SCATTER: return MPI_Reduce_scatter_block(op->send, op->recv, op->count, op->type, op->op, op->comm);
  default: return MPI_Allreduce(op->send, op->recv, op->count, op->type, op->op, op->comm);
  }
}

static int start_nonblocking(const CommOp *op, MPI_Request *req)
{
  switch (op->kind) {
  case COMM_ALLGATHER:
    return MPI_Iallgather(op->send, op->count, op->type, op->recv, op->count, op->type, op->comm, req);
  case COMM_REDUCE_SCATTER:
    return MPI_Ireduce_scatter_block(op->send, op->recv, op->count, op->type, op->op, op->comm, req);
  default: return MPI_Iallreduce(op->send, op->recv, op->count, op->type, op->op, op->comm, req);
  }
}

/* Timing and logging of a finished operation (called once per operation). */
static void account(CommStream s, Slot *sl)
{
  double t = sl->end - sl->start;
  s->comm_time += t;
  s->ncollectives++;
  (void)FSDPLogEventAdd_Private(sl->op.event, 1, t, sl->op.bytes);
  if (sl->op.unit_event >= 0) (void)FSDPLogEventAdd_Private(sl->op.unit_event, 1, t, sl->op.bytes);
}

static void *thread_main(void *arg)
{
  CommStream s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->next_run > s->submitted && !s->quit) pthread_cond_wait(&s->work, &s->lock);
    if (s->next_run > s->submitted) break; /* quit with nothing left */
    Slot *sl = slot_of(s, s->next_run);
    pthread_mutex_unlock(&s->lock);
    sl->start = FSDPTime_Private();
    int err = run_blocking(&sl->op);
    double end = FSDPTime_Private();
    pthread_mutex_lock(&s->lock);
    sl->mpierr = err;
    sl->end = end;
    sl->done = true;
    account(s, sl);
    s->next_run++;
    pthread_cond_broadcast(&s->done);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static void destroy_events(CommStream s)
{
#ifdef FSDP_HAVE_CUDA
  for (int i = 0; i < RING; i++) {
    DeviceEventDestroy_Private(s->ring[i].ready);
    DeviceEventDestroy_Private(s->ring[i].staged);
    DeviceEventDestroy_Private(s->ring[i].landed);
  }
#else
  (void)s;
#endif
}

FSDPErrorCode CommStreamCreate(FSDPCommEngine engine, double timeout, MPI_Comm abort_comm, Device dev,
                               CommStream *stream)
{
  CommStream s;
  FSDPLogEvent ev_wait;
  int err;

  FSDPCall(FSDPLogEventRegister("CommWait", &ev_wait));
  FSDPCall(FSDPLogEventSetKind_Private(ev_wait, FSDP_LOG_KIND_EXPOSED));
  FSDPCall(FSDPCalloc(1, sizeof *s, FSDP_MEM_OTHER, &s));
  s->ev_wait = ev_wait;
  s->engine = engine;
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
#ifdef FSDP_HAVE_CUDA
  for (int i = 0; dev && i < RING; i++) {
    FSDPErrorCode ierr = DeviceEventCreate_Private(dev, &s->ring[i].ready);
    if (!ierr) ierr = DeviceEventCreate_Private(dev, &s->ring[i].staged);
    if (!ierr) ierr = DeviceEventCreate_Private(dev, &s->ring[i].landed);
    if (ierr) {
      (void)CommStreamDestroy(&s);
      return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
    }
  }
#endif
  if (!dev && engine == FSDP_COMM_ENGINE_THREAD) {
    err = pthread_create(&s->thread, NULL, thread_main, s);
    if (err) {
      (void)CommStreamDestroy(&s);
      FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "cannot start the communication thread: %s", strerror(err));
    }
    s->have_thread = true;
  }
  *stream = s;
  return FSDP_SUCCESS;
}

/* Nonblocking engine: starts queued operations whose predecessor allows. */
static void progress(CommStream s)
{
  for (uint64_t t = first_ticket(s); t <= s->submitted; t++) {
    Slot *sl = slot_of(s, t);
    if (!sl->queued || sl->done) continue;
    if (!sl->started) {
      const Slot *prev = t > 1 ? slot_of(s, t - 1) : NULL;
      if (sl->op.after_previous && prev && prev->ticket == t - 1 && prev->queued && !prev->done) break;
      sl->start = FSDPTime_Private();
      sl->mpierr = start_nonblocking(&sl->op, &sl->request);
      sl->started = true;
      if (sl->mpierr) {
        sl->done = true;
        sl->end = sl->start;
        continue;
      }
    }
    int flag = 0;
    sl->mpierr = MPI_Test(&sl->request, &flag, MPI_STATUS_IGNORE);
    if (flag || sl->mpierr) {
      sl->done = true;
      sl->end = FSDPTime_Private();
      account(s, sl);
    }
  }
}

#ifdef FSDP_HAVE_CUDA
/* Device MPI operations: the bytes that leave and arrive, at offsets of the pinned staging. */
static void mpi_layout(const CommOp *op, int rank, int size, size_t *out_off, const void **out_src, size_t *out_bytes,
                       size_t *in_bytes, size_t *send_off)
{
  size_t es = FSDPDataTypeSize(op->dtype), n = (size_t)op->count * es;
  *send_off = 0;
  switch (op->kind) {
  case COMM_ALLGATHER: /* this rank's block goes out, all of them come back */
    *out_off = (size_t)rank * n;
    *out_src = op->send == MPI_IN_PLACE ? (const char *)op->recv + *out_off : op->send;
    *out_bytes = n;
    *in_bytes = n * (size_t)size;
    break;
  case COMM_REDUCE_SCATTER: /* all of it goes out after the result's room */
    *send_off = (n + 255) / 256 * 256;
    *out_off = *send_off;
    *out_src = op->send;
    *out_bytes = n * (size_t)size;
    *in_bytes = n;
    break;
  default:
    *out_off = 0;
    *out_src = op->send == MPI_IN_PLACE ? op->recv : op->send;
    *out_bytes = n;
    *in_bytes = n;
    break;
  }
}

static int start_mpi(const CommOp *op, void *base, size_t send_off, MPI_Request *req)
{
  char *b = base;
  switch (op->kind) {
  case COMM_ALLGATHER:
    return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, op->count, op->type, op->comm, req);
  case COMM_REDUCE_SCATTER:
    return MPI_Ireduce_scatter_block(b + send_off, b, op->count, op->type, op->op, op->comm, req);
  default: return MPI_Iallreduce(MPI_IN_PLACE, b, op->count, op->type, op->op, op->comm, req);
  }
}

static void dev_finish(CommStream s, Slot *sl, int mpierr)
{
  sl->mpierr = mpierr;
  sl->phase = DEV_DONE;
  sl->done = true;
  sl->end = FSDPTime_Private();
  if (sl->op.nccl == NULL && s->mpi_active == sl->ticket) s->mpi_active = 0;
  if (!mpierr) account(s, sl);
}

/* Moves device operations along; a CUDA failure is returned. */
static FSDPErrorCode dev_progress(CommStream s)
{
  for (uint64_t t = first_ticket(s); t <= s->submitted; t++) {
    Slot *sl = slot_of(s, t);
    bool passed = false;
    if (!sl->queued || sl->done) continue;
    if (sl->op.nccl || sl->local) { /* on the communication stream since Submit */
      FSDPCall(DeviceEventDone_Private(sl->landed, &passed));
      if (passed) dev_finish(s, sl, MPI_SUCCESS);
      continue;
    }
    /* MPI: one at a time through the staging, in submission order. */
    if (sl->phase == DEV_QUEUED) {
      size_t out_off, out_bytes;
      const void *out_src;
      int rank, size;
      if (s->mpi_active) continue;
      MPI_Comm_rank(sl->op.comm, &rank);
      MPI_Comm_size(sl->op.comm, &size);
      mpi_layout(&sl->op, rank, size, &out_off, &out_src, &out_bytes, &sl->in_bytes, &sl->send_off);
      s->mpi_active = t;
      sl->start = FSDPTime_Private();
      /* CUDA-aware: only the wait for the compute stream's point. */
      FSDPCall(DeviceCommCopy_Private(s->dev, sl->op.cuda_aware ? NULL : (char *)DevicePinned_Private(s->dev) + out_off,
                                      out_src, sl->op.cuda_aware ? 0 : out_bytes, sl->ready, sl->staged));
      sl->phase = DEV_STAGING;
      sl->started = true;
    }
    if (sl->phase == DEV_STAGING) {
      FSDPCall(DeviceEventDone_Private(sl->staged, &passed));
      if (!passed) continue;
      if (sl->op.cuda_aware) sl->mpierr = start_nonblocking(&sl->op, &sl->request);
      else sl->mpierr = start_mpi(&sl->op, DevicePinned_Private(s->dev), sl->send_off, &sl->request);
      if (sl->mpierr) {
        dev_finish(s, sl, sl->mpierr);
        continue;
      }
      sl->phase = DEV_RUNNING;
    }
    if (sl->phase == DEV_RUNNING) {
      int flag = 0, err = MPI_Test(&sl->request, &flag, MPI_STATUS_IGNORE);
      if (err) {
        dev_finish(s, sl, err);
        continue;
      }
      if (!flag) continue;
      if (sl->op.cuda_aware) {
        dev_finish(s, sl, MPI_SUCCESS);
        continue;
      }
      FSDPCall(DeviceCommCopy_Private(s->dev, sl->op.recv, DevicePinned_Private(s->dev), sl->in_bytes, NULL, sl->landed));
      sl->phase = DEV_LANDING;
    }
    if (sl->phase == DEV_LANDING) {
      FSDPCall(DeviceEventDone_Private(sl->landed, &passed));
      if (passed) dev_finish(s, sl, MPI_SUCCESS);
    }
  }
  return FSDP_SUCCESS;
}

static void dev_fail(CommStream s);

static FSDPErrorCode dev_submit(CommStream s, Slot *sl)
{
  int size;
  FSDPCallMPI(MPI_Comm_size(sl->op.comm, &size));
  sl->phase = DEV_QUEUED;
  sl->local = !sl->op.nccl && size == 1;
  /* Launched now, a copy would not wait for an MPI operation before it; no caller chains one. */
  FSDPCheck(!sl->local || !sl->op.after_previous, MPI_COMM_SELF, FSDP_ERR_INTERNAL,
            "a %s in a group of one rank chained after the previous operation", CommKindName(sl->op.kind));
  FSDPCall(DeviceMarkReady_Private(s->dev, sl->ready));
  if (sl->local) { /* the result is the input: a device copy, not a round trip through the host */
    const void *src = sl->op.send == MPI_IN_PLACE || sl->op.send == sl->op.recv ? NULL : sl->op.send;
    sl->start = FSDPTime_Private();
    FSDPCall(DeviceCommCopy_Private(s->dev, sl->op.recv, src, src ? (size_t)sl->op.count * FSDPDataTypeSize(sl->op.dtype) : 0,
                                    sl->ready, sl->landed));
    sl->started = true;
  } else if (sl->op.nccl) {
    DeviceCollective c = {.kind = (int)sl->op.kind,
                          .send = sl->op.send == MPI_IN_PLACE ? NULL : sl->op.send,
                          .recv = sl->op.recv,
                          .count = (size_t)sl->op.count,
                          .dtype = sl->op.dtype,
                          .nccl = sl->op.nccl};
    sl->start = FSDPTime_Private();
    FSDPCall(DeviceLaunchNCCL_Private(s->dev, &c, sl->ready, sl->landed));
    sl->started = true;
  }
  FSDPCall(dev_progress(s));
  return FSDP_SUCCESS;
}
#endif

FSDPErrorCode CommStreamSubmit(CommStream s, const CommOp *op, uint64_t *ticket)
{
  uint64_t t = s->submitted + 1;
  Slot *sl = slot_of(s, t);

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
#ifdef FSDP_HAVE_CUDA
  if (s->dev) {
    FSDPErrorCode ierr;
    if (s->failed) {
      sl->queued = false;
      FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_CUDA,
                "the %s of unit '%s' cannot start: the GPU communication stream stopped at an earlier CUDA error",
                CommKindName(op->kind), op->unit ? op->unit : "?");
    }
    ierr = dev_submit(s, sl);
    if (ierr) { /* retired here; the stream stops only when the GPU failed under it */
      if (ierr == FSDP_ERR_CUDA || ierr == FSDP_ERR_NCCL) dev_fail(s);
      else if (s->mpi_active == t) s->mpi_active = 0;
      sl->queued = false;
      return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
    }
    *ticket = t;
    return FSDP_SUCCESS;
  }
#endif
  if (s->engine == FSDP_COMM_ENGINE_SYNC) {
    sl->start = FSDPTime_Private();
    sl->mpierr = run_blocking(op);
    sl->end = FSDPTime_Private();
    sl->done = sl->started = true;
    account(s, sl);
    /* The caller waited for all of it. */
    s->exposed_time += sl->end - sl->start;
    (void)FSDPLogEventAdd_Private(s->ev_wait, 1, sl->end - sl->start, 0);
  } else if (s->engine == FSDP_COMM_ENGINE_NONBLOCKING) progress(s);
  *ticket = t;
  return FSDP_SUCCESS;
}

static void watchdog_fire(CommStream s, const char *what, double waited)
{
  int rank = -1, signo = FSDPPendingSignal_Private();
  MPI_Comm_rank(s->abort_comm, &rank);
  if (s->by_signal)
    fprintf(stderr,
            "[%d] libfsdp: signal %d (%s) received while waiting for %s; it has not completed %.1f s later "
            "(-fsdp_signal_grace %g) at step %lld: another rank is not taking part in it. Aborting the job.\n",
            rank, signo, signo == SIGTERM ? "SIGTERM" : signo == SIGUSR1 ? "SIGUSR1" : signo == SIGINT ? "SIGINT" : "a signal",
            what, FSDPTime_Private() - s->signal_seen, s->signal_grace, (long long)s->step);
  else
  fprintf(stderr,
          "[%d] libfsdp watchdog: %s has not completed after %.1f s (-fsdp_collective_timeout %g) at step %lld; "
          "another rank is not taking part in it: it skipped it, waits in a different collective, or died. "
          "Aborting the job.\n",
          rank, what, waited, s->timeout, (long long)s->step);
  fflush(stderr);
#ifdef FSDP_HAVE_CUDA
  /* NCCL kernels waiting for a peer would keep the GPU busy through the abort. */
  if (s->dev) DeviceCommAbort_Private(s->dev);
#endif
  /* mpiexec kills the job at once and can drop output it has not forwarded
     yet, this message included: give it a moment, as FSDPErrorAbort does. */
  nanosleep(&(struct timespec){0, 250000000L}, NULL);
  /* MPICH's MPI_Abort on another communicator ends this process alone: a peer
     computing, or sleeping, would live on and the job would not end. */
  MPI_Abort(MPI_COMM_WORLD, FSDP_ERR_TIMEOUT);
}

/* Seconds since t0 (the wait's start) in *waited; whether the watchdog's
   time is up, or the signal grace: a wait that goes on that long after the
   program was signalled will not end (a collective takes milliseconds). */
static bool overdue(const CommStream s, double t0, double *waited)
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

static void describe(const Slot *sl, char *buf, size_t len)
{
  char b[32];
  int size = 0;
  FSDPFormatBytes(b, sizeof b, (double)sl->op.bytes);
  MPI_Comm_size(sl->op.comm, &size);
  snprintf(buf, len, "the %s of unit '%s' (%s, on a communicator of %d ranks)", CommKindName(sl->op.kind),
           sl->op.unit ? sl->op.unit : "?", b, size);
}

#ifdef FSDP_HAVE_CUDA
/* After a CUDA failure the stream runs nothing more.  What it started is
   finished first, under the watchdog, so that nothing still writes into
   buffers the caller reuses or frees: MPI collectives (host memory and the
   peers, who take part in them) and the copies and NCCL collectives on the
   communication stream (an event that fails ends the wait: nothing more
   will run there).  What is left reads as failed. */
static void dev_fail(CommStream s)
{
  char what[256];
  s->failed = true;
  for (uint64_t t = first_ticket(s); t <= s->submitted; t++) {
    Slot *sl = slot_of(s, t);
    double t0 = FSDPTime_Private(), waited;
    void *event = NULL;
    int flag = 0;
    if (!sl->queued || sl->done) continue;
    while (sl->phase == DEV_RUNNING && !flag && MPI_Test(&sl->request, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS)
      if (!flag && overdue(s, t0, &waited)) {
        describe(sl, what, sizeof what);
        watchdog_fire(s, what, waited);
      }
    if ((sl->op.nccl || sl->local) && sl->started) event = sl->landed;
    else if (sl->phase == DEV_STAGING) event = sl->staged;
    else if (sl->phase == DEV_LANDING) event = sl->landed;
    /* The wait raises no error of its own: the caller returns the first one. */
    for (int got = event ? DeviceEventPoll_Private(event) : 1; !got; got = DeviceEventPoll_Private(event)) {
      if (sl->op.nccl && DeviceCommFailed_Private(s->dev, what, sizeof what)) break; /* it will never finish */
      if (overdue(s, t0, &waited)) {
        describe(sl, what, sizeof what);
        watchdog_fire(s, what, waited);
      }
    }
    sl->phase = DEV_DONE;
    sl->done = true;
  }
  s->mpi_active = 0;
}
#endif

/* The collective the others wait behind: the oldest one started and not done. */
static const Slot *oldest_pending(CommStream s, const Slot *waited)
{
  for (uint64_t t = first_ticket(s); t <= s->submitted; t++) {
    const Slot *sl = slot_of(s, t);
    if (sl->ticket == t && sl->queued && sl->started && !sl->done) return sl;
  }
  return waited;
}

FSDPErrorCode CommStreamWait(CommStream s, uint64_t ticket)
{
  Slot *sl;
  double t0 = FSDPTime_Private(), waited;
  bool blocked;
  int err;
  char what[256];

  FSDPCheck(ticket >= 1 && ticket <= s->submitted, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "no operation has ticket %llu",
            (unsigned long long)ticket);
  sl = slot_of(s, ticket);
  FSDPCheck(sl->queued && sl->ticket == ticket, MPI_COMM_SELF, FSDP_ERR_INTERNAL,
            "operation %llu was waited for already", (unsigned long long)ticket);
#ifdef FSDP_HAVE_CUDA
  if (s->dev) {
    FSDPErrorCode ierr;
    if (s->failed) {
      sl->queued = false;
      FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_CUDA,
                "the %s of unit '%s' did not complete: the GPU communication stream stopped at an earlier CUDA error",
                CommKindName(sl->op.kind), sl->op.unit ? sl->op.unit : "?");
    }
    ierr = dev_progress(s);
    blocked = !sl->done;
    if (blocked) (void)FSDPLogEventBegin(s->ev_wait);
    while (!ierr && !sl->done) {
      ierr = dev_progress(s);
      if (!sl->done && DeviceCommFailed_Private(s->dev, what, sizeof what)) {
        int rank = -1;
        MPI_Comm_rank(s->abort_comm, &rank);
        fprintf(stderr, "[%d] libfsdp: %s at step %lld. Aborting the job.\n", rank, what, (long long)s->step);
        fflush(stderr);
        DeviceCommAbort_Private(s->dev);
        MPI_Abort(MPI_COMM_WORLD, FSDP_ERR_NCCL);
      }
      if (!ierr && !sl->done && overdue(s, t0, &waited)) {
        describe(oldest_pending(s, sl), what, sizeof what);
        watchdog_fire(s, what, waited);
      }
    }
    if (blocked) {
      (void)FSDPLogEventEnd(s->ev_wait, 0);
      s->exposed_time += FSDPTime_Private() - t0;
    }
    if (ierr) { /* the device failed under it: nothing more will come of it */
      dev_fail(s);
      sl->queued = false;
      return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
    }
    /* The compute stream reads the result after it lands. */
    if (!sl->mpierr && (sl->op.nccl || sl->local || !sl->op.cuda_aware))
      ierr = DeviceComputeWaits_Private(s->dev, sl->landed);
    err = sl->mpierr;
    sl->queued = false;
    if (err != MPI_SUCCESS) FSDPCallMPI(err);
    FSDPCall(ierr);
    return FSDP_SUCCESS;
  }
#endif
  if (s->engine == FSDP_COMM_ENGINE_THREAD) {
    pthread_mutex_lock(&s->lock);
    blocked = !sl->done;
    if (blocked) (void)FSDPLogEventBegin(s->ev_wait);
    while (!sl->done) {
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += 250000000L; /* look at the watchdog and for a signal 4 times a second */
      if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&s->done, &s->lock, &until);
      if (!sl->done && overdue(s, t0, &waited)) {
        describe(slot_of(s, s->next_run), what, sizeof what); /* the one the thread is stuck in */
        pthread_mutex_unlock(&s->lock);
        watchdog_fire(s, what, waited);
      }
    }
    pthread_mutex_unlock(&s->lock);
  } else {
    if (!sl->done) progress(s);
    blocked = !sl->done;
    if (blocked) (void)FSDPLogEventBegin(s->ev_wait);
    while (!sl->done) {
      progress(s);
      if (!sl->done && overdue(s, t0, &waited)) {
        describe(oldest_pending(s, sl), what, sizeof what);
        watchdog_fire(s, what, waited);
      }
    }
  }
  if (blocked) {
    (void)FSDPLogEventEnd(s->ev_wait, 0);
    s->exposed_time += FSDPTime_Private() - t0;
  }
  err = sl->mpierr;
  sl->queued = false;
  if (err != MPI_SUCCESS) FSDPCallMPI(err);
  return FSDP_SUCCESS;
}

FSDPErrorCode CommStreamWaitRequest(CommStream s, MPI_Request *request, const char *what)
{
  double t0 = FSDPTime_Private(), waited;
  int flag = 0;
  FSDPErrorCode gpu_err = FSDP_SUCCESS; /* returned once the request, which writes into the caller's buffer, is done */
  while (!flag) {
    FSDPCallMPI(MPI_Test(request, &flag, MPI_STATUS_IGNORE));
#ifdef FSDP_HAVE_CUDA
    if (s->dev) {
      if (!s->failed && (gpu_err = dev_progress(s))) dev_fail(s);
    } else
#endif
    if (s->engine == FSDP_COMM_ENGINE_NONBLOCKING) progress(s);
    if (!flag && overdue(s, t0, &waited)) watchdog_fire(s, what, waited);
  }
  if (gpu_err) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, gpu_err);
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
     failure, dev_fail saw to that). */
  for (int i = 0; i < RING; i++)
    if (s->failed) s->ring[i].queued = false;
    else if (s->ring[i].queued) {
      FSDPErrorCode e = CommStreamWait(s, s->ring[i].ticket);
      if (!ierr) ierr = e;
    }
  if (s->have_thread) {
    pthread_mutex_lock(&s->lock);
    s->quit = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
  }
  destroy_events(s);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->done);
  pthread_mutex_destroy(&s->lock);
  FSDPCall(FSDPFree(stream));
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}
