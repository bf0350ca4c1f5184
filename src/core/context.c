/* FSDPContext: the units of a model, how they are sharded, and the runtime
   that gathers and reduces them (doc/flatparam.md). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "coreimpl.h"
#ifdef FSDP_HAVE_CUDA
#include "fsdp_cuda.h"
#endif
#ifdef HAVE_MPI_EXT_H
#include <mpi-ext.h> /* Open MPI's MPIX_Query_cuda_support */
#endif

static const char *const strategy_names[] = {"full", "grad_op", "none", "hybrid", "hybrid_zero2", NULL};
/* PyTorch's names (ShardingStrategy.FULL_SHARD, ...), accepted as input; matched ignoring case. */
static const char *const strategy_aliases[] = {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard",
                                               "hybrid_shard_zero2"};
static const char *const engine_names[] = {"thread", "nonblocking", "sync", NULL};
static const char *const checkpoint_io_names[] = {"collective", "independent", "auto", "posix", NULL};
static const char *const prefetch_names[] = {"pre", "post", "none", NULL};
static const char *const device_names[] = {"host", "cuda", NULL};
static const char *const replicate_engine_names[] = {"mpi", "nccl", NULL};
static const char *const wait_names[] = {"auto", "poll", "sleep", NULL};

const char *FSDPCheckpointIOName_Private(FSDPCheckpointIO io)
{
  return (int)io >= 0 && io < FSDP_NUM_CHECKPOINT_IO ? checkpoint_io_names[io] : "unknown";
}

const char *FSDPShardingStrategyName(FSDPShardingStrategy strategy)
{
  if ((int)strategy < 0 || strategy >= FSDP_NUM_SHARDING_STRATEGIES) return "unknown strategy";
  return strategy_names[strategy];
}

#define CHECK_CTX(c) FSDPCheck(c, MPI_COMM_SELF, FSDP_ERR_ARG, "ctx must not be NULL")
/* Settings can change until SetUp. */
#define CHECK_SETTABLE(c)                                                                                              \
  do {                                                                                                                 \
    CHECK_CTX(c);                                                                                                      \
    FSDPCheck(!(c)->laid_out || (c)->setup, MPI_COMM_SELF, FSDP_ERR_STATE,                                             \
              "%s: FSDPContextSetUp failed on this context; destroy it", __func__);                                    \
    FSDPCheck(!(c)->laid_out, MPI_COMM_SELF, FSDP_ERR_STATE,                                                           \
              "%s after FSDPContextSetUp: the context is already set up", __func__);                                   \
  } while (0)
#define CHECK_SETUP(c)                                                                                                 \
  do {                                                                                                                 \
    CHECK_CTX(c);                                                                                                      \
    FSDPCheck(!(c)->laid_out || (c)->setup, MPI_COMM_SELF, FSDP_ERR_STATE,                                             \
              "%s: FSDPContextSetUp failed on this context; destroy it", __func__);                                    \
    FSDPCheck((c)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: the context is not set up: call FSDPContextSetUp first", \
              __func__);                                                                                               \
  } while (0)
/* Calls that work on the context's buffers: on a GPU, its device first. */
#define CHECK_RUNNING(c)                                                                                               \
  do {                                                                                                                 \
    CHECK_SETUP(c);                                                                                                    \
    FSDPCall(DeviceEnter_Private((c)->dev));                                                                           \
  } while (0)

/* ------------------------------------------------------------------ lifecycle */

static FSDPErrorCode create(MPI_Comm comm, FSDPContext c)
{
  FSDPCallMPI(MPI_Comm_dup(comm, &c->comm));
  FSDPCallMPI(MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN));
  FSDPCallMPI(MPI_Comm_rank(c->comm, &c->rank));
  FSDPCallMPI(MPI_Comm_size(c->comm, &c->size));
  FSDPCall(ShardGroupCreate(comm, &c->group));
  FSDPCall(FSDPLogEventRegister("AllGather", &c->ev_allgather));
  FSDPCall(FSDPLogEventRegister("ReduceScatter", &c->ev_reduce_scatter));
  FSDPCall(FSDPLogEventRegister("AllReduce", &c->ev_allreduce));
  FSDPCall(FSDPLogEventRegister("ParamInit", &c->ev_init));
  FSDPCall(FSDPLogEventRegister("ParamBroadcast", &c->ev_broadcast));
  FSDPCall(FSDPLogEventRegister("CheckpointSave", &c->ev_save));
  FSDPCall(FSDPLogEventRegister("CheckpointLoad", &c->ev_load));
  FSDPCall(FSDPLogEventSetKind_Private(c->ev_allgather, FSDP_LOG_KIND_COMM));
  FSDPCall(FSDPLogEventSetKind_Private(c->ev_reduce_scatter, FSDP_LOG_KIND_COMM));
  FSDPCall(FSDPLogEventSetKind_Private(c->ev_allreduce, FSDP_LOG_KIND_COMM));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextCreate(MPI_Comm comm, FSDPContext *ctx)
{
  FSDPContext c;
  FSDPErrorCode ierr;

  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "ctx must not be NULL");
  *ctx = NULL;
  FSDPCall(FSDPCheckCreateComm_Private(comm, __func__));
  FSDPCollective(comm);
  FSDPCall(FSDPCalloc(1, sizeof *c, FSDP_MEM_OTHER, &c));
  c->comm = c->shard_comm = c->replicate_comm = MPI_COMM_NULL;
  c->half_sum = MPI_OP_NULL;
  c->predivide = 1;
  c->strategy = FSDP_FULL_SHARD;
  c->device = FSDP_DEVICE_HOST;
  c->device_local_rank = -1;
  c->grad_sync = c->replicate_grad_sync = true;
  c->stream_shard_comm = c->stream_replicate_comm = c->check_comm = MPI_COMM_NULL;
  c->backward_prefetch = FSDP_BACKWARD_PREFETCH_PRE;
  c->limit = 2;
  c->checkpoint_keep = 1;
  c->checkpoint_strict = true;
  c->check_finite = true;
  c->checkpoint_save_io = c->checkpoint_load_io = c->checkpoint_io_requested = FSDP_CHECKPOINT_IO_AUTO;
  c->memory_limit = FSDP_MEMORY_LIMIT_AUTO;
  c->shm_reduce = true;
  c->shm_views = true;
  c->timeout = 600;
  c->signal_grace = 5;
  c->debug_collectives = FSDPCollectiveChecks_Private; /* -fsdp_debug_collectives given to FSDPInitialize */
  if ((ierr = create(comm, c))) {
    c->half_made = true; /* the other ranks may have theirs: this Destroy is this rank's alone */
    (void)FSDPContextDestroy(&c);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  *ctx = c;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextDestroy(FSDPContext *ctx)
{
  FSDPContext c;
  FSDPErrorCode stream_err;
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "ctx must not be NULL");
  if (!(c = *ctx)) return FSDP_SUCCESS;
  if (!c->half_made) FSDPCollectiveTeardown(c->comm);
  FSDPCheck(!c->reducing, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPContextDestroy: the gradient reduction of unit '%s' is in flight: call FSDPContextFinishBackward "
            "first; the context is left as it was",
            c->reducing ? c->reducing->name : "");
  (void)DeviceEnter_Private(c->dev); /* its memory is freed on its GPU, error or not */
  /* Prefetches nobody used finish before their buffers go.  A collective
     that failed there is finished too: the rest is freed, then its error returned. */
  stream_err = CommStreamDestroy(&c->stream);
  for (int i = 0; i < c->nunits; i++) FSDPCall(FlatParamDestroy_Private(&c->units[i]));
  FSDPCall(FSDPFree(&c->units));
  FSDPCall(BufferPoolDestroy_Private(&c->params_pool));
  FSDPCall(BufferPoolDestroy_Private(&c->grads_pool));
  FSDPCall(CommShmDestroy(&c->shm));
  FSDPCall(DeviceFree_Private(c->dev, &c->staging, c->plan.bytes[FSDP_MEM_COMM_STAGING], FSDP_MEM_COMM_STAGING));
  FSDPCall(CommNCCLDestroy(&c->nccl));
  FSDPCall(DeviceDestroy_Private(&c->dev));
  FSDPCall(FSDPFree(&c->order));
  FSDPCall(FSDPFree(&c->prev_order));
  FSDPCall(FSDPFree(&c->check_records));
  FSDPCall(FSDPFree(&c->ev_unit));
  MPI_Comm *comms[] = {&c->stream_shard_comm, &c->stream_replicate_comm, &c->check_comm};
  for (size_t k = 0; k < sizeof comms / sizeof comms[0]; k++)
    if (*comms[k] != MPI_COMM_NULL) FSDPCallMPI(MPI_Comm_free(comms[k]));
  FSDPCall(ShardGroupDestroy(&c->group));
  if (c->half_sum != MPI_OP_NULL) FSDPCallMPI(MPI_Op_free(&c->half_sum));
  if (c->comm != MPI_COMM_NULL) FSDPCallMPI(MPI_Comm_free(&c->comm));
  FSDPCall(FSDPFree(ctx));
  if (stream_err) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, stream_err);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetShardingStrategy(FSDPContext ctx, FSDPShardingStrategy strategy)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck((int)strategy >= 0 && strategy < FSDP_NUM_SHARDING_STRATEGIES, MPI_COMM_SELF, FSDP_ERR_ARG,
            "sharding strategy %d is not one of FSDP_FULL_SHARD, _SHARD_GRAD_OP, _NO_SHARD, _HYBRID_SHARD, "
            "_HYBRID_SHARD_ZERO2",
            (int)strategy);
  ctx->strategy = strategy;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetShardingStrategy(FSDPContext ctx, FSDPShardingStrategy *strategy)
{
  CHECK_CTX(ctx);
  if (strategy) *strategy = ctx->strategy;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetShardGroup(FSDPContext ctx, ShardGroup *group)
{
  CHECK_CTX(ctx);
  if (group) *group = ctx->group;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetUnitInit(FSDPContext ctx, FSDPUnitInitFn init, void *user)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck(!init || !ctx->shard_init, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetUnitInit: the context already has a shard initializer; a context has at most one");
  ctx->unit_init = init;
  ctx->unit_init_user = user;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetShardInit(FSDPContext ctx, FSDPShardInitFn init, void *user)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck(!init || !ctx->unit_init, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetShardInit: the context already has a unit initializer; a context has at most one");
  ctx->shard_init = init;
  ctx->shard_init_user = user;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetSyncParams(FSDPContext ctx, bool sync)
{
  CHECK_SETTABLE(ctx);
  ctx->sync_params = sync;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetGradSync(FSDPContext ctx, bool sync)
{
  CHECK_CTX(ctx);
  ctx->grad_sync = sync;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetReplicateGradSync(FSDPContext ctx, bool sync)
{
  CHECK_CTX(ctx);
  ctx->replicate_grad_sync = sync;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCommEngine(FSDPContext ctx, FSDPCommEngine engine)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck((int)engine >= 0 && engine < FSDP_NUM_COMM_ENGINES, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetCommEngine: %d is not an FSDPCommEngine (thread, nonblocking, sync)", (int)engine);
  ctx->engine = engine;
  ctx->engine_set = true;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetShmReduce(FSDPContext ctx, bool use)
{
  CHECK_SETTABLE(ctx);
  ctx->shm_reduce = use;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetShmViews(FSDPContext ctx, bool use)
{
  CHECK_SETTABLE(ctx);
  ctx->shm_views = use;
  return FSDP_SUCCESS;
}

/* Whether start_shm made the units views (all of them or none). */
static bool has_views(FSDPContext ctx) { return ctx->nunits > 0 && ctx->units[0]->view; }

FSDPErrorCode FSDPContextGetShmViews(FSDPContext ctx, bool *use)
{
  CHECK_CTX(ctx);
  FSDPCheck(use, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetShmViews: use must not be NULL");
  *use = ctx->laid_out ? has_views(ctx) : ctx->shm_views;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetWaitMode(FSDPContext ctx, FSDPWaitMode mode)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck((int)mode >= 0 && mode < FSDP_NUM_WAIT_MODES, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetWaitMode: %d is not an FSDPWaitMode (auto, poll, sleep)", (int)mode);
  ctx->wait = ctx->wait_requested = mode;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetWaitMode(FSDPContext ctx, FSDPWaitMode *mode, int *node_ranks, int *node_cpus)
{
  CHECK_RUNNING(ctx);
  if (mode) *mode = ctx->wait;
  if (node_ranks) *node_ranks = ctx->node_ranks;
  if (node_cpus) *node_cpus = ctx->node_cpus;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextWait(FSDPContext ctx, MPI_Request *request)
{
  CHECK_RUNNING(ctx);
  FSDPCheck(request, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextWait: request must not be NULL");
  FSDPCall(CommStreamWaitRequest(ctx->stream, request, "a request of the caller's (FSDPContextWait)"));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetBackwardPrefetch(FSDPContext ctx, FSDPBackwardPrefetch mode)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck((int)mode >= 0 && mode < FSDP_NUM_BACKWARD_PREFETCH, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetBackwardPrefetch: %d is not an FSDPBackwardPrefetch (pre, post, none)", (int)mode);
  ctx->backward_prefetch = mode;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetForwardPrefetch(FSDPContext ctx, bool prefetch)
{
  CHECK_SETTABLE(ctx);
  ctx->forward_prefetch = prefetch;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetLimitAllGathers(FSDPContext ctx, int limit)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck(limit >= 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetLimitAllGathers: the limit is %d; it is a number of units, or 0 for no limit", limit);
  ctx->limit = limit;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCollectiveTimeout(FSDPContext ctx, double seconds)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck(seconds >= 0 && seconds == seconds, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetCollectiveTimeout: %g seconds; the timeout is >= 0 (0 turns the watchdog off)", seconds);
  ctx->timeout = seconds;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetSignalGrace(FSDPContext ctx, double seconds)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck(seconds >= 0 && seconds == seconds, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetSignalGrace: %g seconds; the grace is >= 0 (0: wait for the watchdog)", seconds);
  ctx->signal_grace = seconds;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetMemoryLimit(FSDPContext ctx, int64_t bytes)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck(bytes >= FSDP_MEMORY_LIMIT_AUTO, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetMemoryLimit: %lld is not a number of bytes, 0 (no check) or FSDP_MEMORY_LIMIT_AUTO (%d)",
            (long long)bytes, FSDP_MEMORY_LIMIT_AUTO);
  ctx->memory_limit = bytes;
  return FSDP_SUCCESS;
}

/* -fsdp_memory_limit: auto, none (or 0), or bytes with an optional K, M, G or T (KiB ... TiB) suffix. */
static FSDPErrorCode parse_memory_limit(const char *text, int64_t *bytes)
{
  if (!strcasecmp(text, "auto")) *bytes = FSDP_MEMORY_LIMIT_AUTO;
  else if (!strcasecmp(text, "none")) *bytes = 0;
  else
    FSDPCheck(FSDPParseBytes_Private(text, bytes), MPI_COMM_SELF, FSDP_ERR_OPTION,
              "-fsdp_memory_limit '%s': expected auto, none, or a number of bytes with an optional K, M, G or T "
              "suffix (KiB, MiB, GiB, TiB: 12G is 12 GiB)",
              text);
  return FSDP_SUCCESS;
}

static bool is_policy_dtype(FSDPDataType t) { return t == FSDP_FLOAT32 || t == FSDP_BFLOAT16 || t == FSDP_FLOAT16; }

FSDPErrorCode FSDPContextSetMixedPrecision(FSDPContext ctx, FSDPDataType param_dtype, FSDPDataType reduce_dtype)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck(is_policy_dtype(param_dtype), MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetMixedPrecision: param_dtype %s (%d) is not fp32, bf16 or fp16",
            FSDPDataTypeName(param_dtype), (int)param_dtype);
  FSDPCheck(is_policy_dtype(reduce_dtype), MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetMixedPrecision: reduce_dtype %s (%d) is not fp32, bf16 or fp16",
            FSDPDataTypeName(reduce_dtype), (int)reduce_dtype);
  ctx->param_dtype = param_dtype;
  ctx->reduce_dtype = reduce_dtype;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetMixedPrecision(FSDPContext ctx, FSDPDataType *param_dtype, FSDPDataType *reduce_dtype)
{
  CHECK_CTX(ctx);
  if (param_dtype) *param_dtype = ctx->param_dtype;
  if (reduce_dtype) *reduce_dtype = ctx->reduce_dtype;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetDebugCollectives(FSDPContext ctx, bool debug)
{
  CHECK_SETTABLE(ctx);
  ctx->debug_collectives = debug;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetDevice(FSDPContext ctx, FSDPDeviceType device)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck((int)device >= 0 && device < FSDP_NUM_DEVICE_TYPES, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetDevice: %d is not an FSDPDeviceType (host, cuda)", (int)device);
  ctx->device = device;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetDevice(FSDPContext ctx, FSDPDeviceType *device)
{
  CHECK_CTX(ctx);
  if (device) *device = ctx->device;
  return FSDP_SUCCESS;
}

#ifdef FSDP_HAVE_CUDA
/* fsdp_cuda.h's calls: CUDA builds only, with CUDA's types. */
FSDPErrorCode FSDPContextSetCUDAStream(FSDPContext ctx, cudaStream_t stream)
{
  CHECK_SETTABLE(ctx);
  ctx->user_stream = stream;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetCUDAStream(FSDPContext ctx, cudaStream_t *stream, int *ordinal)
{
  CHECK_SETUP(ctx);
  if (stream) *stream = DeviceStream_Private(ctx->dev);
  if (ordinal) *ordinal = DeviceOrdinal_Private(ctx->dev);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetMPICUDAAware(FSDPContext ctx, bool aware)
{
  CHECK_SETTABLE(ctx);
  ctx->cuda_aware = aware;
  ctx->cuda_aware_set = true;
  return FSDP_SUCCESS;
}
#endif

FSDPErrorCode FSDPContextSynchronize(FSDPContext ctx)
{
  CHECK_RUNNING(ctx);
  if (ctx->dev) FSDPCall(DeviceSynchronize_Private(ctx->dev));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetReplicateEngine(FSDPContext ctx, FSDPReplicateEngine engine)
{
  CHECK_SETTABLE(ctx);
  FSDPCheck((int)engine >= 0 && engine < FSDP_NUM_REPLICATE_ENGINES, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetReplicateEngine: %d is not an FSDPReplicateEngine (mpi, nccl)", (int)engine);
  ctx->replicate_engine = engine;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetFromOptions(FSDPContext ctx)
{
  int choice;
  int64_t limit;
  double timeout;
  bool set;

  CHECK_SETTABLE(ctx);
  FSDPCall(FSDPOptionsGetEnumAliased_Private(
      "-fsdp_sharding_strategy",
      "how units are sharded: full (F = W), grad_op (F = W, parameters kept from forward to backward), none (DDP), "
      "hybrid (F from the shard group), hybrid_zero2; PyTorch's names full_shard, shard_grad_op, no_shard, "
      "hybrid_shard and hybrid_shard_zero2 (any case) are aliases",
      strategy_names, strategy_aliases, (int)ctx->strategy, &choice, NULL));
  ctx->strategy = (FSDPShardingStrategy)choice;
  {
    int param, reduce;
    bool pset, rset;
    FSDPCall(FSDPOptionsGetEnum("-fsdp_param_dtype",
                                "mixed precision: the type of unsharded parameters and all-gathers (fp32: the "
                                "units' own; bf16, fp16 over fp32 master shards)",
                                FSDPDataTypeNames_Private, (int)ctx->param_dtype, &param, &pset));
    /* As in PyTorch's MixedPrecision, gradients follow the parameters unless told otherwise. */
    FSDPCall(FSDPOptionsGetEnum("-fsdp_reduce_dtype",
                                "mixed precision: the type gradients are reduced in (default: -fsdp_param_dtype's)",
                                FSDPDataTypeNames_Private, pset ? param : (int)ctx->reduce_dtype, &reduce, &rset));
    FSDPCheck(is_policy_dtype((FSDPDataType)param), MPI_COMM_SELF, FSDP_ERR_OPTION,
              "-fsdp_param_dtype %s: mixed precision types are fp32, bf16 and fp16", FSDPDataTypeNames_Private[param]);
    FSDPCheck(is_policy_dtype((FSDPDataType)reduce), MPI_COMM_SELF, FSDP_ERR_OPTION,
              "-fsdp_reduce_dtype %s: mixed precision types are fp32, bf16 and fp16",
              FSDPDataTypeNames_Private[reduce]);
    if (pset || rset) FSDPCall(FSDPContextSetMixedPrecision(ctx, (FSDPDataType)param, (FSDPDataType)reduce));
  }
  FSDPCall(FSDPOptionsGetEnum("-fsdp_device",
                              "where shards, gradients and unsharded buffers live: host, or cuda (the rank's GPU, "
                              "NCCL in the shard group)",
                              device_names, (int)ctx->device, &choice, NULL));
  ctx->device = (FSDPDeviceType)choice;
  FSDPCall(FSDPOptionsGetEnum("-fsdp_replicate_engine",
                              "-fsdp_device cuda: how gradients cross the replicas: mpi (pinned host staging, or "
                              "device pointers with -fsdp_mpi_cuda_aware) or nccl",
                              replicate_engine_names, (int)ctx->replicate_engine, &choice, NULL));
  ctx->replicate_engine = (FSDPReplicateEngine)choice;
  FSDPCall(FSDPOptionsGetBool("-fsdp_mpi_cuda_aware",
                              "-fsdp_device cuda: give MPI device pointers (default: what MPI reports, else false)",
                              ctx->cuda_aware, &ctx->cuda_aware, &set));
  if (set) ctx->cuda_aware_set = true;
  FSDPCall(FSDPOptionsGetBool("-fsdp_sync_params", "broadcast parameters from the first replica at SetUp",
                              ctx->sync_params, &ctx->sync_params, NULL));
  FSDPCall(FSDPOptionsGetBool("-fsdp_view", "print the context and its process layout at SetUp", ctx->view_at_setup,
                              &ctx->view_at_setup, NULL));
  FSDPCall(FSDPOptionsGetEnum("-fsdp_comm_engine",
                              "where collectives run: thread (a communication thread; needs MPI_THREAD_MULTIPLE; the "
                              "default where every node has 2 CPUs per rank), nonblocking (MPI_I* collectives; the "
                              "default otherwise), sync (blocking, at the point of call)",
                              engine_names, (int)ctx->engine, &choice, &set));
  if (set) FSDPCall(FSDPContextSetCommEngine(ctx, (FSDPCommEngine)choice));
  FSDPCall(FSDPOptionsGetBool(
      "-fsdp_shm_reduce",
      "host: a shard group on one node reduce-scatters and all-gathers fp32 data through shared memory",
      ctx->shm_reduce, &ctx->shm_reduce, NULL));
  FSDPCall(FSDPOptionsGetBool("-fsdp_shm_views",
                              "with -fsdp_shm_reduce and fp32 parameters: a unit's unsharded parameters are one "
                              "view per shard group in shared memory, read in place (an all-gather copies only "
                              "the rank's shard; no parameter buffers)",
                              ctx->shm_views, &ctx->shm_views, NULL));
  FSDPCall(FSDPOptionsGetEnum("-fsdp_backward_prefetch",
                              "when backward issues the next unit's all-gather: pre (before the current unit's "
                              "reduce-scatter), post (after it), none",
                              prefetch_names, (int)ctx->backward_prefetch, &choice, NULL));
  ctx->backward_prefetch = (FSDPBackwardPrefetch)choice;
  FSDPCall(FSDPOptionsGetBool("-fsdp_forward_prefetch",
                              "issue the next unit's all-gather before the current unit's forward (static graphs)",
                              ctx->forward_prefetch, &ctx->forward_prefetch, NULL));
  FSDPCall(FSDPOptionsGetInt("-fsdp_limit_all_gathers",
                             "rate limiter: at most L units unsharded or being gathered at once (0: no limit)",
                             ctx->limit, 0, 1 << 20, &limit, NULL));
  ctx->limit = (int)limit;
  FSDPCall(FSDPOptionsGetReal("-fsdp_collective_timeout", FSDP_COLLECTIVE_TIMEOUT_HELP, ctx->timeout, &timeout, NULL));
  FSDPCall(FSDPContextSetCollectiveTimeout(ctx, timeout));
  FSDPCall(FSDPOptionsGetReal("-fsdp_signal_grace",
                              "seconds a collective may still wait after FSDPNotifySignal before the job aborts (0: "
                              "wait for the watchdog)",
                              ctx->signal_grace, &timeout, NULL));
  FSDPCall(FSDPContextSetSignalGrace(ctx, timeout));
  FSDPCall(FSDPOptionsGetEnum("-fsdp_wait",
                              "how waits for collectives use the core: poll, sleep between tests (gives the core "
                              "back), or auto (sleep where a node has more ranks than CPUs)",
                              wait_names, (int)ctx->wait, &choice, NULL));
  FSDPCall(FSDPContextSetWaitMode(ctx, (FSDPWaitMode)choice));
  FSDPCall(FSDPOptionsGetBool("-fsdp_debug_collectives",
                              "check before each collective that every rank runs the same one (costs a small "
                              "all-gather per collective)",
                              ctx->debug_collectives, &ctx->debug_collectives, NULL));
  FSDPCall(FSDPOptionsGetBool("-fsdp_log_view_units", "-fsdp_log_view: also one line per unit and collective",
                              ctx->log_units, &ctx->log_units, NULL));
  FSDPCall(FSDPOptionsGetInt("-fsdp_checkpoint_keep", "checkpoints FSDPContextSave keeps: path, path.1, ...",
                             ctx->checkpoint_keep, 1, 1 << 20, &limit, NULL));
  ctx->checkpoint_keep = (int)limit;
  FSDPCall(FSDPOptionsGetEnum("-fsdp_checkpoint_io",
                              "checkpoint transfers: collective (MPI-IO aggregates them), independent (each rank "
                              "its own pieces through MPI-IO), posix (no MPI-IO: rank 0 makes the file, each rank "
                              "writes its pieces), or auto (posix where a node has more ranks than CPUs, else "
                              "collective, but independent loads without replicas)",
                              checkpoint_io_names, (int)ctx->checkpoint_io_requested, &choice, NULL));
  ctx->checkpoint_save_io = ctx->checkpoint_load_io = ctx->checkpoint_io_requested = (FSDPCheckpointIO)choice;
  {
    char text[64], now[32];
    int64_t bytes = FSDP_MEMORY_LIMIT_AUTO;
    if (ctx->memory_limit == FSDP_MEMORY_LIMIT_AUTO) snprintf(now, sizeof now, "auto");
    else if (ctx->memory_limit == 0) snprintf(now, sizeof now, "none");
    else snprintf(now, sizeof now, "%lld", (long long)ctx->memory_limit);
    FSDPCall(FSDPOptionsGetString("-fsdp_memory_limit",
                                  "the most memory a rank's memory plan may take: auto (physical memory, cgroup and "
                                  "RLIMIT_AS), none, or bytes (12G)",
                                  now, text, sizeof text, &set));
    if (set) {
      FSDPCall(parse_memory_limit(text, &bytes));
      FSDPCall(FSDPContextSetMemoryLimit(ctx, bytes));
    }
  }
  FSDPCall(FSDPOptionsGetBool("-fsdp_checkpoint_strict",
                              "FSDPContextLoad: any parameter or state missing, unexpected or mis-shaped is an error "
                              "(false: load what matches and report the rest)",
                              ctx->checkpoint_strict, &ctx->checkpoint_strict, NULL));
  FSDPCall(FSDPOptionsGetBool(
      "-fsdp_check_finite", "stop at a NaN or Inf gradient norm; refuse to save or load non-finite parameters or state",
      ctx->check_finite, &ctx->check_finite, NULL));
  FSDPCall(ShardGroupSetFromOptions(ctx->group));
  FSDPCall(ShardGroupSetViewAtSetUp_Private(ctx->group, false)); /* inside the context's view instead */
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextAddUnit(FSDPContext ctx, const char *name, FlatParam *unit)
{
  FlatParam u;
  FSDPErrorCode ierr;

  CHECK_CTX(ctx);
  FSDPCheck(unit, MPI_COMM_SELF, FSDP_ERR_ARG, "unit must not be NULL");
  FSDPCheck(name && *name, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextAddUnit: the unit name must not be empty");
  FSDPCheck(!ctx->laid_out, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPContextAddUnit: cannot add unit '%s' after FSDPContextSetUp: the layout is fixed", name);
  for (int i = 0; i < ctx->nunits; i++)
    FSDPCheck(strcmp(ctx->units[i]->name, name) != 0, MPI_COMM_SELF, FSDP_ERR_ARG,
              "FSDPContextAddUnit: a unit called '%s' already exists", name);
  FSDPCall(FSDPGrowArray_Private(&ctx->units, sizeof *ctx->units, ctx->nunits + 1, &ctx->capacity, FSDP_MEM_OTHER));
  FSDPCall(FSDPCalloc(1, sizeof *u, FSDP_MEM_OTHER, &u));
  if ((ierr = FSDPStrdup(name, &u->name))) {
    (void)FSDPFree(&u);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  u->index = ctx->nunits;
  ctx->units[ctx->nunits++] = u;
  u->ctx = ctx;
  u->fwd_pos = u->prev_pos = -1;
  u->dtype = FSDP_FLOAT32;
  *unit = u;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ SetUp */

/* The settings that decide which collectives run, with what sizes and in
   what order, how checkpoints move data, or what every rank must compute
   alike: every rank must have the same (doc/options.md, "Settings that must
   agree").  What was asked for, before SetUp decides the automatic ones
   (alike on every rank where it matters).  The ShardGroup compares its own
   settings in ShardGroupSetUp. */
static int agreed_settings(FSDPContext ctx, FSDPSetting *s)
{
  int n = 0;
#define YES(b) ((b) ? "true" : "false")
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_sharding_strategy", "%s", strategy_names[ctx->strategy]);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_param_dtype", "%s", FSDPDataTypeNames_Private[ctx->param_dtype]);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_reduce_dtype", "%s", FSDPDataTypeNames_Private[ctx->reduce_dtype]);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_device", "%s", device_names[ctx->device]);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_replicate_engine", "%s", replicate_engine_names[ctx->replicate_engine]);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_sync_params", "%s", YES(ctx->sync_params));
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_view", "%s", YES(ctx->view_at_setup));
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_comm_engine", "%s",
                               ctx->engine_set ? engine_names[ctx->engine] : "auto");
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_shm_reduce", "%s", YES(ctx->shm_reduce));
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_shm_views", "%s", YES(ctx->shm_views));
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_backward_prefetch", "%s", prefetch_names[ctx->backward_prefetch]);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_forward_prefetch", "%s", YES(ctx->forward_prefetch));
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_limit_all_gathers", "%d", ctx->limit);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_wait", "%s", wait_names[ctx->wait_requested]);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_debug_collectives", "%s", YES(ctx->debug_collectives));
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_checkpoint_keep", "%d", ctx->checkpoint_keep);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_checkpoint_io", "%s", checkpoint_io_names[ctx->checkpoint_io_requested]);
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_checkpoint_strict", "%s", YES(ctx->checkpoint_strict));
  (void)FSDPSettingSet_Private(&s[n++], "-fsdp_check_finite", "%s", YES(ctx->check_finite));
  (void)FSDPSettingSet_Private(&s[n++], "the initializer", "%s",
                               ctx->unit_init    ? "a unit initializer (FSDPContextSetUnitInit)"
                               : ctx->shard_init ? "a shard initializer (FSDPContextSetShardInit)"
                                                 : "none");
#undef YES
  return n;
}

/* The units and parameters, which must be the same on every rank, in one number. */
static uint64_t units_hash(FSDPContext ctx, int *nparams)
{
  uint64_t h = FSDP_HASH_INIT;
  *nparams = 0;
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    h = FSDPHashBytes_Private(h, u->name, strlen(u->name) + 1);
    h = FSDPHashBytes_Private(h, &u->dtype, sizeof u->dtype);
    h = FSDPHashBytes_Private(h, &u->nparams, sizeof u->nparams);
    for (int j = 0; j < u->nparams; j++) {
      h = FSDPHashBytes_Private(h, u->params[j].name, strlen(u->params[j].name) + 1);
      h = FSDPHashBytes_Private(h, &u->params[j].ndim, sizeof u->params[j].ndim);
      h = FSDPHashBytes_Private(h, u->params[j].shape, (size_t)u->params[j].ndim * sizeof(int64_t));
    }
    *nparams += u->nparams;
  }
  return h;
}

/* The sharding factor each strategy implies (0: the ShardGroup derives it). */
static FSDPErrorCode strategy_factor(FSDPContext ctx, int *factor)
{
  int requested;
  FSDPCall(ShardGroupGetRequestedFactor_Private(ctx->group, &requested));
  switch (ctx->strategy) {
  case FSDP_FULL_SHARD:
  case FSDP_SHARD_GRAD_OP: *factor = ctx->size; break;
  case FSDP_NO_SHARD: *factor = 1; break;
  default: *factor = requested; break;
  }
  FSDPCheck(requested == 0 || requested == *factor, MPI_COMM_SELF, FSDP_ERR_ARG,
            "sharding strategy %s shards every unit over %d rank%s, but a sharding factor of %d was asked for "
            "(-fsdp_sharding_factor or ShardGroupSetShardingFactor): use strategy hybrid to choose F",
            strategy_names[ctx->strategy], *factor, *factor == 1 ? "" : "s", requested);
  return FSDP_SUCCESS;
}

/* Collective: the same settings and units on every rank, and a strategy that fits them. */
static FSDPErrorCode agree_on_model(FSDPContext ctx, int *factor)
{
  struct {
    uint64_t hash;
    int nunits, nparams;
  } mine, root;
  FSDPSetting settings[FSDP_MAX_SETTINGS];
  FSDPErrorCode ierr = FSDP_SUCCESS;

  FSDPCall(FSDPSettingsAgree_Private(ctx->comm, "FSDPContextSetUp", agreed_settings(ctx, settings), settings));
  mine.hash = units_hash(ctx, &mine.nparams);
  mine.nunits = ctx->nunits;
  root = mine;
  FSDPCallMPI(MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, ctx->comm));
  if (mine.hash != root.hash)
    ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_ARG,
                     "the context on this rank (%d units, %d parameters) differs from rank 0's (%d units, %d "
                     "parameters): every rank must register the same units and parameters, with the same names, "
                     "shapes and data types, in the same order (an FSDPModel: the same spec and -fsdp_wrap)",
                     mine.nunits, mine.nparams, root.nunits, root.nparams);
  else ierr = strategy_factor(ctx, factor);
  for (int i = 0; !ierr && i < ctx->nunits; i++)
    if (ctx->units[i]->dtype != FSDP_FLOAT32 && (ctx->param_dtype != FSDP_FLOAT32 || ctx->reduce_dtype != FSDP_FLOAT32))
      ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_UNSUPPORTED,
                       "mixed precision (parameters %s, reductions %s) needs fp32 master copies, but unit '%s' is %s",
                       FSDPDataTypeNames_Private[ctx->param_dtype], FSDPDataTypeNames_Private[ctx->reduce_dtype],
                       ctx->units[i]->name, FSDPDataTypeNames_Private[ctx->units[i]->dtype]);
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, ierr));
  return FSDP_SUCCESS;
}

static FSDPErrorCode initialize_unit(FSDPContext ctx, FlatParam unit)
{
  FSDPErrorCode ierr = FSDP_SUCCESS;
  ctx->initializing = true;
  if (ctx->unit_init) ierr = FlatParamInitUnit_Private(unit, ctx->unit_init, ctx->unit_init_user);
  else if (ctx->shard_init) ierr = FlatParamInitShard_Private(unit, ctx->shard_init, ctx->shard_init_user);
  ctx->initializing = false;
  return ierr;
}

/* Agreed unit by unit: an initializer may read a file collectively, and no
   rank must go on to the next unit's collectives while another has failed. */
static FSDPErrorCode initialize(FSDPContext ctx)
{
  FSDPErrorCode ierr = FSDP_SUCCESS;
  if (!ctx->unit_init && !ctx->shard_init) return FSDP_SUCCESS;
  FSDPCall(FSDPLogEventBegin(ctx->ev_init));
  for (int i = 0; i < ctx->nunits && !ierr; i++)
    ierr = FSDPErrorAgree_Private(ctx->comm, initialize_unit(ctx, ctx->units[i]));
  FSDPCall(FSDPLogEventEnd(ctx->ev_init, 0)); /* balanced, failed or not */
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

/* The memory plan's sizes for a layout: the one formula (doc/overlap.md)
   with which SetUp allocates, the memory check refuses a plan before any of
   it is allocated, -fsdp_view explains it, and FSDPPlan predicts layouts no
   context has.  The units are the context's, laid out or not; the layout
   may be another one's (its F, strategy, parameter type, limit, views). */
void FSDPMemorySizes_Private(FSDPContext ctx, const MemoryLayout *lay, MemorySizes *s)
{
  int64_t f = lay->factor;
  bool keeps = lay->strategy == FSDP_SHARD_GRAD_OP || lay->strategy == FSDP_HYBRID_SHARD_ZERO2;
  bool direct = f == 1 && lay->param_dtype == FSDP_FLOAT32;

  memset(s, 0, sizeof *s);
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    size_t es = FSDPDataTypeSize(u->dtype);
    /* Parameters in param_dtype (the paper's K_low max(psi_i)); gradients
       are computed and accumulated in the master type. */
    size_t ps = lay->param_dtype == FSDP_FLOAT32 ? es : FSDPDataTypeSize(lay->param_dtype);
    int64_t padded;
    size_t p, g, sh;
    if (u->numel > (INT64_MAX - f) / 8) continue; /* too large to address: FlatParamSetUp_Private says so */
    padded = (u->numel + f - 1) / f * f;          /* as FlatParamSetUp_Private pads */
    p = (size_t)padded * ps;
    g = (size_t)padded * es;
    sh = (size_t)(padded / f) * es;
    s->shards += sh;
    s->all_p += p;
    s->max_p = p > s->max_p ? p : s->max_p;
    s->max_g = g > s->max_g ? g : s->max_g;
    s->max_shard = sh > s->max_shard ? sh : s->max_shard;
  }
  /* The unit computing its gradient, and the one whose reduction is in flight. */
  s->ngrads = ctx->nunits < 2 ? ctx->nunits : 2;
  /* SHARD_GRAD_OP's units keep their parameters from forward to backward,
     each in a buffer of its own, unless it is a view (kept anyway). */
  s->own = f > 1 && keeps && !lay->views ? s->all_p : 0;
  /* L buffers for parameters, unless every unit keeps its own, the shards
     are the units (F = 1), or the units are views of the shards. */
  if (!direct && !s->own && !lay->views) s->nparams = lay->limit > 0 ? lay->limit : 2;
  if (s->nparams > ctx->nunits) s->nparams = ctx->nunits;
  s->bytes[FSDP_MEM_PARAMS] = s->bytes[FSDP_MEM_GRADS] = s->shards;
  /* A view per unit in the shard group: each rank's share of them, sum(psi_i)/F. */
  s->bytes[FSDP_MEM_UNSHARDED] =
      (size_t)s->ngrads * s->max_g + (size_t)s->nparams * s->max_p + s->own + (lay->views ? s->shards : 0);
  /* One shard in the master type: room for a 16-bit one too. */
  s->bytes[FSDP_MEM_COMM_STAGING] = s->max_shard;
}

/* Whether start_shm will make the shard group's units views, as far as the
   settings tell; it also needs the group to be one node's ranks, all of them. */
bool FSDPMemoryViewsWanted_Private(FSDPContext ctx, FSDPDeviceType device, int factor, FSDPDataType param_dtype)
{
  bool fp32 = ctx->reduce_dtype == FSDP_FLOAT32 && param_dtype == FSDP_FLOAT32;
  for (int i = 0; i < ctx->nunits; i++)
    if (ctx->units[i]->dtype != FSDP_FLOAT32) fp32 = false;
  return device == FSDP_DEVICE_HOST && factor > 1 && ctx->shm_reduce && ctx->shm_views && ctx->nunits > 0 && fp32;
}

static MemoryLayout layout_of(FSDPContext ctx, bool views)
{
  MemoryLayout lay = {.factor = ctx->factor,
                      .strategy = ctx->strategy,
                      .param_dtype = ctx->param_dtype,
                      .limit = ctx->limit,
                      .views = views};
  return lay;
}

/* The memory plan: every buffer a step needs, allocated at SetUp
   (doc/overlap.md).  The gradient buffers and the staging first; the
   parameter buffers once start_shm has placed the views, which need none. */
static FSDPErrorCode plan_memory(FSDPContext ctx)
{
  MemoryLayout lay = layout_of(ctx, false);
  MemorySizes s;
  FSDPMemoryPlan *plan = &ctx->plan;

  FSDPMemorySizes_Private(ctx, &lay, &s);
  memset(plan, 0, sizeof *plan);
  FSDPCall(BufferPoolCreate_Private(&ctx->grads_pool, ctx->dev, s.ngrads, ctx->nunits, s.max_g, FSDP_MEM_UNSHARDED));
  if (s.max_shard) FSDPCall(DeviceAlloc_Private(ctx->dev, s.max_shard, FSDP_MEM_COMM_STAGING, &ctx->staging));
  plan->bytes[FSDP_MEM_PARAMS] = s.bytes[FSDP_MEM_PARAMS];
  plan->bytes[FSDP_MEM_GRADS] = s.bytes[FSDP_MEM_GRADS];
  plan->bytes[FSDP_MEM_UNSHARDED] = (size_t)s.ngrads * s.max_g;
  plan->bytes[FSDP_MEM_COMM_STAGING] = s.bytes[FSDP_MEM_COMM_STAGING];
  plan->gradient_buffers = s.ngrads;
  return FSDP_SUCCESS;
}

static FSDPErrorCode plan_params(FSDPContext ctx)
{
  MemoryLayout lay = layout_of(ctx, has_views(ctx));
  MemorySizes s;
  size_t own = 0;
  FSDPMemoryPlan *plan = &ctx->plan;

  FSDPMemorySizes_Private(ctx, &lay, &s);
  for (int i = 0; i < ctx->nunits; i++) {
    FSDPCall(FlatParamTakeOwn_Private(ctx->units[i]));
    if (ctx->units[i]->own) own += (size_t)ctx->units[i]->padded * FSDPDataTypeSize(ctx->units[i]->pdtype);
  }
  FSDPCheck(own == s.own, MPI_COMM_SELF, FSDP_ERR_INTERNAL,
            "the memory plan counted %zu bytes of units' own buffers, but %zu were allocated", s.own, own);
  FSDPCall(BufferPoolCreate_Private(&ctx->params_pool, ctx->dev, s.nparams, ctx->nunits, s.max_p, FSDP_MEM_UNSHARDED));
  plan->bytes[FSDP_MEM_UNSHARDED] = s.bytes[FSDP_MEM_UNSHARDED];
  plan->total = 0;
  for (int k = 0; k < FSDP_MEM_NUM_CATEGORIES; k++) plan->total += plan->bytes[k];
  plan->unsharded_buffers = s.nparams;
  return FSDP_SUCCESS;
}

/* PyTorch FSDP's gradient pre-division: p doubles while it divides W and
   stays below W / p; W / p is divided after the sum.  A 16-bit sum of W
   gradients then neither overflows as soon nor underflows as much. */
static double predivide_factor(int w)
{
  int p = 1;
  while (w % p == 0 && w / p > p) p *= 2;
  return p;
}

static FSDPErrorCode lay_out(FSDPContext ctx)
{
  ctx->direct = ctx->factor == 1 && ctx->param_dtype == FSDP_FLOAT32;
  ctx->predivide = ctx->reduce_dtype == FSDP_FLOAT32 ? 1 : predivide_factor(ctx->size);
  for (int i = 0; i < ctx->nunits; i++) FSDPCall(FlatParamSetUp_Private(ctx->units[i], ctx->factor));
  FSDPCall(plan_memory(ctx));
  /* The forward order of this step and of the last one (prefetching). */
  FSDPCall(FSDPCalloc((size_t)ctx->nunits + 1, sizeof(int), FSDP_MEM_OTHER, &ctx->order));
  FSDPCall(FSDPCalloc((size_t)ctx->nunits + 1, sizeof(int), FSDP_MEM_OTHER, &ctx->prev_order));
  return FSDP_SUCCESS;
}

/* How this node's load shapes the engine, the waits and checkpoint I/O.  A
   communication thread that polls is worth its CPU only when it has one of
   its own: with fewer than two CPUs per rank it takes cycles from the ranks'
   compute and its peers' progress (doc/overlap.md: 3.4 against 0.34 ms per
   step for a small model at 2 ranks on 2 CPUs).  Every rank must choose the
   engine alike, since a nonblocking collective does not match a blocking
   one: collective, and called where every rank gets to it.  For the same
   reason the thread and sync engines, which run a collective blocking when
   they poll and nonblocking when they sleep, wait alike on every rank; the
   nonblocking engine's waits are each rank's own.  Collective MPI-IO waits
   for every rank in each transfer, and HDF5's parallel open and close wait
   too, spinning: where a node is oversubscribed a small save took 50 times
   longer than with POSIX transfers, which make no MPI-IO call
   (doc/performance.md), so auto chooses those, alike on every rank.
   Elsewhere it loads with independent transfers unless replicas read the
   same bytes: without them each rank's pieces are its own, which MPI-IO's
   collective read (ROMIO's, when the ranks' requests do not interleave)
   reads on each rank on its own anyway, after synchronizing per dataset;
   that made a load 1.86 to 2.19 times a plain read against 1.34 to 1.51
   for independent ones (bench-checkpoint, W = 1 and 2).  With replicas a
   collective read reads the shared bytes once. */
static void resolve_checkpoint_io(FSDPContext ctx);

static FSDPErrorCode fit_to_node(FSDPContext ctx)
{
  int provided, any[3]; /* some node crowded (< 2 CPUs per rank), oversubscribed; some rank lacks threads */
  bool over, alike;
  FSDPCallMPI(MPI_Query_thread(&provided));
  FSDPCall(ShardGroupGetNodeLoad_Private(ctx->group, &ctx->node_ranks, &ctx->node_cpus, &ctx->machine_hosts));
  over = ctx->node_ranks > ctx->node_cpus;
  any[0] = 2 * ctx->node_ranks > ctx->node_cpus;
  any[1] = over;
  any[2] = provided != MPI_THREAD_MULTIPLE;
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, any, 3, MPI_INT, MPI_LOR, ctx->comm));
  ctx->oversubscribed = any[1];
  ctx->engine_auto_why = NULL;
  if (!ctx->engine_set && ctx->device == FSDP_DEVICE_HOST && (any[0] || any[2])) {
    ctx->engine = FSDP_COMM_ENGINE_NONBLOCKING;
    ctx->engine_auto_why = any[0] ? "fewer than 2 CPUs per rank on a node" : "MPI_THREAD_MULTIPLE missing on a rank";
  }
  ctx->wait_why = NULL;
  if (ctx->wait_requested == FSDP_WAIT_AUTO) {
    alike = ctx->device == FSDP_DEVICE_HOST && ctx->engine != FSDP_COMM_ENGINE_NONBLOCKING;
    ctx->wait = (alike ? any[1] : over) ? FSDP_WAIT_SLEEP : FSDP_WAIT_POLL;
    if (alike && any[1] && !over)
      ctx->wait_why = "another node is oversubscribed, and every rank of this engine must wait alike";
  }
  resolve_checkpoint_io(ctx);
  return FSDP_SUCCESS;
}

void FSDPContextResolveCheckpointIO_Private(FSDPContext ctx)
{
  if (ctx->laid_out) resolve_checkpoint_io(ctx); /* else SetUp decides */
}

static void resolve_checkpoint_io(FSDPContext ctx)
{
  bool over = ctx->oversubscribed;
  ctx->checkpoint_save_io = ctx->checkpoint_load_io = ctx->checkpoint_io_requested;
  ctx->checkpoint_io_why = NULL;
  if (ctx->checkpoint_io_requested != FSDP_CHECKPOINT_IO_AUTO) return;
  if (over) {
    ctx->checkpoint_save_io = ctx->checkpoint_load_io = FSDP_CHECKPOINT_IO_POSIX;
    ctx->checkpoint_io_why = "auto: a node has more ranks than CPUs, where MPI-IO's and HDF5's collectives wait for "
                             "descheduled ranks";
  } else if (ctx->nreplicas > 1) {
    ctx->checkpoint_save_io = ctx->checkpoint_load_io = FSDP_CHECKPOINT_IO_COLLECTIVE;
    ctx->checkpoint_io_why = "auto: no node has more ranks than CPUs; replicas read the same bytes, which a collective "
                             "read reads once";
  } else {
    ctx->checkpoint_save_io = FSDP_CHECKPOINT_IO_COLLECTIVE;
    ctx->checkpoint_load_io = FSDP_CHECKPOINT_IO_INDEPENDENT;
    ctx->checkpoint_io_why = "auto: no node has more ranks than CPUs; each rank reads bytes no other rank reads, "
                             "where a collective read would only make the ranks wait for each other";
  }
}

/* ------------------------------------------------------------------ the memory check */

/* What lay_out, start_shm and plan_params will allocate, computed before
   anything is, and whether the shard group gets views (start_shm's
   conditions; collective on the shard group when they may hold, which every
   rank of it agrees on). */
static FSDPErrorCode estimate_plan(FSDPContext ctx, size_t bytes[FSDP_MEM_NUM_CATEGORIES])
{
  MemoryLayout lay = layout_of(ctx, FSDPMemoryViewsWanted_Private(ctx, ctx->device, ctx->factor, ctx->param_dtype));
  MemorySizes s;
  if (lay.views) { /* only where the shard group shares a node, as CommShmCreate finds */
    MPI_Comm node;
    int node_size;
    FSDPCallMPI(MPI_Comm_split_type(ctx->shard_comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    FSDPCallMPI(MPI_Comm_size(node, &node_size));
    FSDPCallMPI(MPI_Comm_free(&node));
    lay.views = node_size == ctx->factor;
  }
  FSDPMemorySizes_Private(ctx, &lay, &s);
  for (int i = 0; i < FSDP_MEM_NUM_CATEGORIES; i++) bytes[i] = s.bytes[i];
  return FSDP_SUCCESS;
}

/* The most this rank may allocate, and why: -fsdp_memory_limit, else the
   least of the physical memory's share, the cgroup's share and what
   RLIMIT_AS leaves of the address space (0: no limit). */
static FSDPErrorCode memory_limit(FSDPContext ctx, size_t *limit, char *why, size_t len)
{
  size_t physical, cgroup_limit, most;
  int cgroup_ranks;
  const char *cgroup;
  struct rlimit rl;
  char a[32], b[32];

  *limit = 0;
  why[0] = '\0';
  if (ctx->memory_limit > 0) {
    *limit = (size_t)ctx->memory_limit;
    snprintf(why, len, "-fsdp_memory_limit");
    return FSDP_SUCCESS;
  }
  if (ctx->memory_limit == 0) return FSDP_SUCCESS;
  FSDPCall(ShardGroupGetNodeMemory_Private(ctx->group, &physical, &cgroup_limit, &cgroup_ranks, &cgroup));
  if (physical && ctx->node_ranks > 0) {
    *limit = physical / (size_t)ctx->node_ranks;
    FSDPFormatBytes(a, sizeof a, (double)physical);
    snprintf(why, len, "%s of physical memory shared by %d rank%s on this node", a, ctx->node_ranks,
             ctx->node_ranks == 1 ? "" : "s");
  }
  if (cgroup_limit && cgroup_ranks > 0 && (!*limit || cgroup_limit / (size_t)cgroup_ranks < *limit)) {
    *limit = cgroup_limit / (size_t)cgroup_ranks;
    FSDPFormatBytes(a, sizeof a, (double)cgroup_limit);
    snprintf(why, len, "the memory limit of cgroup %s, %s, shared by %d rank%s on this node", cgroup, a, cgroup_ranks,
             cgroup_ranks == 1 ? "" : "s");
  }
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    size_t in_use = 0;
    unsigned long pages;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
      if (fscanf(f, "%lu", &pages) == 1) in_use = (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
      fclose(f);
    }
    most = rl.rlim_cur > in_use ? (size_t)rl.rlim_cur - in_use : 0;
    if (!*limit || most < *limit) {
      *limit = most ? most : 1;
      FSDPFormatBytes(a, sizeof a, (double)rl.rlim_cur);
      FSDPFormatBytes(b, sizeof b, (double)in_use);
      snprintf(why, len, "RLIMIT_AS (ulimit -v) is %s, of which this process uses %s", a, b);
    }
  }
  return FSDP_SUCCESS;
}

/* The memory plan against what the rank can have, before any of it is
   allocated: a plan that cannot fit is refused, by category, instead of
   being killed by the kernel when it touches the pages.  Host memory only:
   on a GPU the plan is device memory. */
static FSDPErrorCode check_memory(FSDPContext ctx)
{
  static const char *const what[FSDP_MEM_NUM_CATEGORIES] = {[FSDP_MEM_PARAMS] = "parameter shards",
                                                            [FSDP_MEM_GRADS] = "gradient shards",
                                                            [FSDP_MEM_UNSHARDED] = "unsharded buffers",
                                                            [FSDP_MEM_COMM_STAGING] = "communication staging"};
  size_t bytes[FSDP_MEM_NUM_CATEGORIES], total = 0, limit;
  char why[768], parts[512] = "", a[32], b[32];

  FSDPCall(estimate_plan(ctx, bytes));
  if (ctx->device != FSDP_DEVICE_HOST) return FSDP_SUCCESS;
  FSDPCall(memory_limit(ctx, &limit, why, sizeof why));
  for (int k = 0; k < FSDP_MEM_NUM_CATEGORIES; k++) total += bytes[k];
  if (!limit || total <= limit) return FSDP_SUCCESS;
  for (int k = 0; k < FSDP_MEM_NUM_CATEGORIES; k++) {
    size_t used = strlen(parts);
    if (!what[k]) continue;
    FSDPFormatBytes(a, sizeof a, (double)bytes[k]);
    snprintf(parts + used, sizeof parts - used, "%s%s %s", used ? ", " : "", what[k], a);
  }
  FSDPFormatBytes(a, sizeof a, (double)total);
  FSDPFormatBytes(b, sizeof b, (double)limit);
  FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_MEM,
            "FSDPContextSetUp: the memory plan needs %s per rank (%s; the optimizer's state and the model's "
            "activations come on top), but this rank can have at most %s (%s): nothing was allocated; use more "
            "ranks or a smaller model, or set -fsdp_memory_limit if this estimate is wrong",
            a, parts, b, why);
  return FSDP_SUCCESS;
}

/* Which engine runs collectives: a thread needs MPI_THREAD_MULTIPLE. */
static FSDPErrorCode choose_engine(FSDPContext ctx)
{
  int provided;
  FSDPCallMPI(MPI_Query_thread(&provided));
  /* Thread for now; fit_to_node settles it once the node's load is known. */
  if (!ctx->engine_set)
    ctx->engine = provided == MPI_THREAD_MULTIPLE ? FSDP_COMM_ENGINE_THREAD : FSDP_COMM_ENGINE_NONBLOCKING;
  FSDPCheck(ctx->engine != FSDP_COMM_ENGINE_THREAD || provided == MPI_THREAD_MULTIPLE, MPI_COMM_SELF,
            FSDP_ERR_UNSUPPORTED,
            "-fsdp_comm_engine thread needs MPI_THREAD_MULTIPLE, but MPI was initialized with a lower thread level: "
            "call MPI_Init_thread with MPI_THREAD_MULTIPLE (FSDPInitialize does), or use -fsdp_comm_engine "
            "nonblocking");
  return FSDP_SUCCESS;
}

/* The rank's GPU: the ShardGroup's hwloc choice when CUDA sees it, else
   the node-local rank modulo the GPUs visible.  A context of one rank that
   stands for a rank of a job (the planner's probe) uses that rank's
   node-local rank. */
static FSDPErrorCode start_device(FSDPContext ctx)
{
  const char *busid = NULL;
  MPI_Comm node;
  int local_rank;
  if (ctx->device == FSDP_DEVICE_HOST) return FSDP_SUCCESS;
  if (ctx->device_local_rank >= 0) local_rank = ctx->device_local_rank;
  else {
    FSDPCall(ShardGroupGetDevicePCIBusId(ctx->group, &busid));
    FSDPCallMPI(MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    FSDPCallMPI(MPI_Comm_rank(node, &local_rank));
    FSDPCallMPI(MPI_Comm_free(&node));
  }
  FSDPCall(DeviceCreate_Private(busid, local_rank, ctx->user_stream, &ctx->dev));
  return FSDP_SUCCESS;
}

/* Whether MPI takes device pointers: the user's word, else MPI's own
   (MPIX_Query_cuda_support: in mpi.h with MPICH, mpi-ext.h with Open MPI;
   found by configure), else no. */
static bool mpi_is_cuda_aware(void)
{
#ifdef HAVE_MPIX_QUERY_CUDA_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

/* NCCL communicators, and pinned staging for what goes through MPI: the
   largest all-gather or reduce-scatter with its send block, or all-reduce. */
static FSDPErrorCode start_device_comm(FSDPContext ctx)
{
  size_t most = 0;
  int shard_rank;
  bool replicate = ctx->replicate_engine == FSDP_REPLICATE_ENGINE_NCCL;
  if (!ctx->cuda_aware_set) ctx->cuda_aware = mpi_is_cuda_aware();
  FSDPCall(CommNCCLSetUp(ctx->dev, ctx->comm, ctx->shard_comm, ctx->replicate_comm, replicate, ctx->timeout,
                         ctx->fallback, sizeof ctx->fallback, &ctx->nccl));
  FSDPCallMPI(MPI_Comm_rank(ctx->shard_comm, &shard_rank));
  if (ctx->fallback[0] && shard_rank == 0) {
    fprintf(stderr, "libfsdp WARNING: [%d] %s\n", ctx->rank, ctx->fallback);
    fflush(stderr);
  }
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    size_t es = FSDPDataTypeSize(u->pdtype) > FSDPDataTypeSize(u->rdtype) ? FSDPDataTypeSize(u->pdtype)
                                                                          : FSDPDataTypeSize(u->rdtype);
    size_t need = ((size_t)u->shard_numel * es + 255) / 256 * 256 + (size_t)u->padded * es;
    if (need > most) most = need;
  }
  /* Groups of one copy on the GPU, and CUDA-aware MPI reads device memory. */
  if (most && !ctx->cuda_aware &&
      ((ctx->factor > 1 && !CommNCCLGet(ctx->nccl, true)) || (ctx->nreplicas > 1 && !CommNCCLGet(ctx->nccl, false))))
    FSDPCall(DeviceReservePinned_Private(ctx->dev, most));
  return FSDP_SUCCESS;
}

/* The stream's own communicators, so that nothing else can interleave with
   its collectives, and the per-unit events of -fsdp_log_view_units. */
static FSDPErrorCode start_engine(FSDPContext ctx)
{
  FSDPCallMPI(MPI_Comm_dup(ctx->shard_comm, &ctx->stream_shard_comm));
  FSDPCallMPI(MPI_Comm_dup(ctx->replicate_comm, &ctx->stream_replicate_comm));
  FSDPCallMPI(MPI_Comm_set_errhandler(ctx->stream_shard_comm, MPI_ERRORS_RETURN));
  FSDPCallMPI(MPI_Comm_set_errhandler(ctx->stream_replicate_comm, MPI_ERRORS_RETURN));
  if (ctx->reduce_dtype != FSDP_FLOAT32)
    FSDPCallMPI(MPI_Op_create(ctx->reduce_dtype == FSDP_BFLOAT16 ? FSDPSumBF16_Private : FSDPSumFP16_Private, 1,
                              &ctx->half_sum));
  if (ctx->debug_collectives) {
    FSDPCallMPI(MPI_Comm_dup(ctx->comm, &ctx->check_comm));
    FSDPCall(FSDPCalloc(5 * (size_t)ctx->size, sizeof(int64_t), FSDP_MEM_OTHER, &ctx->check_records));
  }
  if (ctx->log_units) {
    static const char *const abbrev[COMM_NUM_KINDS] = {"AllGather", "ReduceScatter", "AllReduce"};
    /* The event table has 256 slots: per-unit events only for models that leave room. */
    if (ctx->nunits * COMM_NUM_KINDS <= 128) {
      FSDPCall(FSDPCalloc((size_t)ctx->nunits * COMM_NUM_KINDS, sizeof(FSDPLogEvent), FSDP_MEM_OTHER, &ctx->ev_unit));
      for (int i = 0; i < ctx->nunits; i++)
        for (int k = 0; k < COMM_NUM_KINDS; k++) {
          char name[64]; /* the index keeps truncated names apart */
          snprintf(name, sizeof name, "%s[%d:%.36s]", abbrev[k], i, ctx->units[i]->name);
          FSDPCall(FSDPLogEventRegister(name, &ctx->ev_unit[COMM_NUM_KINDS * i + k]));
        }
    } else if (ctx->rank == 0)
      fprintf(stderr,
              "libfsdp WARNING: -fsdp_log_view_units: %d units need %d events, more than the 128 the event "
              "table leaves for them; per-unit events are off\n",
              ctx->nunits, ctx->nunits * COMM_NUM_KINDS);
  }
  FSDPCall(CommStreamCreate(ctx->dev ? "cuda" : engine_names[ctx->engine], ctx->timeout, ctx->comm, ctx->dev, ctx->nccl,
                            &ctx->stream));
  CommStreamSetSignalGrace(ctx->stream, ctx->signal_grace);
  CommStreamSetSleep(ctx->stream, ctx->wait == FSDP_WAIT_SLEEP);
  FSDPSetSleepWaits_Private(ctx->wait == FSDP_WAIT_SLEEP); /* and the library's own small collectives */
  return FSDP_SUCCESS;
}

/* The planned gradient buffers, and the parameter shards, move into node
   shared memory when the shard group can reduce-scatter and all-gather there
   (comm/shm.c): host, F > 1, fp32 units and reductions (and fp32 parameters
   for the shards).  Before the initializers run, so that nothing holds the
   shards' old addresses.  Collective on the shard group, which agrees on it.

   With -fsdp_shm_views each unit's padded parameters also lie whole in one
   rank's segment: that view is the unit's unsharded buffer on every rank of
   the node, and its all-gather copies each rank's shard into place once
   (doc/overlap.md, "Views").  The shards then stay private.  Every rank
   places the units alike, each in the segment that holds the fewest bytes
   so far, so that the segments stay near equal; a rank counts sum(psi_i)/F
   of the views as its unsharded memory, as the node holds each unit once.
   plan_params then allocates no parameter buffers (nor SHARD_GRAD_OP's). */
static size_t round_up64(size_t n) { return (n + 63) / 64 * 64; } /* slices aligned for the vector loops */

static FSDPErrorCode start_shm(FSDPContext ctx)
{
  BufferPool *p = &ctx->grads_pool;
  bool want = ctx->shm_reduce && p->n > 0 && ctx->reduce_dtype == FSDP_FLOAT32, shards, views;
  size_t slice = round_up64(p->bytes), gbytes = (size_t)p->n * slice, sbytes = 0, mine = 0, *load = NULL, *place = NULL;
  int *owner = NULL;
  char *seg;
  FSDPErrorCode ierr;
  if (ctx->dev || ctx->factor == 1) return FSDP_SUCCESS;
  for (int i = 0; i < ctx->nunits; i++) {
    if (ctx->units[i]->dtype != FSDP_FLOAT32) want = false;
    sbytes += round_up64((size_t)ctx->units[i]->shard_numel * sizeof(float));
  }
  views = ctx->param_dtype == FSDP_FLOAT32 && ctx->shm_views;
  shards = ctx->param_dtype == FSDP_FLOAT32 && !views; /* where the peers copy them from */
  /* A rank that cannot allocate the placement wants no window: CommShmCreate agrees on it. */
  ierr = FSDPCalloc((size_t)ctx->factor, sizeof *load, FSDP_MEM_OTHER, &load);
  if (!ierr) ierr = FSDPCalloc((size_t)ctx->nunits + 1, sizeof *place, FSDP_MEM_OTHER, &place);
  if (!ierr) ierr = FSDPCalloc((size_t)ctx->nunits + 1, sizeof *owner, FSDP_MEM_OTHER, &owner);
  for (int i = 0; views && !ierr && i < ctx->nunits; i++) {
    int q = 0;
    for (int r = 1; r < ctx->factor; r++)
      if (load[r] < load[q]) q = r;
    owner[i] = q;
    place[i] = gbytes + load[q];
    load[q] += round_up64((size_t)ctx->units[i]->padded * sizeof(float));
  }
  if (ierr) want = false; /* and the segment's size is never read */
  else mine = gbytes + (views ? load[ctx->shard_index] : shards ? sbytes : 0);
  {
    FSDPErrorCode e = CommShmCreate(ctx->shard_comm, want, mine, views ? ctx->nunits : 0, &ctx->shm);
    if (!ierr) ierr = e;
  }
  if (ierr || !ctx->shm) goto done;
  seg = CommShmSegment(ctx->shm, ctx->shard_index);
  for (int i = 0; i < p->n; i++) {
    ierr = DeviceFree_Private(NULL, &p->bufs[i], p->bytes, p->category);
    if (ierr) goto done;
    p->bufs[i] = seg + (size_t)i * slice;
    p->shared = i + 1; /* the pool frees the others: an error here leaves it consistent */
    FSDPMemoryCount_Private(FSDP_MEM_UNSHARDED, p->bytes, false);
  }
  for (int i = 0; views && i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    u->view = (char *)CommShmSegment(ctx->shm, owner[i]) + place[i];
    FSDPMemoryCount_Private(FSDP_MEM_UNSHARDED, (size_t)u->shard_numel * sizeof(float), false);
  }
  for (int i = 0; shards && i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    size_t bytes = (size_t)u->shard_numel * sizeof(float);
    char *at = seg + gbytes;
    memcpy(at, u->shard, bytes);
    ierr = DeviceFree_Private(NULL, &u->shard, bytes, FSDP_MEM_PARAMS);
    u->shard = at;
    u->shard_shared = true;
    if (ierr) goto done;
    FSDPMemoryCount_Private(FSDP_MEM_PARAMS, bytes, false);
    gbytes += round_up64(bytes);
  }
done:
  (void)FSDPFree(&load);
  (void)FSDPFree(&place);
  (void)FSDPFree(&owner);
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetUp(FSDPContext ctx)
{
  int factor = 0, requested, rank;

  CHECK_SETTABLE(ctx);
  FSDPCollective(ctx->comm);
  FSDPCall(choose_engine(ctx));
  FSDPCall(agree_on_model(ctx, &factor));
  FSDPCall(ShardGroupGetRequestedFactor_Private(ctx->group, &requested));
  if (factor && factor != requested) FSDPCall(ShardGroupSetShardingFactor(ctx->group, factor));
  FSDPCall(ShardGroupSetUp(ctx->group));
  FSDPCall(ShardGroupGetShardComm(ctx->group, &ctx->shard_comm, &ctx->shard_index, &ctx->factor));
  FSDPCall(ShardGroupGetReplicateComm(ctx->group, &ctx->replicate_comm, &ctx->replica_index, &ctx->nreplicas));
  /* Shard k of every unit must land at block k of the all-gather. */
  FSDPCallMPI(MPI_Comm_rank(ctx->shard_comm, &rank));
  FSDPCheck(rank == ctx->shard_index, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "shard index %d is rank %d of the shard comm",
            ctx->shard_index, rank);
  FSDPCall(ShardGroupGetNodeLoad_Private(ctx->group, &ctx->node_ranks, &ctx->node_cpus, &ctx->machine_hosts));
  /* Before anything is allocated or decided: a refused plan leaves a context SetUp can be tried on again. */
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, check_memory(ctx)));
  FSDPCall(fit_to_node(ctx));
  /* A rank without a usable GPU says why; the others learn that it failed. */
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, start_device(ctx)));
  ctx->laid_out = true;
  /* Allocation and user initializers can fail on some ranks only. */
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, lay_out(ctx)));
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, start_shm(ctx)));
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, plan_params(ctx)));
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, start_engine(ctx)));
  /* Collective inside: only once every rank has its engine. */
  if (ctx->dev) FSDPCall(FSDPErrorAgree_Private(ctx->comm, start_device_comm(ctx)));
  FSDPCall(initialize(ctx));
  ctx->setup = true;
  if (ctx->sync_params) FSDPCall(FSDPContextBroadcastParams(ctx));
  if (ctx->view_at_setup) FSDPCall(FSDPContextView(ctx, NULL));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ the runtime */

FSDPErrorCode FSDPContextCompleteReduction_Private(FSDPContext ctx)
{
  FlatParam unit = ctx->reducing;
  ctx->reducing = NULL; /* done or failed, it is not in flight any more */
  if (unit) FSDPCall(FlatParamCompleteReduction_Private(unit));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextFinishBackward(FSDPContext ctx)
{
  CHECK_RUNNING(ctx);
  FSDPCollective(ctx->comm);
  FSDPCall(FSDPContextCompleteReduction_Private(ctx));
  /* Parameters kept for a backward pass that did not come must not outlive
     the step; a prefetch nobody used ends first, so the unit can be flushed. */
  for (int i = 0; i < ctx->nunits; i++) FSDPCall(FlatParamDropKept_Private(ctx->units[i]));
  /* Gradients left behind by accumulation reach every rank now, unit by unit. */
  for (int i = 0; i < ctx->nunits; i++) FSDPCall(FlatParamFlushGrad_Private(ctx->units[i]));
  ctx->phase = PHASE_NONE;
  ctx->deferred = NULL;
  if (ctx->step_active) CommStreamSetStep(ctx->stream, ++ctx->step); /* once per step, however often it is called */
  ctx->step_active = false;
  return FSDP_SUCCESS;
}

void FSDPContextSetStep_Private(FSDPContext ctx, int64_t step)
{
  ctx->step = step;
  if (ctx->stream) CommStreamSetStep(ctx->stream, step);
}

FSDPErrorCode FSDPContextBeginForward(FSDPContext ctx)
{
  CHECK_RUNNING(ctx);
  /* Parameters kept since the last forward are not reused: the shards may
     have been written since (a finite-difference loop does just that). */
  for (int i = 0; i < ctx->nunits; i++) FSDPCall(FlatParamDropKept_Private(ctx->units[i]));
  if (ctx->norder > 0) { /* the last forward's order is what this one prefetches by */
    int *t = ctx->prev_order;
    ctx->prev_order = ctx->order;
    ctx->order = t;
    ctx->nprev = ctx->norder;
    ctx->norder = 0;
    for (int i = 0; i < ctx->nunits; i++) ctx->units[i]->prev_pos = -1;
    for (int i = 0; i < ctx->nprev; i++) ctx->units[ctx->prev_order[i]]->prev_pos = i;
  }
  for (int i = 0; i < ctx->nunits; i++) ctx->units[i]->fwd_pos = -1;
  ctx->phase = PHASE_FORWARD;
  ctx->deferred = NULL;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextBeginBackward(FSDPContext ctx)
{
  CHECK_RUNNING(ctx);
  ctx->phase = PHASE_BACKWARD;
  ctx->deferred = NULL;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetMemoryPlan(FSDPContext ctx, FSDPMemoryPlan *plan)
{
  CHECK_SETUP(ctx);
  FSDPCheck(plan, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetMemoryPlan: plan must not be NULL");
  *plan = ctx->plan;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetCommStats(FSDPContext ctx, FSDPCommStats *stats)
{
  CHECK_SETUP(ctx);
  FSDPCheck(stats, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetCommStats: stats must not be NULL");
  *stats = ctx->stats;
  CommStreamGetTimes(ctx->stream, &stats->comm_time, &stats->exposed_time, &stats->collectives);
  stats->buffer_growths = ctx->params_pool.growths + ctx->grads_pool.growths;
  stats->shm_collectives = stats->shm_fallbacks = 0;
  if (ctx->shm) CommShmGetCounts(ctx->shm, &stats->shm_collectives, &stats->shm_fallbacks);
  stats->params_in_use = ctx->params_pool.in_use;
  stats->grads_in_use = ctx->grads_pool.in_use;
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    stats->params_in_use +=
        u->own && (u->kept || u->state == FSDP_FLATPARAM_GATHERING || u->state == FSDP_FLATPARAM_UNSHARDED);
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextZeroGrad(FSDPContext ctx)
{
  CHECK_RUNNING(ctx);
  FSDPCheck(!ctx->reducing, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPContextZeroGrad: the gradient reduction of unit '%s' is in flight: call FSDPContextFinishBackward "
            "first",
            ctx->reducing ? ctx->reducing->name : "");
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    size_t es = FSDPDataTypeSize(u->dtype);
    FSDPCall(DeviceZero_Private(ctx->dev, u->grad_shard, (size_t)u->shard_numel * es));
    u->grad = GRAD_NONE;
    if (u->ugrad && u->state == FSDP_FLATPARAM_UNSHARDED)
      FSDPCall(DeviceZero_Private(ctx->dev, u->ugrad, (size_t)u->padded * es));
    else FSDPCall(FlatParamPutGrad_Private(u));
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode check_all_sharded(FSDPContext ctx, const char *caller)
{
  for (int i = 0; i < ctx->nunits; i++)
    FSDPCheck(ctx->units[i]->state == FSDP_FLATPARAM_SHARDED, MPI_COMM_SELF, FSDP_ERR_STATE,
              "%s: unit '%s' is %s: every unit must be sharded", caller, ctx->units[i]->name,
              FlatParamStateName(ctx->units[i]->state));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextBroadcastParams(FSDPContext ctx)
{
  CHECK_RUNNING(ctx);
  FSDPCollective(ctx->comm);
  /* Copies kept from forward, cached or prefetched would go stale when the shards change. */
  for (int i = 0; i < ctx->nunits; i++) FSDPCall(FlatParamDropKept_Private(ctx->units[i]));
  /* A rank that cannot take part must not leave the others in MPI_Bcast. */
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, check_all_sharded(ctx, __func__)));
  if (ctx->nreplicas == 1) return FSDP_SUCCESS;
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    size_t bytes = (size_t)u->shard_numel * FSDPDataTypeSize(u->dtype);
    void *buf = u->shard;
    FSDPCall(FSDPLogEventBegin(ctx->ev_broadcast));
    /* On a GPU, through the host: once, at SetUp or on request, not per step. */
    if (ctx->dev) {
      FSDPCall(FSDPMalloc(bytes, FSDP_MEM_COMM_STAGING, &buf));
      FSDPCall(DeviceToHost_Private(ctx->dev, buf, u->shard, bytes));
    }
    FSDPCallMPI(MPI_Bcast(buf, (int)u->shard_numel, FSDPDataTypeMPI_Private(u->dtype), 0, ctx->replicate_comm));
    if (ctx->dev) {
      FSDPCall(DeviceFromHost_Private(ctx->dev, u->shard, buf, bytes));
      FSDPCall(FSDPFree(&buf));
    }
    FSDPCall(FSDPLogEventEnd(ctx->ev_broadcast, (int64_t)bytes));
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ queries */

FSDPErrorCode FSDPContextGetComm(FSDPContext ctx, MPI_Comm *comm)
{
  CHECK_CTX(ctx);
  FSDPCheck(comm, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetComm: comm must not be NULL");
  *comm = ctx->comm;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetNumUnits(FSDPContext ctx, int *nunits)
{
  CHECK_CTX(ctx);
  if (nunits) *nunits = ctx->nunits;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetUnit(FSDPContext ctx, int i, FlatParam *unit)
{
  CHECK_CTX(ctx);
  FSDPCheck(i >= 0 && i < ctx->nunits, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextGetUnit: unit index %d is not in [0, %d)", i, ctx->nunits);
  if (unit) *unit = ctx->units[i];
  return FSDP_SUCCESS;
}

bool FSDPContextLookupParam_Private(FSDPContext ctx, const char *name, FlatParam *unit, FSDPParamId *id)
{
  for (int i = 0; i < ctx->nunits; i++)
    for (int j = 0; j < ctx->units[i]->nparams; j++)
      if (strcmp(ctx->units[i]->params[j].name, name) == 0) {
        if (unit) *unit = ctx->units[i];
        if (id) *id = j;
        return true;
      }
  return false;
}

FSDPErrorCode FSDPContextFindParam(FSDPContext ctx, const char *name, FlatParam *unit, FSDPParamId *id)
{
  CHECK_CTX(ctx);
  FSDPCheck(name, MPI_COMM_SELF, FSDP_ERR_ARG, "name must not be NULL");
  FSDPCheck(FSDPContextLookupParam_Private(ctx, name, unit, id), MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextFindParam: no unit has a parameter called '%s'", name);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetSizes(FSDPContext ctx, int64_t *numel, int64_t *shard_numel, int64_t *max_unit_numel)
{
  int64_t n = 0, s = 0, m = 0;
  CHECK_SETUP(ctx);
  for (int i = 0; i < ctx->nunits; i++) {
    n += ctx->units[i]->numel;
    s += ctx->units[i]->shard_numel;
    if (ctx->units[i]->padded > m) m = ctx->units[i]->padded;
  }
  if (numel) *numel = n;
  if (shard_numel) *shard_numel = s;
  if (max_unit_numel) *max_unit_numel = m;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ view */

/* What carries a group's collectives on the GPU (stream.c decides the same way). */
static const char *device_engine(FSDPContext ctx, bool shard)
{
  if ((shard ? ctx->factor : ctx->nreplicas) == 1) return "copies (one rank)";
  if (CommNCCLGet(ctx->nccl, shard)) return "NCCL";
  return ctx->cuda_aware ? "MPI (CUDA-aware)" : "MPI (host staging)";
}

static FSDPErrorCode view_context(FSDPViewer v, void *arg)
{
  FSDPContext ctx = arg;
  int64_t numel = 0;
  size_t shard_bytes, max_bytes, max_gbytes, all_bytes;
  int nparams = 0;
  char a[32], b[32], c[32], d[32], e[64];
  const char *low = ctx->param_dtype != FSDP_FLOAT32 ? FSDPDataTypeNames_Private[ctx->param_dtype] : NULL;
  MemoryLayout lay;
  MemorySizes ms;

  for (int i = 0; i < ctx->nunits; i++) {
    numel += ctx->units[i]->numel;
    nparams += ctx->units[i]->nparams;
  }
  FSDPCall(FSDPViewerASCIIPrintf(v, "FSDPContext: %d unit%s, %d parameter tensor%s, %lld elements\n", ctx->nunits,
                                 ctx->nunits == 1 ? "" : "s", nparams, nparams == 1 ? "" : "s", (long long)numel));
  FSDPCall(FSDPViewerASCIIPushTab(v));
  if (!ctx->setup) {
    FSDPCall(FSDPViewerASCIIPrintf(v, "sharding strategy %s (not set up yet)\n", strategy_names[ctx->strategy]));
    FSDPCall(FSDPViewerASCIIPopTab(v));
    return FSDP_SUCCESS;
  }
  lay = layout_of(ctx, has_views(ctx));
  FSDPMemorySizes_Private(ctx, &lay, &ms);
  shard_bytes = ms.shards;
  max_bytes = ms.max_p;
  max_gbytes = ms.max_g;
  all_bytes = ms.all_p;
  FSDPCall(
      FSDPViewerASCIIPrintf(v, "sharding strategy %s: W = %d ranks, F = %d per shard group, %d replica%s; device %s\n",
                            strategy_names[ctx->strategy], ctx->size, ctx->factor, ctx->nreplicas,
                            ctx->nreplicas == 1 ? "" : "s", device_names[ctx->device]));
  if (ctx->dev)
    FSDPCall(FSDPViewerASCIISynchronizedPrintf(v, "[%d] %s: shard group on %s, replicas on %s%s\n", ctx->rank,
                                               DeviceDescribe_Private(ctx->dev), device_engine(ctx, true),
                                               device_engine(ctx, false), ctx->fallback[0] ? ": one GPU shared" : ""));
  if (ctx->param_dtype != FSDP_FLOAT32 || ctx->reduce_dtype != FSDP_FLOAT32)
    FSDPCall(FSDPViewerASCIIPrintf(
        v,
        "mixed precision: parameters unsharded and all-gathered in %s, gradients reduced "
        "in %s%s; fp32 master shards, gradients and optimizer state\n",
        FSDPDataTypeNames_Private[ctx->param_dtype], FSDPDataTypeNames_Private[ctx->reduce_dtype],
        ctx->predivide > 1 ? (snprintf(e, sizeof e, " (divided by %g before the sum)", ctx->predivide), e) : ""));
  FSDPCall(ShardGroupView(ctx->group, v));
  FSDPCall(FSDPViewerASCIIPrintf(v, "units (elements; padded to a multiple of F = %d):\n", ctx->factor));
  FSDPCall(FSDPViewerASCIIPrintf(v, "  %-24s %5s %7s %14s %14s %14s %6s\n", "unit", "dtype", "tensors", "numel",
                                 "padded", "shard", "pad"));
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    FSDPCall(FSDPViewerASCIIPrintf(v, "  %-24s %5s %7d %14lld %14lld %14lld %6lld\n", u->name,
                                   FSDPDataTypeNames_Private[u->dtype], u->nparams, (long long)u->numel,
                                   (long long)u->padded, (long long)u->shard_numel, (long long)(u->padded - u->numel)));
  }
  FSDPCall(FSDPViewerASCIIPrintf(
      v,
      "overlap: %s engine%s%s%s, backward prefetch %s, forward prefetch %s, at most %s "
      "unit%s unsharded at once, watchdog %s%s\n",
      engine_names[ctx->engine], ctx->engine_auto_why ? " (" : "", ctx->engine_auto_why ? ctx->engine_auto_why : "",
      ctx->engine_auto_why ? ")" : "", prefetch_names[ctx->backward_prefetch], ctx->forward_prefetch ? "on" : "off",
      ctx->limit ? (snprintf(a, sizeof a, "%d", ctx->limit), a) : "any number of", ctx->limit == 1 ? "" : "s",
      ctx->timeout > 0 ? (snprintf(b, sizeof b, "%g s", ctx->timeout), b) : "off",
      ctx->debug_collectives ? ", collectives checked" : ""));
  if (ctx->factor > 1 && !ctx->dev)
    FSDPCall(FSDPViewerASCIIPrintf(
        v, "reduce-scatter: %s; all-gather: %s\n",
        ctx->shm ? "node shared memory (the shard group's ranks share a node; -fsdp_shm_reduce)" : "MPI",
        has_views(ctx) ? "into views: each unit's parameters kept once per shard group, read in place (-fsdp_shm_views)"
        : ctx->shm && ctx->param_dtype == FSDP_FLOAT32 ? "node shared memory"
                                                       : "MPI"));
  {
    char machine[96] = "this node";
    if (ctx->machine_hosts > 1)
      snprintf(machine, sizeof machine, "this machine (%d nodes on one kernel: containers or namespaces of a host)",
               ctx->machine_hosts);
    FSDPCall(FSDPViewerASCIISynchronizedPrintf(v, "[%d] waits %s: %d rank%s on %d CPU%s of %s%s%s%s\n", ctx->rank,
                                               wait_names[ctx->wait], ctx->node_ranks, ctx->node_ranks == 1 ? "" : "s",
                                               ctx->node_cpus, ctx->node_cpus == 1 ? "" : "s", machine,
                                               ctx->node_ranks > ctx->node_cpus ? " (oversubscribed)" : "",
                                               ctx->wait_why ? "; " : "", ctx->wait_why ? ctx->wait_why : ""));
  }
  if (ctx->checkpoint_save_io == ctx->checkpoint_load_io)
    FSDPCall(FSDPViewerASCIIPrintf(v, "checkpoint I/O: %s transfers (%s)\n",
                                   checkpoint_io_names[ctx->checkpoint_save_io],
                                   ctx->checkpoint_io_why ? ctx->checkpoint_io_why : "-fsdp_checkpoint_io"));
  else
    FSDPCall(FSDPViewerASCIIPrintf(v, "checkpoint I/O: %s saves, %s loads (%s)\n",
                                   checkpoint_io_names[ctx->checkpoint_save_io],
                                   checkpoint_io_names[ctx->checkpoint_load_io], ctx->checkpoint_io_why));
  {
    const FSDPMemoryPlan *p = &ctx->plan;
    int L = p->unsharded_buffers;
    FSDPCall(FSDPViewerASCIIPrintf(
        v, "memory plan per rank (allocated at SetUp; after the first step, a step allocates nothing):\n"));
    FSDPFormatBytes(a, sizeof a, (double)shard_bytes);
    FSDPCall(FSDPViewerASCIIPrintf(v, "  %-22s %12s   sum(psi_i)/F\n", "parameter shards", a));
    FSDPCall(FSDPViewerASCIIPrintf(v, "  %-22s %12s   sum(psi_i)/F\n", "gradient shards", a));
    FSDPFormatBytes(a, sizeof a, (double)p->bytes[FSDP_MEM_UNSHARDED]);
    FSDPFormatBytes(b, sizeof b, (double)max_bytes);
    FSDPFormatBytes(d, sizeof d, (double)max_gbytes);
    if (has_views(ctx))
      FSDPCall(FSDPViewerASCIIPrintf(v,
                                     "  %-22s %12s   sum(psi_i)/F for parameters (this rank's share of the group's "
                                     "views: each unit once) + %d x %s for gradients\n",
                                     "unsharded buffers", a, p->gradient_buffers, d));
    else if (ctx->factor > 1 && !L)
      FSDPCall(FSDPViewerASCIIPrintf(v,
                                     "  %-22s %12s   sum(psi_i)%s%s for parameters (%s keeps every unit from "
                                     "forward to backward) + %d x %s for gradients\n",
                                     "unsharded buffers", a, low ? " in " : "", low ? low : "",
                                     strategy_names[ctx->strategy], p->gradient_buffers, d));
    else
      FSDPCall(FSDPViewerASCIIPrintf(v, "  %-22s %12s   %d x %s%s%s for parameters%s + %d x %s for gradients\n",
                                     "unsharded buffers", a, L, b, low ? " in " : "", low ? low : "",
                                     ctx->direct ? " (F = 1: the shards are the units)" : "", p->gradient_buffers, d));
    FSDPFormatBytes(a, sizeof a, (double)p->bytes[FSDP_MEM_COMM_STAGING]);
    FSDPCall(FSDPViewerASCIIPrintf(v,
                                   "  %-22s %12s   one shard, for reductions into a gradient shard that holds "
                                   "gradients\n",
                                   "communication staging", a));
    if (ctx->device == FSDP_DEVICE_HOST) {
      char why[768];
      size_t limit;
      FSDPCall(memory_limit(ctx, &limit, why, sizeof why));
      FSDPFormatBytes(a, sizeof a, (double)limit);
      FSDPCall(FSDPViewerASCIIPrintf(v, "  %-22s %12s   %s%s%s\n", "limit (rank 0)", limit ? a : "none",
                                     limit ? "the most SetUp lets the plan take: " : "", limit ? why : "",
                                     limit ? "" : "-fsdp_memory_limit none"));
    }
    FSDPFormatBytes(a, sizeof a, (double)shard_bytes);
    FSDPFormatBytes(c, sizeof c, (double)(shard_bytes + (ctx->factor > 1 && !L ? all_bytes : (size_t)L * max_bytes)));
    if (has_views(ctx))
      FSDPCall(FSDPViewerASCIIPrintf(v,
                                     "  parameters at peak: sum(psi_i)/F + sum(psi_i)/F = %s + %s (the shards, "
                                     "and this rank's share of the group's views)\n",
                                     a, a));
    else if (ctx->factor > 1 && !L)
      FSDPCall(FSDPViewerASCIIPrintf(v, "  parameters at peak: sum(psi_i)/F + sum(psi_i) = %s\n", c));
    else
      FSDPCall(FSDPViewerASCIIPrintf(v,
                                     "  parameters at peak: sum(psi_i)/F + L*max(psi_i) = %s + %d x %s = %s (the "
                                     "paper's formula, L = %d%s%s)\n",
                                     a, L, b, c, L, low ? ", K_low: parameters in " : "", low ? low : ""));
  }
  FSDPCall(FSDPViewerASCIIPopTab(v));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextView(FSDPContext ctx, FSDPViewer viewer)
{
  CHECK_CTX(ctx);
  FSDPCall(FSDPViewerApply_Private(__func__, viewer, ctx->comm, view_context, ctx));
  return FSDP_SUCCESS;
}
