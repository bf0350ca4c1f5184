/* coreimpl.h: FSDPContext and FlatParam internals, shared by context.c and flatparam.c. */
#ifndef FSDP_COREIMPL_H
#define FSDP_COREIMPL_H

#include "fsdpimpl.h"

/* Where a context's buffers live.  Only the host exists so far; the field is
   here so that device memory plugs in without changing the runtime. */
typedef enum { FSDP_DEVICE_HOST = 0 } FSDPDeviceType;

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
  FSDPDataType dtype;
  ParamInfo *params;
  int nparams, capacity;
  /* layout, in elements (after SetUp) */
  int64_t numel, padded, shard_numel;
  /* buffers */
  void *shard, *grad_shard; /* FSDP_MEM_PARAMS, FSDP_MEM_GRADS */
  void *unsharded;          /* NULL when released; the shard itself when F = 1 */
  void *ugrad;              /* unsharded gradient, FSDP_MEM_UNSHARDED; NULL when none */
  void *staging;            /* reduce-scatter output when the gradient shard already holds gradients */
  FlatParamState state;
  bool kept;                /* SHARD_GRAD_OP: the unsharded buffer is kept after Reshard */
  GradShardState grad;
  /* the reduction in flight (state REDUCING) */
  MPI_Request request;
  void *target;       /* where the first collective writes: grad_shard or staging */
  bool replicate_now; /* an all-reduce across replicas follows the reduce-scatter */
  bool reduced_all;   /* the first collective already reduced over all W ranks */
};

struct FSDPContext_s {
  MPI_Comm comm; /* a duplicate of the user's: agreement at SetUp */
  int rank, size;
  ShardGroup group;
  FSDPShardingStrategy strategy;
  FSDPDeviceType device;
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
  FlatParam reducing; /* the unit whose reduction is in flight (one at a time), or NULL */
  FSDPLogEvent ev_allgather, ev_reduce_scatter, ev_allreduce, ev_init, ev_broadcast;
};

MPI_Datatype FSDPDataTypeMPI_Private(FSDPDataType dtype);
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
/* Frees a buffer kept by SHARD_GRAD_OP. */
FSDPErrorCode FlatParamDropKept_Private(FlatParam unit);
FSDPErrorCode FlatParamDestroy_Private(FlatParam *unit);
/* Lays the unit out for F shards and allocates this rank's. */
FSDPErrorCode FlatParamSetUp_Private(FlatParam unit, int factor);
/* Initialization at SetUp: the unit materialized on this rank, or shard by shard. */
FSDPErrorCode FlatParamInitUnit_Private(FlatParam unit, FSDPUnitInitFn init, void *user);
FSDPErrorCode FlatParamInitShard_Private(FlatParam unit, FSDPShardInitFn init, void *user);

#endif
