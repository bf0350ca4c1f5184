/* FlatParam: one unit's parameters flattened, concatenated in registration
   order, right-padded to a multiple of F and cut into F equal shards
   (doc/flatparam.md).  The unsharded buffer is exactly MPI_Allgather's
   receive buffer and MPI_Reduce_scatter_block's send buffer, so parameters
   and gradients never pass through a copy on their way into a collective. */
#include <string.h>

#include "coreimpl.h"

static const char *const state_names[] = {"sharded", "gathering", "unsharded", "reducing"};

const char *FlatParamStateName(FlatParamState state)
{
  if ((int)state < 0 || state > FSDP_FLATPARAM_REDUCING) return "unknown state";
  return state_names[state];
}

#define CHECK_UNIT(u) FSDPCheck(u, MPI_COMM_SELF, FSDP_ERR_ARG, "unit must not be NULL")
/* Whether the unit can be used: its layout exists (views and getters work
   inside initializers too), or, for `running`, the context is fully set up. */
static FSDPErrorCode check_ready(FlatParam u, bool running, const char *caller)
{
  FSDPContext ctx = u->ctx;
  FSDPCheck(!running || !ctx->initializing, MPI_COMM_SELF, FSDP_ERR_STATE,
            "%s: unit '%s' is being initialized: an initializer may only fill parameters", caller, u->name);
  FSDPCheck(!ctx->laid_out || ctx->setup || ctx->initializing, MPI_COMM_SELF, FSDP_ERR_STATE,
            "%s: unit '%s': FSDPContextSetUp failed on this context; destroy it", caller, u->name);
  FSDPCheck(ctx->laid_out, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: unit '%s' is not set up: call FSDPContextSetUp first",
            caller, u->name);
  return FSDP_SUCCESS;
}
#define CHECK_UNIT_SETUP(u)                                                                                      \
  do {                                                                                                           \
    CHECK_UNIT(u);                                                                                               \
    FSDPCall(check_ready(u, false, __func__));                                                                   \
  } while (0)
#define CHECK_UNIT_RUNNING(u)                                                                                    \
  do {                                                                                                           \
    CHECK_UNIT(u);                                                                                               \
    FSDPCall(check_ready(u, true, __func__));                                                                    \
  } while (0)
#define CHECK_ID(u, id)                                                                                          \
  FSDPCheck((id) >= 0 && (id) < (u)->nparams, MPI_COMM_SELF, FSDP_ERR_ARG,                                      \
            "%s: parameter id %d is not one of unit '%s''s %d parameters", __func__, (int)(id), (u)->name,      \
            (u)->nparams)

static size_t esize(const FlatParam u) { return FSDPDataTypeSize(u->dtype); }
static void *at(const FlatParam u, void *base, int64_t element) { return (char *)base + (size_t)element * esize(u); }

/* ------------------------------------------------------------------ registration */

FSDPErrorCode FlatParamSetDataType(FlatParam unit, FSDPDataType dtype)
{
  CHECK_UNIT(unit);
  FSDPCheck(!unit->ctx->laid_out, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamSetDataType: unit '%s' is already set up: its layout is fixed", unit->name);
  FSDPCheck((int)dtype >= 0 && dtype < FSDP_NUM_DATA_TYPES, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FlatParamSetDataType: unit '%s': data type %d is not an FSDPDataType", unit->name, (int)dtype);
  FSDPCheck(dtype == FSDP_FLOAT32 || dtype == FSDP_FLOAT64, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "FlatParamSetDataType: unit '%s': the master copy of parameters is fp32 or fp64, not %s (16-bit "
            "parameters come from a mixed-precision policy over fp32 shards)",
            unit->name, FSDPDataTypeName(dtype));
  unit->dtype = dtype;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamAddParam(FlatParam unit, const char *name, int ndim, const int64_t shape[], FSDPParamId *id)
{
  FSDPContext ctx;
  ParamInfo *p;
  int64_t numel = 1;
  FlatParam other;
  FSDPParamId dup;

  CHECK_UNIT(unit);
  ctx = unit->ctx;
  FSDPCheck(name && *name, MPI_COMM_SELF, FSDP_ERR_ARG, "FlatParamAddParam: unit '%s': the parameter name must not be empty",
            unit->name);
  FSDPCheck(!ctx->laid_out, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamAddParam: cannot add parameter '%s' to unit '%s' after FSDPContextSetUp: the layout is fixed",
            name, unit->name);
  FSDPCheck(ndim >= 0, MPI_COMM_SELF, FSDP_ERR_ARG, "FlatParamAddParam: parameter '%s' has %d dimensions", name, ndim);
  FSDPCheck(ndim == 0 || shape, MPI_COMM_SELF, FSDP_ERR_ARG, "FlatParamAddParam: parameter '%s' has %d dimensions but no shape",
            name, ndim);
  for (int d = 0; d < ndim; d++) {
    FSDPCheck(shape[d] >= 0, MPI_COMM_SELF, FSDP_ERR_ARG, "FlatParamAddParam: parameter '%s': extent %d is %lld",
              name, d, (long long)shape[d]);
    FSDPCheck(shape[d] == 0 || numel <= INT64_MAX / shape[d], MPI_COMM_SELF, FSDP_ERR_ARG,
              "FlatParamAddParam: parameter '%s' has more than 2^63 elements", name);
    numel *= shape[d];
  }
  FSDPCheck(numel <= INT64_MAX - unit->numel, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FlatParamAddParam: unit '%s' would have more than 2^63 elements", unit->name);
  FSDPCheck(!FSDPContextLookupParam_Private(ctx, name, &other, &dup), MPI_COMM_SELF, FSDP_ERR_ARG,
            "FlatParamAddParam: a parameter called '%s' already exists (in unit '%s'): names are unique in a context",
            name, other->name);
  FSDPCall(FSDPGrowArray_Private(&unit->params, sizeof *unit->params, unit->nparams + 1, &unit->capacity,
                                 FSDP_MEM_OTHER));
  p = &unit->params[unit->nparams];
  memset(p, 0, sizeof *p);
  FSDPCall(FSDPStrdup(name, &p->name));
  p->ndim = ndim;
  if (ndim > 0) {
    FSDPCall(FSDPMalloc((size_t)ndim * sizeof *p->shape, FSDP_MEM_OTHER, &p->shape));
    memcpy(p->shape, shape, (size_t)ndim * sizeof *p->shape);
  }
  p->numel = numel;
  p->offset = unit->numel;
  unit->numel += numel;
  if (id) *id = unit->nparams;
  unit->nparams++;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamSetTrainable(FlatParam unit, FSDPParamId id, bool trainable)
{
  CHECK_UNIT(unit);
  CHECK_ID(unit, id);
  if (unit->params[id].frozen == !trainable) return FSDP_SUCCESS;
  unit->params[id].frozen = !trainable;
  unit->ctx->trainable_changes++;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetTrainable(FlatParam unit, FSDPParamId id, bool *trainable)
{
  CHECK_UNIT(unit);
  CHECK_ID(unit, id);
  FSDPCheck(trainable, MPI_COMM_SELF, FSDP_ERR_ARG, "FlatParamGetTrainable: trainable must not be NULL");
  *trainable = !unit->params[id].frozen;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamSetUp_Private(FlatParam unit, int factor)
{
  size_t es = esize(unit);

  FSDPCheck(unit->numel <= INT64_MAX - factor, MPI_COMM_SELF, FSDP_ERR_ARG, "unit '%s' is too large to pad",
            unit->name);
  unit->padded = (unit->numel + factor - 1) / factor * factor;
  unit->shard_numel = unit->padded / factor;
  /* MPI counts are int: a bigger shard must be a smaller unit. */
  FSDPCheck(unit->shard_numel <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "unit '%s' has a shard of %lld elements, more than an MPI count holds: split it into smaller units",
            unit->name, (long long)unit->shard_numel);
  FSDPCheck((size_t)unit->padded <= SIZE_MAX / es, MPI_COMM_SELF, FSDP_ERR_MEM, "unit '%s' is too large to address",
            unit->name);
  FSDPCall(FSDPCalloc((size_t)unit->shard_numel, es, FSDP_MEM_PARAMS, &unit->shard));
  FSDPCall(FSDPCalloc((size_t)unit->shard_numel, es, FSDP_MEM_GRADS, &unit->grad_shard));
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamDestroy_Private(FlatParam *unit)
{
  FlatParam u = *unit;
  if (!u) return FSDP_SUCCESS;
  for (int i = 0; i < u->nparams; i++) {
    FSDPCall(FSDPFree(&u->params[i].name));
    FSDPCall(FSDPFree(&u->params[i].shape));
  }
  FSDPCall(FSDPFree(&u->params));
  if (u->unsharded != u->shard) FSDPCall(FSDPFree(&u->unsharded));
  FSDPCall(FSDPFree(&u->ugrad));
  FSDPCall(FSDPFree(&u->staging));
  FSDPCall(FSDPFree(&u->shard));
  FSDPCall(FSDPFree(&u->grad_shard));
  FSDPCall(FSDPFree(&u->name));
  FSDPCall(FSDPFree(unit));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ introspection */

FSDPErrorCode FlatParamGetName(FlatParam unit, const char **name)
{
  CHECK_UNIT(unit);
  if (name) *name = unit->name;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetState(FlatParam unit, FlatParamState *state)
{
  CHECK_UNIT(unit);
  if (state) *state = unit->state;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetDataType(FlatParam unit, FSDPDataType *dtype)
{
  CHECK_UNIT(unit);
  if (dtype) *dtype = unit->dtype;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetNumParams(FlatParam unit, int *nparams)
{
  CHECK_UNIT(unit);
  if (nparams) *nparams = unit->nparams;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetParamInfo(FlatParam unit, FSDPParamId id, const char **name, int *ndim,
                                    const int64_t **shape, int64_t *numel)
{
  CHECK_UNIT(unit);
  CHECK_ID(unit, id);
  if (name) *name = unit->params[id].name;
  if (ndim) *ndim = unit->params[id].ndim;
  if (shape) *shape = unit->params[id].shape;
  if (numel) *numel = unit->params[id].numel;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetSizes(FlatParam unit, int64_t *numel, int64_t *padded_numel, int64_t *shard_numel)
{
  CHECK_UNIT_SETUP(unit);
  if (numel) *numel = unit->numel;
  if (padded_numel) *padded_numel = unit->padded;
  if (shard_numel) *shard_numel = unit->shard_numel;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetShard(FlatParam unit, void **values, int64_t *numel)
{
  CHECK_UNIT_SETUP(unit);
  /* The caller may write the shard: a copy kept from forward would go stale. */
  FSDPCall(FlatParamDropKept_Private(unit));
  if (values) *values = unit->shard;
  if (numel) *numel = unit->shard_numel;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetGradShard(FlatParam unit, void **values, int64_t *numel)
{
  CHECK_UNIT_SETUP(unit);
  if (values) *values = unit->grad_shard;
  if (numel) *numel = unit->shard_numel;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetShardRange(FlatParam unit, FSDPParamId id, int64_t *begin, int64_t *end, int64_t *offset)
{
  int64_t lo, hi, first;
  const ParamInfo *p;

  CHECK_UNIT_SETUP(unit);
  CHECK_ID(unit, id);
  p = &unit->params[id];
  first = (int64_t)unit->ctx->shard_index * unit->shard_numel;
  lo = p->offset > first ? p->offset : first;
  hi = p->offset + p->numel < first + unit->shard_numel ? p->offset + p->numel : first + unit->shard_numel;
  if (lo >= hi) lo = hi = first = p->offset; /* none of it: an empty range */
  if (begin) *begin = lo - p->offset;
  if (end) *end = hi - p->offset;
  if (offset) *offset = lo - first;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ views */

static FSDPErrorCode check_unsharded(FlatParam unit, FSDPParamId id, const char *what)
{
  FSDPCheck(unit->state == FSDP_FLATPARAM_UNSHARDED, MPI_COMM_SELF, FSDP_ERR_STATE,
            "the %s of parameter '%s' of unit '%s' is not available while the unit is %s: views exist only "
            "between FlatParamUnshard and FlatParamReshard or FlatParamReduceGrad",
            what, unit->params[id].name, unit->name, FlatParamStateName(unit->state));
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetParam(FlatParam unit, FSDPParamId id, void **values)
{
  CHECK_UNIT_SETUP(unit);
  CHECK_ID(unit, id);
  FSDPCheck(values, MPI_COMM_SELF, FSDP_ERR_ARG, "values must not be NULL");
  FSDPCall(check_unsharded(unit, id, "value"));
  *values = at(unit, unit->unsharded, unit->params[id].offset);
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetGrad(FlatParam unit, FSDPParamId id, void **values)
{
  CHECK_UNIT_RUNNING(unit);
  CHECK_ID(unit, id);
  FSDPCheck(values, MPI_COMM_SELF, FSDP_ERR_ARG, "values must not be NULL");
  FSDPCall(check_unsharded(unit, id, "gradient"));
  /* Zeroed: the caller adds its contribution, as autograd accumulates. */
  if (!unit->ugrad) FSDPCall(FSDPCalloc((size_t)unit->padded, esize(unit), FSDP_MEM_UNSHARDED, &unit->ugrad));
  *values = at(unit, unit->ugrad, unit->params[id].offset);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ unshard and reshard */

static bool keeps_params_for_backward(FSDPShardingStrategy s)
{
  return s == FSDP_SHARD_GRAD_OP || s == FSDP_HYBRID_SHARD_ZERO2;
}

/* With F = 1 the shard is the whole unit: the unsharded view is the shard. */
static FSDPErrorCode release_params(FlatParam unit, bool keep)
{
  if (unit->unsharded == unit->shard) unit->unsharded = NULL;
  else if (keep) unit->kept = true;
  else FSDPCall(FSDPFree(&unit->unsharded));
  unit->state = FSDP_FLATPARAM_SHARDED;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamDropKept_Private(FlatParam unit)
{
  if (unit->kept) {
    unit->kept = false;
    FSDPCall(FSDPFree(&unit->unsharded));
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamUnshard(FlatParam unit)
{
  FSDPContext ctx;
  size_t es;
  int mpierr;

  CHECK_UNIT_RUNNING(unit);
  ctx = unit->ctx;
  FSDPCheck(unit->state != FSDP_FLATPARAM_REDUCING, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamUnshard: unit '%s' is reducing its gradient: call FSDPContextFinishBackward before unsharding "
            "it again",
            unit->name);
  FSDPCheck(unit->state == FSDP_FLATPARAM_SHARDED, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamUnshard: unit '%s' is %s, not sharded: call FlatParamReshard or FlatParamReduceGrad first",
            unit->name, FlatParamStateName(unit->state));
  if (ctx->factor == 1) {
    unit->unsharded = unit->shard;
  } else if (unit->kept) {
    unit->kept = false; /* SHARD_GRAD_OP: still there from the forward pass */
  } else {
    es = esize(unit);
    FSDPCall(FSDPMalloc((size_t)unit->padded * es, FSDP_MEM_UNSHARDED, &unit->unsharded));
    (void)FSDPLogEventBegin(ctx->ev_allgather);
    unit->state = FSDP_FLATPARAM_GATHERING;
    mpierr = MPI_Allgather(unit->shard, (int)unit->shard_numel, FSDPDataTypeMPI_Private(unit->dtype), unit->unsharded,
                           (int)unit->shard_numel, FSDPDataTypeMPI_Private(unit->dtype), ctx->shard_comm);
    unit->state = FSDP_FLATPARAM_SHARDED;
    (void)FSDPLogEventEnd(ctx->ev_allgather, (int64_t)((size_t)unit->padded * es));
    if (mpierr != MPI_SUCCESS) {
      FSDPCall(FSDPFree(&unit->unsharded));
      FSDPCallMPI(mpierr);
    }
  }
  unit->state = FSDP_FLATPARAM_UNSHARDED;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamReshard(FlatParam unit)
{
  CHECK_UNIT_RUNNING(unit);
  FSDPCheck(unit->state == FSDP_FLATPARAM_UNSHARDED, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamReshard: unit '%s' is %s, not unsharded", unit->name, FlatParamStateName(unit->state));
  FSDPCall(release_params(unit, keeps_params_for_backward(unit->ctx->strategy)));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ gradient reduction */

static void add_into(FlatParam u, void *dst, const void *src)
{
  if (u->dtype == FSDP_FLOAT64) {
    double *d = dst;
    const double *s = src;
    for (int64_t i = 0; i < u->shard_numel; i++) d[i] += s[i];
  } else {
    float *d = dst;
    const float *s = src;
    for (int64_t i = 0; i < u->shard_numel; i++) d[i] += s[i];
  }
}

/* Sum over W ranks -> average.  A division, not a multiplication by 1/W, so
   that an average of exactly representable values is exact. */
static void divide(FlatParam u, void *x, int w)
{
  if (u->dtype == FSDP_FLOAT64) {
    double *d = x;
    for (int64_t i = 0; i < u->shard_numel; i++) d[i] /= (double)w;
  } else {
    float *d = x;
    for (int64_t i = 0; i < u->shard_numel; i++) d[i] /= (float)w;
  }
}

/* The reduction's first collective: a reduce-scatter in the shard group or,
   with F = 1 and replicas to reach, an all-reduce straight across them. */
static FSDPErrorCode start_reduction(FlatParam unit)
{
  FSDPContext ctx = unit->ctx;
  MPI_Datatype type = FSDPDataTypeMPI_Private(unit->dtype);
  bool replicate = ctx->replicate_grad_sync && ctx->nreplicas > 1;
  int count = (int)unit->shard_numel, mpierr;

  if (unit->grad == GRAD_NONE) {
    unit->target = unit->grad_shard; /* nothing to keep: reduce straight into the gradient shard */
  } else {
    FSDPCall(FSDPMalloc((size_t)count * esize(unit), FSDP_MEM_COMM_STAGING, &unit->staging));
    unit->target = unit->staging;
  }
  if (ctx->factor == 1 && replicate && unit->grad != GRAD_PARTIAL) {
    unit->reduced_all = true;
    unit->replicate_now = false;
    mpierr = MPI_Iallreduce(unit->ugrad, unit->target, count, type, MPI_SUM, ctx->replicate_comm, &unit->request);
  } else {
    unit->reduced_all = ctx->nreplicas == 1;
    unit->replicate_now = replicate;
    mpierr =
      MPI_Ireduce_scatter_block(unit->ugrad, unit->target, count, type, MPI_SUM, ctx->shard_comm, &unit->request);
  }
  if (mpierr != MPI_SUCCESS) {
    unit->target = NULL;
    FSDPCall(FSDPFree(&unit->staging));
    FSDPCallMPI(mpierr);
  }
  unit->state = FSDP_FLATPARAM_REDUCING;
  ctx->reducing = unit;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamReduceGrad(FlatParam unit)
{
  FSDPContext ctx;
  CHECK_UNIT_RUNNING(unit);
  ctx = unit->ctx;
  FSDPCheck(unit->state != FSDP_FLATPARAM_REDUCING, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamReduceGrad: unit '%s' is already reducing its gradient", unit->name);
  FSDPCheck(unit->ugrad || unit->state == FSDP_FLATPARAM_UNSHARDED, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamReduceGrad: unit '%s' has no gradient to reduce (it is %s): unshard it for its backward pass "
            "first",
            unit->name, FlatParamStateName(unit->state));
  FSDPCheck(!ctx->grad_sync || ctx->replicate_grad_sync || ctx->nreplicas == 1 || unit->grad != GRAD_SYNCED,
            MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamReduceGrad: unit '%s' holds gradients already averaged across replicas: call "
            "FSDPContextZeroGrad before accumulating with replicate gradient sync off",
            unit->name);
  /* A unit unsharded for backward whose parameters got no gradient on this
     rank (an unused branch) reduces zeros, as the other ranks expect it to. */
  if (!unit->ugrad) FSDPCall(FSDPCalloc((size_t)unit->padded, esize(unit), FSDP_MEM_UNSHARDED, &unit->ugrad));
  /* Resharded after backward under every strategy. */
  if (unit->state == FSDP_FLATPARAM_UNSHARDED) FSDPCall(release_params(unit, false));
  FSDPCall(FlatParamDropKept_Private(unit));
  if (!ctx->grad_sync) return FSDP_SUCCESS; /* the unsharded gradient accumulates on */
  /* One reduce-scatter in flight, overlapping the next unit's backward: the
     unsharded gradients held are that one's and the current unit's. */
  FSDPCall(FSDPContextCompleteReduction_Private(ctx));
  FSDPCall(start_reduction(unit));
  return FSDP_SUCCESS;
}

/* Sum `shard` (shard-sized) over the replicas in place, then divide by W. */
static FSDPErrorCode allreduce_average(FlatParam unit, void *shard)
{
  FSDPContext ctx = unit->ctx;
  FSDPCall(FSDPLogEventBegin(ctx->ev_allreduce));
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, shard, (int)unit->shard_numel, FSDPDataTypeMPI_Private(unit->dtype), MPI_SUM,
                            ctx->replicate_comm));
  FSDPCall(FSDPLogEventEnd(ctx->ev_allreduce, (int64_t)((size_t)unit->shard_numel * esize(unit))));
  divide(unit, shard, ctx->size);
  return FSDP_SUCCESS;
}

static FSDPErrorCode complete_reduction(FlatParam unit)
{
  FSDPContext ctx = unit->ctx;
  int64_t bytes = (int64_t)((size_t)unit->padded * esize(unit));
  FSDPLogEvent first = unit->reduced_all && ctx->factor == 1 && ctx->nreplicas > 1 ? ctx->ev_allreduce
                                                                                  : ctx->ev_reduce_scatter;

  FSDPCall(FSDPLogEventBegin(first));
  FSDPCallMPI(MPI_Wait(&unit->request, MPI_STATUS_IGNORE));
  FSDPCall(FSDPLogEventEnd(first, bytes));
  if (unit->reduced_all) {
    divide(unit, unit->target, ctx->size);
    if (unit->target == unit->staging) add_into(unit, unit->grad_shard, unit->staging);
    unit->grad = GRAD_SYNCED;
  } else if (unit->replicate_now) {
    void *sum = unit->target;
    if (unit->grad == GRAD_PARTIAL) { /* the whole accumulated shard crosses the replicas now */
      add_into(unit, unit->grad_shard, unit->staging);
      sum = unit->grad_shard;
      unit->grad = GRAD_SYNCED; /* whatever happens next, the staging is in */
    }
    FSDPCall(allreduce_average(unit, sum));
    if (sum == unit->staging) add_into(unit, unit->grad_shard, unit->staging);
    unit->grad = GRAD_SYNCED;
  } else { /* replicate sync off: a partial sum, divided when the replicas are reached */
    if (unit->target == unit->staging) add_into(unit, unit->grad_shard, unit->staging);
    unit->grad = GRAD_PARTIAL;
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamCompleteReduction_Private(FlatParam unit)
{
  FSDPErrorCode ierr = complete_reduction(unit);
  /* Done or failed, the unit leaves REDUCING: a failed reduction is not retried. */
  unit->request = MPI_REQUEST_NULL;
  unit->target = NULL;
  unit->state = FSDP_FLATPARAM_SHARDED;
  FSDPCall(FSDPFree(&unit->staging));
  FSDPCall(FSDPFree(&unit->ugrad));
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamFlushGrad_Private(FlatParam unit)
{
  FSDPContext ctx = unit->ctx;
  if (!ctx->grad_sync) return FSDP_SUCCESS;
  if (unit->ugrad && unit->state == FSDP_FLATPARAM_SHARDED) { /* accumulated without sync, never reduced since */
    FSDPCall(start_reduction(unit));
    FSDPCall(FSDPContextCompleteReduction_Private(ctx));
  }
  if (unit->grad == GRAD_PARTIAL && ctx->replicate_grad_sync) { /* reduced in the shard group only */
    FSDPCall(allreduce_average(unit, unit->grad_shard));
    unit->grad = GRAD_SYNCED;
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ initialization */

FSDPErrorCode FlatParamInitUnit_Private(FlatParam unit, FSDPUnitInitFn init, void *user)
{
  FSDPErrorCode ierr;
  size_t es = esize(unit);

  if (unit->ctx->factor == 1) unit->unsharded = unit->shard;
  else FSDPCall(FSDPCalloc((size_t)unit->padded, es, FSDP_MEM_UNSHARDED, &unit->unsharded));
  unit->state = FSDP_FLATPARAM_UNSHARDED;
  ierr = init(unit, user); /* runtime calls are refused inside: the unit stays unsharded */
  if (!ierr && unit->unsharded != unit->shard)
    memcpy(unit->shard, at(unit, unit->unsharded, (int64_t)unit->ctx->shard_index * unit->shard_numel),
           (size_t)unit->shard_numel * es);
  FSDPCall(release_params(unit, false));
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamInitShard_Private(FlatParam unit, FSDPShardInitFn init, void *user)
{
  int64_t begin, end, offset;
  for (int i = 0; i < unit->nparams; i++) {
    FSDPCall(FlatParamGetShardRange(unit, i, &begin, &end, &offset));
    if (begin < end) FSDPCall(init(unit, i, begin, end, at(unit, unit->shard, offset), user));
  }
  return FSDP_SUCCESS;
}
