/* Deferred initialization and what memory the runtime holds.
   - Unit-by-unit initialization materializes one unit at a time: inside the
     initializer only that unit is unsharded, and the peak of unsharded
     memory over SetUp is the largest unit.
   - Sharded initialization is called with exactly this rank's ranges and
     materializes nothing.
   - -fsdp_sync_params makes every replica start from the first replica's values.
   - Tracked memory, exactly: shards and gradient shards after SetUp; during
     a step, the unsharded units in use (the current one, and in backward the
     gradient still being reduced), nothing more.
   mpitest: -n 4
   mpitest: -n 1 */
#include "fsdptest.h"

enum { NUNITS = 4 };
static const int64_t sizes[NUNITS] = {13, 40, 7, 21}; /* the largest is not the first or the last */

typedef struct {
  FlatParam unit[NUNITS];
  int calls;
  int64_t covered; /* elements filled by the shard initializer */
  int world_rank;
  bool per_rank; /* values differ by rank, for the sync test */
} Model;

static float value(const Model *m, int u, int64_t e)
{
  return test_value((uint64_t)u, e) + (m->per_rank ? 100.0f * (float)m->world_rank : 0.0f);
}

static int unit_index(const Model *m, FlatParam unit)
{
  for (int u = 0; u < NUNITS; u++)
    if (m->unit[u] == unit) return u;
  TEST_ASSERT(0, "an initializer was called with a unit the context does not have");
  return -1;
}

/* Unsharded parameter and gradient buffers the context holds now. */
static int params_held(FSDPContext ctx)
{
  FSDPCommStats s;
  TEST_OK(FSDPContextGetCommStats(ctx, &s));
  return s.params_in_use;
}

static int grads_held(FSDPContext ctx)
{
  FSDPCommStats s;
  TEST_OK(FSDPContextGetCommStats(ctx, &s));
  return s.grads_in_use;
}

static FSDPErrorCode init_unit(FlatParam unit, void *user)
{
  Model *m = user;
  int u = unit_index(m, unit);
  float *x;
  for (int v = 0; v < NUNITS; v++) { /* only this unit is materialized */
    FlatParamState state;
    FSDPCall(FlatParamGetState(m->unit[v], &state));
    TEST_ASSERT(state == (v == u ? FSDP_FLATPARAM_UNSHARDED : FSDP_FLATPARAM_SHARDED),
                "initializing unit %d, unit %d is %s", u, v, FlatParamStateName(state));
  }
  FSDPCall(FlatParamGetParam(unit, 0, (void **)&x));
  for (int64_t e = 0; e < sizes[u]; e++) x[e] = value(m, u, e);
  m->calls++;
  return FSDP_SUCCESS;
}

static FSDPErrorCode init_shard(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values, void *user)
{
  Model *m = user;
  int u = unit_index(m, unit);
  int64_t b, e, o;
  float *x = values, *shard;
  for (int v = 0; v < NUNITS; v++) { /* nothing is materialized */
    FlatParamState state;
    FSDPCall(FlatParamGetState(m->unit[v], &state));
    TEST_ASSERT(state == FSDP_FLATPARAM_SHARDED, "sharded initialization of unit %d, unit %d is %s", u, v,
                FlatParamStateName(state));
  }
  FSDPCall(FlatParamGetShardRange(unit, id, &b, &e, &o));
  FSDPCall(FlatParamGetShard(unit, (void **)&shard, NULL));
  TEST_ASSERT(id == 0 && begin == b && end == e && b < e && x == shard + o,
              "unit %d: called for [%lld, %lld) at %p, its range is [%lld, %lld) at %p", u, (long long)begin,
              (long long)end, values, (long long)b, (long long)e, (void *)(shard + o));
  for (int64_t i = begin; i < end; i++) x[i - begin] = value(m, u, i);
  m->calls++;
  m->covered += end - begin;
  return FSDP_SUCCESS;
}

static FSDPContext build(Model *m, FSDPShardingStrategy strategy, int factor, int how)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, strategy, factor);
  for (int u = 0; u < NUNITS; u++) {
    char name[16];
    snprintf(name, sizeof name, "u%d", u);
    TEST_OK(FSDPContextAddUnit(ctx, name, &m->unit[u]));
    snprintf(name, sizeof name, "u%d.w", u);
    TEST_OK(FlatParamAddParam(m->unit[u], name, 1, &sizes[u], NULL));
  }
  if (how == 0) TEST_OK(FSDPContextSetUnitInit(ctx, init_unit, m));
  else TEST_OK(FSDPContextSetShardInit(ctx, init_shard, m));
  TEST_OK(FSDPMemoryResetPeak());
  TEST_OK(FSDPContextSetUp(ctx));
  return ctx;
}

/* Every element of every shard is value(m, u, e), with `owner`'s rank for per-rank values. */
static void check_shards(Model *m, int owner)
{
  int saved = m->world_rank;
  m->world_rank = owner;
  for (int u = 0; u < NUNITS; u++) {
    int64_t b, e, o;
    float *shard;
    TEST_OK(FlatParamGetShardRange(m->unit[u], 0, &b, &e, &o));
    TEST_OK(FlatParamGetShard(m->unit[u], (void **)&shard, NULL));
    for (int64_t i = b; i < e; i++)
      TEST_ASSERT(shard[o + i - b] == value(m, u, i), "unit %d element %lld is %g, expected %g (values of rank %d)", u,
                  (long long)i, shard[o + i - b], value(m, u, i), owner);
  }
  m->world_rank = saved;
}

static void test_init(FSDPShardingStrategy strategy, int factor)
{
  int W, F;
  Model m = {0};
  FSDPMemoryStats mem;
  int64_t padded[NUNITS], max_padded = 0;
  ShardGroup group;
  FSDPContext ctx;

  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &m.world_rank);
  for (int how = 0; how < 2; how++) {
    m.calls = 0;
    m.covered = 0;
    ctx = build(&m, strategy, factor, how);
    TEST_OK(FSDPContextGetShardGroup(ctx, &group));
    TEST_OK(ShardGroupGetShardComm(group, NULL, NULL, &F));
    TEST_OK(FSDPGetMemoryStats(&mem));
    for (int u = 0; u < NUNITS; u++) {
      TEST_OK(FlatParamGetSizes(m.unit[u], NULL, &padded[u], NULL));
      if (padded[u] > max_padded) max_padded = padded[u];
    }
    if (how == 0) {
      TEST_ASSERT(m.calls == NUNITS, "the unit initializer ran %d times for %d units", m.calls, NUNITS);
      /* Units are materialized one at a time in the plan's parameter buffers
         (none with F = 1: the shard is the unit; with views, which the node's
         ranks share, in a gradient buffer): nothing beyond the plan. */
      FSDPMemoryPlan plan;
      bool views;
      TEST_OK(FSDPContextGetMemoryPlan(ctx, &plan));
      TEST_OK(FSDPContextGetShmViews(ctx, &views));
      TEST_ASSERT(F == 1 || views || plan.unsharded_buffers >= 1, "F = %d: the plan has no parameter buffer", F);
      TEST_ASSERT(mem.peak[FSDP_MEM_UNSHARDED] == plan.bytes[FSDP_MEM_UNSHARDED],
                  "F = %d: unit-by-unit initialization peaked at %zu unsharded bytes; the plan has %zu", F,
                  mem.peak[FSDP_MEM_UNSHARDED], plan.bytes[FSDP_MEM_UNSHARDED]);
      TEST_ASSERT(F == 1 || plan.bytes[FSDP_MEM_UNSHARDED] >= (size_t)max_padded * sizeof(float),
                  "F = %d: the plan's unsharded buffers (%zu bytes) cannot hold the largest unit", F,
                  plan.bytes[FSDP_MEM_UNSHARDED]);
    } else {
      MPI_Comm shard_comm;
      int64_t total = 0;
      TEST_OK(ShardGroupGetShardComm(group, &shard_comm, NULL, NULL));
      MPI_Allreduce(&m.covered, &total, 1, MPI_INT64_T, MPI_SUM, shard_comm);
      TEST_ASSERT(total == sizes[0] + sizes[1] + sizes[2] + sizes[3], "the shard initializer filled %lld elements",
                  (long long)total);
      FSDPMemoryPlan plan;
      TEST_OK(FSDPContextGetMemoryPlan(ctx, &plan));
      TEST_ASSERT(mem.peak[FSDP_MEM_UNSHARDED] == plan.bytes[FSDP_MEM_UNSHARDED],
                  "sharded initialization peaked at %zu unsharded bytes, more than the plan's %zu",
                  mem.peak[FSDP_MEM_UNSHARDED], plan.bytes[FSDP_MEM_UNSHARDED]);
    }
    check_shards(&m, m.world_rank);
    TEST_OK(FSDPContextDestroy(&ctx));
  }
}

/* Exact tracked memory through a step (FULL_SHARD or NO_SHARD), with the
   units gathered into buffers or (F > 1 on one node) as views of the node's
   shards, which take no buffer and count sum(psi_i)/F per rank. */
static void test_memory(FSDPShardingStrategy strategy, bool want_views)
{
  Model m = {0};
  FSDPContext ctx;
  FSDPMemoryStats mem;
  int64_t padded[NUNITS], shard[NUNITS], sum_shards = 0, max_padded = 0;
  int F;
  ShardGroup group;
  FSDPMemoryPlan plan;
  size_t es = sizeof(float);
  bool views;
  int held;

  MPI_Comm_rank(MPI_COMM_WORLD, &m.world_rank);
  TEST_OK(FSDPOptionsSetValue("-fsdp_shm_views", want_views ? "true" : "false"));
  ctx = build(&m, strategy, 0, 0);
  TEST_OK(FSDPOptionsClearValue("-fsdp_shm_views"));
  TEST_OK(FSDPContextGetShmViews(ctx, &views));
  TEST_OK(FSDPContextGetShardGroup(ctx, &group));
  TEST_OK(ShardGroupGetShardComm(group, NULL, NULL, &F));
  for (int u = 0; u < NUNITS; u++) {
    TEST_OK(FlatParamGetSizes(m.unit[u], NULL, &padded[u], &shard[u]));
    sum_shards += shard[u];
    if (padded[u] > max_padded) max_padded = padded[u];
  }
  TEST_ASSERT(views == (want_views && F > 1), "F = %d: views are %s with -fsdp_shm_views %s", F, views ? "on" : "off",
              want_views ? "true" : "false");
  held = F == 1 || views ? 0 : 1; /* parameter buffers while a unit is unsharded */
  TEST_OK(FSDPGetMemoryStats(&mem));
  TEST_ASSERT(mem.current[FSDP_MEM_PARAMS] == (size_t)sum_shards * es &&
                  mem.current[FSDP_MEM_GRADS] == (size_t)sum_shards * es,
              "after SetUp: %zu bytes of parameters and %zu of gradients, the shards are %zu",
              mem.current[FSDP_MEM_PARAMS], mem.current[FSDP_MEM_GRADS], (size_t)sum_shards * es);
  TEST_ASSERT(params_held(ctx) == 0 && grads_held(ctx) == 0,
              "after SetUp %d parameter and %d gradient buffers are held", params_held(ctx), grads_held(ctx));
  TEST_OK(FSDPMemoryResetPeak());
  for (int u = 0; u < NUNITS; u++) {
    TEST_OK(FlatParamUnshard(m.unit[u]));
    TEST_ASSERT(params_held(ctx) == held && grads_held(ctx) == 0,
                "forward, unit %d: %d parameter and %d gradient buffers held", u, params_held(ctx), grads_held(ctx));
    TEST_OK(FlatParamReshard(m.unit[u]));
  }
  for (int u = NUNITS - 1; u >= 0; u--) {
    float *g;
    /* this unit's parameters and gradient, and the gradient of the unit whose reduction is in flight */
    TEST_OK(FlatParamUnshard(m.unit[u]));
    TEST_OK(FlatParamGetGrad(m.unit[u], 0, (void **)&g));
    TEST_ASSERT(params_held(ctx) == held && grads_held(ctx) == (u + 1 < NUNITS ? 2 : 1),
                "backward, unit %d: %d parameter and %d gradient buffers held", u, params_held(ctx), grads_held(ctx));
    TEST_OK(FlatParamReduceGrad(m.unit[u]));
  }
  TEST_OK(FSDPContextFinishBackward(ctx));
  TEST_ASSERT(params_held(ctx) == 0 && grads_held(ctx) == 0,
              "after the step %d parameter and %d gradient buffers are held", params_held(ctx), grads_held(ctx));
  /* The step ran in the plan's buffers: nothing was allocated beyond them. */
  TEST_OK(FSDPGetMemoryStats(&mem));
  TEST_OK(FSDPContextGetMemoryPlan(ctx, &plan));
  for (int c = 0; c < FSDP_MEM_OTHER; c++)
    TEST_ASSERT(mem.peak[c] == plan.bytes[c] && mem.current[c] == plan.bytes[c],
                "%s: the step peaked at %zu bytes, holds %zu, the plan is %zu", FSDPMemCategoryName((FSDPMemCategory)c),
                mem.peak[c], mem.current[c], plan.bytes[c]);
  if (views)
    TEST_ASSERT(plan.bytes[FSDP_MEM_UNSHARDED] == (2 * (size_t)max_padded + (size_t)sum_shards) * es,
                "F = %d, views: the plan has %zu unsharded bytes, not 2 units of %lld elements and the shards' %lld", F,
                plan.bytes[FSDP_MEM_UNSHARDED], (long long)max_padded, (long long)sum_shards);
  else
    TEST_ASSERT(plan.bytes[FSDP_MEM_UNSHARDED] == (size_t)((F == 1 ? 0 : 2) + 2) * (size_t)max_padded * es,
                "F = %d: the plan has %zu unsharded bytes, not (L + 2) units of %lld elements", F,
                plan.bytes[FSDP_MEM_UNSHARDED], (long long)max_padded);
  TEST_ASSERT(mem.current[FSDP_MEM_PARAMS] == (size_t)sum_shards * es, "parameters grew to %zu bytes",
              mem.current[FSDP_MEM_PARAMS]);
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_sync_params(int factor)
{
  Model m = {.per_rank = true};
  FSDPContext ctx;
  ShardGroup group;
  MPI_Comm replicate;
  int first;

  MPI_Comm_rank(MPI_COMM_WORLD, &m.world_rank);
  for (int sync = 0; sync < 2; sync++) {
    if (sync) TEST_OK(FSDPOptionsSetValue("-fsdp_sync_params", "true"));
    ctx = build(&m, FSDP_HYBRID_SHARD, factor, 0);
    TEST_OK(FSDPContextGetShardGroup(ctx, &group));
    TEST_OK(ShardGroupGetReplicateComm(group, &replicate, NULL, NULL));
    first = m.world_rank;
    MPI_Bcast(&first, 1, MPI_INT, 0, replicate); /* the first replica's world rank */
    check_shards(&m, sync ? first : m.world_rank);
    TEST_OK(FSDPContextDestroy(&ctx));
  }
  TEST_OK(FSDPOptionsClearValue("-fsdp_sync_params"));
}

/* -fsdp_view prints the context, the ShardGroup inside it once, and each unit's sizes. */
static void test_view(void)
{
  Model m = {0};
  FSDPContext ctx;
  Capture cap;
  char *out, row[128];
  int64_t numel, padded, shard;
  int W;

  MPI_Comm_size(MPI_COMM_WORLD, &W);
  TEST_OK(FSDPOptionsSetValue("-fsdp_view", "true"));
  capture_begin(&cap, 1);
  ctx = build(&m, FSDP_FULL_SHARD, 0, 1);
  out = capture_end(&cap);
  TEST_OK(FSDPOptionsClearValue("-fsdp_view"));
  TEST_OK(FlatParamGetSizes(m.unit[1], &numel, &padded, &shard));
  snprintf(row, sizeof row, "u1 fp32 1 %lld %lld %lld %lld", (long long)numel, (long long)padded, (long long)shard,
           (long long)(padded - numel));
  if (test_rank() == 0) {
    char squeezed[8192], *q = squeezed; /* the table's columns with single spaces */
    for (const char *p = out; *p && q < squeezed + sizeof squeezed - 1; p++)
      if (*p != ' ' || (q > squeezed && q[-1] != ' ')) *q++ = *p;
    *q = 0;
    char header[64];
    snprintf(header, sizeof header, "sharding strategy full: W = %d ranks, F = %d per shard group", W, W);
    TEST_ASSERT(strstr(out, "FSDPContext: 4 units, 4 parameter tensors, 81 elements") && strstr(out, header) &&
                    strstr(squeezed, row) && count_occurrences(out, "ShardGroup: ") == 1,
                "the view lacks the context line, '%s', the row '%s' or one ShardGroup:\n%s", header, row, out);
  } else {
    TEST_ASSERT(out[0] == 0, "rank %d printed the view too:\n%s", test_rank(), out);
  }
  free(out);
  TEST_OK(FSDPContextDestroy(&ctx));
}

int main(int argc, char **argv)
{
  int W;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  test_init(FSDP_FULL_SHARD, 0);
  test_init(FSDP_NO_SHARD, 0);
  if (W % 2 == 0) test_init(FSDP_HYBRID_SHARD, W / 2);
  test_memory(FSDP_FULL_SHARD, false);
  test_memory(FSDP_FULL_SHARD, true);
  test_memory(FSDP_NO_SHARD, true);
  test_sync_params(W % 2 == 0 ? W / 2 : 1);
  test_view();
  if (test_rank() == 0) printf("test_fsdp_init: W = %d passed\n", W);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
