/* engine.h: what the communication stream (stream.c) and its engines share;
   private to src/comm.  A stream is a ring of slots, one per operation not
   yet waited for.  stream.c owns the ring, the tickets, the accounting and
   the watchdog; an engine (one file each, registered in stream.c's table)
   decides how a queued operation runs and how a wait makes it finish. */
#ifndef FSDP_COMM_ENGINE_H
#define FSDP_COMM_ENGINE_H

#include <pthread.h>

#include "commimpl.h"

#define RING 64 /* operations queued and not yet waited for, at most */

/* Where a GPU operation on MPI is (NCCL ones go from QUEUED to DONE). */
typedef enum { DEV_QUEUED = 0, DEV_STAGING, DEV_RUNNING, DEV_LANDING, DEV_DONE } DevPhase;

/* A collective through shared memory in flight (shm.c). */
typedef enum { SHM_POSTED = 0, SHM_READ, SHM_MPI, SHM_RELEASING } ShmPhase;
typedef struct {
  uint64_t seq;
  ShmPhase phase;
} CommShmState;

typedef struct {
  CommOp op;
  uint64_t ticket;
  void *ready, *staged, *landed; /* GPU events: the compute stream's point, staging out, the result in */
  DevPhase phase;
  size_t send_off, in_bytes; /* GPU MPI: where the send block sits in the staging, the bytes coming back */
  bool local;                /* GPU, a group of one: a copy on the communication stream, no MPI */
  bool queued;               /* submitted and not retired (waited for) */
  bool started;              /* the collective was started (the MPI_I* call, the launch) */
  bool done;
  int mpierr;
  MPI_Request request;
  CommShmState shm; /* op.shm: where it is (a fallback to MPI uses request) */
  double start, end;
} Slot;

typedef struct CommEngineOps_s CommEngineOps;

struct CommStream_s {
  const CommEngineOps *ops;
  double timeout;
  double signal_grace;             /* seconds after FSDPNotifySignal; 0: no limit */
  double signal_wait, signal_seen; /* the wait (its start) that saw the signal, and when */
  bool by_signal;                  /* the watchdog fires for the signal, not the timeout */
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
  Device dev;          /* the GPU engine's device; NULL on the host */
  CommNCCL nccl;       /* the GPU engine's NCCL communicators, or NULL */
  uint64_t mpi_active; /* GPU: the MPI operation using the pinned staging (0: none) */
  bool failed;         /* GPU: a CUDA call failed under the stream, which runs nothing more */
  bool sleep;          /* waits sleep between tests (CommStreamSetSleep) */
};

/* A wait's pauses between tests: none when the stream polls, else sleeps
   doubling from 1 us to 32 us (stream.c). */
typedef struct {
  bool sleep;
  long ns;
} CommBackoff;

/* An engine.  stream.c queues each operation in its slot (under the lock)
   before submit, checks tickets before wait, and retires the slot after it
   (sl->mpierr is then returned as an MPI error). */
struct CommEngineOps_s {
  const char *name;
  FSDPErrorCode (*start)(CommStream s);            /* at creation (may be NULL) */
  FSDPErrorCode (*submit)(CommStream s, Slot *sl); /* sl is queued */
  /* Returns once sl is done, under the watchdog, with the exposed time accounted. */
  FSDPErrorCode (*wait)(CommStream s, Slot *sl);
  /* Moves queued operations along while the caller waits for something else (may be NULL). */
  FSDPErrorCode (*progress)(CommStream s);
  void (*stop)(CommStream s); /* at destruction, after every operation was waited for (may be NULL) */
};

extern const CommEngineOps CommEngineThread_Private, CommEngineNonblocking_Private, CommEngineSync_Private;
#ifdef FSDP_HAVE_CUDA
extern const CommEngineOps CommEngineCUDA_Private;
#endif

static inline Slot *CommSlot(CommStream s, uint64_t ticket) { return &s->ring[(ticket - 1) % RING]; }
/* The oldest ticket whose slot may still hold its operation. */
static inline uint64_t CommFirstTicket(CommStream s) { return s->submitted >= RING ? s->submitted - RING + 1 : 1; }

static inline CommBackoff CommBackoffStart(CommStream s) { return (CommBackoff){.sleep = s->sleep, .ns = 0}; }
/* After a test that found the operation not done. */
void CommBackoffPause(CommBackoff *b);

/* The collective as a blocking MPI call, or started as a nonblocking one. */
int CommRunBlocking(const CommOp *op);
/* The collective to its end on the calling thread: blocking, or, when the
   stream sleeps, started nonblocking and tested with pauses. */
int CommRun(CommStream s, const CommOp *op);
int CommStartNonblocking(const CommOp *op, MPI_Request *req);
/* Any collective, nonblocking: op->shm's protocol or MPI_I*; then tested. */
int CommStart(const CommOp *op, MPI_Request *req, CommShmState *st);
int CommTest(const CommOp *op, MPI_Request *req, CommShmState *st, int *flag);
/* Shared memory (shm.c): posts this rank's buffer; reads its blocks once
   every rank has posted, completes once every rank has read (an all-gather
   into a view: copies its block in once the peers released the view, posts,
   completes once every rank has posted).  One at a time
   per CommShm.  Its MPI fallback starts at a moment that depends on timing,
   so it runs on a communicator of the CommShm's own, where nothing else
   runs: collectives on the op's communicator keep their order. */
int CommShmStart(const CommOp *op, CommShmState *st);
int CommShmTest(const CommOp *op, CommShmState *st, MPI_Request *fallback, int *flag);
/* Timing and logging of a finished operation (once per operation). */
void CommAccount(CommStream s, Slot *sl);
/* A wait that blocked from t0 on: its time is exposed communication. */
void CommWaitBlocked(CommStream s, bool blocked, double t0);
/* Seconds since t0 in *waited; whether the watchdog's time, or the signal grace, is up. */
bool CommOverdue(CommStream s, double t0, double *waited);
/* Prints what hangs and aborts the job. */
void CommWatchdogFire(CommStream s, const char *what, double waited);
void CommDescribe(const Slot *sl, char *buf, size_t len);
/* The collective the others wait behind: the oldest one started and not done. */
const Slot *CommOldestPending(CommStream s, const Slot *waited);

/* NCCL (nccl.c): a collective on the device's communication stream after
   `ready`, recording `done`; an asynchronous error of a communicator; abort. */
FSDPErrorCode CommNCCLLaunch(CommNCCL nccl, Device dev, const CommOp *op, void *ready, void *done);
bool CommNCCLFailed(CommNCCL nccl, char *msg, size_t len);
void CommNCCLAbort(CommNCCL nccl);

#endif
