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
  if (running) FSDPCall(DeviceEnter_Private(ctx->dev));
  return FSDP_SUCCESS;
}
#define CHECK_UNIT_SETUP(u)                                                                                            \
  do {                                                                                                                 \
    CHECK_UNIT(u);                                                                                                     \
    FSDPCall(check_ready(u, false, __func__));                                                                         \
  } while (0)
#define CHECK_UNIT_RUNNING(u)                                                                                          \
  do {                                                                                                                 \
    CHECK_UNIT(u);                                                                                                     \
    FSDPCall(check_ready(u, true, __func__));                                                                          \
  } while (0)
#define CHECK_ID(u, id)                                                                                                \
  FSDPCheck((id) >= 0 && (id) < (u)->nparams, MPI_COMM_SELF, FSDP_ERR_ARG,                                             \
            "%s: parameter id %d is not one of unit '%s''s %d parameters", __func__, (int)(id), (u)->name,             \
            (u)->nparams)

static size_t esize(const FlatParam u) { return FSDPDataTypeSize(u->dtype); }
static void *at(const FlatParam u, void *base, int64_t element) { return (char *)base + (size_t)element * esize(u); }
/* The unsharded parameters are in pdtype, except while an initializer fills
   them: then they are the master copy's type. */
static FSDPDataType view_dtype(const FlatParam u) { return u->ctx->initializing ? u->dtype : u->pdtype; }
static void *at_param(const FlatParam u, void *base, int64_t element)
{
  return (char *)base + (size_t)element * FSDPDataTypeSize(view_dtype(u));
}

static size_t own_bytes(const FlatParam u) { return (size_t)u->padded * FSDPDataTypeSize(u->pdtype); }

static bool keeps_params_for_backward(FSDPShardingStrategy s)
{
  return s == FSDP_SHARD_GRAD_OP || s == FSDP_HYBRID_SHARD_ZERO2;
}

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
  FSDPCheck(name && *name, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FlatParamAddParam: unit '%s': the parameter name must not be empty", unit->name);
  FSDPCheck(!ctx->laid_out, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamAddParam: cannot add parameter '%s' to unit '%s' after FSDPContextSetUp: the layout is fixed",
            name, unit->name);
  /* Checkpoints name datasets /params/<name>: a slash would be a path. */
  FSDPCheck(!strchr(name, '/') && strcmp(name, "."), MPI_COMM_SELF, FSDP_ERR_ARG,
            "FlatParamAddParam: parameter name '%s' is a path in HDF5 (use dots, as in blocks.0.weight)", name);
  FSDPCheck(ndim >= 0, MPI_COMM_SELF, FSDP_ERR_ARG, "FlatParamAddParam: parameter '%s' has %d dimensions", name, ndim);
  FSDPCheck(ndim == 0 || shape, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FlatParamAddParam: parameter '%s' has %d dimensions but no shape", name, ndim);
  for (int d = 0; d < ndim; d++) {
    FSDPCheck(shape[d] >= 0, MPI_COMM_SELF, FSDP_ERR_ARG, "FlatParamAddParam: parameter '%s': extent %d is %lld", name,
              d, (long long)shape[d]);
    FSDPCheck(shape[d] == 0 || numel <= INT64_MAX / shape[d], MPI_COMM_SELF, FSDP_ERR_ARG,
              "FlatParamAddParam: parameter '%s' has more than 2^63 elements", name);
    numel *= shape[d];
  }
  FSDPCheck(numel <= INT64_MAX - unit->numel, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FlatParamAddParam: unit '%s' would have more than 2^63 elements", unit->name);
  FSDPCheck(!FSDPContextLookupParam_Private(ctx, name, &other, &dup), MPI_COMM_SELF, FSDP_ERR_ARG,
            "FlatParamAddParam: a parameter called '%s' already exists (in unit '%s'): names are unique in a context",
            name, other->name);
  FSDPCall(
      FSDPGrowArray_Private(&unit->params, sizeof *unit->params, unit->nparams + 1, &unit->capacity, FSDP_MEM_OTHER));
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
  /* FSDP_FLOAT32 in the policy is the unit's own precision (checked: only fp32 units mix). */
  unit->pdtype = unit->ctx->param_dtype == FSDP_FLOAT32 ? unit->dtype : unit->ctx->param_dtype;
  unit->rdtype = unit->ctx->reduce_dtype == FSDP_FLOAT32 ? unit->dtype : unit->ctx->reduce_dtype;
  FSDPCall(DeviceCalloc_Private(unit->ctx->dev, (size_t)unit->shard_numel * es, FSDP_MEM_PARAMS, &unit->shard));
  FSDPCall(DeviceCalloc_Private(unit->ctx->dev, (size_t)unit->shard_numel * es, FSDP_MEM_GRADS, &unit->grad_shard));
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamTakeOwn_Private(FlatParam unit)
{
  /* Parameters kept from forward to backward: every unit has a buffer of its
     own, unless it is a view, which stays from forward to backward anyway. */
  if (unit->ctx->factor > 1 && keeps_params_for_backward(unit->ctx->strategy) && !unit->view)
    FSDPCall(DeviceAlloc_Private(unit->ctx->dev, own_bytes(unit), FSDP_MEM_UNSHARDED, &unit->own));
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
  /* pool buffers are the context's */
  FSDPCall(DeviceFree_Private(u->ctx->dev, &u->own, own_bytes(u), FSDP_MEM_UNSHARDED));
  if (u->view) FSDPMemoryCount_Private(FSDP_MEM_UNSHARDED, (size_t)u->shard_numel * esize(u), true);
  if (u->shard_shared) FSDPMemoryCount_Private(FSDP_MEM_PARAMS, (size_t)u->shard_numel * esize(u), true);
  else FSDPCall(DeviceFree_Private(u->ctx->dev, &u->shard, (size_t)u->shard_numel * esize(u), FSDP_MEM_PARAMS));
  FSDPCall(DeviceFree_Private(u->ctx->dev, &u->grad_shard, (size_t)u->shard_numel * esize(u), FSDP_MEM_GRADS));
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

FSDPErrorCode FlatParamGetViewDataType(FlatParam unit, FSDPDataType *dtype)
{
  CHECK_UNIT_SETUP(unit);
  if (dtype) *dtype = view_dtype(unit);
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetNumParams(FlatParam unit, int *nparams)
{
  CHECK_UNIT(unit);
  if (nparams) *nparams = unit->nparams;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamGetParamInfo(FlatParam unit, FSDPParamId id, const char **name, int *ndim, const int64_t **shape,
                                    int64_t *numel)
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
  /* Not collective, so it changes nothing the collectives depend on: a copy
     kept from forward stays until the next collective point (BeginForward,
     FinishBackward), and a shard written in between is not seen by the
     backward of that forward. */
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
  *values = at_param(unit, unit->unsharded, unit->params[id].offset);
  return FSDP_SUCCESS;
}

static FSDPErrorCode take_grad(FlatParam u);

FSDPErrorCode FlatParamGetGrad(FlatParam unit, FSDPParamId id, void **values)
{
  CHECK_UNIT_RUNNING(unit);
  CHECK_ID(unit, id);
  FSDPCheck(values, MPI_COMM_SELF, FSDP_ERR_ARG, "values must not be NULL");
  FSDPCall(check_unsharded(unit, id, "gradient"));
  /* Zeroed: the caller adds its contribution, as autograd accumulates. */
  FSDPCall(take_grad(unit));
  *values = at(unit, unit->ugrad, unit->params[id].offset);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ buffers of the memory plan */

FSDPErrorCode BufferPoolCreate_Private(BufferPool *p, Device dev, int n, int cap, size_t bytes,
                                       FSDPMemCategory category)
{
  memset(p, 0, sizeof *p);
  p->dev = dev;
  p->cap = cap > n ? cap : n;
  p->bytes = bytes;
  p->category = category;
  if (p->cap == 0) return FSDP_SUCCESS;
  FSDPCall(FSDPCalloc((size_t)p->cap, sizeof *p->bufs, FSDP_MEM_OTHER, &p->bufs));
  FSDPCall(FSDPCalloc((size_t)p->cap, sizeof *p->used, FSDP_MEM_OTHER, &p->used));
  FSDPCall(FSDPCalloc((size_t)p->cap, sizeof *p->zero, FSDP_MEM_OTHER, &p->zero));
  for (; p->n < n; p->n++) FSDPCall(DeviceAlloc_Private(dev, bytes, category, &p->bufs[p->n]));
  return FSDP_SUCCESS;
}

FSDPErrorCode BufferPoolDestroy_Private(BufferPool *p)
{
  for (int i = p->shared; i < p->n; i++) FSDPCall(DeviceFree_Private(p->dev, &p->bufs[i], p->bytes, p->category));
  FSDPMemoryCount_Private(p->category, (size_t)p->shared * p->bytes, true); /* the window's, counted at start_shm */
  FSDPCall(FSDPFree(&p->bufs));
  FSDPCall(FSDPFree(&p->used));
  FSDPCall(FSDPFree(&p->zero));
  return FSDP_SUCCESS;
}

/* A free buffer; a new one when every planned one is held (counted). */
/* *zero (may be NULL): whether the buffer holds zeros (pool_put's `zero`). */
static FSDPErrorCode pool_get(BufferPool *p, void **buf, bool *zero)
{
  if (zero) *zero = false;
  for (int i = 0; i < p->n; i++)
    if (!p->used[i]) {
      p->used[i] = true;
      p->in_use++;
      *buf = p->bufs[i];
      if (zero) *zero = p->zero[i];
      return FSDP_SUCCESS;
    }
  /* Each unit holds at most one buffer of a pool, so cap (the number of units) is never passed. */
  FSDPCheck(p->n < p->cap, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "buffer pool of %d buffers is exhausted", p->cap);
  FSDPCall(DeviceAlloc_Private(p->dev, p->bytes, p->category, &p->bufs[p->n]));
  p->used[p->n] = true;
  p->in_use++;
  p->growths++;
  *buf = p->bufs[p->n++];
  return FSDP_SUCCESS;
}

/* zero: the buffer comes back holding zeros. */
static void pool_put(BufferPool *p, void *buf, bool zero)
{
  for (int i = 0; i < p->n; i++)
    if (p->bufs[i] == buf && p->used[i]) {
      p->used[i] = false;
      p->zero[i] = zero;
      p->in_use--;
      return;
    }
}

/* ------------------------------------------------------------------ unshard and reshard */

/* Units whose parameters take an unsharded buffer now: what the limiter counts. */
static int units_in_flight(FSDPContext ctx)
{
  int n = 0;
  if (ctx->direct) return 0;
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    n += u->state == FSDP_FLATPARAM_GATHERING || u->state == FSDP_FLATPARAM_UNSHARDED || (u->cached && !u->view);
  }
  return n;
}

static void note_in_flight(FSDPContext ctx)
{
  int n = units_in_flight(ctx);
  if (n > ctx->stats.max_unsharded) ctx->stats.max_unsharded = n;
}

/* Gives a parameter buffer back (F > 1); a view is released to the peers,
   whose next gather of it may then write their shards into it. */
static void put_params(FlatParam u)
{
  if (u->view && u->unsharded) CommShmRelease(u->ctx->shm, u->index, u->gathers);
  else if (!u->own && !u->view) pool_put(&u->ctx->params_pool, u->unsharded, false);
  u->unsharded = NULL;
}

/* A unit cached after forward gives its buffer to one that needs it now. */
static bool evict_cached(FSDPContext ctx, FlatParam except)
{
  for (int i = 0; i < ctx->nunits; i++) {
    FlatParam u = ctx->units[i];
    if (u->cached && u != except && !u->own && !u->view) {
      u->cached = false;
      put_params(u);
      return true;
    }
  }
  return false;
}

/* Before each collective with -fsdp_debug_collectives: every rank of comm
   says what it is about to run; a difference is an error on all of them. */
static FSDPErrorCode check_collective(FlatParam u, CommKind kind, bool shard, int count)
{
  FSDPContext ctx = u->ctx;
  int64_t mine[5] = {kind, u->index, count, shard, ctx->rank}, *all = ctx->check_records;
  MPI_Request req;
  int bad = -1;
  char what[160];

  /* Every rank of the context issues the same collectives in the same order,
     each on its own shard or replicate group: one check over all of them
     catches a rank that is about to use the other communicator too. */
  FSDPCallMPI(MPI_Iallgather(mine, 5, MPI_INT64_T, all, 5, MPI_INT64_T, ctx->check_comm, &req));
  snprintf(what, sizeof what, "the -fsdp_debug_collectives check before the %s of unit '%s'", CommKindName(kind),
           u->name);
  FSDPCall(CommStreamWaitRequest(ctx->stream, &req, what));
  for (int r = 1; r < ctx->size && bad < 0; r++)
    for (int k = 0; k < 4; k++)
      if (all[5 * r + k] != all[k]) bad = r;
  if (bad < 0) return FSDP_SUCCESS;
  {
    const int64_t *a = all, *b = all + 5 * bad;
    FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_STATE,
              "collective mismatch at step %lld (-fsdp_debug_collectives): rank %lld is about to run the %s of unit "
              "'%s' (%lld elements per rank, %s communicator) but rank %lld the %s of unit '%s' (%lld elements per "
              "rank, %s communicator): every rank must unshard, reshard and reduce the same units in the same order",
              (long long)ctx->step, (long long)a[4], CommKindName((CommKind)a[0]), ctx->units[a[1]]->name,
              (long long)a[2], a[3] ? "shard" : "replicate", (long long)b[4], CommKindName((CommKind)b[0]),
              ctx->units[b[1]]->name, (long long)b[2], b[3] ? "shard" : "replicate");
  }
  return FSDP_SUCCESS;
}

/* Queues a collective of unit u on the context's stream. */
static FSDPErrorCode submit(FlatParam u, CommKind kind, const void *send, void *recv, int count, bool after,
                            uint64_t *ticket)
{
  FSDPContext ctx = u->ctx;
  bool shard = kind != COMM_ALLREDUCE;
  FSDPLogEvent events[COMM_NUM_KINDS] = {ctx->ev_allgather, ctx->ev_reduce_scatter, ctx->ev_allreduce};
  /* Parameters travel in the policy's param_dtype, gradients in its reduce_dtype. */
  FSDPDataType dtype = kind == COMM_ALLGATHER ? u->pdtype : u->rdtype;
  CommOp op = {.kind = kind,
               .send = send,
               .recv = recv,
               .count = count,
               .type = FSDPDataTypeMPI_Private(dtype),
               .op = FSDPDataTypeSize(dtype) == 2 ? ctx->half_sum : MPI_SUM,
               .comm = shard ? ctx->stream_shard_comm : ctx->stream_replicate_comm,
               .shm =
                   kind != COMM_ALLREDUCE && shard && dtype == FSDP_FLOAT32 && send != MPI_IN_PLACE ? ctx->shm : NULL,
               .zeroed = kind == COMM_REDUCE_SCATTER ? &u->ugrad_zeroed : NULL,
               .epoch = kind == COMM_ALLGATHER && u->view ? u->gathers : 0,
               .view = u->index,
               .unit = u->name,
               .bytes = (int64_t)((size_t)(kind == COMM_ALLREDUCE ? count : u->padded) * FSDPDataTypeSize(dtype)),
               .event = events[kind],
               .unit_event = ctx->ev_unit ? ctx->ev_unit[COMM_NUM_KINDS * u->index + kind] : -1,
               .after_previous = after,
               .dtype = dtype,
               .nccl = CommNCCLGet(ctx->nccl, shard),
               .cuda_aware = ctx->cuda_aware};
  if (ctx->debug_collectives) FSDPCall(check_collective(u, kind, shard, count));
  FSDPCall(CommStreamSubmit(ctx->stream, &op, ticket));
  return FSDP_SUCCESS;
}

/* Starts the all-gather of u into its buffer (taken by the caller).  In
   mixed precision this rank's shard is first rounded into its own slot of
   the buffer, which is then gathered in place: the one low-precision copy of
   an unshard, and no staging.  With F = 1 that copy is all there is to do. */
static FSDPErrorCode start_gather(FlatParam u)
{
  FSDPErrorCode ierr = FSDP_SUCCESS;
  bool convert = u->pdtype != u->dtype;
  if (convert)
    ierr = DeviceConvert_Private(u->ctx->dev, u->pdtype,
                                 at_param(u, u->unsharded, (int64_t)u->ctx->shard_index * u->shard_numel), u->dtype,
                                 u->shard, u->shard_numel, 1);
  if (!ierr && u->ctx->factor == 1) {
    u->state = FSDP_FLATPARAM_UNSHARDED;
    return FSDP_SUCCESS;
  }
  if (u->view) u->gathers++; /* every rank counts alike: the view's epoch */
  if (!ierr)
    ierr = submit(u, COMM_ALLGATHER, convert ? MPI_IN_PLACE : u->shard, u->unsharded, (int)u->shard_numel, false,
                  &u->gather);
  if (ierr) {
    put_params(u);
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  u->state = FSDP_FLATPARAM_GATHERING;
  return FSDP_SUCCESS;
}

static FSDPErrorCode finish_gather(FlatParam u)
{
  FSDPErrorCode ierr = CommStreamWait(u->ctx->stream, u->gather);
  u->gather = 0;
  if (ierr) {
    put_params(u);
    u->state = FSDP_FLATPARAM_SHARDED;
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  u->state = FSDP_FLATPARAM_UNSHARDED;
  return FSDP_SUCCESS;
}

/* A buffer for u's parameters: its own, a free one, else a cached unit's,
   else (for a FlatParamUnshard that needs it now, not for a prefetch) a
   prefetched unit's, whose prefetch was wasted, else a new one beyond the plan. */
static FSDPErrorCode take_params(FlatParam u, bool drop_prefetches)
{
  FSDPContext ctx = u->ctx;
  BufferPool *p = &ctx->params_pool;
  if (u->own || u->view) {
    u->unsharded = u->own ? u->own : u->view;
    return FSDP_SUCCESS;
  }
  if (p->in_use == p->n) (void)evict_cached(ctx, u);
  for (int i = 0; drop_prefetches && i < ctx->nunits && p->in_use == p->n; i++) {
    FlatParam v = ctx->units[i];
    if (v != u && v->state == FSDP_FLATPARAM_GATHERING && !v->own && !v->view) FSDPCall(FlatParamDropKept_Private(v));
  }
  FSDPCall(pool_get(p, &u->unsharded, NULL));
  return FSDP_SUCCESS;
}

/* Issues v's all-gather ahead of its FlatParamUnshard, if the limiter lets
   it; otherwise it waits for the next release of a buffer. */
static FSDPErrorCode prefetch(FSDPContext ctx, FlatParam v)
{
  /* With F = 1 there is nothing to overlap: no all-gather. */
  if (!v || ctx->factor == 1 || v->state != FSDP_FLATPARAM_SHARDED || v->cached || v->kept) return FSDP_SUCCESS;
  while (ctx->limit > 0 && units_in_flight(ctx) >= ctx->limit)
    if (!evict_cached(ctx, v)) {
      if (ctx->deferred != v) ctx->stats.deferred++;
      ctx->deferred = v;
      return FSDP_SUCCESS;
    }
  if (ctx->deferred == v) ctx->deferred = NULL;
  FSDPCall(take_params(v, false));
  FSDPCall(start_gather(v));
  ctx->stats.prefetches++;
  note_in_flight(ctx);
  return FSDP_SUCCESS;
}

/* The unit after u in this step's order: the previous forward's in forward,
   this forward's reversed in backward. */
static FlatParam next_unit(FlatParam u)
{
  FSDPContext ctx = u->ctx;
  if (ctx->phase == PHASE_FORWARD && u->prev_pos >= 0 && u->prev_pos + 1 < ctx->nprev)
    return ctx->units[ctx->prev_order[u->prev_pos + 1]];
  if (ctx->phase == PHASE_BACKWARD && u->fwd_pos > 0) return ctx->units[ctx->order[u->fwd_pos - 1]];
  return NULL;
}

/* With F = 1 at full precision the unsharded view is the shard itself.
   `resharded`: released by FlatParamReshard, not after backward.  Then
   SHARD_GRAD_OP keeps its own buffer, and in a forward pass a unit's buffer
   stays with it (cached) until another unit needs it: the last units of
   forward are then ready for backward (AG0).  A view of the shards holds no
   buffer: within a pass it stays with its unit until the step ends, and
   backward needs no all-gather. */
static FSDPErrorCode release_params(FlatParam unit, bool resharded)
{
  FSDPContext ctx = unit->ctx;
  if (ctx->direct) unit->unsharded = NULL;
  else if (resharded && unit->view && (ctx->phase != PHASE_NONE || keeps_params_for_backward(ctx->strategy)))
    unit->cached = true; /* no buffer held; until the step ends (FinishBackward, BeginForward) no all-gather */
  else if (resharded && unit->own) unit->kept = true;
  else if (resharded && ctx->phase == PHASE_FORWARD && (ctx->limit == 0 || units_in_flight(ctx) <= ctx->limit))
    unit->cached = true; /* counted already: caching it keeps the count */
  else put_params(unit);
  unit->state = FSDP_FLATPARAM_SHARDED;
  if (ctx->deferred) FSDPCall(prefetch(ctx, ctx->deferred));
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamDropKept_Private(FlatParam unit)
{
  unit->kept = false;
  if (unit->cached) {
    unit->cached = false;
    put_params(unit);
  }
  if (unit->state == FSDP_FLATPARAM_GATHERING) { /* a prefetch nobody used */
    FSDPCall(finish_gather(unit));
    put_params(unit);
    unit->state = FSDP_FLATPARAM_SHARDED;
  }
  if (unit->ctx->deferred == unit) unit->ctx->deferred = NULL;
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamUnshard(FlatParam unit)
{
  FSDPContext ctx;
  bool wait = false, first;

  CHECK_UNIT_RUNNING(unit);
  ctx = unit->ctx;
  FSDPCollective(ctx->comm);
  FSDPCheck(unit->state != FSDP_FLATPARAM_REDUCING, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamUnshard: unit '%s' is reducing its gradient: call FSDPContextFinishBackward before unsharding "
            "it again",
            unit->name);
  FSDPCheck(unit->state == FSDP_FLATPARAM_SHARDED || unit->state == FSDP_FLATPARAM_GATHERING, MPI_COMM_SELF,
            FSDP_ERR_STATE,
            "FlatParamUnshard: unit '%s' is %s, not sharded: call FlatParamReshard or FlatParamReduceGrad first",
            unit->name, FlatParamStateName(unit->state));
  if (ctx->deferred == unit) ctx->deferred = NULL;
  ctx->step_active = true;
  if (unit->state == FSDP_FLATPARAM_GATHERING) { /* prefetched */
    ctx->stats.prefetch_hits++;
    wait = true;
  } else if (ctx->direct) {
    unit->unsharded = unit->shard;
    unit->state = FSDP_FLATPARAM_UNSHARDED;
  } else if (unit->kept || unit->cached) { /* still there from the forward pass */
    unit->kept = false;
    if (unit->cached) ctx->stats.cache_hits++;
    unit->cached = false;
    unit->state = FSDP_FLATPARAM_UNSHARDED;
  } else {
    FSDPCall(take_params(unit, true));
    FSDPCall(start_gather(unit));
    wait = unit->state == FSDP_FLATPARAM_GATHERING;
  }
  note_in_flight(ctx);
  /* A unit used again later in a forward pass (a tied head's embedding) has
     nothing after it to prefetch the second time. */
  first = unit->fwd_pos < 0;
  if (ctx->phase == PHASE_FORWARD && first) {
    unit->fwd_pos = ctx->norder;
    ctx->order[ctx->norder++] = unit->index;
  }
  /* The next unit's all-gather goes out before this unit computes. */
  if ((ctx->phase == PHASE_FORWARD && ctx->forward_prefetch && first) ||
      (ctx->phase == PHASE_BACKWARD && ctx->backward_prefetch == FSDP_BACKWARD_PREFETCH_PRE))
    FSDPCall(prefetch(ctx, next_unit(unit)));
  if (wait) FSDPCall(finish_gather(unit));
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamReshard(FlatParam unit)
{
  CHECK_UNIT_RUNNING(unit);
  FSDPCollective(unit->ctx->comm);
  FSDPCheck(unit->state == FSDP_FLATPARAM_UNSHARDED, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FlatParamReshard: unit '%s' is %s, not unsharded", unit->name, FlatParamStateName(unit->state));
  FSDPCall(release_params(unit, true));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ gradient reduction */

/* Whether u's gradients cross the network in 16 bits. */
static bool reduces_low(const FlatParam u) { return u->rdtype != u->dtype; }

/* fp32 values -> rdtype, each divided by the pre-division factor (a power
   of two: exact).  dst may be src: the gradient is rounded in place. */
static FSDPErrorCode narrow(FlatParam u, void *dst, const void *src, int64_t n)
{
  return DeviceConvert_Private(u->ctx->dev, u->rdtype, dst, FSDP_FLOAT32, src, n, 1.0 / u->ctx->predivide);
}

/* The reduction's result (in unit->target) into the gradient shard: the sum
   divided by `divisor` (W; or 1, a partial sum, divided when the replicas
   are reached), assigned when the shard held nothing, else added.  16-bit
   sums are of pre-divided values, and always in staging. */
static FSDPErrorCode land(FlatParam u, double divisor)
{
  FSDPContext ctx = u->ctx;
  if (reduces_low(u))
    return DeviceAccumulate_Private(ctx->dev, FSDP_FLOAT32, u->grad_shard, u->rdtype, ctx->staging, u->shard_numel,
                                    divisor / ctx->predivide, u->grad == GRAD_NONE);
  if (divisor == 1 && u->target == u->grad_shard) return FSDP_SUCCESS;
  return DeviceAccumulate_Private(ctx->dev, u->dtype, u->grad_shard, u->dtype, u->target, u->shard_numel, divisor,
                                  u->target == u->grad_shard);
}

/* The unsharded gradient, zeroed, from the plan's gradient buffers. */
static FSDPErrorCode take_grad(FlatParam u)
{
  bool zero;
  if (u->ugrad) return FSDP_SUCCESS;
  FSDPCall(pool_get(&u->ctx->grads_pool, &u->ugrad, &zero));
  u->ugrad_zeroed = false;
  /* A reduce-scatter in shared memory zeroes what it read (comm/shm.c): the
     unit's padded gradient.  The buffer then holds zeros throughout only if
     it did beyond that when taken: under shared memory a buffer not known to
     be zero (its first use; an initializer's scratch) is zeroed whole. */
  if (!zero)
    FSDPCall(DeviceZero_Private(u->ctx->dev, u->ugrad,
                                u->ctx->shm ? u->ctx->grads_pool.bytes : (size_t)u->padded * esize(u)));
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamPutGrad_Private(FlatParam u)
{
  if (u->ugrad) pool_put(&u->ctx->grads_pool, u->ugrad, u->ugrad_zeroed);
  u->ugrad = NULL;
  u->ugrad_zeroed = false;
  return FSDP_SUCCESS;
}

/* The reduction's collectives: a reduce-scatter in the shard group, followed
   on the stream by the all-reduce across replicas; or, with F = 1, one
   all-reduce straight across them. */
static FSDPErrorCode submit_reduction(FlatParam unit);

static FSDPErrorCode start_reduction(FlatParam unit)
{
  FSDPErrorCode ierr;
  bool low = reduces_low(unit);
  if (low) FSDPCall(narrow(unit, unit->ugrad, unit->ugrad, unit->padded));
  ierr = submit_reduction(unit);
  /* Rounded in place, the gradient cannot be reduced again: it is lost, as the error says. */
  if (ierr && low) (void)FlatParamPutGrad_Private(unit);
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

static FSDPErrorCode submit_reduction(FlatParam unit)
{
  FSDPContext ctx = unit->ctx;
  bool replicate = ctx->replicate_grad_sync && ctx->nreplicas > 1;
  int count = (int)unit->shard_numel;

  /* Nothing to keep: reduce straight into the gradient shard; else into the
     staging buffer, added after.  16-bit sums always land in staging. */
  unit->target = unit->grad == GRAD_NONE && !reduces_low(unit) ? unit->grad_shard : ctx->staging;
  if (ctx->factor == 1 && replicate && unit->grad != GRAD_PARTIAL) {
    unit->reduced_all = true;
    unit->replicate_now = false;
    FSDPCall(submit(unit, COMM_ALLREDUCE, unit->ugrad, unit->target, count, false, &unit->reduce));
  } else {
    /* A shard holding a partial sum crosses the replicas whole, after the add: not on the stream. */
    bool chain = replicate && unit->grad != GRAD_PARTIAL;
    unit->reduced_all = ctx->nreplicas == 1 || chain;
    unit->replicate_now = replicate && !chain;
    FSDPCall(submit(unit, COMM_REDUCE_SCATTER, unit->ugrad, unit->target, count, false, &unit->reduce));
    if (chain) {
      uint64_t first = unit->reduce;
      FSDPErrorCode ierr = submit(unit, COMM_ALLREDUCE, MPI_IN_PLACE, unit->target, count, true, &unit->reduce);
      if (ierr) {
        (void)CommStreamWait(ctx->stream, first);
        unit->reduce = 0;
        return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
      }
      unit->reduce_first = first;
    }
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
  FSDPCollective(ctx->comm);
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
  FSDPCall(take_grad(unit));
  ctx->step_active = true;
  /* Resharded after backward under every strategy. */
  unit->kept = false;
  if (unit->state == FSDP_FLATPARAM_UNSHARDED) FSDPCall(release_params(unit, false));
  FSDPCall(FlatParamDropKept_Private(unit));
  if (!ctx->grad_sync) return FSDP_SUCCESS; /* the unsharded gradient accumulates on */
  /* One reduction in flight, overlapping the next unit's backward: the
     unsharded gradients held are that one's and the current unit's. */
  FSDPCall(FSDPContextCompleteReduction_Private(ctx));
  FSDPCall(start_reduction(unit));
  if (ctx->phase == PHASE_BACKWARD && ctx->backward_prefetch == FSDP_BACKWARD_PREFETCH_POST)
    FSDPCall(prefetch(ctx, next_unit(unit)));
  return FSDP_SUCCESS;
}

/* Sum the gradient shard, a partial sum of the shard group, over the
   replicas in place (through staging in reduce_dtype), then average. */
static FSDPErrorCode allreduce_average(FlatParam unit)
{
  FSDPContext ctx = unit->ctx;
  bool low = reduces_low(unit);
  void *buf = low ? ctx->staging : unit->grad_shard;
  uint64_t ticket;
  if (low) FSDPCall(narrow(unit, buf, unit->grad_shard, unit->shard_numel));
  FSDPCall(submit(unit, COMM_ALLREDUCE, MPI_IN_PLACE, buf, (int)unit->shard_numel, false, &ticket));
  FSDPCall(CommStreamWait(ctx->stream, ticket));
  if (low)
    FSDPCall(DeviceAccumulate_Private(ctx->dev, FSDP_FLOAT32, unit->grad_shard, unit->rdtype, buf, unit->shard_numel,
                                      ctx->size / ctx->predivide, true));
  else
    FSDPCall(
        DeviceAccumulate_Private(ctx->dev, unit->dtype, buf, unit->dtype, buf, unit->shard_numel, ctx->size, true));
  return FSDP_SUCCESS;
}

static FSDPErrorCode complete_reduction(FlatParam unit)
{
  FSDPContext ctx = unit->ctx;
  FSDPErrorCode ierr = FSDP_SUCCESS;

  /* Every ticket is waited for, even after a failure, so that none leaks. */
  if (unit->reduce_first) ierr = CommStreamWait(ctx->stream, unit->reduce_first);
  if (unit->reduce) {
    FSDPErrorCode e = CommStreamWait(ctx->stream, unit->reduce);
    if (!ierr) ierr = e;
  }
  unit->reduce = unit->reduce_first = 0;
  FSDPCall(ierr);
  if (unit->reduced_all) {
    FSDPCall(land(unit, ctx->size));
    unit->grad = GRAD_SYNCED;
  } else if (unit->replicate_now) { /* a partial sum in the shard: the whole of it crosses the replicas now */
    FSDPCall(land(unit, 1));
    unit->grad = GRAD_SYNCED; /* whatever happens next, the staging is in */
    FSDPCall(allreduce_average(unit));
  } else { /* replicate sync off: a partial sum, divided when the replicas are reached */
    FSDPCall(land(unit, 1));
    unit->grad = GRAD_PARTIAL;
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamCompleteReduction_Private(FlatParam unit)
{
  FSDPErrorCode ierr = complete_reduction(unit);
  /* Done or failed, the unit leaves REDUCING: a failed reduction is not retried. */
  unit->target = NULL;
  unit->state = FSDP_FLATPARAM_SHARDED;
  FSDPCall(FlatParamPutGrad_Private(unit));
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
    FSDPCall(allreduce_average(unit));
    unit->grad = GRAD_SYNCED;
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ initialization */

/* On a GPU an initializer fills host memory (as FSDPModel's and user code
   expect): the unit, or one shard, in a buffer of its own, then copied up.
   This is SetUp, not a step: it may allocate. */
static FSDPErrorCode init_unit_device(FlatParam unit, FSDPUnitInitFn init, void *user)
{
  FSDPContext ctx = unit->ctx;
  size_t es = esize(unit);
  void *host = NULL;
  FSDPErrorCode ierr;
  FSDPCall(FSDPCalloc((size_t)unit->padded, es, FSDP_MEM_OTHER, &host));
  unit->unsharded = host;
  unit->state = FSDP_FLATPARAM_UNSHARDED;
  ierr = init(unit, user);
  if (!ierr) ierr = DeviceEnter_Private(ctx->dev); /* the initializer may have switched devices */
  if (!ierr)
    ierr = DeviceFromHost_Private(ctx->dev, unit->shard, at(unit, host, (int64_t)ctx->shard_index * unit->shard_numel),
                                  (size_t)unit->shard_numel * es);
  unit->unsharded = NULL;
  unit->state = FSDP_FLATPARAM_SHARDED;
  FSDPCall(FSDPFree(&host));
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamInitUnit_Private(FlatParam unit, FSDPUnitInitFn init, void *user)
{
  FSDPErrorCode ierr;
  size_t es = esize(unit);

  if (unit->ctx->dev) return init_unit_device(unit, init, user);
  /* In one of the plan's buffers: initialization needs no memory of its own.
     The initializer fills the master copy's type: in mixed precision the
     parameter buffers are too small for it, a gradient buffer is not. */
  bool low = unit->pdtype != unit->dtype, scratch = low || unit->view;
  if (unit->ctx->direct) unit->unsharded = unit->shard;
  else if (scratch) FSDPCall(pool_get(&unit->ctx->grads_pool, &unit->unsharded, NULL));
  else FSDPCall(take_params(unit, true));
  if (unit->unsharded != unit->shard) memset(unit->unsharded, 0, (size_t)unit->padded * es);
  unit->state = FSDP_FLATPARAM_UNSHARDED;
  ierr = init(unit, user); /* runtime calls are refused inside: the unit stays unsharded */
  if (!ierr && unit->unsharded != unit->shard)
    memcpy(unit->shard, at(unit, unit->unsharded, (int64_t)unit->ctx->shard_index * unit->shard_numel),
           (size_t)unit->shard_numel * es);
  if (scratch) pool_put(&unit->ctx->grads_pool, unit->unsharded, false);
  else if (!unit->ctx->direct) put_params(unit);
  unit->unsharded = NULL;
  unit->state = FSDP_FLATPARAM_SHARDED;
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

FSDPErrorCode FlatParamInitShard_Private(FlatParam unit, FSDPShardInitFn init, void *user)
{
  int64_t begin, end, offset;
  FSDPErrorCode ierr = FSDP_SUCCESS;
  size_t bytes = (size_t)unit->shard_numel * esize(unit);
  void *shard = unit->shard;
  /* On a GPU, through a host copy of the shard (see init_unit_device). */
  if (unit->ctx->dev) FSDPCall(FSDPCalloc(1, bytes, FSDP_MEM_OTHER, &shard));
  for (int i = 0; i < unit->nparams && !ierr; i++) {
    ierr = FlatParamGetShardRange(unit, i, &begin, &end, &offset);
    if (!ierr && begin < end) ierr = init(unit, i, begin, end, at(unit, shard, offset), user);
  }
  if (unit->ctx->dev) {
    if (!ierr) ierr = DeviceEnter_Private(unit->ctx->dev); /* the initializer may have switched devices */
    if (!ierr) ierr = DeviceFromHost_Private(unit->ctx->dev, unit->shard, shard, bytes);
    FSDPCall(FSDPFree(&shard));
  }
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}
