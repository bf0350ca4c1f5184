/* The GPU engine (doc/cuda.md): the stream of a context on a GPU.  Each
   operation waits for the compute stream's point through an event; NCCL
   ones (nccl.c) run on the device's communication stream, MPI ones one at
   a time through pinned staging (copied out, MPI_I*, copied back) or on
   device pointers (CUDA-aware MPI), progressed inside the library's calls
   as the nonblocking engine is.  In a group of one rank the result is the
   input: a copy on the communication stream. */
#include <stdio.h>

#include "engine.h"

#ifdef FSDP_HAVE_CUDA

static FSDPErrorCode gpu_start(CommStream s)
{
  for (int i = 0; i < RING; i++) {
    FSDPCall(DeviceEventCreate_Private(s->dev, &s->ring[i].ready));
    FSDPCall(DeviceEventCreate_Private(s->dev, &s->ring[i].staged));
    FSDPCall(DeviceEventCreate_Private(s->dev, &s->ring[i].landed));
  }
  return FSDP_SUCCESS;
}

static void gpu_stop(CommStream s)
{
  for (int i = 0; i < RING; i++) {
    DeviceEventDestroy_Private(s->ring[i].ready);
    DeviceEventDestroy_Private(s->ring[i].staged);
    DeviceEventDestroy_Private(s->ring[i].landed);
  }
}

/* MPI operations: the bytes that leave and arrive, at offsets of the pinned staging. */
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
  case COMM_ALLGATHER: return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, op->count, op->type, op->comm, req);
  case COMM_REDUCE_SCATTER:
    return MPI_Ireduce_scatter_block(b + send_off, b, op->count, op->type, op->op, op->comm, req);
  default: return MPI_Iallreduce(MPI_IN_PLACE, b, op->count, op->type, op->op, op->comm, req);
  }
}

static void finish(CommStream s, Slot *sl, int mpierr)
{
  sl->mpierr = mpierr;
  sl->phase = DEV_DONE;
  sl->done = true;
  sl->end = FSDPTime_Private();
  if (sl->op.nccl == NULL && s->mpi_active == sl->ticket) s->mpi_active = 0;
  if (!mpierr) CommAccount(s, sl);
}

/* Moves operations along; a CUDA failure is returned. */
static FSDPErrorCode advance(CommStream s)
{
  for (uint64_t t = CommFirstTicket(s); t <= s->submitted; t++) {
    Slot *sl = CommSlot(s, t);
    bool passed = false;
    if (!sl->queued || sl->done) continue;
    if (sl->op.nccl || sl->local) { /* on the communication stream since Submit */
      FSDPCall(DeviceEventDone_Private(sl->landed, &passed));
      if (passed) finish(s, sl, MPI_SUCCESS);
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
      if (sl->op.cuda_aware) sl->mpierr = CommStartNonblocking(&sl->op, &sl->request);
      else sl->mpierr = start_mpi(&sl->op, DevicePinned_Private(s->dev), sl->send_off, &sl->request);
      if (sl->mpierr) {
        finish(s, sl, sl->mpierr);
        continue;
      }
      sl->phase = DEV_RUNNING;
    }
    if (sl->phase == DEV_RUNNING) {
      int flag = 0, err = MPI_Test(&sl->request, &flag, MPI_STATUS_IGNORE);
      if (err) {
        finish(s, sl, err);
        continue;
      }
      if (!flag) continue;
      if (sl->op.cuda_aware) {
        finish(s, sl, MPI_SUCCESS);
        continue;
      }
      FSDPCall(
          DeviceCommCopy_Private(s->dev, sl->op.recv, DevicePinned_Private(s->dev), sl->in_bytes, NULL, sl->landed));
      sl->phase = DEV_LANDING;
    }
    if (sl->phase == DEV_LANDING) {
      FSDPCall(DeviceEventDone_Private(sl->landed, &passed));
      if (passed) finish(s, sl, MPI_SUCCESS);
    }
  }
  return FSDP_SUCCESS;
}

/* After a CUDA failure the stream runs nothing more.  What it started is
   finished first, under the watchdog, so that nothing still writes into
   buffers the caller reuses or frees: MPI collectives (host memory and the
   peers, who take part in them) and the copies and NCCL collectives on the
   communication stream (an event that fails ends the wait: nothing more
   will run there).  What is left reads as failed. */
static void fail(CommStream s)
{
  char what[256];
  s->failed = true;
  for (uint64_t t = CommFirstTicket(s); t <= s->submitted; t++) {
    Slot *sl = CommSlot(s, t);
    double t0 = FSDPTime_Private(), waited;
    void *event = NULL;
    int flag = 0;
    if (!sl->queued || sl->done) continue;
    while (sl->phase == DEV_RUNNING && !flag && MPI_Test(&sl->request, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS)
      if (!flag && CommOverdue(s, t0, &waited)) {
        CommDescribe(sl, what, sizeof what);
        CommWatchdogFire(s, what, waited);
      }
    if ((sl->op.nccl || sl->local) && sl->started) event = sl->landed;
    else if (sl->phase == DEV_STAGING) event = sl->staged;
    else if (sl->phase == DEV_LANDING) event = sl->landed;
    /* The wait raises no error of its own: the caller returns the first one. */
    for (int got = event ? DeviceEventPoll_Private(event) : 1; !got; got = DeviceEventPoll_Private(event)) {
      if (sl->op.nccl && CommNCCLFailed(s->nccl, what, sizeof what)) break; /* it will never finish */
      if (CommOverdue(s, t0, &waited)) {
        CommDescribe(sl, what, sizeof what);
        CommWatchdogFire(s, what, waited);
      }
    }
    sl->phase = DEV_DONE;
    sl->done = true;
  }
  s->mpi_active = 0;
}

static FSDPErrorCode launch(CommStream s, Slot *sl)
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
    FSDPCall(DeviceCommCopy_Private(s->dev, sl->op.recv, src,
                                    src ? (size_t)sl->op.count * FSDPDataTypeSize(sl->op.dtype) : 0, sl->ready,
                                    sl->landed));
    sl->started = true;
  } else if (sl->op.nccl) {
    sl->start = FSDPTime_Private();
    FSDPCall(CommNCCLLaunch(s->nccl, s->dev, &sl->op, sl->ready, sl->landed));
    sl->started = true;
  }
  FSDPCall(advance(s));
  return FSDP_SUCCESS;
}

static FSDPErrorCode gpu_submit(CommStream s, Slot *sl)
{
  FSDPErrorCode ierr;
  if (s->failed) {
    sl->queued = false;
    FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_CUDA,
              "the %s of unit '%s' cannot start: the GPU communication stream stopped at an earlier CUDA error",
              CommKindName(sl->op.kind), sl->op.unit ? sl->op.unit : "?");
  }
  ierr = launch(s, sl);
  if (ierr) { /* retired here; the stream stops only when the GPU failed under it */
    if (ierr == FSDP_ERR_CUDA || ierr == FSDP_ERR_NCCL) fail(s);
    else if (s->mpi_active == sl->ticket) s->mpi_active = 0;
    sl->queued = false;
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode gpu_wait(CommStream s, Slot *sl)
{
  double t0 = FSDPTime_Private(), waited;
  FSDPErrorCode ierr;
  bool blocked;
  char what[256];

  FSDPCheck(!s->failed, MPI_COMM_SELF, FSDP_ERR_CUDA,
            "the %s of unit '%s' did not complete: the GPU communication stream stopped at an earlier CUDA error",
            CommKindName(sl->op.kind), sl->op.unit ? sl->op.unit : "?");
  ierr = advance(s);
  blocked = !sl->done;
  if (blocked) (void)FSDPLogEventBegin(s->ev_wait);
  while (!ierr && !sl->done) {
    ierr = advance(s);
    if (!sl->done && CommNCCLFailed(s->nccl, what, sizeof what)) {
      int rank = -1;
      MPI_Comm_rank(s->abort_comm, &rank);
      fprintf(stderr, "[%d] libfsdp: %s at step %lld. Aborting the job.\n", rank, what, (long long)s->step);
      fflush(stderr);
      CommNCCLAbort(s->nccl);
      FSDPAbortJob_Private(MPI_COMM_WORLD, FSDP_ERR_NCCL);
    }
    if (!ierr && !sl->done && CommOverdue(s, t0, &waited)) {
      CommDescribe(CommOldestPending(s, sl), what, sizeof what);
      CommWatchdogFire(s, what, waited);
    }
  }
  CommWaitBlocked(s, blocked, t0);
  if (ierr) { /* the device failed under it: nothing more will come of it */
    fail(s);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  /* The compute stream reads the result after it lands. */
  if (!sl->mpierr && (sl->op.nccl || sl->local || !sl->op.cuda_aware))
    FSDPCall(DeviceComputeWaits_Private(s->dev, sl->landed));
  return FSDP_SUCCESS;
}

static FSDPErrorCode gpu_progress(CommStream s)
{
  FSDPErrorCode ierr;
  if (s->failed) return FSDP_SUCCESS;
  if ((ierr = advance(s))) fail(s);
  return ierr;
}

const CommEngineOps CommEngineCUDA_Private = {.name = "cuda",
                                              .start = gpu_start,
                                              .submit = gpu_submit,
                                              .wait = gpu_wait,
                                              .progress = gpu_progress,
                                              .stop = gpu_stop};

#endif /* FSDP_HAVE_CUDA */
