/* FSDPContext: the units of a model, how they are sharded, and the runtime
   that gathers and reduces them (doc/flatparam.md). */
#include <string.h>

#include "coreimpl.h"

static const char *const strategy_names[] = {"full", "grad_op", "none", "hybrid", "hybrid_zero2", NULL};
static const char *const dtype_names[] = {"fp32", "fp64", "bf16", "fp16"};
static const size_t dtype_sizes[] = {4, 8, 2, 2};

const char *FSDPShardingStrategyName(FSDPShardingStrategy strategy)
{
  if ((int)strategy < 0 || strategy >= FSDP_NUM_SHARDING_STRATEGIES) return "unknown strategy";
  return strategy_names[strategy];
}

const char *FSDPDataTypeName(FSDPDataType dtype)
{
  if ((int)dtype < 0 || dtype >= FSDP_NUM_DATA_TYPES) return "unknown data type";
  return dtype_names[dtype];
}

size_t FSDPDataTypeSize(FSDPDataType dtype)
{
  if ((int)dtype < 0 || dtype >= FSDP_NUM_DATA_TYPES) return 0;
  return dtype_sizes[dtype];
}

MPI_Datatype FSDPDataTypeMPI_Private(FSDPDataType dtype)
{
  return dtype == FSDP_FLOAT64 ? MPI_DOUBLE : MPI_FLOAT; /* the master types; 16-bit ones never reach MPI here */
}

#define CHECK_CTX(c) FSDPCheck(c, MPI_COMM_SELF, FSDP_ERR_ARG, "ctx must not be NULL")
/* Settings can change until SetUp. */
#define CHECK_SETTABLE(c)                                                                                        \
  do {                                                                                                           \
    CHECK_CTX(c);                                                                                                \
    FSDPCheck(!(c)->laid_out || (c)->setup, MPI_COMM_SELF, FSDP_ERR_STATE,                                       \
              "%s: FSDPContextSetUp failed on this context; destroy it", __func__);                              \
    FSDPCheck(!(c)->laid_out, MPI_COMM_SELF, FSDP_ERR_STATE, "%s after FSDPContextSetUp: the context is already set up", \
              __func__);                                                                                         \
  } while (0)
#define CHECK_SETUP(c)                                                                                           \
  do {                                                                                                           \
    CHECK_CTX(c);                                                                                                \
    FSDPCheck(!(c)->laid_out || (c)->setup, MPI_COMM_SELF, FSDP_ERR_STATE,                                       \
              "%s: FSDPContextSetUp failed on this context; destroy it", __func__);                              \
    FSDPCheck((c)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: the context is not set up: call FSDPContextSetUp first", \
              __func__);                                                                                         \
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
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextCreate(MPI_Comm comm, FSDPContext *ctx)
{
  FSDPContext c;
  FSDPErrorCode ierr;

  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "ctx must not be NULL");
  *ctx = NULL;
  FSDPCall(FSDPCheckCreateComm_Private(comm, __func__));
  FSDPCall(FSDPCalloc(1, sizeof *c, FSDP_MEM_OTHER, &c));
  c->comm = c->shard_comm = c->replicate_comm = MPI_COMM_NULL;
  c->strategy = FSDP_FULL_SHARD;
  c->device = FSDP_DEVICE_HOST;
  c->grad_sync = c->replicate_grad_sync = true;
  if ((ierr = create(comm, c))) {
    (void)FSDPContextDestroy(&c);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  *ctx = c;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextDestroy(FSDPContext *ctx)
{
  FSDPContext c;
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "ctx must not be NULL");
  if (!(c = *ctx)) return FSDP_SUCCESS;
  FSDPCheck(!c->reducing, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPContextDestroy: the gradient reduction of unit '%s' is in flight: call FSDPContextFinishBackward "
            "first; the context is left as it was",
            c->reducing ? c->reducing->name : "");
  for (int i = 0; i < c->nunits; i++) FSDPCall(FlatParamDestroy_Private(&c->units[i]));
  FSDPCall(FSDPFree(&c->units));
  FSDPCall(ShardGroupDestroy(&c->group));
  if (c->comm != MPI_COMM_NULL) FSDPCallMPI(MPI_Comm_free(&c->comm));
  FSDPCall(FSDPFree(ctx));
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

FSDPErrorCode FSDPContextSetFromOptions(FSDPContext ctx)
{
  int choice;

  CHECK_SETTABLE(ctx);
  FSDPCall(FSDPOptionsGetEnum("-fsdp_sharding_strategy",
                              "how units are sharded: full (F = W), grad_op (F = W, parameters kept from forward to "
                              "backward), none (DDP), hybrid (F from the shard group), hybrid_zero2",
                              strategy_names, (int)ctx->strategy, &choice, NULL));
  ctx->strategy = (FSDPShardingStrategy)choice;
  FSDPCall(FSDPOptionsGetBool("-fsdp_sync_params", "broadcast parameters from the first replica at SetUp",
                              ctx->sync_params, &ctx->sync_params, NULL));
  FSDPCall(FSDPOptionsGetBool("-fsdp_view", "print the context and its process layout at SetUp", ctx->view_at_setup,
                              &ctx->view_at_setup, NULL));
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
  ctx->units[ctx->nunits++] = u;
  u->ctx = ctx;
  u->dtype = FSDP_FLOAT32;
  u->request = MPI_REQUEST_NULL;
  *unit = u;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ SetUp */

/* Everything that must be the same on every rank, in one number. */
static uint64_t model_hash(FSDPContext ctx, int *nparams)
{
  uint64_t h = FSDP_HASH_INIT;
  int settings[] = {(int)ctx->strategy, ctx->sync_params,   ctx->view_at_setup,
                    ctx->nunits,         !!ctx->unit_init, !!ctx->shard_init};
  *nparams = 0;
  h = FSDPHashBytes_Private(h, settings, sizeof settings);
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

/* Collective: same units on every rank, and a strategy that fits them. */
static FSDPErrorCode agree_on_model(FSDPContext ctx, int *factor)
{
  struct {
    uint64_t hash;
    int nunits, nparams;
  } mine, root;
  FSDPErrorCode ierr = FSDP_SUCCESS;

  mine.hash = model_hash(ctx, &mine.nparams);
  mine.nunits = ctx->nunits;
  root = mine;
  FSDPCallMPI(MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, ctx->comm));
  if (mine.hash != root.hash)
    ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_ARG,
                     "the context on this rank (%d units, %d parameters, strategy %s) differs from rank 0's (%d units, "
                     "%d parameters): every rank must register the same units and parameters, with the same names, "
                     "shapes and data types, in the same order, and use the same settings (strategy, initializer, "
                     "-fsdp_sync_params, -fsdp_view)",
                     mine.nunits, mine.nparams, strategy_names[ctx->strategy], root.nunits, root.nparams);
  else ierr = strategy_factor(ctx, factor);
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

static FSDPErrorCode lay_out(FSDPContext ctx)
{
  for (int i = 0; i < ctx->nunits; i++) FSDPCall(FlatParamSetUp_Private(ctx->units[i], ctx->factor));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetUp(FSDPContext ctx)
{
  int factor = 0, requested, rank;

  CHECK_SETTABLE(ctx);
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
  ctx->laid_out = true;
  /* Allocation and user initializers can fail on some ranks only. */
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, lay_out(ctx)));
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
  CHECK_SETUP(ctx);
  FSDPCall(FSDPContextCompleteReduction_Private(ctx));
  /* Gradients left behind by accumulation reach every rank now, unit by unit. */
  for (int i = 0; i < ctx->nunits; i++) FSDPCall(FlatParamFlushGrad_Private(ctx->units[i]));
  /* Parameters kept for a backward pass that did not come must not outlive the step. */
  for (int i = 0; i < ctx->nunits; i++) FSDPCall(FlatParamDropKept_Private(ctx->units[i]));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextZeroGrad(FSDPContext ctx)
{
  CHECK_SETUP(ctx);
  FSDPCheck(!ctx->reducing, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPContextZeroGrad: the gradient reduction of unit '%s' is in flight: call FSDPContextFinishBackward "
            "first",
            ctx->reducing ? ctx->reducing->name : "");
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    size_t es = FSDPDataTypeSize(u->dtype);
    memset(u->grad_shard, 0, (size_t)u->shard_numel * es);
    u->grad = GRAD_NONE;
    if (u->ugrad && u->state == FSDP_FLATPARAM_UNSHARDED) memset(u->ugrad, 0, (size_t)u->padded * es);
    else FSDPCall(FSDPFree(&u->ugrad));
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
  CHECK_SETUP(ctx);
  /* A rank that cannot take part must not leave the others in MPI_Bcast. */
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, check_all_sharded(ctx, __func__)));
  if (ctx->nreplicas == 1) return FSDP_SUCCESS;
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    FSDPCall(FlatParamDropKept_Private(u));
    FSDPCall(FSDPLogEventBegin(ctx->ev_broadcast));
    FSDPCallMPI(MPI_Bcast(u->shard, (int)u->shard_numel, FSDPDataTypeMPI_Private(u->dtype), 0, ctx->replicate_comm));
    FSDPCall(FSDPLogEventEnd(ctx->ev_broadcast, (int64_t)((size_t)u->shard_numel * FSDPDataTypeSize(u->dtype))));
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
  FSDPCheck(i >= 0 && i < ctx->nunits, MPI_COMM_SELF, FSDP_ERR_ARG, "unit index %d is not in [0, %d)", i,
            ctx->nunits);
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

static FSDPErrorCode view_context(FSDPViewer v, void *arg)
{
  FSDPContext ctx = arg;
  int64_t numel = 0, shard_bytes = 0, max_bytes = 0, all_bytes = 0;
  int nparams = 0;
  char a[32], b[32], c[32];

  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    size_t es = FSDPDataTypeSize(u->dtype);
    numel += u->numel;
    nparams += u->nparams;
    shard_bytes += u->shard_numel * (int64_t)es;
    if (u->padded * (int64_t)es > max_bytes) max_bytes = u->padded * (int64_t)es;
    all_bytes += u->padded * (int64_t)es;
  }
  FSDPCall(FSDPViewerASCIIPrintf(v, "FSDPContext: %d unit%s, %d parameter tensor%s, %lld elements\n", ctx->nunits,
                                 ctx->nunits == 1 ? "" : "s", nparams, nparams == 1 ? "" : "s", (long long)numel));
  FSDPCall(FSDPViewerASCIIPushTab(v));
  if (!ctx->setup) {
    FSDPCall(FSDPViewerASCIIPrintf(v, "sharding strategy %s (not set up yet)\n", strategy_names[ctx->strategy]));
    FSDPCall(FSDPViewerASCIIPopTab(v));
    return FSDP_SUCCESS;
  }
  FSDPCall(FSDPViewerASCIIPrintf(v, "sharding strategy %s: W = %d ranks, F = %d per shard group, %d replica%s; device host\n",
                                 strategy_names[ctx->strategy], ctx->size, ctx->factor, ctx->nreplicas,
                                 ctx->nreplicas == 1 ? "" : "s"));
  FSDPCall(ShardGroupView(ctx->group, v));
  FSDPCall(FSDPViewerASCIIPrintf(v, "units (elements; padded to a multiple of F = %d):\n", ctx->factor));
  FSDPCall(FSDPViewerASCIIPrintf(v, "  %-24s %5s %7s %14s %14s %14s %6s\n", "unit", "dtype", "tensors", "numel",
                                 "padded", "shard", "pad"));
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    FSDPCall(FSDPViewerASCIIPrintf(v, "  %-24s %5s %7d %14lld %14lld %14lld %6lld\n", u->name, dtype_names[u->dtype],
                                   u->nparams, (long long)u->numel, (long long)u->padded, (long long)u->shard_numel,
                                   (long long)(u->padded - u->numel)));
  }
  FSDPFormatBytes_Private(a, sizeof a, (double)shard_bytes);
  FSDPFormatBytes_Private(b, sizeof b, (double)max_bytes);
  FSDPFormatBytes_Private(c, sizeof c, (double)(shard_bytes + max_bytes));
  FSDPCall(FSDPViewerASCIIPrintf(v, "memory per rank: parameter shards %s, gradient shards %s\n", a, a));
  if (ctx->factor > 1 && (ctx->strategy == FSDP_SHARD_GRAD_OP || ctx->strategy == FSDP_HYBRID_SHARD_ZERO2)) {
    FSDPFormatBytes_Private(b, sizeof b, (double)all_bytes);
    FSDPFormatBytes_Private(c, sizeof c, (double)(shard_bytes + all_bytes));
    FSDPCall(FSDPViewerASCIIPrintf(v, "parameters at peak: sum(psi_i)/F + sum(psi_i) = %s + %s = %s (%s keeps every "
                                   "unit unsharded from its forward to its backward); backward adds up to two units' "
                                   "unsharded gradients\n",
                                   a, b, c, strategy_names[ctx->strategy]));
  } else if (ctx->factor == 1)
    FSDPCall(FSDPViewerASCIIPrintf(v, "parameters at peak: %s (F = 1: the shards are the units); backward adds up to "
                                   "two units' unsharded gradients, %s each at most\n", a, b));
  else
    FSDPCall(FSDPViewerASCIIPrintf(v, "parameters at peak: sum(psi_i)/F + max(psi_i) = %s + %s = %s (one unit "
                                   "unsharded at a time); backward adds up to two units' unsharded gradients\n",
                                   a, b, c));
  FSDPCall(FSDPViewerASCIIPopTab(v));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextView(FSDPContext ctx, FSDPViewer viewer)
{
  CHECK_CTX(ctx);
  FSDPCall(FSDPViewerApply_Private(viewer, ctx->comm, view_context, ctx));
  return FSDP_SUCCESS;
}
