/* fsdpimpl.h: what the pieces of libfsdp share and users do not see. */
#ifndef FSDPIMPL_H
#define FSDPIMPL_H

#include <fenv.h>

#include "fsdp_config.h"
#include "fsdp.h"

/* The library's own duplicate of MPI_COMM_WORLD (errors return), valid between
   FSDPInitialize and FSDPFinalize; MPI_COMM_NULL otherwise. */
MPI_Comm FSDPCommWorld_Private(void);
/* This process's rank in MPI_COMM_WORLD, or -1 when MPI is not running. */
int FSDPWorldRank_Private(void);
/* Ends the job with `code`: MPI_Abort on comm (MPI_COMM_WORLD when it is
   MPI_COMM_NULL), after flushing and a moment for mpiexec to forward the
   output.  If that has not ended this process within 10 s (a node cut off
   from mpiexec), the process exits by itself, saying so.  Without MPI,
   abort(). */
_Noreturn void FSDPAbortJob_Private(MPI_Comm comm, FSDPErrorCode code);
/* The signal FSDPNotifySignal recorded; 0: none. */
int FSDPPendingSignal_Private(void);

/* Data types (src/sys/dtype.c): the option names ("fp32", ... NULL), the MPI
   datatype each travels as (16-bit values as MPI_UINT16_T, their bits), and
   MPI_User_function sums of bf16 and fp16 values: in fp32, rounded once. */
extern const char *const FSDPDataTypeNames_Private[];
MPI_Datatype FSDPDataTypeMPI_Private(FSDPDataType dtype);
void FSDPSumBF16_Private(void *in, void *inout, int *len, MPI_Datatype *type);
void FSDPSumFP16_Private(void *in, void *inout, int *len, MPI_Datatype *type);

/* Around a call into another library that may raise floating-point
   exceptions (hwloc's libxml2, MPI's start-up, OpenBLAS, HDF5): Enter saves
   the caller's floating-point environment, clears its flags and masks its
   traps; Leave restores the saved environment, dropping every flag raised in
   between.  No trap of the caller's fires inside and no flag reaches it. */
void FSDPFPEnter_Private(fenv_t *saved);
void FSDPFPLeave_Private(const fenv_t *saved);

/* Reads FSDP_OPTIONS and argv; where argv names options files, *argc and *argv
   are replaced by the expanded list, which lives until FSDPOptionsFinalize_Private. */
FSDPErrorCode FSDPOptionsInitialize_Private(int *argc, char ***argv);
FSDPErrorCode FSDPOptionsFinalize_Private(void);
/* FSDPOptionsGetEnum that also accepts aliases[i] (NULL or one per choice, NULL where none) for choices[i]. */
FSDPErrorCode FSDPOptionsGetEnumAliased_Private(const char *name, const char *help, const char *const *choices,
                                                const char *const *aliases, int defval, int *value, bool *set);

/* A setting every rank of a communicator must give alike (doc/options.md,
   "Settings that must agree"): the option that sets it and its value as text. */
#define FSDP_SETTING_LEN 64
#define FSDP_MAX_SETTINGS 32
typedef struct {
  const char *name; /* "-fsdp_check_finite" */
  char value[FSDP_SETTING_LEN];
} FSDPSetting;
FSDPErrorCode FSDPSettingSet_Private(FSDPSetting *setting, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Collective on comm, with the same n names in the same order on every rank:
   when some rank's value of a setting differs from rank 0's, every rank
   returns FSDP_ERR_ARG naming each such setting, the lowest such rank and
   both values ("caller: -fsdp_check_finite differs across ranks: rank 0 has
   true, rank 1 has false; ...").  One allreduce when they agree. */
FSDPErrorCode FSDPSettingsAgree_Private(MPI_Comm comm, const char *caller, int n, const FSDPSetting *settings);

FSDPErrorCode FSDPLogInitialize_Private(void);
/* Events whose time is measured elsewhere (the communication thread). */
FSDPErrorCode FSDPLogEventAdd_Private(FSDPLogEvent event, int64_t count, double time, int64_t bytes);
/* What -fsdp_log_view's communication summary counts an event as. */
enum { FSDP_LOG_KIND_OTHER = 0, FSDP_LOG_KIND_COMM, FSDP_LOG_KIND_EXPOSED };
FSDPErrorCode FSDPLogEventSetKind_Private(FSDPLogEvent event, int kind);
/* Seconds on a monotonic clock. */
double FSDPTime_Private(void);
FSDPErrorCode FSDPLogFinalize_Private(void);
/* -fsdp_log_trace (trace.c): spans of the compute thread (thread 0: events
   timed by Begin/End, units' passes) and of the communication stream
   (thread 1), written as Chrome trace events by FSDPTraceWrite_Private. */
FSDPErrorCode FSDPTraceStart_Private(const char *path);
bool FSDPTraceOn_Private(void);
void FSDPTraceSpan_Private(const char *name, int thread, double start, double end, int64_t bytes);
FSDPErrorCode FSDPTraceWrite_Private(MPI_Comm comm);

/* Run view(viewer, ctx); a NULL viewer becomes stdout on comm (the object's
   communicator), or on MPI_COMM_WORLD when comm is MPI_COMM_NULL, for the
   call, as every XView(obj, NULL) promises. */
FSDPErrorCode FSDPViewerApply_Private(const char *caller, FSDPViewer viewer, MPI_Comm comm,
                                      FSDPErrorCode (*view)(FSDPViewer, void *), void *ctx);

/* A number of bytes with an optional K, M, G or T suffix (KiB ... TiB: 12G is 12 GiB); false when text is not one. */
bool FSDPParseBytes_Private(const char *text, int64_t *bytes);

/* The characters an error message holds (and its terminator): a message
   built from lists (names, paths) must fit its end in, as the checkpoint
   code's lists of names do. */
#define FSDP_MAX_MESSAGE 1024

/* Collective on comm: `code` is this rank's outcome of a step that may fail on
   some ranks only (a file only one rank reads, say).  When any rank failed,
   every rank returns an error: the failed ones their own, the others one that
   quotes the lowest failed rank's message.  No rank is left waiting. */
FSDPErrorCode FSDPErrorAgree_Private(MPI_Comm comm, FSDPErrorCode code);

/* A watch on a call with no way out (src/sys/watch.c): unless
   FSDPWatchStop_Private comes first, after `timeout` seconds (0: never) a
   thread prints "libfsdp watchdog: <fmt...>. Aborting the job." and aborts
   the job with `code`.  *watch is NULL when there is nothing to stop. */
typedef struct FSDPWatch_s *FSDPWatch;
FSDPErrorCode FSDPWatchStart_Private(double timeout, FSDPErrorCode code, FSDPWatch *watch, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
FSDPErrorCode FSDPWatchStop_Private(FSDPWatch *watch);

/* The library's own small blocking collectives (src/sys/waits.c): MPI's
   nonblocking ones, waited for with MPI_Wait or, once
   FSDPSetSleepWaits_Private(true) (a context set up to wait by sleeping:
   more ranks than CPUs on its node), tested with naps in between, so that a
   waiting rank gives its core to the rank it waits for.  Every rank of the
   communicator must call the same one (never MPI's blocking collective in
   its place).  They return MPI's error codes (FSDPCallMPI, MPI_RECORD). */
void FSDPSetSleepWaits_Private(bool sleep);
/* A waiting loop's nap: sleep *ns nanoseconds (start it at 1000), then double
   it up to `most`.  A rank that waits this way gives its core to the ranks it
   waits for; the short first naps notice a collective that finishes soon. */
void FSDPNap_Private(long *ns, long most);
/* Waits for n requests: in MPI_Wait, or, where sleep, testing each with naps
   of 1 us doubling to 32 us, which give the core back.  Returns the first
   error; every request is waited for all the same. */
int FSDPWaitRequests_Private(int n, MPI_Request *req, bool sleep);
int FSDPAllreduce_Private(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int FSDPBcast_Private(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int FSDPAllgather_Private(const void *send, int scount, MPI_Datatype stype, void *recv, int rcount, MPI_Datatype rtype,
                          MPI_Comm comm);
int FSDPBarrier_Private(MPI_Comm comm);

/* -fsdp_debug_collectives at the door of each collective call (src/sys/collective.c):
   FSDPCollective(comm) checks, when it is on, that every rank of comm entered
   the calling function, and returns a named error when one did not within the
   timeout or entered another.  Off, it costs a branch. */
extern bool FSDPCollectiveChecks_Private;
FSDPErrorCode FSDPCollectiveChecksSet_Private(bool on, double timeout);
/* -fsdp_collective_timeout's help line: FSDPInitialize (for the door checks) and FSDPContextSetFromOptions
   (the context's watchdog) both read the option. */
#define FSDP_COLLECTIVE_TIMEOUT_HELP "seconds a collective may take before the watchdog aborts the job (0: never)"
void FSDPCollectiveChecksFinalize_Private(void);
FSDPErrorCode FSDPCollectiveEnter_Private(MPI_Comm comm, const char *func, bool teardown);
#define FSDPCollective(comm)                                                                                           \
  do {                                                                                                                 \
    if (FSDPUnlikely(FSDPCollectiveChecks_Private)) FSDPCall(FSDPCollectiveEnter_Private(comm, __func__, false));      \
  } while (0)
/* For Destroy and Finalize: no check where an earlier one broke, so that what is left can be freed. */
#define FSDPCollectiveTeardown(comm)                                                                                   \
  do {                                                                                                                 \
    if (FSDPUnlikely(FSDPCollectiveChecks_Private)) FSDPCall(FSDPCollectiveEnter_Private(comm, __func__, true));       \
  } while (0)

/* What every XCreate(comm, ...) checks first: MPI is running and comm is a
   communicator.  `caller` names the function in the message. */
FSDPErrorCode FSDPCheckCreateComm_Private(MPI_Comm comm, const char *caller);

FSDPErrorCode FSDPStrdup(const char *s, char **copy);
/* FNV-1a, 64 bits: h = FSDPHashBytes_Private(FSDP_HASH_INIT, data, n), and
   chained for more data.  For agreement checks and the generator's streams. */
#define FSDP_HASH_INIT 14695981039346656037ULL
uint64_t FSDPHashBytes_Private(uint64_t h, const void *data, size_t n);
/* Make room for `need` elements in *array (address of a pointer), capacity *cap. */
/* Device memory (src/device) counted by category, apart from the host's. */
void FSDPDeviceMemoryCount_Private(FSDPMemCategory category, size_t bytes, bool freed);
/* Host memory that did not come from FSDPMalloc (an MPI shared-memory window), counted the same way. */
void FSDPMemoryCount_Private(FSDPMemCategory category, size_t bytes, bool freed);
/* Pages mapped for the library alone (src/sys/pages.c), counted by category. */
size_t FSDPPageSize_Private(void);
FSDPErrorCode FSDPPagesAlloc_Private(size_t bytes, FSDPMemCategory category, void *ptr);
FSDPErrorCode FSDPPagesFree_Private(void *ptr, size_t bytes, FSDPMemCategory category);
/* dst takes src's n bytes, by exchanging whole pages where they line up; src
   is left unspecified.  Host memory private to this process only. */
void FSDPTakeBytes_Private(void *dst, void *src, size_t n);
FSDPErrorCode FSDPGrowArray_Private(void *array, size_t elemsize, int need, int *cap, FSDPMemCategory category);

/* What FSDPContext needs of its ShardGroup: the factor asked for (0: none),
   and whether ShardGroupSetUp prints the layout (the context prints it
   inside its own view instead). */
FSDPErrorCode ShardGroupGetRequestedFactor_Private(ShardGroup group, int *factor);
FSDPErrorCode ShardGroupSetViewAtSetUp_Private(ShardGroup group, bool view);
/* After SetUp: the ranks on this rank's machine (its kernel: a host, or the
   containers on one host), the CPUs they may run on (the union of their
   affinity masks; more ranks than CPUs is oversubscribed), and the hosts
   (MPI's shared-memory nodes) among them (may be NULL). */
FSDPErrorCode ShardGroupGetNodeLoad_Private(ShardGroup group, int *ranks, int *cpus, int *hosts);
/* After SetUp: the node's physical memory, and this rank's cgroup memory
   limit (0: none), the node's ranks under it and the cgroup that sets it. */
FSDPErrorCode ShardGroupGetNodeMemory_Private(ShardGroup group, size_t *physical, size_t *cgroup_limit,
                                              int *cgroup_ranks, const char **cgroup);

#endif
