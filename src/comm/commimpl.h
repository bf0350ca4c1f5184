/* commimpl.h: the communication stream.  Collectives submitted to a stream
   run in submission order, asynchronously to the submitting thread, which
   gets a ticket and blocks only when it waits for one (doc/overlap.md).  On
   a GPU (doc/cuda.md) the same calls order collectives after the compute
   stream's work through events, run NCCL on a communication stream of the
   device's, and the MPI ones through pinned host staging. */
#ifndef FSDP_COMMIMPL_H
#define FSDP_COMMIMPL_H

#include "../device/deviceimpl.h"

typedef enum { COMM_ALLGATHER = 0, COMM_REDUCE_SCATTER, COMM_ALLREDUCE, COMM_NUM_KINDS } CommKind;

/* One collective.  send may be MPI_IN_PLACE for an all-reduce or an all-gather. */
typedef struct {
  CommKind kind;
  const void *send;
  void *recv;
  int count; /* per rank for the all-gather and the reduce-scatter, total for the all-reduce */
  MPI_Datatype type;
  MPI_Op op; /* of the reductions: MPI_SUM, or a 16-bit sum */
  MPI_Comm comm;
  const char *unit;   /* for diagnostics */
  int64_t bytes;      /* what -fsdp_log_view counts */
  FSDPLogEvent event; /* the event of this kind, and optionally of this unit (-1: none) */
  FSDPLogEvent unit_event;
  bool after_previous; /* reads what the previous operation writes: starts when that one is done */
  /* device streams only */
  FSDPDataType dtype; /* of the elements (type is its MPI datatype) */
  void *nccl;         /* the NCCL communicator to run it on; NULL: MPI on comm */
  bool cuda_aware;    /* MPI takes the device pointers themselves; else through pinned staging */
} CommOp;

typedef struct CommStream_s *CommStream;

const char *CommKindName(CommKind kind);
/* abort_comm: what the watchdog aborts; timeout: seconds, 0 = never.  With a
   device, the stream runs on it (the engine is not used). */
FSDPErrorCode CommStreamCreate(FSDPCommEngine engine, double timeout, MPI_Comm abort_comm, Device dev,
                               CommStream *stream);
/* Seconds a wait may go on after FSDPNotifySignal before it aborts the job (0: no limit). */
void CommStreamSetSignalGrace(CommStream stream, double seconds);
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

#endif
