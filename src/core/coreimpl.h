/* coreimpl.h: FSDPContext and FlatParam internals, shared by context.c and flatparam.c. */
#ifndef FSDP_COREIMPL_H
#define FSDP_COREIMPL_H

#include "../comm/commimpl.h"

typedef struct {
  char *name;
  int ndim;
  int64_t *shape; /* [ndim] */
  int64_t numel;
  int64_t offset; /* first element in the unit's flat buffer */
  bool frozen;    /* not trainable: the optimizer leaves it alone */
} ParamInfo;

/* What the gradient shard holds. */
typedef enum {
  GRAD_NONE = 0, /* nothing since the last zero: the shard is zero */
  GRAD_SYNCED,   /* averaged over all W ranks */
  GRAD_PARTIAL   /* summed in the shard group only (replicate sync off): not yet divided */
} GradShardState;

struct FlatParam_s {
  FSDPContext ctx;
  char *name;
  FSDPDataType dtype;  /* of the master copy: the shard, the gradient shard, the unsharded gradient */
  FSDPDataType pdtype; /* of the unsharded parameters (the mixed-precision policy's, or dtype) */
  FSDPDataType rdtype; /* in which gradients cross the network (likewise) */
  ParamInfo *params;
  int nparams, capacity;
  /* layout, in elements (after SetUp) */
  int64_t numel, padded, shard_numel;
  /* buffers */
  void *shard, *grad_shard; /* FSDP_MEM_PARAMS, FSDP_MEM_GRADS */
  bool shard_shared;        /* the shard is in the context's CommShm window (not this unit's to free) */
  void *view;               /* the unit's parameters kept whole in that window, read in place by every rank
                               of the node: the unsharded buffer (NULL: gathered into a buffer of the rank's) */
  uint64_t gathers;         /* all-gathers into the view so far (its epochs, comm/shm.c) */
  void *unsharded;          /* NULL when released; the shard itself when the context's `direct` */
  void *ugrad;              /* unsharded gradient, from the context's gradient buffers; NULL when none */
  FlatParamState state;
  bool kept; /* SHARD_GRAD_OP: the unsharded buffer is kept after Reshard */
  GradShardState grad;
  int index;             /* in the context's units */
  void *own;             /* SHARD_GRAD_OP strategies: this unit's own unsharded buffer */
  bool cached;           /* resharded after forward, buffer still valid: backward may use it */
  uint64_t gather;       /* the all-gather's ticket (state GATHERING) */
  int fwd_pos, prev_pos; /* position in this forward's order and the previous one's, or -1 */
  /* the reduction in flight (state REDUCING) */
  uint64_t reduce_first, reduce; /* the tickets of its collectives (0: none) */
  void *target;                  /* where the first collective writes: grad_shard or staging */
  bool replicate_now;            /* an all-reduce across replicas follows the reduce-scatter */
  bool reduced_all;              /* the first collective already reduced over all W ranks */
  bool ugrad_zeroed;             /* the reduce-scatter in shared memory left ugrad all zeros */
};

/* Equal buffers of one size, allocated at SetUp and handed out and back
   without allocating; grown only when more are held at once than planned. */
typedef struct {
  void **bufs;
  bool *used;
  bool *zero; /* known to hold zeros (a reduce-scatter in shared memory zeroed it): no need to zero it again */
  int n, cap, in_use;
  size_t bytes;
  FSDPMemCategory category;
  int64_t growths;
  int shared; /* the first `shared` buffers are slices of a CommShm window, not the pool's to free */
  Device dev; /* where the buffers are (NULL: host) */
} BufferPool;

typedef enum { PHASE_NONE = 0, PHASE_FORWARD, PHASE_BACKWARD } StepPhase;

struct FSDPContext_s {
  MPI_Comm comm; /* a duplicate of the user's: agreement at SetUp */
  int rank, size;
  ShardGroup group;
  FSDPShardingStrategy strategy;
  /* where buffers live (doc/cuda.md): dev is NULL on the host */
  FSDPDeviceType device;
  Device dev;
  CommNCCL nccl; /* the GPU's NCCL communicators (src/comm/nccl.c), or NULL */
  void *user_stream;
  int device_local_rank; /* >= 0: the node-local rank whose GPU to take (fsdp-plan's probe on MPI_COMM_SELF) */
  FSDPReplicateEngine replicate_engine;
  bool cuda_aware, cuda_aware_set;
  char fallback[512]; /* why a group's collectives use MPI on a GPU, or "" */
  /* mixed precision: FSDP_FLOAT32 is the units' own precision */
  FSDPDataType param_dtype, reduce_dtype;
  bool direct;      /* F = 1 at full precision: the unsharded view is the shard itself */
  MPI_Op half_sum;  /* sums 16-bit gradients in fp32 (reduce_dtype bf16 or fp16), else MPI_OP_NULL */
  double predivide; /* 16-bit reductions divide by this before summing, by W / predivide after */
  FSDPUnitInitFn unit_init;
  FSDPShardInitFn shard_init;
  void *unit_init_user, *shard_init_user;
  bool sync_params, view_at_setup, grad_sync, replicate_grad_sync;
  bool laid_out;     /* units have their layout and shards (SetUp under way, done, or failed) */
  bool initializing; /* SetUp is running an initializer */
  bool setup;
  FlatParam *units;
  int nunits, capacity;
  /* from the ShardGroup, after SetUp */
  MPI_Comm shard_comm, replicate_comm;
  int factor, shard_index, nreplicas, replica_index;
  int64_t trainable_changes; /* bumped by FlatParamSetTrainable: optimizers notice late changes */
  FlatParam reducing;        /* the unit whose reduction is in flight (one at a time), or NULL */
  FSDPLogEvent ev_allgather, ev_reduce_scatter, ev_allreduce, ev_init, ev_broadcast;
  FSDPLogEvent *ev_unit; /* -fsdp_log_view_units: per unit, one per CommKind */
  /* the overlap engine (doc/overlap.md) */
  FSDPCommEngine engine;
  bool engine_set;
  const char *engine_auto_why; /* why SetUp chose the engine, when the user did not */
  bool shm_reduce;             /* -fsdp_shm_reduce: wanted */
  bool shm_views;              /* -fsdp_shm_views: wanted (the units' views are set at SetUp) */
  CommShm shm;                 /* the gradient buffers' and shards' window on one node, or NULL */
  FSDPBackwardPrefetch backward_prefetch;
  bool forward_prefetch, debug_collectives, log_units;
  bool half_made;              /* FSDPContextCreate failed on this rank: its Destroy checks nothing collective */
  int limit;                   /* L; 0 = none */
  double timeout;              /* seconds; 0 = none */
  double signal_grace;         /* seconds a wait goes on after FSDPNotifySignal; 0 = no limit */
  FSDPWaitMode wait;           /* as set; after SetUp, POLL or SLEEP */
  FSDPWaitMode wait_requested; /* as set (AUTO is decided again by a SetUp tried again) */
  const char *wait_why;        /* why SetUp chose the waits, where not this node's load */
  int node_ranks, node_cpus;   /* on this rank's machine (ShardGroupGetNodeLoad_Private) */
  int machine_hosts;           /* MPI's nodes on that machine: more than 1 for containers of one host */
  bool oversubscribed;         /* some node of the context has more ranks than CPUs (agreed at SetUp) */
  int64_t memory_limit;        /* -fsdp_memory_limit: bytes, 0 none, FSDP_MEMORY_LIMIT_AUTO */
  CommStream stream;
  MPI_Comm stream_shard_comm, stream_replicate_comm; /* only the stream communicates on these */
  MPI_Comm check_comm;                               /* -fsdp_debug_collectives: a duplicate of comm */
  int64_t *check_records;                            /* W records of the debug check */
  /* the memory plan */
  BufferPool params_pool, grads_pool;
  void *staging;
  FSDPMemoryPlan plan;
  /* the step */
  StepPhase phase;
  int *order, norder, *prev_order, nprev; /* units in forward order: this forward's, the last one's */
  FlatParam deferred;                     /* a prefetch the limiter holds back */
  int unsharded_now;                      /* units unsharded, gathering or cached in the pool */
  int64_t step;
  bool step_active; /* a unit was unsharded or reduced since the last FinishBackward */
  FSDPCommStats stats;
  /* checkpoints (src/io/checkpoint.c) */
  int checkpoint_keep;
  bool checkpoint_strict;
  bool check_finite;                        /* -fsdp_check_finite: steps, saves and loads refuse NaN and Inf */
  FSDPCheckpointIO checkpoint_save_io;      /* what a save does: after SetUp, COLLECTIVE, INDEPENDENT or POSIX */
  FSDPCheckpointIO checkpoint_load_io;      /* and a load */
  FSDPCheckpointIO checkpoint_io_requested; /* as set: AUTO is decided at SetUp */
  const char *checkpoint_io_why;            /* why AUTO chose them; NULL when it was set */
  FSDPTrainingState training;
  FSDPLogEvent ev_save, ev_load;
};

/* Settles checkpoint_save_io and checkpoint_load_io from
   checkpoint_io_requested: AUTO by the node load SetUp agreed on and the
   replicas (before SetUp, nothing to do). */
void FSDPContextResolveCheckpointIO_Private(FSDPContext ctx);
/* -fsdp_checkpoint_io's name of a mode. */
const char *FSDPCheckpointIOName_Private(FSDPCheckpointIO io);
/* The steps taken, as a loaded checkpoint says: what the watchdog's and
   -fsdp_debug_collectives' messages count on from. */
void FSDPContextSetStep_Private(FSDPContext ctx, int64_t step);
/* Whether a parameter called `name` exists (raises nothing). */
bool FSDPContextLookupParam_Private(FSDPContext ctx, const char *name, FlatParam *unit, FSDPParamId *id);
/* Completes unit's reduction (state REDUCING -> SHARDED); collective on the
   replicate group when an all-reduce follows. */
FSDPErrorCode FlatParamCompleteReduction_Private(FlatParam unit);
/* At the end of backward, with gradient sync on: reduces a gradient
   accumulated without sync that no FlatParamReduceGrad reduced since, and
   all-reduces a shard reduced in the shard group only.  Collective. */
FSDPErrorCode FlatParamFlushGrad_Private(FlatParam unit);
/* Completes the reduction in flight, if any. */
FSDPErrorCode FSDPContextCompleteReduction_Private(FSDPContext ctx);
/* Lets go of parameters kept after Reshard (SHARD_GRAD_OP, or cached after
   forward), and of a prefetch not used: the shard may change now. */
FSDPErrorCode FlatParamDropKept_Private(FlatParam unit);
/* SHARD_GRAD_OP's buffer of the unit's own (after the views are placed: a view needs none). */
FSDPErrorCode FlatParamTakeOwn_Private(FlatParam unit);
FSDPErrorCode FlatParamDestroy_Private(FlatParam *unit);
/* Gives the unsharded gradient back to the context's buffers. */
FSDPErrorCode FlatParamPutGrad_Private(FlatParam unit);
/* n buffers of `bytes` now, room for cap (a pool never holds more than one per unit). */
FSDPErrorCode BufferPoolCreate_Private(BufferPool *pool, Device dev, int n, int cap, size_t bytes,
                                       FSDPMemCategory category);
FSDPErrorCode BufferPoolDestroy_Private(BufferPool *pool);
/* Lays the unit out for F shards and allocates this rank's. */
FSDPErrorCode FlatParamSetUp_Private(FlatParam unit, int factor);
/* A layout whose memory plan FSDPMemorySizes_Private computes: the
   context's own, or one FSDPPlan considers. */
typedef struct {
  int factor;                    /* F: the ranks each unit is sharded over */
  FSDPShardingStrategy strategy; /* whether units keep their parameters from forward to backward */
  FSDPDataType param_dtype;      /* of the unsharded parameters */
  int limit;                     /* -fsdp_limit_all_gathers: parameter buffers (0: 2) */
  bool views;                    /* the shard group reads its units in place in node shared memory */
} MemoryLayout;

/* The memory plan per rank, and the sizes it is made of. */
typedef struct {
  size_t bytes[FSDP_MEM_NUM_CATEGORIES]; /* as FSDPMemoryPlan: shards, unsharded buffers, staging */
  size_t shards;                         /* sum(psi_i)/F, in the master type */
  size_t all_p;                          /* sum(psi_i), in the parameters' type */
  size_t max_p, max_g, max_shard;        /* the largest unit's parameters, gradient and shard */
  size_t own;                            /* SHARD_GRAD_OP's units' own buffers */
  int nparams, ngrads;                   /* parameter and gradient buffers of the largest unit's size */
} MemorySizes;

void FSDPMemorySizes_Private(FSDPContext ctx, const MemoryLayout *lay, MemorySizes *s);
bool FSDPMemoryViewsWanted_Private(FSDPContext ctx, FSDPDeviceType device, int factor, FSDPDataType param_dtype);
/* Initialization at SetUp: the unit materialized on this rank, or shard by shard. */
FSDPErrorCode FlatParamInitUnit_Private(FlatParam unit, FSDPUnitInitFn init, void *user);
FSDPErrorCode FlatParamInitShard_Private(FlatParam unit, FSDPShardInitFn init, void *user);

#endif
