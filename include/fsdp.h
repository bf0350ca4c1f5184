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
  FSDP_ERR_NUM_CODES
} FSDPErrorCode;

/* What happens when an error is raised (see FSDPSetErrorMode). */
typedef enum {
  FSDP_ERRORS_PRINT = 0,    /* print a traceback line per frame on stderr, return the code (default) */
  FSDP_ERRORS_RETURN,       /* print nothing, return the code; FSDPGetLastError/FSDPErrorPrintTrace tell */
  FSDP_ERRORS_ARE_FATAL     /* print the error and MPI_Abort at once */
} FSDPErrorMode;

const char *FSDPGetErrorString(FSDPErrorCode code);
FSDPErrorCode FSDPSetErrorMode(FSDPErrorMode mode);
FSDPErrorCode FSDPGetErrorMode(FSDPErrorMode *mode);
/* The last error raised on this thread: its code, message and traceback depth. */
FSDPErrorCode FSDPGetLastError(FSDPErrorCode *code, const char **message, int *nframes);
/* Print the last error's traceback, one line per frame, prefixed by the rank. */
FSDPErrorCode FSDPErrorPrintTrace(FILE *fp);

/* Used by the macros below; call them through the macros. */
FSDPErrorCode FSDPError(MPI_Comm comm, int line, const char *func, const char *file, FSDPErrorCode code,
                        const char *fmt, ...) FSDP_ATTR_FORMAT(6, 7);
FSDPErrorCode FSDPErrorTraceback(int line, const char *func, const char *file, FSDPErrorCode code);
FSDPErrorCode FSDPErrorMPI(int line, const char *func, const char *file, int mpierr, const char *call);
void FSDPErrorAbort(MPI_Comm comm, FSDPErrorCode code);

/* Call a function that returns FSDPErrorCode; on error, add this frame to the
   traceback and return the code to the caller. */
#define FSDPCall(...)                                                                  \
  do {                                                                                 \
    FSDPErrorCode fsdp_ierr_ = (__VA_ARGS__);                                          \
    if (FSDPUnlikely(fsdp_ierr_ != FSDP_SUCCESS))                                      \
      return FSDPErrorTraceback(__LINE__, __func__, __FILE__, fsdp_ierr_);             \
  } while (0)

/* Raise `code` with a printf-style message when `cond` is false.  `comm` holds
   the ranks that all see this error (MPI_COMM_SELF when only this one does). */
#define FSDPCheck(cond, comm, code, ...)                                               \
  do {                                                                                 \
    if (FSDPUnlikely(!(cond))) return FSDPError(comm, __LINE__, __func__, __FILE__, code, __VA_ARGS__); \
  } while (0)

/* Call an MPI function; a code other than MPI_SUCCESS becomes FSDP_ERR_MPI with
   MPI's own error string.  The communicator needs MPI_ERRORS_RETURN. */
#define FSDPCallMPI(...)                                                               \
  do {                                                                                 \
    int fsdp_mpierr_ = (__VA_ARGS__);                                                  \
    if (FSDPUnlikely(fsdp_mpierr_ != MPI_SUCCESS))                                     \
      return FSDPErrorMPI(__LINE__, __func__, __FILE__, fsdp_mpierr_, #__VA_ARGS__);   \
  } while (0)

/* For a program's top level: on error print the whole traceback and MPI_Abort(comm). */
#define FSDPCallAbort(comm, ...)                                                       \
  do {                                                                                 \
    FSDPErrorCode fsdp_ierr_ = (__VA_ARGS__);                                          \
    if (FSDPUnlikely(fsdp_ierr_ != FSDP_SUCCESS)) {                                    \
      (void)FSDPErrorTraceback(__LINE__, __func__, __FILE__, fsdp_ierr_);              \
      FSDPErrorAbort(comm, fsdp_ierr_);                                                \
    }                                                                                  \
  } while (0)

/* ------------------------------------------------------------------ initialization */

/* Reads -fsdp_* options from argv and FSDP_OPTIONS; calls MPI_Init_thread only
   when MPI is not initialized yet.  argc and argv may be NULL. */
FSDPErrorCode FSDPInitialize(int *argc, char ***argv);
/* Prints -fsdp_log_view and unused-option reports; finalizes MPI only when
   FSDPInitialize initialized it. */
FSDPErrorCode FSDPFinalize(void);
FSDPErrorCode FSDPInitialized(bool *initialized);

FSDPErrorCode FSDPGetVersion(int *major, int *minor, int *patch);

/* ------------------------------------------------------------------ viewers */

/* Objects print themselves with XView(obj, viewer); a NULL viewer means
   stdout on MPI_COMM_WORLD (rank 0 writes).  Views are collective. */
typedef struct FSDPViewer_s *FSDPViewer;

/* name: "stdout", "stderr" or a file name (created by the communicator's rank 0). */
FSDPErrorCode FSDPViewerASCIIOpen(MPI_Comm comm, const char *name, FSDPViewer *viewer);
/* Collective: flushes synchronized output first. */
FSDPErrorCode FSDPViewerDestroy(FSDPViewer *viewer);
FSDPErrorCode FSDPViewerGetComm(FSDPViewer viewer, MPI_Comm *comm);
/* Written once, by rank 0 of the viewer's communicator. */
FSDPErrorCode FSDPViewerASCIIPrintf(FSDPViewer viewer, const char *fmt, ...) FSDP_ATTR_FORMAT(2, 3);
/* Buffered on every rank; FSDPViewerFlush (collective) writes all ranks' text in rank order. */
FSDPErrorCode FSDPViewerASCIISynchronizedPrintf(FSDPViewer viewer, const char *fmt, ...) FSDP_ATTR_FORMAT(2, 3);
FSDPErrorCode FSDPViewerFlush(FSDPViewer viewer);
FSDPErrorCode FSDPViewerASCIIPushTab(FSDPViewer viewer);
FSDPErrorCode FSDPViewerASCIIPopTab(FSDPViewer viewer);

/* The build: version, backends, and the versions of MPI, hwloc, HDF5, BLAS,
   CUDA and NCCL this library runs with.  Collective on the viewer. */
FSDPErrorCode FSDPConfigView(FSDPViewer viewer);

/* ------------------------------------------------------------------ options */

/* Each getter registers its option (for -help and the unused-option report)
   and reads it.  `set` (may be NULL) tells whether the option was given; when
   it was not, *value is the default.  A malformed value is FSDP_ERR_OPTION. */
FSDPErrorCode FSDPOptionsGetInt(const char *name, const char *help, int64_t defval, int64_t min, int64_t max,
                                int64_t *value, bool *set);
FSDPErrorCode FSDPOptionsGetReal(const char *name, const char *help, double defval, double *value, bool *set);
FSDPErrorCode FSDPOptionsGetBool(const char *name, const char *help, bool defval, bool *value, bool *set);
/* choices: NULL-terminated; defval and *value index it. */
FSDPErrorCode FSDPOptionsGetEnum(const char *name, const char *help, const char *const *choices, int defval,
                                 int *value, bool *set);
/* Copies into value[len]; a value that does not fit is an error. */
FSDPErrorCode FSDPOptionsGetString(const char *name, const char *help, const char *defval, char *value,
                                   size_t len, bool *set);
/* Comma-separated lists: on entry *n is the capacity of values, on exit the
   count read (unchanged, with values untouched, when the option is not set). */
FSDPErrorCode FSDPOptionsGetIntList(const char *name, const char *help, int64_t *values, int *n, bool *set);
FSDPErrorCode FSDPOptionsGetRealList(const char *name, const char *help, double *values, int *n, bool *set);

/* Programmatic access to the database; value NULL sets a flag. */
FSDPErrorCode FSDPOptionsSetValue(const char *name, const char *value);
FSDPErrorCode FSDPOptionsClearValue(const char *name);
/* Parse a string like the FSDP_OPTIONS environment variable: "-fsdp_a 1 -fsdp_b". */
FSDPErrorCode FSDPOptionsInsertString(const char *options);
/* Report every option given but never read, with the closest registered name;
   *nleft (may be NULL) gets their number on this rank.  Collective. */
FSDPErrorCode FSDPOptionsLeft(FSDPViewer viewer, int *nleft);
FSDPErrorCode FSDPOptionsView(FSDPViewer viewer);

/* ------------------------------------------------------------------ logging */

typedef int FSDPLogEvent;

typedef struct {
  int64_t count;   /* completed Begin/End pairs */
  double time;     /* seconds inside the event (outermost pairs only) */
  int64_t bytes;   /* bytes moved, as reported to FSDPLogEventEnd */
} FSDPLogEventInfo;

/* Registering a name twice returns the same event. */
FSDPErrorCode FSDPLogEventRegister(const char *name, FSDPLogEvent *event);
/* Begin/End cost a branch while logging is off (see FSDPLogSetActive, -fsdp_log_view). */
FSDPErrorCode FSDPLogEventBegin(FSDPLogEvent event);
FSDPErrorCode FSDPLogEventEnd(FSDPLogEvent event, int64_t bytes);
FSDPErrorCode FSDPLogEventGetInfo(FSDPLogEvent event, FSDPLogEventInfo *info);
FSDPErrorCode FSDPLogSetActive(bool active);
FSDPErrorCode FSDPLogGetActive(bool *active);
/* Per-event table (min/max/avg over ranks, GB/s) and memory; collective on the viewer. */
FSDPErrorCode FSDPLogView(FSDPViewer viewer);

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
FSDPErrorCode ShardGroupCreate(MPI_Comm comm, ShardGroup *group);
/* F ranks per shard group; 0 (the default) derives F from the shard domain. */
FSDPErrorCode ShardGroupSetShardingFactor(ShardGroup group, int factor);
FSDPErrorCode ShardGroupSetShardDomain(ShardGroup group, FSDPShardDomain domain);
FSDPErrorCode ShardGroupSetBind(ShardGroup group, FSDPBind bind);
/* -fsdp_sharding_factor, -fsdp_shard_domain, -fsdp_bind, -fsdp_topology,
   -fsdp_ranks_per_node, -fsdp_rank_placement, -fsdp_view (doc/options.md). */
FSDPErrorCode ShardGroupSetFromOptions(ShardGroup group);
/* Collective: discovers nodes and topology, binds, builds the communicators
   and assigns devices.  Errors are raised on every rank. */
FSDPErrorCode ShardGroupSetUp(ShardGroup group);
/* Collective: topology per node, the groups, and one line per rank.  A NULL
   viewer is stdout on the group's communicator. */
FSDPErrorCode ShardGroupView(ShardGroup group, FSDPViewer viewer);
/* Collective; sets *group to NULL. */
FSDPErrorCode ShardGroupDestroy(ShardGroup *group);

/* Getters, valid after ShardGroupSetUp; any output pointer may be NULL.
   Communicators belong to the group: do not free them. */
FSDPErrorCode ShardGroupGetComm(ShardGroup group, MPI_Comm *comm);
/* The F ranks of this rank's shard group; *index is this rank's shard. */
FSDPErrorCode ShardGroupGetShardComm(ShardGroup group, MPI_Comm *comm, int *index, int *factor);
/* The W/F ranks holding the same shard; *index is this rank's shard group. */
FSDPErrorCode ShardGroupGetReplicateComm(ShardGroup group, MPI_Comm *comm, int *index, int *size);
/* Node of this rank (nodes numbered by their lowest rank) and how many there are. */
FSDPErrorCode ShardGroupGetNode(ShardGroup group, int *node, int *nnodes);
FSDPErrorCode ShardGroupGetLocalRank(ShardGroup group, int *local_rank, int *local_size);
/* The GPU assigned to this rank, numbered in PCI bus order on its node, or -1
   when the node has none; *nsharing is how many ranks of the node share it. */
FSDPErrorCode ShardGroupGetDevice(ShardGroup group, int *device, int *nsharing);
/* Its PCI bus id ("0000:18:00.0"), or NULL without a GPU: what
   cudaDeviceGetByPCIBusId takes, whatever CUDA's device order. */
FSDPErrorCode ShardGroupGetDevicePCIBusId(ShardGroup group, const char **busid);

/* ------------------------------------------------------------------ memory */

typedef enum {
  FSDP_MEM_PARAMS = 0,     /* parameter shards (full precision) */
  FSDP_MEM_GRADS,          /* gradient shards */
  FSDP_MEM_OPTIM_STATE,    /* optimizer state shards */
  FSDP_MEM_UNSHARDED,      /* unsharded (all-gathered) parameter and gradient buffers */
  FSDP_MEM_COMM_STAGING,   /* communication staging buffers */
  FSDP_MEM_OTHER,          /* everything else the library allocates */
  FSDP_MEM_NUM_CATEGORIES
} FSDPMemCategory;

typedef struct {
  size_t current[FSDP_MEM_NUM_CATEGORIES]; /* bytes allocated now */
  size_t peak[FSDP_MEM_NUM_CATEGORIES];    /* most bytes allocated at once, since start or reset */
  size_t total_current;
  size_t total_peak;
  uint64_t nallocs;                        /* successful allocations, since start */
  uint64_t nfrees;
} FSDPMemoryStats;

/* ptr is the address of a pointer; memory is 64-byte aligned and counted in `category`. */
FSDPErrorCode FSDPMalloc(size_t bytes, FSDPMemCategory category, void *ptr);
FSDPErrorCode FSDPCalloc(size_t count, size_t size, FSDPMemCategory category, void *ptr);
/* ptr is the address of a pointer from FSDPMalloc/FSDPCalloc (or NULL); it is set to NULL. */
FSDPErrorCode FSDPFree(void *ptr);
FSDPErrorCode FSDPGetMemoryStats(FSDPMemoryStats *stats);
FSDPErrorCode FSDPMemoryResetPeak(void);
const char *FSDPMemCategoryName(FSDPMemCategory category);

#ifdef __cplusplus
}
#endif

#endif /* FSDP_H */
