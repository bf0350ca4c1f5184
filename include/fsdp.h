/*
 * fsdp.h: the public C interface of libfsdp, Fully Sharded Data Parallel
 * training for MPI programs.  One header; every function returns an
 * FSDPErrorCode (FSDP_SUCCESS is 0).  doc/ tells the whole story.
 */
#ifndef FSDP_H
#define FSDP_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fsdpconf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What libfsdp exports: the library builds with -fvisibility=hidden, so a
   function is public exactly when its declaration here says FSDP_EXTERN. */
#if defined(__GNUC__) || defined(__clang__)
#define FSDP_EXTERN extern __attribute__((visibility("default")))
#else
#define FSDP_EXTERN extern
#endif

#if defined(__GNUC__) || defined(__clang__)
#define FSDP_ATTR_FORMAT(fmt, args) __attribute__((format(printf, fmt, args)))
#define FSDPUnlikely(cond) __builtin_expect(!!(cond), 0)
#else
#define FSDP_ATTR_FORMAT(fmt, args)
#define FSDPUnlikely(cond) (cond)
#endif

/* ------------------------------------------------------------------ errors */

typedef enum {
  FSDP_SUCCESS = 0,
  FSDP_ERR_ARG,         /* an argument is invalid: NULL, out of range, inconsistent */
  FSDP_ERR_STATE,       /* the object is not in a state that allows this call */
  FSDP_ERR_MEM,         /* out of memory */
  FSDP_ERR_MPI,         /* an MPI call failed */
  FSDP_ERR_HWLOC,       /* hwloc topology discovery failed */
  FSDP_ERR_HDF5,        /* an HDF5 call failed */
  FSDP_ERR_CUDA,        /* a CUDA runtime or cuBLAS call failed */
  FSDP_ERR_NCCL,        /* an NCCL call failed */
  FSDP_ERR_IO,          /* a file system operation failed */
  FSDP_ERR_OPTION,      /* a runtime option has a malformed or invalid value */
  FSDP_ERR_UNSUPPORTED, /* not supported by this build or configuration */
  FSDP_ERR_TIMEOUT,     /* a collective or a wait did not finish in time */
  FSDP_ERR_CORRUPT,     /* data failed verification (checksum, format) */
  FSDP_ERR_USER,        /* raised by user code or a user callback */
  FSDP_ERR_INTERNAL,    /* a bug in libfsdp: please report it */
  FSDP_ERR_NOT_FINITE,  /* a loss, gradient or parameter is NaN or infinite (-fsdp_check_finite) */
  FSDP_ERR_NUM_CODES
} FSDPErrorCode;

/* What happens when an error is raised (see FSDPSetErrorMode). */
typedef enum {
  FSDP_ERRORS_PRINT = 0, /* print a traceback line per frame on stderr, return the code (default) */
  FSDP_ERRORS_RETURN,    /* print nothing, return the code; FSDPGetLastError/FSDPErrorPrintTrace tell */
  FSDP_ERRORS_ARE_FATAL  /* print the error and MPI_Abort at once */
} FSDPErrorMode;

FSDP_EXTERN const char *FSDPGetErrorString(FSDPErrorCode code);
FSDP_EXTERN FSDPErrorCode FSDPSetErrorMode(FSDPErrorMode mode);
FSDP_EXTERN FSDPErrorCode FSDPGetErrorMode(FSDPErrorMode *mode);
/* The last error raised on this thread: its code, message and traceback depth. */
FSDP_EXTERN FSDPErrorCode FSDPGetLastError(FSDPErrorCode *code, const char **message, int *nframes);
/* Print the last error's traceback, one line per frame, prefixed by the rank. */
FSDP_EXTERN FSDPErrorCode FSDPErrorPrintTrace(FILE *fp);

/* Used by the macros below; call them through the macros. */
FSDP_EXTERN FSDPErrorCode FSDPError(MPI_Comm comm, int line, const char *func, const char *file, FSDPErrorCode code,
                                    const char *fmt, ...) FSDP_ATTR_FORMAT(6, 7);
FSDP_EXTERN FSDPErrorCode FSDPErrorTraceback(int line, const char *func, const char *file, FSDPErrorCode code);
FSDP_EXTERN FSDPErrorCode FSDPErrorMPI(int line, const char *func, const char *file, int mpierr, const char *call);
FSDP_EXTERN void FSDPErrorAbort(MPI_Comm comm, FSDPErrorCode code);

/* Call a function that returns FSDPErrorCode; on error, add this frame to the
   traceback and return the code to the caller. */
#define FSDPCall(...)                                                                                                  \
  do {                                                                                                                 \
    FSDPErrorCode fsdp_ierr_ = (__VA_ARGS__);                                                                          \
    if (FSDPUnlikely(fsdp_ierr_ != FSDP_SUCCESS)) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, fsdp_ierr_); \
  } while (0)

/* Raise `code` with a printf-style message when `cond` is false.  `comm` holds
   the ranks that all see this error (MPI_COMM_SELF when only this one does). */
#define FSDPCheck(cond, comm, code, ...)                                                                               \
  do {                                                                                                                 \
    if (FSDPUnlikely(!(cond))) return FSDPError(comm, __LINE__, __func__, __FILE__, code, __VA_ARGS__);                \
  } while (0)

/* Call an MPI function; a code other than MPI_SUCCESS becomes FSDP_ERR_MPI with
   MPI's own error string.  The communicator needs MPI_ERRORS_RETURN. */
#define FSDPCallMPI(...)                                                                                               \
  do {                                                                                                                 \
    int fsdp_mpierr_ = (__VA_ARGS__);                                                                                  \
    if (FSDPUnlikely(fsdp_mpierr_ != MPI_SUCCESS))                                                                     \
      return FSDPErrorMPI(__LINE__, __func__, __FILE__, fsdp_mpierr_, #__VA_ARGS__);                                   \
  } while (0)

/* For a program's top level: on error print the whole traceback and MPI_Abort(comm). */
#define FSDPCallAbort(comm, ...)                                                                                       \
  do {                                                                                                                 \
    FSDPErrorCode fsdp_ierr_ = (__VA_ARGS__);                                                                          \
    if (FSDPUnlikely(fsdp_ierr_ != FSDP_SUCCESS)) {                                                                    \
      (void)FSDPErrorTraceback(__LINE__, __func__, __FILE__, fsdp_ierr_);                                              \
      FSDPErrorAbort(comm, fsdp_ierr_);                                                                                \
    }                                                                                                                  \
  } while (0)

/* ------------------------------------------------------------------ initialization */

/* Reads -fsdp_* options from argv and FSDP_OPTIONS; calls MPI_Init_thread only
   when MPI is not initialized yet.  argc and argv may be NULL.  When argv names
   options files (-options_file FILE), *argc and *argv are replaced by a list
   with each file's words in place of the pair, valid until FSDPFinalize. */
FSDP_EXTERN FSDPErrorCode FSDPInitialize(int *argc, char ***argv);
/* Prints -fsdp_log_view and unused-option reports; finalizes MPI only when
   FSDPInitialize initialized it. */
FSDP_EXTERN FSDPErrorCode FSDPFinalize(void);
FSDP_EXTERN FSDPErrorCode FSDPInitialized(bool *initialized);
/* For a program's SIGTERM/SIGUSR1 handler (async-signal-safe): the job is
   being stopped.  libfsdp only records it.  A collective that is then still
   waiting after the context's signal grace (-fsdp_signal_grace) aborts the
   job with a message naming the signal and the collective, instead of
   waiting for the watchdog: a peer that will never arrive is usually why a
   job does not stop at its signal. */
FSDP_EXTERN void FSDPNotifySignal(int signo);

FSDP_EXTERN FSDPErrorCode FSDPGetVersion(int *major, int *minor, int *patch);

/* ------------------------------------------------------------------ memory */

typedef enum {
  FSDP_MEM_PARAMS = 0,   /* parameter shards (full precision) */
  FSDP_MEM_GRADS,        /* gradient shards */
  FSDP_MEM_OPTIM_STATE,  /* optimizer state shards */
  FSDP_MEM_UNSHARDED,    /* unsharded (all-gathered) parameter and gradient buffers */
  FSDP_MEM_COMM_STAGING, /* communication staging buffers */
  FSDP_MEM_OTHER,        /* everything else the library allocates */
  FSDP_MEM_NUM_CATEGORIES
} FSDPMemCategory;

typedef struct {
  size_t current[FSDP_MEM_NUM_CATEGORIES]; /* bytes allocated now */
  size_t peak[FSDP_MEM_NUM_CATEGORIES];    /* most bytes allocated at once, since start or reset */
  size_t total_current;
  size_t total_peak;
  uint64_t nallocs; /* successful allocations, since start */
  uint64_t nfrees;
} FSDPMemoryStats;

/* ptr is the address of a pointer; memory is 64-byte aligned and counted in `category`. */
FSDP_EXTERN FSDPErrorCode FSDPMalloc(size_t bytes, FSDPMemCategory category, void *ptr);
FSDP_EXTERN FSDPErrorCode FSDPCalloc(size_t count, size_t size, FSDPMemCategory category, void *ptr);
/* ptr is the address of a pointer from FSDPMalloc/FSDPCalloc (or NULL); it is set to NULL. */
FSDP_EXTERN FSDPErrorCode FSDPFree(void *ptr);
FSDP_EXTERN FSDPErrorCode FSDPGetMemoryStats(FSDPMemoryStats *stats);
FSDP_EXTERN FSDPErrorCode FSDPMemoryResetPeak(void);
/* The same for device memory (-fsdp_device cuda): what the contexts of this
   process hold on their GPU. */
FSDP_EXTERN FSDPErrorCode FSDPGetDeviceMemoryStats(FSDPMemoryStats *stats);
FSDP_EXTERN const char *FSDPMemCategoryName(FSDPMemCategory category);

/* ------------------------------------------------------------------ viewers */

/* Objects print themselves with XView(obj, viewer); a NULL viewer means
   stdout on MPI_COMM_WORLD (rank 0 writes).  Views are collective. */
typedef struct FSDPViewer_s *FSDPViewer;

/* name: "stdout", "stderr" or a file name (created by the communicator's rank 0). */
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIIOpen(MPI_Comm comm, const char *name, FSDPViewer *viewer);
/* Collective: flushes synchronized output first. */
FSDP_EXTERN FSDPErrorCode FSDPViewerDestroy(FSDPViewer *viewer);
FSDP_EXTERN FSDPErrorCode FSDPViewerGetComm(FSDPViewer viewer, MPI_Comm *comm);
/* Written once, by rank 0 of the viewer's communicator. */
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIIPrintf(FSDPViewer viewer, const char *fmt, ...) FSDP_ATTR_FORMAT(2, 3);
/* Buffered on every rank; FSDPViewerFlush (collective) writes all ranks' text in rank order. */
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIISynchronizedPrintf(FSDPViewer viewer, const char *fmt, ...)
    FSDP_ATTR_FORMAT(2, 3);
FSDP_EXTERN FSDPErrorCode FSDPViewerFlush(FSDPViewer viewer);
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIIPushTab(FSDPViewer viewer);
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIIPopTab(FSDPViewer viewer);

/* The build: version, backends, and the versions of MPI, hwloc, HDF5, BLAS,
   CUDA and NCCL this library runs with.  Collective on the viewer. */
FSDP_EXTERN FSDPErrorCode FSDPConfigView(FSDPViewer viewer);
/* "512 B", "1.50 KiB", ... "2.00 TiB" into buf[len]: sizes as the views print them. */
FSDP_EXTERN void FSDPFormatBytes(char *buf, size_t len, double bytes);

/* ------------------------------------------------------------------ options */

/* Each getter registers its option (for -help and the unused-option report)
   and reads it.  `set` (may be NULL) tells whether the option was given; when
   it was not, *value is the default.  A malformed value is FSDP_ERR_OPTION. */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetInt(const char *name, const char *help, int64_t defval, int64_t min,
                                            int64_t max, int64_t *value, bool *set);
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetReal(const char *name, const char *help, double defval, double *value,
                                             bool *set);
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetBool(const char *name, const char *help, bool defval, bool *value, bool *set);
/* choices: NULL-terminated; defval and *value index it. */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetEnum(const char *name, const char *help, const char *const *choices, int defval,
                                             int *value, bool *set);
/* Copies into value[len]; a value that does not fit is an error. */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetString(const char *name, const char *help, const char *defval, char *value,
                                               size_t len, bool *set);
/* Comma-separated lists: on entry *n is the capacity of values, on exit the
   count read (unchanged, with values untouched, when the option is not set). */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetIntList(const char *name, const char *help, int64_t *values, int *n, bool *set);
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetRealList(const char *name, const char *help, double *values, int *n, bool *set);

/* Programmatic access to the database; value NULL sets a flag. */
FSDP_EXTERN FSDPErrorCode FSDPOptionsSetValue(const char *name, const char *value);
FSDP_EXTERN FSDPErrorCode FSDPOptionsClearValue(const char *name);
/* Parse a string like the FSDP_OPTIONS environment variable: "-fsdp_a 1 -fsdp_b". */
FSDP_EXTERN FSDPErrorCode FSDPOptionsInsertString(const char *options);
/* Report every option given but never read, with the closest registered name;
   *nleft (may be NULL) gets their number on this rank.  Collective. */
FSDP_EXTERN FSDPErrorCode FSDPOptionsLeft(FSDPViewer viewer, int *nleft);
FSDP_EXTERN FSDPErrorCode FSDPOptionsView(FSDPViewer viewer);

/* ------------------------------------------------------------------ logging */

typedef int FSDPLogEvent;

typedef struct {
  int64_t count; /* completed Begin/End pairs */
  double time;   /* seconds inside the event (outermost pairs only) */
  int64_t bytes; /* bytes moved, as reported to FSDPLogEventEnd */
} FSDPLogEventInfo;

/* Registering a name twice returns the same event. */
FSDP_EXTERN FSDPErrorCode FSDPLogEventRegister(const char *name, FSDPLogEvent *event);
/* Begin/End cost a branch while logging is off (see FSDPLogSetActive, -fsdp_log_view). */
FSDP_EXTERN FSDPErrorCode FSDPLogEventBegin(FSDPLogEvent event);
FSDP_EXTERN FSDPErrorCode FSDPLogEventEnd(FSDPLogEvent event, int64_t bytes);
FSDP_EXTERN FSDPErrorCode FSDPLogEventGetInfo(FSDPLogEvent event, FSDPLogEventInfo *info);
FSDP_EXTERN FSDPErrorCode FSDPLogSetActive(bool active);
FSDP_EXTERN FSDPErrorCode FSDPLogGetActive(bool *active);
/* Per-event table (min/max/avg over ranks, GB/s) and memory; collective on the viewer. */
FSDP_EXTERN FSDPErrorCode FSDPLogView(FSDPViewer viewer);

/* ------------------------------------------------------------------ data types */

/* Element types of parameters and buffers.  A FlatParam's master copy (its
   shard) is FSDP_FLOAT32 or FSDP_FLOAT64; the 16-bit types are for
   mixed-precision copies and reductions. */
typedef enum { FSDP_FLOAT32 = 0, FSDP_FLOAT64, FSDP_BFLOAT16, FSDP_FLOAT16, FSDP_NUM_DATA_TYPES } FSDPDataType;

/* "fp32", "fp64", "bf16", "fp16" */
FSDP_EXTERN const char *FSDPDataTypeName(FSDPDataType dtype);

/* The SIMD path of the host kernels (GELU, LayerNorm, the optimizers'
   updates): by default the best this CPU runs.  Every path gives the same
   bits; choosing one is for tests and benchmarks.  Setting a level the CPU
   lacks is FSDP_ERR_UNSUPPORTED. */
typedef enum { FSDP_SIMD_GENERIC = 0, FSDP_SIMD_AVX2, FSDP_SIMD_AVX512, FSDP_NUM_SIMD } FSDPSimd;
FSDP_EXTERN const char *FSDPSimdName(FSDPSimd level);
FSDP_EXTERN FSDPErrorCode FSDPSetSimd(FSDPSimd level); /* -fsdp_simd generic|avx2|avx512 */
/* The level in use, and the best this CPU runs (either may be NULL). */
FSDP_EXTERN FSDPErrorCode FSDPGetSimd(FSDPSimd *level, FSDPSimd *best);
/* Bytes per element, 0 for a value that is not an FSDPDataType. */
FSDP_EXTERN size_t FSDPDataTypeSize(FSDPDataType dtype);
/* Converts n values; to bf16 and fp16 with round to nearest even (a NaN
   stays a NaN, a value beyond fp16's range becomes an infinity), from them
   exactly.  Every type converts to and from fp32; fp64 and the 16-bit types
   do not convert into each other (through fp32 they would round twice).
   dst and src may be the same array only when the types are. */
FSDP_EXTERN FSDPErrorCode FSDPDataTypeConvert(FSDPDataType to, void *dst, FSDPDataType from, const void *src,
                                              int64_t n);

/* ------------------------------------------------------------------ ShardGroup */

/* The process layout of FSDP: the shard communicator (the F ranks that split
   every FlatParam, normally one node) and the replicate communicator (the W/F
   ranks that hold the same shard in different groups), built from MPI's node
   discovery and each node's hwloc topology.  doc/shardgroup.md tells how. */
typedef struct ShardGroup_s *ShardGroup;

/* Where shard groups come from when no sharding factor is set. */
typedef enum {
  FSDP_SHARD_DOMAIN_NODE = 0, /* the ranks of one node (hybrid sharding; the default) */
  FSDP_SHARD_DOMAIN_PACKAGE,  /* the ranks on one package (socket) of a node */
  FSDP_SHARD_DOMAIN_NUMA,     /* the ranks on one NUMA node */
  FSDP_SHARD_DOMAIN_WORLD     /* every rank (full sharding) */
} FSDPShardDomain;

/* Optional CPU binding of each rank, applied at ShardGroupSetUp through hwloc. */
typedef enum {
  FSDP_BIND_NONE = 0, /* keep whatever binding the launcher gave */
  FSDP_BIND_CORE,     /* one core per rank */
  FSDP_BIND_NUMA,     /* the cores of one NUMA node */
  FSDP_BIND_PACKAGE   /* the cores of one package */
} FSDPBind;

/* Collective on comm, which is duplicated. */
FSDP_EXTERN FSDPErrorCode ShardGroupCreate(MPI_Comm comm, ShardGroup *group);
/* F ranks per shard group; 0 (the default) derives F from the shard domain. */
FSDP_EXTERN FSDPErrorCode ShardGroupSetShardingFactor(ShardGroup group, int factor);
FSDP_EXTERN FSDPErrorCode ShardGroupSetShardDomain(ShardGroup group, FSDPShardDomain domain);
FSDP_EXTERN FSDPErrorCode ShardGroupSetBind(ShardGroup group, FSDPBind bind);
/* -fsdp_sharding_factor, -fsdp_shard_domain, -fsdp_bind, -fsdp_bind_force, -fsdp_topology,
   -fsdp_ranks_per_node, -fsdp_rank_placement, -fsdp_node_source, -fsdp_view (doc/options.md). */
FSDP_EXTERN FSDPErrorCode ShardGroupSetFromOptions(ShardGroup group);
/* Collective: discovers nodes and topology, binds, builds the communicators
   and assigns devices.  Errors are raised on every rank. */
FSDP_EXTERN FSDPErrorCode ShardGroupSetUp(ShardGroup group);
/* Collective: topology per node, the groups, and one line per rank.  A NULL
   viewer is stdout on the group's communicator. */
FSDP_EXTERN FSDPErrorCode ShardGroupView(ShardGroup group, FSDPViewer viewer);
/* Collective; sets *group to NULL. */
FSDP_EXTERN FSDPErrorCode ShardGroupDestroy(ShardGroup *group);

/* Getters, valid after ShardGroupSetUp; any output pointer may be NULL.
   Communicators belong to the group: do not free them. */
FSDP_EXTERN FSDPErrorCode ShardGroupGetComm(ShardGroup group, MPI_Comm *comm);
/* The F ranks of this rank's shard group; *index is this rank's shard. */
FSDP_EXTERN FSDPErrorCode ShardGroupGetShardComm(ShardGroup group, MPI_Comm *comm, int *index, int *factor);
/* The W/F ranks holding the same shard; *index is this rank's shard group. */
FSDP_EXTERN FSDPErrorCode ShardGroupGetReplicateComm(ShardGroup group, MPI_Comm *comm, int *index, int *size);
/* Node of this rank (nodes numbered by their lowest rank) and how many there are. */
FSDP_EXTERN FSDPErrorCode ShardGroupGetNode(ShardGroup group, int *node, int *nnodes);
FSDP_EXTERN FSDPErrorCode ShardGroupGetLocalRank(ShardGroup group, int *local_rank, int *local_size);
/* The GPU assigned to this rank, numbered in PCI bus order on its node, or -1
   when the node has none; *nsharing is how many ranks of the node share it. */
FSDP_EXTERN FSDPErrorCode ShardGroupGetDevice(ShardGroup group, int *device, int *nsharing);
/* Its PCI bus id ("0000:18:00.0"), or NULL without a GPU: what
   cudaDeviceGetByPCIBusId takes, whatever CUDA's device order. */
FSDP_EXTERN FSDPErrorCode ShardGroupGetDevicePCIBusId(ShardGroup group, const char **busid);

/* ------------------------------------------------------------------ FSDPContext (doc/flatparam.md): types */

/* The context owns its units; their getters, like the ShardGroup's, take
   NULL for any output not wanted.  doc/flatparam.md tells the whole story. */
typedef struct FSDPContext_s *FSDPContext;
typedef struct FlatParam_s *FlatParam;
/* An optimizer of a context's shards (the optimizers section); checkpoints save it with the context. */
typedef struct FSDPOptimizer_s *FSDPOptimizer;
/* A parameter's index in its unit, in registration order. */
typedef int FSDPParamId;

/* Deferred initialization, called by FSDPContextSetUp.  A unit initializer
   fills the unit's parameters (FlatParamGetParam works inside it) the same way
   on every rank of a shard group; units are materialized one at a time.  A
   shard initializer fills elements [begin, end) of parameter `id`, flattened
   in row-major order, into values[0 .. end-begin), and nothing is materialized.
   Return FSDP_SUCCESS, or an error (raise it with FSDPCheck to give a message). */
typedef FSDPErrorCode (*FSDPUnitInitFn)(FlatParam unit, void *user);
typedef FSDPErrorCode (*FSDPShardInitFn)(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values,
                                         void *user);

/* How units are sharded (doc/flatparam.md).  W ranks in all, F per shard group. */
typedef enum {
  FSDP_FULL_SHARD = 0,     /* F = W; parameters resharded after forward and after backward */
  FSDP_SHARD_GRAD_OP,      /* F = W; parameters stay unsharded from forward to backward */
  FSDP_NO_SHARD,           /* F = 1: every rank holds everything, gradients all-reduced (DDP) */
  FSDP_HYBRID_SHARD,       /* F from the ShardGroup (a node by default), replicated across groups */
  FSDP_HYBRID_SHARD_ZERO2, /* hybrid, with parameters unsharded from forward to backward */
  FSDP_NUM_SHARDING_STRATEGIES
} FSDPShardingStrategy;

/* "full", "grad_op", "none", "hybrid", "hybrid_zero2": the -fsdp_sharding_strategy values. */
FSDP_EXTERN const char *FSDPShardingStrategyName(FSDPShardingStrategy strategy);

/* Where the context's collectives run.  THREAD: a communication thread of the
   context (needs MPI_THREAD_MULTIPLE; the default when MPI provides it).
   NONBLOCKING: MPI_I* collectives, progressed inside the library's MPI calls
   (the default otherwise).  SYNC: blocking collectives at the point of call. */
typedef enum {
  FSDP_COMM_ENGINE_THREAD = 0,
  FSDP_COMM_ENGINE_NONBLOCKING,
  FSDP_COMM_ENGINE_SYNC,
  FSDP_NUM_COMM_ENGINES
} FSDPCommEngine;

/* How the context waits for collectives.  POLL: test in a loop (MPI's own
   blocking calls do): the lowest latency when every rank has a core.  SLEEP:
   test, then sleep with backoff (1 us doubling to 32 us), giving the core
   back to the ranks being waited for.  AUTO (the default): SLEEP where the
   node has more ranks than CPUs they may run on, POLL elsewhere. */
typedef enum { FSDP_WAIT_AUTO = 0, FSDP_WAIT_POLL, FSDP_WAIT_SLEEP, FSDP_NUM_WAIT_MODES } FSDPWaitMode;

/* When backward issues the next unit's all-gather: PRE, when the current
   unit is unsharded for its backward (before its reduce-scatter); POST, after
   the current unit's reduce-scatter is issued; NONE, when it is needed. */
typedef enum {
  FSDP_BACKWARD_PREFETCH_PRE = 0,
  FSDP_BACKWARD_PREFETCH_POST,
  FSDP_BACKWARD_PREFETCH_NONE,
  FSDP_NUM_BACKWARD_PREFETCH
} FSDPBackwardPrefetch;

/* Where a context's shards, gradients, unsharded buffers and staging live.
   CUDA: device memory on the rank's GPU (the ShardGroup's choice), NCCL in
   the shard group; FlatParamGetParam, FlatParamGetGrad, FlatParamGetShard
   and FlatParamGetGradShard then return device pointers, ordered on the
   context's compute stream.  Initializers still fill host memory. */
typedef enum { FSDP_DEVICE_HOST = 0, FSDP_DEVICE_CUDA, FSDP_NUM_DEVICE_TYPES } FSDPDeviceType;
/* How gradients cross the replicas on a GPU: MPI (through pinned host
   staging, or device pointers when MPI is CUDA-aware), or NCCL. */
typedef enum {
  FSDP_REPLICATE_ENGINE_MPI = 0,
  FSDP_REPLICATE_ENGINE_NCCL,
  FSDP_NUM_REPLICATE_ENGINES
} FSDPReplicateEngine;

/* How ranks move a checkpoint's data: COLLECTIVE MPI-IO transfers (MPI-IO
   aggregates the ranks' pieces into large aligned writes, what parallel file
   systems want), INDEPENDENT ones (each rank reads and writes its own
   contiguous pieces, with no synchronization per dataset), or AUTO (the
   default): independent where a node of the job has more ranks than CPUs
   (collective transfers there wait for descheduled ranks), else collective;
   decided at FSDPContextSetUp, alike on every rank. */
typedef enum {
  FSDP_CHECKPOINT_IO_COLLECTIVE = 0,
  FSDP_CHECKPOINT_IO_INDEPENDENT,
  FSDP_CHECKPOINT_IO_AUTO,
  FSDP_NUM_CHECKPOINT_IO
} FSDPCheckpointIO;

/* What a training program needs besides parameters and optimizer state to
   resume exactly; a checkpoint keeps it in its root attributes. */
typedef struct {
  int64_t step;        /* steps taken (FSDPContextSave writes the optimizer's step when given one) */
  int64_t data_cursor; /* where the program's data resumes, in the program's own units */
  uint64_t rng[4];     /* the program's random-number state */
} FSDPTrainingState;
/* The memory plan of a set-up context, bytes per category on this rank: what
   FSDPContextSetUp allocated for shards, unsharded buffers and staging. */
typedef struct {
  size_t bytes[FSDP_MEM_NUM_CATEGORIES];
  size_t total;
  int unsharded_buffers; /* parameter buffers of the largest unit's size (the limit L) */
  int gradient_buffers;  /* unsharded gradient buffers of that size */
} FSDPMemoryPlan;

/* What the runtime did, since SetUp, on this rank. */
typedef struct {
  int64_t collectives;     /* collectives issued */
  int64_t prefetches;      /* all-gathers issued before their FlatParamUnshard */
  int64_t prefetch_hits;   /* FlatParamUnshard calls that found the all-gather under way or done */
  int64_t cache_hits;      /* FlatParamUnshard calls that found the unit still unsharded from forward */
  int64_t deferred;        /* prefetches the limiter held back until a buffer was released */
  int64_t buffer_growths;  /* buffers allocated beyond the plan (more units held unsharded than planned) */
  int64_t shm_collectives; /* of them, the shard group's run in node shared memory (-fsdp_shm_reduce) */
  int64_t shm_fallbacks;   /* of those, run through MPI after all: a buffer outside the window */
  int max_unsharded;       /* most units unsharded, being gathered, or cached (in a buffer) at once */
  int params_in_use;       /* unsharded parameter buffers held now (the plan's or a unit's own) */
  int grads_in_use;        /* unsharded gradient buffers held now */
  double comm_time;        /* seconds in collectives */
  double exposed_time;     /* seconds the calling thread waited for collectives */
} FSDPCommStats;

/* ------------------------------------------------------------------ FSDPContext: create and configure, before SetUp */

/* Collective on comm, which is duplicated.  The context creates its ShardGroup. */
FSDP_EXTERN FSDPErrorCode FSDPContextCreate(MPI_Comm comm, FSDPContext *ctx);
FSDP_EXTERN FSDPErrorCode FSDPContextSetShardingStrategy(FSDPContext ctx, FSDPShardingStrategy strategy);
/* The context's ShardGroup: configure it before FSDPContextSetUp (hybrid
   strategies take F from it), query it after.  It belongs to the context. */
FSDP_EXTERN FSDPErrorCode FSDPContextGetShardGroup(FSDPContext ctx, ShardGroup *group);
/* At most one of the two initializers; without either, parameters start at zero. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetUnitInit(FSDPContext ctx, FSDPUnitInitFn init, void *user);
FSDP_EXTERN FSDPErrorCode FSDPContextSetShardInit(FSDPContext ctx, FSDPShardInitFn init, void *user);
/* Whether SetUp broadcasts each shard from the first replica to the others (default false). */
FSDP_EXTERN FSDPErrorCode FSDPContextSetSyncParams(FSDPContext ctx, bool sync);
/* Before SetUp, for fp32 units: parameters are rounded to param_dtype once
   per unshard, all-gathered and viewed in it (FlatParamGetViewDataType);
   gradients stay fp32 in their views, are rounded to reduce_dtype and summed
   in it across ranks (each pairwise sum in fp32, rounded), then accumulated
   into the fp32 gradient shard.  Shards, gradient shards and optimizer state
   stay fp32: the master copy.  Each type is FSDP_FLOAT32 (full precision,
   the default), FSDP_BFLOAT16 or FSDP_FLOAT16.  With fp16, see the gradient
   scaler (FSDPOptimizerSetGradScaler). */
FSDP_EXTERN FSDPErrorCode FSDPContextSetMixedPrecision(
    FSDPContext ctx, FSDPDataType param_dtype, FSDPDataType reduce_dtype); /* -fsdp_param_dtype, -fsdp_reduce_dtype */

/* Overlap (doc/overlap.md). */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCommEngine(FSDPContext ctx, FSDPCommEngine engine); /* -fsdp_comm_engine */
FSDP_EXTERN FSDPErrorCode FSDPContextSetBackwardPrefetch(FSDPContext ctx,
                                                         FSDPBackwardPrefetch mode);     /* -fsdp_backward_prefetch */
FSDP_EXTERN FSDPErrorCode FSDPContextSetForwardPrefetch(FSDPContext ctx, bool prefetch); /* -fsdp_forward_prefetch */
/* At most `limit` units' parameters unsharded or being gathered at once; 0 = no limit. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetLimitAllGathers(FSDPContext ctx, int limit); /* -fsdp_limit_all_gathers */
/* Seconds a collective may take before the watchdog aborts the job; 0 = never. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCollectiveTimeout(FSDPContext ctx,
                                                          double seconds); /* -fsdp_collective_timeout */
/* After FSDPNotifySignal, a collective wait that has gone on `seconds` more
   (default 5) aborts the job, saying so: another rank is not coming. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetSignalGrace(FSDPContext ctx, double seconds); /* -fsdp_signal_grace */
/* Before each collective, check that every rank issues the same one. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetDebugCollectives(FSDPContext ctx, bool debug); /* -fsdp_debug_collectives */
FSDP_EXTERN FSDPErrorCode FSDPContextSetWaitMode(FSDPContext ctx, FSDPWaitMode mode);  /* -fsdp_wait */
/* After SetUp: the mode in force (POLL or SLEEP), and the node's ranks and CPUs it was chosen from. */
FSDP_EXTERN FSDPErrorCode FSDPContextGetWaitMode(FSDPContext ctx, FSDPWaitMode *mode, int *node_ranks, int *node_cpus);
/* Waits for a nonblocking MPI operation of the caller's (an MPI_Iallreduce
   of the loss, say) as the context waits for its own collectives: under its
   watchdog, progressing its queued collectives, and sleeping between tests
   when the wait mode is SLEEP.  A blocking MPI call would poll instead. */
FSDP_EXTERN FSDPErrorCode FSDPContextWait(FSDPContext ctx, MPI_Request *request);
/* On the host, a shard group whose ranks share a node reduce-scatters fp32
   gradients and all-gathers fp32 shards through node shared memory: the
   unsharded gradient buffers (and, without views, the shards) sit in an MPI
   shared-memory window, and each rank reads its peers' data where it lies
   (default true; doc/overlap.md).  false: MPI's collectives.  Set before
   FSDPContextSetUp. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetShmReduce(FSDPContext ctx, bool use); /* -fsdp_shm_reduce */
/* With that window and fp32 parameters, each unit's parameters are kept
   whole in it, once per shard group, and that view is every rank's
   unsharded buffer, read in place: an all-gather copies only the rank's own
   shard into its place (once every peer is done with the view's previous
   gather), backward needs none, and no parameter buffers are allocated
   (default true; doc/overlap.md, "Views").  The shards stay each rank's own:
   a rank may write its shard at any time between its passes.  false: each
   rank all-gathers into buffers of its own.  Every rank must set the same;
   set before FSDPContextSetUp. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetShmViews(FSDPContext ctx, bool use); /* -fsdp_shm_views */
/* Before SetUp, what was asked for; after, whether the units are views. */
FSDP_EXTERN FSDPErrorCode FSDPContextGetShmViews(FSDPContext ctx, bool *use);

/* Where the context computes (doc/cuda.md). */
FSDP_EXTERN FSDPErrorCode FSDPContextSetDevice(FSDPContext ctx, FSDPDeviceType device); /* -fsdp_device host|cuda */
FSDP_EXTERN FSDPErrorCode FSDPContextSetReplicateEngine(FSDPContext ctx,
                                                        FSDPReplicateEngine engine); /* -fsdp_replicate_engine */

/* Keep the last `keep` checkpoints: path, path.1, ... (default 1). */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCheckpointKeep(FSDPContext ctx, int keep);          /* -fsdp_checkpoint_keep */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCheckpointIO(FSDPContext ctx, FSDPCheckpointIO io); /* -fsdp_checkpoint_io */
/* false: load the parameters and state the file and the context share, and
   report the rest on rank 0's stderr (default true: any difference is an error). */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCheckpointStrict(FSDPContext ctx, bool strict); /* -fsdp_checkpoint_strict */
/* Guard against NaN and Inf (default true): FSDPOptimizerStep stops with
   FSDP_ERR_NOT_FINITE when the global gradient norm is not finite (with the
   gradient scaler on, an overflow skips the step instead), FSDPContextSave
   refuses to write non-finite parameters or state, and FSDPContextLoad
   refuses a file that holds them.  false lets all three go on. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCheckFinite(FSDPContext ctx, bool check); /* -fsdp_check_finite */
/* The most memory the rank's memory plan may take (doc/options.md): FSDPContextSetUp
   refuses, on every rank and before allocating, a plan above it.  bytes > 0: this
   limit; 0: no check; FSDP_MEMORY_LIMIT_AUTO (the default): the least of the
   node's physical memory divided by its ranks, the cgroup's memory limit divided
   by its ranks on the node, and what RLIMIT_AS leaves.  Set before SetUp. */
#define FSDP_MEMORY_LIMIT_AUTO (-1)
FSDP_EXTERN FSDPErrorCode FSDPContextSetMemoryLimit(FSDPContext ctx, int64_t bytes); /* -fsdp_memory_limit */

/* Every option above (-fsdp_sharding_strategy, -fsdp_comm_engine, ...), -fsdp_view, and the ShardGroup's options. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetFromOptions(FSDPContext ctx);
/* A new unit, last in execution order; it belongs to the context. */
FSDP_EXTERN FSDPErrorCode FSDPContextAddUnit(FSDPContext ctx, const char *name, FlatParam *unit);
/* Collective: builds the ShardGroup, checks that every rank registered the
   same units, lays out and allocates shards, runs the initializer. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetUp(FSDPContext ctx);

/* ------------------------------------------------------------------ FSDPContext: a training step */

/* Mark the passes of a training step, as autograd's hooks tell PyTorch FSDP.
   The forward pass records the order in which units are unsharded; backward
   prefetches in the reverse of that order, the next forward (with forward
   prefetch) in that order.  Without these calls nothing is prefetched.
   FSDPContextFinishBackward ends the step. */
FSDP_EXTERN FSDPErrorCode FSDPContextBeginForward(FSDPContext ctx);
FSDP_EXTERN FSDPErrorCode FSDPContextBeginBackward(FSDPContext ctx);

/* Collective: waits for every gradient reduction started by FlatParamReduceGrad
   and, with gradient sync on, reduces what accumulation left unreduced;
   gradient shards are then final and the optimizer may run. */
FSDP_EXTERN FSDPErrorCode FSDPContextFinishBackward(FSDPContext ctx);
/* Zero every gradient shard and drop gradients accumulated without synchronization. */
FSDP_EXTERN FSDPErrorCode FSDPContextZeroGrad(FSDPContext ctx);
/* Gradient synchronization of FlatParamReduceGrad (default true).  With false
   no communication happens: each unit keeps its unsharded gradient and later
   micro-batches add to it, until a reduction with synchronization on. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetGradSync(FSDPContext ctx, bool sync);
/* Hybrid strategies: with false, gradients are reduce-scattered in the shard
   group but not all-reduced across replicas, until a reduction with it on. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetReplicateGradSync(FSDPContext ctx, bool sync);
/* Collective: broadcast every shard from the first replica to the others
   (what -fsdp_sync_params does at SetUp). */
FSDP_EXTERN FSDPErrorCode FSDPContextBroadcastParams(FSDPContext ctx);
/* After SetUp: returns when the work the context queued on its GPU has run
   (shards then read right on the host; timings are complete).  On the host it returns at once. */
FSDP_EXTERN FSDPErrorCode FSDPContextSynchronize(FSDPContext ctx);

/* ------------------------------------------------------------------ FSDPContext: checkpoints (doc/checkpoint-format.md) */

/* Stored by the next FSDPContextSave; FSDPContextLoad sets it from the file. */
FSDP_EXTERN FSDPErrorCode FSDPContextSetTrainingState(FSDPContext ctx, const FSDPTrainingState *state);
FSDP_EXTERN FSDPErrorCode FSDPContextGetTrainingState(FSDPContext ctx, FSDPTrainingState *state);
/* Collective, after SetUp: one HDF5 file with every parameter at its full
   shape as /params/<name> and, when opt is not NULL, its state as
   /optim/<state>/<name>.  Each rank writes only what lies in its shard
   (replicas split it); the file is written beside path and renamed over it
   once complete, so a crash leaves the previous checkpoint intact. */
FSDP_EXTERN FSDPErrorCode FSDPContextSave(FSDPContext ctx, FSDPOptimizer opt, const char *path);
/* Collective, after SetUp and between steps: loads a file written at any
   world size, strategy and wrapping, each rank reading only its shards;
   opt NULL loads the parameters alone.  Names, shapes and types are checked
   first: a difference is an error listing them all, and nothing is loaded.
   Checksums are verified unit by unit before the unit changes: a corrupt
   dataset is an error naming it, leaving its unit and later ones as they were. */
FSDP_EXTERN FSDPErrorCode FSDPContextLoad(FSDPContext ctx, FSDPOptimizer opt, const char *path);

/* ------------------------------------------------------------------ FSDPContext: queries */

FSDP_EXTERN FSDPErrorCode FSDPContextGetShardingStrategy(FSDPContext ctx, FSDPShardingStrategy *strategy);
/* The context's own duplicate of the communicator it was created on. */
FSDP_EXTERN FSDPErrorCode FSDPContextGetComm(FSDPContext ctx, MPI_Comm *comm);
FSDP_EXTERN FSDPErrorCode FSDPContextGetNumUnits(FSDPContext ctx, int *nunits);
FSDP_EXTERN FSDPErrorCode FSDPContextGetUnit(FSDPContext ctx, int i, FlatParam *unit);
/* The unit holding the parameter called `name`; FSDP_ERR_ARG when there is none. */
FSDP_EXTERN FSDPErrorCode FSDPContextFindParam(FSDPContext ctx, const char *name, FlatParam *unit, FSDPParamId *id);
/* Per rank, in elements: all original parameters, this rank's shards (padding
   included), and the largest unit unsharded (padding included). */
FSDP_EXTERN FSDPErrorCode FSDPContextGetSizes(FSDPContext ctx, int64_t *numel, int64_t *shard_numel,
                                              int64_t *max_unit_numel);
FSDP_EXTERN FSDPErrorCode FSDPContextGetDevice(FSDPContext ctx, FSDPDeviceType *device);
FSDP_EXTERN FSDPErrorCode FSDPContextGetMixedPrecision(FSDPContext ctx, FSDPDataType *param_dtype,
                                                       FSDPDataType *reduce_dtype);
FSDP_EXTERN FSDPErrorCode FSDPContextGetCheckpointKeep(FSDPContext ctx, int *keep);
FSDP_EXTERN FSDPErrorCode FSDPContextGetCheckFinite(FSDPContext ctx, bool *check);
FSDP_EXTERN FSDPErrorCode FSDPContextGetMemoryPlan(FSDPContext ctx, FSDPMemoryPlan *plan);
FSDP_EXTERN FSDPErrorCode FSDPContextGetCommStats(FSDPContext ctx, FSDPCommStats *stats);

/* ------------------------------------------------------------------ FSDPContext: view, destroy */

/* Collective: strategy, ShardGroup, units and the memory they take. */
FSDP_EXTERN FSDPErrorCode FSDPContextView(FSDPContext ctx, FSDPViewer viewer);
/* Collective; an error, with the context left intact, while reductions are in flight. */
FSDP_EXTERN FSDPErrorCode FSDPContextDestroy(FSDPContext *ctx);

/* ------------------------------------------------------------------ FlatParam (doc/flatparam.md) */

/* One unit's lifecycle: SHARDED -> GATHERING -> UNSHARDED -> REDUCING -> SHARDED. */
typedef enum {
  FSDP_FLATPARAM_SHARDED = 0, /* only this rank's shard is held */
  FSDP_FLATPARAM_GATHERING,   /* an all-gather is under way */
  FSDP_FLATPARAM_UNSHARDED,   /* the whole unit is held: parameter and gradient views are valid */
  FSDP_FLATPARAM_REDUCING     /* the gradient is being reduced into the gradient shard */
} FlatParamState;

FSDP_EXTERN const char *FlatParamStateName(FlatParamState state);

/* Before SetUp.  All parameters of a unit share its data type (default FSDP_FLOAT32). */
FSDP_EXTERN FSDPErrorCode FlatParamSetDataType(FlatParam unit, FSDPDataType dtype);
/* Register a parameter of shape[0] x ... x shape[ndim-1] (ndim 0: a scalar;
   a zero extent: an empty tensor).  Names are unique in the context. */
FSDP_EXTERN FSDPErrorCode FlatParamAddParam(FlatParam unit, const char *name, int ndim, const int64_t shape[],
                                            FSDPParamId *id);

/* Trainable (the default) or frozen, like requires_grad in PyTorch: a frozen
   parameter keeps its value and has no optimizer state, while the other
   parameters of its unit train.  Set it the same on every rank, before
   FSDPOptimizerSetUp. */
FSDP_EXTERN FSDPErrorCode FlatParamSetTrainable(FlatParam unit, FSDPParamId id, bool trainable);
FSDP_EXTERN FSDPErrorCode FlatParamGetTrainable(FlatParam unit, FSDPParamId id, bool *trainable);

/* Collective on the shard group: all-gather the unit (state UNSHARDED). */
FSDP_EXTERN FSDPErrorCode FlatParamUnshard(FlatParam unit);
/* Release the unsharded parameters (state SHARDED).  Under SHARD_GRAD_OP the
   buffer is kept for the backward pass, but views are invalid all the same. */
FSDP_EXTERN FSDPErrorCode FlatParamReshard(FlatParam unit);
/* Collective on the shard and replicate groups, after the unit's backward:
   releases the unsharded parameters and starts averaging the unsharded
   gradient over all W ranks into the gradient shard (state REDUCING until
   the next unit's reduction or FSDPContextFinishBackward completes it).  A
   rank that never asked for the gradient reduces zeros.  With gradient sync
   off it only releases. */
FSDP_EXTERN FSDPErrorCode FlatParamReduceGrad(FlatParam unit);

/* Views into the unsharded buffers, valid while the unit is UNSHARDED.  The
   gradient is zero when first asked for in a step; add to it.  Parameters
   are in FlatParamGetViewDataType's type, gradients in the unit's. */
FSDP_EXTERN FSDPErrorCode FlatParamGetParam(FlatParam unit, FSDPParamId id, void **values);
FSDP_EXTERN FSDPErrorCode FlatParamGetGrad(FlatParam unit, FSDPParamId id, void **values);

/* This rank's shard, its gradient shard (always valid after SetUp), and their length. */
FSDP_EXTERN FSDPErrorCode FlatParamGetShard(FlatParam unit, void **values, int64_t *numel);
FSDP_EXTERN FSDPErrorCode FlatParamGetGradShard(FlatParam unit, void **values, int64_t *numel);
/* Which part of parameter `id` this rank's shard holds: elements [*begin, *end)
   of the flattened parameter, at element *offset of the shard.  *begin == *end
   when it holds none of it.  Any output may be NULL. */
FSDP_EXTERN FSDPErrorCode FlatParamGetShardRange(FlatParam unit, FSDPParamId id, int64_t *begin, int64_t *end,
                                                 int64_t *offset);

FSDP_EXTERN FSDPErrorCode FlatParamGetName(FlatParam unit, const char **name);
FSDP_EXTERN FSDPErrorCode FlatParamGetState(FlatParam unit, FlatParamState *state);
FSDP_EXTERN FSDPErrorCode FlatParamGetDataType(FlatParam unit, FSDPDataType *dtype);
/* The type of FlatParamGetParam's views: the mixed-precision param_dtype, or
   the unit's own (always the unit's own inside a unit initializer). */
FSDP_EXTERN FSDPErrorCode FlatParamGetViewDataType(FlatParam unit, FSDPDataType *dtype);
FSDP_EXTERN FSDPErrorCode FlatParamGetNumParams(FlatParam unit, int *nparams);
/* shape has ndim entries and lives as long as the context; any output may be NULL. */
FSDP_EXTERN FSDPErrorCode FlatParamGetParamInfo(FlatParam unit, FSDPParamId id, const char **name, int *ndim,
                                                const int64_t **shape, int64_t *numel);
/* Elements: the original parameters, padded to a multiple of F, and one shard (padded / F). */
FSDP_EXTERN FSDPErrorCode FlatParamGetSizes(FlatParam unit, int64_t *numel, int64_t *padded_numel,
                                            int64_t *shard_numel);

/* ------------------------------------------------------------------ optimizers */

/* Sharded SGD and AdamW (doc/optim.md): each rank updates only its own
   shards, with the update rules and defaults of torch.optim.SGD and
   torch.optim.AdamW; state exists only for the trainable elements of its
   shards.  Global gradient-norm clipping counts each distinct shard once. */
typedef enum { FSDP_OPTIMIZER_SGD = 0, FSDP_OPTIMIZER_ADAMW } FSDPOptimizerType;
/* Constant, or linear warmup then cosine decay to zero. */
typedef enum { FSDP_LR_CONSTANT = 0, FSDP_LR_COSINE } FSDPLRSchedule;
FSDP_EXTERN const char *FSDPOptimizerTypeName(FSDPOptimizerType type);
FSDP_EXTERN const char *FSDPLRScheduleName(FSDPLRSchedule schedule);

/* Default AdamW: lr 1e-3, betas 0.9 and 0.999, eps 1e-8, weight decay 0.01.
   SGD: lr 1e-3, momentum 0, weight decay 0, no nesterov. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerCreate(FSDPContext ctx, FSDPOptimizer *opt);
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetType(FSDPOptimizer opt, FSDPOptimizerType type);
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetLearningRate(FSDPOptimizer opt, double lr);
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetWeightDecay(FSDPOptimizer opt, double weight_decay);
/* SGD only. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetMomentum(FSDPOptimizer opt, double momentum, bool nesterov);
/* AdamW only. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetBetas(FSDPOptimizer opt, double beta1, double beta2);
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetEps(FSDPOptimizer opt, double eps);
/* Cosine: the rate rises linearly over warmup_steps steps, then decays to
   zero at step total_steps. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetSchedule(FSDPOptimizer opt, FSDPLRSchedule schedule, int64_t warmup_steps,
                                                   int64_t total_steps);
/* Clip the global gradient norm to max_norm in every FSDPOptimizerStep (0: off, the default). */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetClipGradNorm(FSDPOptimizer opt, double max_norm);
/* Parameter groups, as torch.optim's param_groups: the parameters `pattern`
   selects take this weight decay and lr_scale times the learning rate (of the
   schedule); the others keep the optimizer's.  `pattern` is a shell glob on
   the parameter's name ("*.bias", "blocks.*.ln_?.*", fnmatch(3)) or a test of
   its dimensions: "ndim<2" is nanoGPT's and GPT-2's rule, no decay for biases
   and LayerNorm's weights.  A parameter is in the last group that selects it.
   Before SetUp; a group that selects no trainable parameter is an error there.
   Checkpoints record the groups, and a load refuses other patterns. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerAddParamGroup(FSDPOptimizer opt, const char *pattern, double weight_decay,
                                                     double lr_scale);
/* The weight decay and learning-rate scale that parameter `name` takes. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetParamSettings(FSDPOptimizer opt, const char *name, double *weight_decay,
                                                        double *lr_scale);
/* -fsdp_optimizer, -fsdp_lr, -fsdp_weight_decay, -fsdp_momentum, -fsdp_nesterov,
   -fsdp_beta1, -fsdp_beta2, -fsdp_eps, -fsdp_lr_schedule, -fsdp_warmup_steps,
   -fsdp_lr_decay_steps, -fsdp_clip_grad_norm, and before SetUp -fsdp_no_decay
   (its groups added once), -fsdp_grad_scaler, -fsdp_grad_scaler_init_scale,
   -fsdp_grad_scaler_growth_interval. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetFromOptions(FSDPOptimizer opt);
/* Dynamic loss scaling, for fp16 (PyTorch's ShardedGradScaler; doc/optim.md).
   Multiply the loss gradient by FSDPOptimizerGetGradScale's scale before
   backward.  FSDPOptimizerStep (and FSDPOptimizerClipGradNorm, if called
   first) divides the gradient shards by it; when any shard of any rank holds
   an inf or a NaN, every rank skips the step and multiplies the scale by
   backoff_factor; after growth_interval steps in a row without one, it
   multiplies the scale by growth_factor.  Defaults: off, 65536, 2, 0.5, 2000.
   Before SetUp. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetGradScaler(FSDPOptimizer opt, bool enable); /* -fsdp_grad_scaler */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetGradScaler(FSDPOptimizer opt, bool *enabled);
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetGradScalerParams(FSDPOptimizer opt, double init_scale, double growth_factor,
                                                           double backoff_factor, int64_t growth_interval);
/* The scale for the next backward (1 with the scaler off), and the steps skipped so far. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetGradScale(FSDPOptimizer opt, double *scale, int64_t *skipped);
/* Collective, after FSDPContextSetUp: checks that every rank froze the same
   parameters and allocates the state. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetUp(FSDPOptimizer opt);
/* Collective: completes the backward pass (FSDPContextFinishBackward), clips
   if asked, and updates every trainable element of this rank's shards. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerStep(FSDPOptimizer opt);
/* Collective: the global L2 norm of the gradients of trainable parameters,
   each distinct shard counted once and padding excluded; with max_norm > 0
   the gradient shards are scaled by max_norm / (norm + 1e-6) when that is
   below 1, as torch.nn.utils.clip_grad_norm_ does.  total_norm may be NULL. */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerClipGradNorm(FSDPOptimizer opt, double max_norm, double *total_norm);
/* Steps taken, the rate the next step will use, and the norm the last step
   measured (NaN when it did not clip). */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetStep(FSDPOptimizer opt, int64_t *step);
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetLearningRate(FSDPOptimizer opt, double *lr);
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetGradNorm(FSDPOptimizer opt, double *norm);
/* Elements of state this rank holds (all state tensors together). */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetStateSize(FSDPOptimizer opt, int64_t *numel);
FSDP_EXTERN FSDPErrorCode FSDPOptimizerView(FSDPOptimizer opt, FSDPViewer viewer);
FSDP_EXTERN FSDPErrorCode FSDPOptimizerDestroy(FSDPOptimizer *opt);

#ifdef __cplusplus
}
#endif

#endif /* FSDP_H */
