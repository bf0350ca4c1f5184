/* commimpl.h: the communication stream.  Collectives submitted to a stream
   run in submission order, asynchronously to the submitting thread, which
   gets a ticket and blocks only when it waits for one (doc/overlap.md).  An
   engine, chosen by name, runs them (stream.c lists the engines).  On a GPU
   (doc/cuda.md) the "cuda" engine orders collectives after the compute
   stream's work through events, runs NCCL on a communication stream of the
   device's, and the MPI ones through pinned host staging. */
#ifndef FSDP_COMMIMPL_H
#define FSDP_COMMIMPL_H

#include "../device/deviceimpl.h"

typedef enum { COMM_ALLGATHER = 0, COMM_REDUCE_SCATTER, COMM_ALLREDUCE, COMM_NUM_KINDS } CommKind;

/* A shard group's gradient buffers in node shared memory (shm.c), through
   which its fp32 reduce-scatters run when every rank shares the node. */
typedef struct CommShm_s *CommShm;

/* One collective.  send may be MPI_IN_PLACE for an all-reduce or an all-gather. */
typedef struct {
  CommKind kind;
  const void *send;
  void *recv;
  int count; /* per rank for the all-gather and the reduce-scatter, total for the all-reduce */
  MPI_Datatype type;
  MPI_Op op; /* of the reductions: MPI_SUM, or a 16-bit sum */
  MPI_Comm comm;
  CommShm shm;  /* an fp32 reduce-scatter or all-gather on comm: through this shared memory (NULL: MPI) */
  bool *zeroed; /* a reduce-scatter sets it when shared memory leaves send all zeros (may be NULL) */
  /* epoch > 0: an all-gather through shm into the window's view `view`
     (recv), its gather number `epoch` (from 1): each rank copies its block
     into place once every peer has released the view's previous gather. */
  uint64_t epoch;
  int view;
  const char *unit;   /* for diagnostics */
  int64_t bytes;      /* what -fsdp_log_view counts */
  FSDPLogEvent event; /* the event of this kind, and optionally of this unit (-1: none, for each) */
  FSDPLogEvent unit_event;
  bool after_previous; /* reads what the previous operation writes: starts when that one is done */
  /* device streams only */
  FSDPDataType dtype; /* of the elements (type is its MPI datatype) */
  void *nccl;         /* the NCCL communicator to run it on; NULL: MPI on comm */
  bool cuda_aware;    /* MPI takes the device pointers themselves; else through pinned staging */
} CommOp;

typedef struct CommStream_s *CommStream;

/* A context's NCCL communicators (nccl.c), for the shard group and the
   replicate group; NULL where a group goes through MPI. */
typedef struct CommNCCL_s *CommNCCL;

const char *CommKindName(CommKind kind);
/* engine: "thread", "nonblocking", "sync", or (CUDA builds) "cuda" for a
   stream on dev, whose NCCL communicators are nccl (may be NULL).
   abort_comm: what the watchdog names ranks in; timeout: seconds, 0 = never. */
FSDPErrorCode CommStreamCreate(const char *engine, double timeout, MPI_Comm abort_comm, Device dev, CommNCCL nccl,
                               CommStream *stream);
/* Seconds a wait may go on after FSDPNotifySignal before it aborts the job (0: no limit). */
void CommStreamSetSignalGrace(CommStream stream, double seconds);
/* How the stream waits for MPI: polling (the default: the lowest latency
   when each rank has a core), or testing and sleeping between tests, with
   backoff, so that a rank gives its core back to the ranks it waits for
   (the node has more ranks than cores).  Set before the first Submit. */
void CommStreamSetSleep(CommStream stream, bool sleep);
/* Queues op; *ticket identifies it for CommStreamWait (tickets start at 1). */
FSDPErrorCode CommStreamSubmit(CommStream stream, const CommOp *op, uint64_t *ticket);
/* Blocks until the operation is done and retires its ticket; the time spent
   blocked is exposed communication.  A collective that does not finish within
   the timeout prints a diagnostic and aborts the job. */
FSDPErrorCode CommStreamWait(CommStream stream, uint64_t ticket);
/* Waits for an MPI request of the caller's under the same watchdog (the
   debug check's gather); `what` describes it in the diagnostic. */
FSDPErrorCode CommStreamWaitRequest(CommStream stream, MPI_Request *request, const char *what);
/* The step number that diagnostics print. */
void CommStreamSetStep(CommStream stream, int64_t step);
/* Seconds spent in collectives, and waiting for them. */
void CommStreamGetTimes(CommStream stream, double *comm_time, double *exposed_time, int64_t *ncollectives);
/* Waits for every queued operation, stops the thread. */
FSDPErrorCode CommStreamDestroy(CommStream *stream);

/* Collective on comm: a window in node shared memory with a segment of
   `bytes` for this rank (ranks may differ) and `nviews` views (all-gathers
   in place, CommOp.view), when every rank of comm wants it (`want`, agreed
   here) and shares this node with the others; else *shm is NULL. */
FSDPErrorCode CommShmCreate(MPI_Comm comm, bool want, size_t bytes, int nviews, CommShm *shm);
/* This rank is done reading view `view` as its gather `epoch` left it. */
void CommShmRelease(CommShm shm, int view, uint64_t epoch);
/* Rank `rank`'s segment of the window, as mapped in this process. */
void *CommShmSegment(CommShm shm, int rank);
/* Operations run through it so far, and those of them that went through MPI. */
void CommShmGetCounts(CommShm shm, int64_t *ops, int64_t *fallbacks);
/* Collective on comm (MPI_Win_free). */
FSDPErrorCode CommShmDestroy(CommShm *shm);

/* Collective on comm: NCCL communicators for the shard group (and the
   replicate group when `replicate_nccl`) on dev's GPU.  A group in which two
   ranks share a GPU gets none (NCCL refuses that); *why then says so, for
   the warning, as it does in builds without NCCL.  An ncclCommInitRank still
   running after `timeout` seconds (0: never) aborts the job, as the watchdog
   does a collective.  *nccl is set, error or not: destroy it. */
FSDPErrorCode CommNCCLSetUp(Device dev, MPI_Comm comm, MPI_Comm shard_comm, MPI_Comm replicate_comm,
                            bool replicate_nccl, double timeout, char *why, size_t len, CommNCCL *nccl);
/* The ncclComm_t of the shard or the replicate group, or NULL: MPI. */
void *CommNCCLGet(CommNCCL nccl, bool shard);
FSDPErrorCode CommNCCLDestroy(CommNCCL *nccl);

#endif
