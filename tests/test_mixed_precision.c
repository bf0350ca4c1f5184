/* Mixed precision and the gradient scaler, under every path of the runtime:
   full sharding (all-gather, reduce-scatter), F = 1 (a conversion only, an
   all-reduce), hybrid (reduce-scatter then all-reduce across replicas, or
   that all-reduce at FinishBackward), and SHARD_GRAD_OP's own buffers.
   - An unsharded view holds exactly the master values rounded to
     param_dtype, and writing to it leaves the master shard alone.
   - The all-gather moves half the bytes of fp32 (the library's counters).
   - Gradients are reduced in reduce_dtype: a value fp32 would carry and the
     16-bit types cannot comes out rounded, values exact in 16 bits come out
     exactly averaged, accumulation adds.
   - The scaler: steps unscale exactly; an overflow on one rank's gradient
     makes every rank skip the step and halve the scale; the scale grows
     after growth_interval good steps; clipping sees unscaled gradients.
     A checkpoint carries the scale and the growth counter to a new optimizer.
   - Errors: a bad policy type, fp64 units, a policy after SetUp; a unit
     initializer fills fp32 values even under a 16-bit policy, and what it
     leaves in the gradient buffer it borrows never reaches a gradient.
   mpitest: -n 4 */
#include <math.h>
#include <unistd.h>

#include "fsdp_config.h"

#include "fsdp_nn.h"
#include "fsdptest.h"

enum { NUNITS = 3 };
static const int64_t sizes[NUNITS] = {37, 10, 1};
static int W, rank;

static float master_value(int u, int64_t e) { return test_value((uint64_t)(77 + u), e); }

static FSDPErrorCode fill_shard(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values, void *user)
{
  const char *name;
  (void)id;
  (void)user;
  TEST_OK(FlatParamGetName(unit, &name));
  for (int64_t e = begin; e < end; e++) ((float *)values)[e - begin] = master_value(name[1] - '0', e);
  return FSDP_SUCCESS;
}

static FSDPErrorCode fill_whole_unit(FlatParam unit, void *user)
{
  float *v;
  int64_t n;
  (void)user;
  TEST_OK(FlatParamGetParamInfo(unit, 0, NULL, NULL, NULL, &n));
  TEST_OK(FlatParamGetParam(unit, 0, (void **)&v));
  for (int64_t e = 0; e < n; e++) v[e] = 1.0f + (float)e;
  return FSDP_SUCCESS;
}

/* Units u0..u2 under the policy, filled by fill_shard, or by unit_init when
   given.  fp32 units filled shard by shard are gathered into buffers, not
   views of the node's shards, so that their plan has parameter buffers to
   compare with the 16-bit ones. */
static FSDPContext make_with(FSDPShardingStrategy strategy, int factor, FSDPDataType param, FSDPDataType reduce,
                             FlatParam unit[NUNITS], FSDPUnitInitFn unit_init)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, strategy, factor);
  TEST_OK(FSDPContextSetMixedPrecision(ctx, param, reduce));
  if (!unit_init) TEST_OK(FSDPContextSetShmViews(ctx, false));
  for (int u = 0; u < NUNITS; u++) {
    char name[16];
    snprintf(name, sizeof name, "u%d", u);
    TEST_OK(FSDPContextAddUnit(ctx, name, &unit[u]));
    snprintf(name, sizeof name, "u%d.w", u);
    TEST_OK(FlatParamAddParam(unit[u], name, 1, &sizes[u], NULL));
  }
  if (unit_init) TEST_OK(FSDPContextSetUnitInit(ctx, unit_init, NULL));
  else TEST_OK(FSDPContextSetShardInit(ctx, fill_shard, NULL));
  TEST_OK(FSDPContextSetUp(ctx));
  return ctx;
}

static FSDPContext make(FSDPShardingStrategy strategy, int factor, FSDPDataType param, FSDPDataType reduce,
                        FlatParam unit[NUNITS])
{
  return make_with(strategy, factor, param, reduce, unit, NULL);
}

static float rounded(FSDPDataType t, float x)
{
  uint16_t h;
  float y;
  if (t == FSDP_FLOAT32) return x;
  TEST_OK(FSDPDataTypeConvert(t, &h, FSDP_FLOAT32, &x, 1));
  TEST_OK(FSDPDataTypeConvert(FSDP_FLOAT32, &y, t, &h, 1));
  return y;
}

static int64_t event_bytes(const char *name)
{
  FSDPLogEvent ev;
  FSDPLogEventInfo info;
  TEST_OK(FSDPLogEventRegister(name, &ev));
  TEST_OK(FSDPLogEventGetInfo(ev, &info));
  return info.bytes;
}

/* ------------------------------------------------------------------ parameters */

/* Unshards every unit and checks its view; returns the all-gather bytes moved. */
static int64_t check_views(FSDPContext ctx, FlatParam unit[NUNITS], FSDPDataType param, const char *what)
{
  int64_t before = event_bytes("AllGather");
  TEST_OK(FSDPContextBeginForward(ctx));
  for (int u = 0; u < NUNITS; u++) {
    void *view;
    FSDPDataType vt;
    TEST_OK(FlatParamUnshard(unit[u]));
    TEST_OK(FlatParamGetViewDataType(unit[u], &vt));
    TEST_ASSERT(vt == param, "%s: unit %d's view is %s, not %s", what, u, FSDPDataTypeName(vt),
                FSDPDataTypeName(param));
    TEST_OK(FlatParamGetParam(unit[u], 0, &view));
    for (int64_t e = 0; e < sizes[u]; e++) {
      float got, want = rounded(param, master_value(u, e));
      if (param == FSDP_FLOAT32) got = ((float *)view)[e];
      else TEST_OK(FSDPDataTypeConvert(FSDP_FLOAT32, &got, param, (uint16_t *)view + e, 1));
      TEST_ASSERT(memcmp(&got, &want, sizeof got) == 0, "%s: unit %d element %lld is %.9g, expected %.9g", what, u,
                  (long long)e, got, want);
    }
    /* Writing to a low-precision view must not reach the master copy. */
    if (param != FSDP_FLOAT32) memset(view, 0xff, (size_t)sizes[u] * 2);
    TEST_OK(FlatParamReshard(unit[u]));
  }
  TEST_OK(FSDPContextFinishBackward(ctx));
  for (int u = 0; u < NUNITS; u++) {
    float *shard;
    int64_t begin, end, offset;
    TEST_OK(FlatParamGetShard(unit[u], (void **)&shard, NULL));
    TEST_OK(FlatParamGetShardRange(unit[u], 0, &begin, &end, &offset));
    for (int64_t e = begin; e < end; e++)
      TEST_ASSERT(shard[offset + e - begin] == master_value(u, e), "%s: the master shard of unit %d changed at %lld",
                  what, u, (long long)e);
  }
  return event_bytes("AllGather") - before;
}

static void test_params(FSDPShardingStrategy strategy, int factor, FSDPDataType param)
{
  FlatParam unit[NUNITS], ref_unit[NUNITS];
  char what[96];
  FSDPContext ctx = make(strategy, factor, param, FSDP_FLOAT32, unit);
  FSDPContext ref = make(strategy, factor, FSDP_FLOAT32, FSDP_FLOAT32, ref_unit);
  FSDPMemoryPlan plan, ref_plan;
  int64_t bytes, ref_bytes, max_padded = 0;

  snprintf(what, sizeof what, "%s F=%d %s", FSDPShardingStrategyName(strategy), factor, FSDPDataTypeName(param));
  bytes = check_views(ctx, unit, param, what);
  bytes += check_views(ctx, unit, param, what); /* again: a new low-precision copy, not the written one */
  ref_bytes = 2 * check_views(ref, ref_unit, FSDP_FLOAT32, what);
  TEST_ASSERT(2 * bytes == ref_bytes, "%s: the all-gathers moved %lld bytes, fp32 ones %lld", what, (long long)bytes,
              (long long)ref_bytes);
  /* The plan: parameter buffers in 2 bytes per element, gradient buffers in 4. */
  TEST_OK(FSDPContextGetMemoryPlan(ctx, &plan));
  TEST_OK(FSDPContextGetMemoryPlan(ref, &ref_plan));
  TEST_OK(FSDPContextGetSizes(ctx, NULL, NULL, &max_padded));
  if (strategy == FSDP_SHARD_GRAD_OP)
    TEST_ASSERT(ref_plan.bytes[FSDP_MEM_UNSHARDED] - plan.bytes[FSDP_MEM_UNSHARDED] ==
                    plan.bytes[FSDP_MEM_UNSHARDED] - 2 * 4 * (size_t)max_padded,
                "%s: the own buffers take %zu bytes in the plan, fp32 ones %zu", what,
                plan.bytes[FSDP_MEM_UNSHARDED] - 2 * 4 * (size_t)max_padded,
                ref_plan.bytes[FSDP_MEM_UNSHARDED] - 2 * 4 * (size_t)max_padded);
  else
    TEST_ASSERT(plan.bytes[FSDP_MEM_UNSHARDED] == (size_t)max_padded * (2 * (size_t)plan.unsharded_buffers + 4 * 2) &&
                    plan.unsharded_buffers == 2,
                "%s: the plan has %zu bytes of unsharded buffers (%d parameter buffers) for units of at most %lld",
                what, plan.bytes[FSDP_MEM_UNSHARDED], plan.unsharded_buffers, (long long)max_padded);
  TEST_OK(FSDPContextDestroy(&ctx));
  TEST_OK(FSDPContextDestroy(&ref));
}

/* ------------------------------------------------------------------ gradients */

/* Rank r's gradient: (r + 1) k 2^-4 with k a small integer, so that every
   partial sum is exact in bf16 and fp16; element 0 is 1 + 2^-12 on every
   rank, which fp32 carries and neither 16-bit type can. */
static float grad_value(int r, int u, int64_t e)
{
  if (e == 0) return 1.0f + 0x1p-12f;
  return (float)((r + 1) * ((int)((e * 7 + u) % 17) - 8)) * 0x1p-4f;
}

static float mean_grad(FSDPDataType reduce, int u, int64_t e)
{
  double s = 0;
  if (e == 0) return reduce == FSDP_FLOAT32 ? 1.0f + 0x1p-12f : 1.0f;
  for (int r = 0; r < W; r++) s += grad_value(r, u, e);
  return (float)(s / W);
}

/* One backward pass writing `times` copies of this rank's gradients. */
static void backward(FSDPContext ctx, FlatParam unit[NUNITS], float times, int bad_rank)
{
  TEST_OK(FSDPContextBeginBackward(ctx));
  for (int u = NUNITS - 1; u >= 0; u--) {
    float *g;
    TEST_OK(FlatParamUnshard(unit[u]));
    TEST_OK(FlatParamGetGrad(unit[u], 0, (void **)&g));
    for (int64_t e = 0; e < sizes[u]; e++) g[e] += times * grad_value(rank, u, e);
    if (u == 0 && rank == bad_rank) g[0] = 1e30f; /* an overflow in fp16, on one rank only */
    TEST_OK(FlatParamReduceGrad(unit[u]));
  }
}

static void check_grads(FlatParam unit[NUNITS], FSDPDataType reduce, float times, const char *what)
{
  for (int u = 0; u < NUNITS; u++) {
    float *g;
    int64_t n, begin, end, offset;
    TEST_OK(FlatParamGetGradShard(unit[u], (void **)&g, &n));
    TEST_OK(FlatParamGetShardRange(unit[u], 0, &begin, &end, &offset));
    for (int64_t i = 0; i < n; i++) {
      bool mine = i >= offset && i < offset + end - begin;
      float want = mine ? times * mean_grad(reduce, u, begin + i - offset) : 0.0f;
      TEST_ASSERT(g[i] == want, "%s: unit %d shard element %lld (%s) is %.9g, expected %.9g", what, u, (long long)i,
                  mine ? "parameter" : "padding", g[i], want);
    }
  }
}

typedef enum { REDUCE_EACH, ACCUMULATE, REPLICATE_AT_FINISH } GradMode;

static void test_grads(FSDPShardingStrategy strategy, int factor, FSDPDataType reduce, GradMode mode)
{
  FlatParam unit[NUNITS];
  char what[128];
  FSDPContext ctx = make(strategy, factor, reduce, reduce, unit);
  int64_t rs = event_bytes("ReduceScatter");

  snprintf(what, sizeof what, "%s F=%d reduce %s, %s", FSDPShardingStrategyName(strategy), factor,
           FSDPDataTypeName(reduce),
           mode == REDUCE_EACH  ? "reduced twice"
           : mode == ACCUMULATE ? "accumulated"
                                : "replicas at finish");
  TEST_OK(FSDPContextZeroGrad(ctx));
  TEST_OK(FSDPContextSetGradSync(ctx, mode != ACCUMULATE));
  TEST_OK(FSDPContextSetReplicateGradSync(ctx, mode != REPLICATE_AT_FINISH));
  backward(ctx, unit, 1, -1);
  TEST_OK(FSDPContextSetGradSync(ctx, true));
  backward(ctx, unit, 1, -1);
  TEST_OK(FSDPContextSetReplicateGradSync(ctx, true));
  TEST_OK(FSDPContextFinishBackward(ctx));
  /* Twice the mean, exactly: every partial sum is exact in 16 bits, but
     for element 0, which 16-bit reductions round to 1 per pass (2 + 2^-11
     accumulated without sync rounds to 2 as well). */
  check_grads(unit, reduce, 2, what);
  if (strategy == FSDP_FULL_SHARD) {
    int64_t per = 0, max_padded;
    TEST_OK(FSDPContextGetSizes(ctx, NULL, NULL, &max_padded));
    for (int u = 0; u < NUNITS; u++) {
      int64_t padded;
      TEST_OK(FlatParamGetSizes(unit[u], NULL, &padded, NULL));
      per += padded;
    }
    rs = event_bytes("ReduceScatter") - rs;
    TEST_ASSERT(rs == (mode == ACCUMULATE ? 1 : 2) * per * (int64_t)FSDPDataTypeSize(reduce),
                "%s: the reduce-scatters moved %lld bytes for %lld padded elements", what, (long long)rs,
                (long long)per);
  }
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* With replicate sync off a gradient shard holds its shard group's sum,
   whatever type it was reduced in (the pre-division is undone). */
static void test_partial(FSDPShardingStrategy strategy, int factor)
{
  FlatParam u32[NUNITS], u16[NUNITS];
  FSDPContext c32 = make(strategy, factor, FSDP_FLOAT32, FSDP_FLOAT32, u32);
  FSDPContext c16 = make(strategy, factor, FSDP_BFLOAT16, FSDP_BFLOAT16, u16);
  FSDPContext ctx[2] = {c32, c16};
  FlatParam *units[2] = {u32, u16};
  for (int k = 0; k < 2; k++) {
    TEST_OK(FSDPContextZeroGrad(ctx[k]));
    TEST_OK(FSDPContextSetReplicateGradSync(ctx[k], false));
    backward(ctx[k], units[k], 1, -1);
    TEST_OK(FSDPContextFinishBackward(ctx[k]));
  }
  for (int u = 0; u < NUNITS; u++) {
    float *a, *b;
    int64_t n, begin, end, offset;
    TEST_OK(FlatParamGetGradShard(u32[u], (void **)&a, &n));
    TEST_OK(FlatParamGetGradShard(u16[u], (void **)&b, NULL));
    TEST_OK(FlatParamGetShardRange(u32[u], 0, &begin, &end, &offset));
    for (int64_t i = 0; i < n; i++) /* element 0 is the one bf16 rounds */
      TEST_ASSERT(a[i] == b[i] || (i == offset && begin == 0),
                  "%s F=%d, replicate sync off: unit %d shard element %lld "
                  "is %.9g reduced in bf16, %.9g in fp32",
                  FSDPShardingStrategyName(strategy), factor, u, (long long)i, b[i], a[i]);
  }
  TEST_OK(FSDPContextDestroy(&c32));
  TEST_OK(FSDPContextDestroy(&c16));
}

/* ------------------------------------------------------------------ the scaler */

static void snapshot(FlatParam unit[NUNITS], float *out)
{
  for (int u = 0, k = 0; u < NUNITS; u++) {
    float *shard;
    int64_t n;
    TEST_OK(FlatParamGetShard(unit[u], (void **)&shard, &n));
    for (int64_t i = 0; i < n; i++) out[k++] = shard[i];
  }
}

static void test_scaler(FSDPShardingStrategy strategy, int factor)
{
  FlatParam unit[NUNITS];
  FSDPContext ctx = make(strategy, factor, FSDP_FLOAT16, FSDP_FLOAT16, unit);
  FSDPOptimizer opt;
  float before[64] = {0}, after[64] = {0};
  double scale, norm, want_norm = 0;
  int64_t skipped, step;
  char what[64];

  snprintf(what, sizeof what, "scaler, %s F=%d", FSDPShardingStrategyName(strategy), factor);
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_OK(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_SGD));
  TEST_OK(FSDPOptimizerSetLearningRate(opt, 0.5));
  TEST_OK(FSDPOptimizerSetGradScaler(opt, true));
  TEST_OK(FSDPOptimizerSetGradScalerParams(opt, 1024, 2, 0.5, 2));
  TEST_OK(FSDPOptimizerSetClipGradNorm(opt, 1e6)); /* measures the norm, never clips */
  TEST_OK(FSDPOptimizerSetUp(opt));
  for (int u = 0; u < NUNITS; u++)
    for (int64_t e = 0; e < sizes[u]; e++)
      want_norm += (double)mean_grad(FSDP_FLOAT16, u, e) * mean_grad(FSDP_FLOAT16, u, e);
  want_norm = sqrt(want_norm);
  for (int s = 0; s < 4; s++) {
    bool overflow = s == 2;
    TEST_OK(FSDPOptimizerGetGradScale(opt, &scale, NULL));
    TEST_ASSERT(scale == (s == 0   ? 1024
                          : s == 1 ? 1024
                          : s == 2 ? 2048
                                   : 1024),
                "%s: step %d has scale %g", what, s, scale);
    snapshot(unit, before);
    TEST_OK(FSDPContextZeroGrad(ctx));
    /* The loss gradient scaled: each rank's gradient times the scale. Rank 1
       overflows in step 2 at element 0 of unit 0, in shard 0. */
    backward(ctx, unit, (float)scale, overflow ? 1 : -1);
    if (s == 0) { /* clipping called by hand unscales first, once */
      TEST_OK(FSDPOptimizerClipGradNorm(opt, 0, &norm));
      TEST_ASSERT(fabs(norm - want_norm) <= 1e-6 * want_norm,
                  "%s: FSDPOptimizerClipGradNorm measured %.9g, expected "
                  "%.9g",
                  what, norm, want_norm);
      /* An evaluation forward in between ends a step of the context: the gradients must not be unscaled twice. */
      TEST_OK(FSDPContextBeginForward(ctx));
      TEST_OK(FlatParamUnshard(unit[0]));
      TEST_OK(FlatParamReshard(unit[0]));
    }
    TEST_OK(FSDPOptimizerStep(opt));
    snapshot(unit, after);
    TEST_OK(FSDPOptimizerGetGradScale(opt, &scale, &skipped));
    TEST_OK(FSDPOptimizerGetStep(opt, &step));
    TEST_OK(FSDPOptimizerGetGradNorm(opt, &norm));
    TEST_ASSERT(skipped == (s >= 2), "%s: %lld steps skipped after step %d", what, (long long)skipped, s);
    TEST_ASSERT(step == s + 1 - (s >= 2), "%s: the optimizer counts %lld steps after step %d", what, (long long)step,
                s);
    if (overflow) {
      TEST_ASSERT(scale == 1024, "%s: the scale is %g after the overflow, not 2048 halved", what, scale);
      TEST_ASSERT(memcmp(before, after, sizeof before) == 0, "%s: a skipped step changed the parameters", what);
      TEST_ASSERT(isnan(norm), "%s: a skipped step reports the norm %g", what, norm);
      continue;
    }
    /* Unscaled, the gradient is the mean; the norm was taken after unscaling. */
    TEST_ASSERT(fabs(norm - want_norm) <= 1e-6 * want_norm, "%s: step %d measured the norm %.9g, expected %.9g", what,
                s, norm, want_norm);
    for (int u = 0, k = 0; u < NUNITS; u++) {
      int64_t n, begin, end, offset;
      TEST_OK(FlatParamGetShard(unit[u], NULL, &n));
      TEST_OK(FlatParamGetShardRange(unit[u], 0, &begin, &end, &offset));
      for (int64_t i = 0; i < n; i++, k++) {
        float g = i >= offset && i < offset + end - begin ? mean_grad(FSDP_FLOAT16, u, begin + i - offset) : 0.0f;
        float want = before[k] - 0.5f * g;
        TEST_ASSERT(after[k] == want, "%s: step %d: unit %d element %lld is %.9g, expected %.9g", what, s, u,
                    (long long)i, after[k], want);
      }
    }
  }
#ifdef FSDP_HAVE_HDF5
  { /* The scale (1024) and the growth counter (1 good step of 2) survive a checkpoint. */
    FSDPOptimizer fresh;
    char dir[256], path[300];
    if (rank == 0) {
      snprintf(dir, sizeof dir, "%s/fsdp-test-mp-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
      TEST_ASSERT(mkdtemp(dir), "cannot create %s", dir);
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(path, sizeof path, "%s/scaler.h5", dir);
    TEST_OK(FSDPContextSave(ctx, opt, path));
    TEST_OK(FSDPOptimizerCreate(ctx, &fresh));
    TEST_OK(FSDPOptimizerSetType(fresh, FSDP_OPTIMIZER_SGD));
    TEST_OK(FSDPOptimizerSetGradScaler(fresh, true));
    TEST_OK(FSDPOptimizerSetGradScalerParams(fresh, 65536, 2, 0.5, 2));
    TEST_OK(FSDPOptimizerSetUp(fresh));
    TEST_OK(FSDPContextLoad(ctx, fresh, path));
    TEST_OK(FSDPOptimizerGetGradScale(fresh, &scale, NULL));
    TEST_ASSERT(scale == 1024, "%s: the loaded scale is %g, the saved one 1024", what, scale);
    TEST_OK(FSDPContextZeroGrad(ctx));
    backward(ctx, unit, (float)scale, -1);
    TEST_OK(FSDPOptimizerStep(fresh));
    TEST_OK(FSDPOptimizerGetGradScale(fresh, &scale, NULL));
    TEST_ASSERT(scale == 2048, "%s: after the loaded counter's second good step the scale is %g, not 2048", what,
                scale);
    TEST_OK(FSDPOptimizerDestroy(&fresh));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) TEST_ASSERT(unlink(path) == 0 && rmdir(dir) == 0, "cannot remove %s", dir);
  }
#endif
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* ------------------------------------------------------------------ errors, initializers, options */

static FSDPErrorCode fill_unit(FlatParam unit, void *user)
{
  float *v;
  FSDPDataType vt;
  (void)user;
  TEST_OK(FlatParamGetViewDataType(unit, &vt));
  TEST_ASSERT(vt == FSDP_FLOAT32, "an initializer's view is %s", FSDPDataTypeName(vt));
  TEST_OK(FlatParamGetParam(unit, 0, (void **)&v));
  for (int64_t e = 0; e < sizes[0]; e++) v[e] = master_value(0, e);
  return FSDP_SUCCESS;
}

/* A unit initializer runs in a gradient buffer (16-bit parameters; and fp32
   views, which the node's ranks share) and leaves the unit's values in it.
   The first unit of backward (the smallest here) then takes that buffer:
   every gradient shard must still come out as the average of the ranks'
   gradients (all ones), whatever was in the buffer beyond the small unit.
   (Before the fix, the reduce-scatter in shared memory marked the whole
   buffer zero after zeroing the small unit's part, and the next, larger
   unit accumulated onto the initializer's values.) */
static void test_init_scratch(FSDPDataType param)
{
  FlatParam unit[NUNITS];
  FSDPContext ctx = make_with(FSDP_FULL_SHARD, W, param, FSDP_FLOAT32, unit, fill_whole_unit);
  for (int step = 0; step < 2; step++) {
    TEST_OK(FSDPContextZeroGrad(ctx));
    TEST_OK(FSDPContextBeginForward(ctx));
    for (int u = 0; u < NUNITS; u++) {
      TEST_OK(FlatParamUnshard(unit[u]));
      TEST_OK(FlatParamReshard(unit[u]));
    }
    TEST_OK(FSDPContextBeginBackward(ctx));
    for (int u = NUNITS - 1; u >= 0; u--) {
      float *g;
      TEST_OK(FlatParamUnshard(unit[u]));
      TEST_OK(FlatParamGetGrad(unit[u], 0, (void **)&g));
      for (int64_t e = 0; e < sizes[u]; e++) g[e] += 1.0f;
      TEST_OK(FlatParamReduceGrad(unit[u]));
    }
    TEST_OK(FSDPContextFinishBackward(ctx));
    for (int u = 0; u < NUNITS; u++) {
      float *g;
      int64_t begin, end, offset;
      TEST_OK(FlatParamGetGradShard(unit[u], (void **)&g, NULL));
      TEST_OK(FlatParamGetShardRange(unit[u], 0, &begin, &end, &offset));
      for (int64_t e = begin; e < end; e++)
        TEST_ASSERT(g[offset + e - begin] == 1.0f, "%s parameters, step %d: unit %d's gradient at %lld is %g, not 1",
                    FSDPDataTypeName(param), step, u, (long long)e, g[offset + e - begin]);
    }
  }
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_errors_and_init(void)
{
  FSDPContext ctx;
  FlatParam unit;
  FSDPDataType p, r;
  float *shard;
  int64_t begin, end, offset;

  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetMixedPrecision(ctx, FSDP_FLOAT64, FSDP_FLOAT32));
  TEST_MESSAGE_HAS("param_dtype fp64");
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetMixedPrecision(ctx, FSDP_FLOAT32, (FSDPDataType)9));
  TEST_MESSAGE_HAS("reduce_dtype");
  /* The option alone: gradients follow the parameters. */
  TEST_OK(FSDPOptionsSetValue("-fsdp_param_dtype", "bf16"));
  TEST_OK(FSDPContextSetFromOptions(ctx));
  TEST_OK(FSDPOptionsClearValue("-fsdp_param_dtype"));
  TEST_OK(FSDPContextGetMixedPrecision(ctx, &p, &r));
  TEST_ASSERT(p == FSDP_BFLOAT16 && r == FSDP_BFLOAT16, "-fsdp_param_dtype bf16 gave %s and %s", FSDPDataTypeName(p),
              FSDPDataTypeName(r));
  TEST_OK(FSDPOptionsSetValue("-fsdp_reduce_dtype", "fp64"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPContextSetFromOptions(ctx));
  TEST_MESSAGE_HAS("-fsdp_reduce_dtype fp64");
  TEST_OK(FSDPOptionsClearValue("-fsdp_reduce_dtype"));
  /* fp64 master copies do not mix: every rank is told, naming the unit. */
  TEST_OK(FSDPContextAddUnit(ctx, "wide", &unit));
  TEST_OK(FlatParamSetDataType(unit, FSDP_FLOAT64));
  TEST_OK(FlatParamAddParam(unit, "wide.w", 1, &sizes[0], NULL));
  TEST_CODE(FSDP_ERR_UNSUPPORTED, FSDPContextSetUp(ctx));
  TEST_MESSAGE_HAS("unit 'wide' is fp64");
  TEST_OK(FSDPContextDestroy(&ctx));

  /* A unit initializer under bf16 fills fp32 values, which the master keeps unrounded. */
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  TEST_OK(FSDPContextSetMixedPrecision(ctx, FSDP_BFLOAT16, FSDP_FLOAT32));
  TEST_OK(FSDPContextAddUnit(ctx, "u0", &unit));
  TEST_OK(FlatParamAddParam(unit, "u0.w", 1, &sizes[0], NULL));
  TEST_OK(FSDPContextSetUnitInit(ctx, fill_unit, NULL));
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_CODE(FSDP_ERR_STATE, FSDPContextSetMixedPrecision(ctx, FSDP_FLOAT16, FSDP_FLOAT16));
  TEST_OK(FlatParamGetShard(unit, (void **)&shard, NULL));
  TEST_OK(FlatParamGetShardRange(unit, 0, &begin, &end, &offset));
  for (int64_t e = begin; e < end; e++)
    TEST_ASSERT(shard[offset + e - begin] == master_value(0, e), "the unit initializer's value %lld was rounded",
                (long long)e);
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* ------------------------------------------------------------------ the layer library */

/* An FSDPModel under bf16 parameters equals an fp32 one whose parameters are
   the rounded values: the widening (70 rows: two blocks of the 64 widened
   at a time) is exact, only the summation order of dx differs. */
static void test_model(void)
{
  const char *spec = "mlp:in=5,hidden=70,depth=2,out=3,act=tanh,norm=layernorm";
  FSDPContext ctx[2];
  FSDPModel model[2];
  float x[4 * 5], dy[4 * 3], *y[2];
  int nunits;

  for (int i = 0; i < 4 * 5; i++) x[i] = test_value((uint64_t)(300 + rank), i);
  for (int i = 0; i < 4 * 3; i++) dy[i] = test_value((uint64_t)(400 + rank), i);
  for (int k = 0; k < 2; k++) {
    TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx[k]));
    TEST_OK(FSDPContextSetMixedPrecision(ctx[k], k ? FSDP_BFLOAT16 : FSDP_FLOAT32, FSDP_FLOAT32));
    TEST_OK(FSDPModelCreate(ctx[k], spec, &model[k]));
    TEST_OK(FSDPModelSetSeed(model[k], 5));
    TEST_OK(FSDPModelSetUp(model[k]));
  }
  TEST_OK(FSDPContextGetNumUnits(ctx[0], &nunits));
  for (int u = 0; u < nunits; u++) { /* the fp32 model gets the rounded values */
    FlatParam unit;
    float *shard;
    int64_t n;
    TEST_OK(FSDPContextGetUnit(ctx[0], u, &unit));
    TEST_OK(FlatParamGetShard(unit, (void **)&shard, &n));
    for (int64_t i = 0; i < n; i++) shard[i] = rounded(FSDP_BFLOAT16, shard[i]);
  }
  for (int k = 0; k < 2; k++) {
    TEST_OK(FSDPContextZeroGrad(ctx[k]));
    TEST_OK(FSDPModelForward(model[k], 4, x, &y[k]));
  }
  for (int i = 0; i < 4 * 3; i++)
    TEST_ASSERT(fabsf(y[1][i] - y[0][i]) <= 1e-5f * (1 + fabsf(y[0][i])), "bf16 model output %d is %.9g, fp32 %.9g", i,
                y[1][i], y[0][i]);
  for (int k = 0; k < 2; k++) {
    TEST_OK(FSDPModelBackward(model[k], dy));
    TEST_OK(FSDPContextFinishBackward(ctx[k]));
  }
  for (int u = 0; u < nunits; u++) {
    FlatParam a, b;
    float *ga, *gb;
    int64_t n;
    TEST_OK(FSDPContextGetUnit(ctx[0], u, &a));
    TEST_OK(FSDPContextGetUnit(ctx[1], u, &b));
    TEST_OK(FlatParamGetGradShard(a, (void **)&ga, &n));
    TEST_OK(FlatParamGetGradShard(b, (void **)&gb, NULL));
    for (int64_t i = 0; i < n; i++)
      TEST_ASSERT(fabsf(gb[i] - ga[i]) <= 1e-5f * (1 + fabsf(ga[i])),
                  "unit %d gradient %lld: bf16 model %.9g, fp32 %.9g", u, (long long)i, gb[i], ga[i]);
  }
  for (int k = 0; k < 2; k++) {
    TEST_OK(FSDPModelDestroy(&model[k]));
    TEST_OK(FSDPContextDestroy(&ctx[k]));
  }
}

int main(int argc, char **argv)
{
  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  TEST_OK(FSDPLogSetActive(true)); /* the byte counters */
  test_errors_and_init();
  test_init_scratch(FSDP_BFLOAT16);
  test_init_scratch(FSDP_FLOAT32);
  for (int t = 0; t < 2; t++) {
    FSDPDataType lowp = t ? FSDP_FLOAT16 : FSDP_BFLOAT16;
    test_params(FSDP_FULL_SHARD, W, lowp);
    test_params(FSDP_NO_SHARD, 1, lowp);
    test_params(FSDP_HYBRID_SHARD, 2, lowp);
    test_params(FSDP_SHARD_GRAD_OP, W, lowp);
    for (GradMode m = REDUCE_EACH; m <= REPLICATE_AT_FINISH; m++) {
      test_grads(FSDP_FULL_SHARD, W, lowp, m);
      test_grads(FSDP_NO_SHARD, 1, lowp, m);
      test_grads(FSDP_HYBRID_SHARD, 2, lowp, m);
    }
  }
  test_grads(FSDP_FULL_SHARD, W, FSDP_FLOAT32, REDUCE_EACH); /* the reference the 1 + 2^-12 element tells apart */
  test_partial(FSDP_HYBRID_SHARD, 2);
  test_partial(FSDP_NO_SHARD, 1);
  test_scaler(FSDP_FULL_SHARD, W);
  test_scaler(FSDP_HYBRID_SHARD, 2);
  test_model();
  TEST_OK(FSDPFinalize());
  if (rank == 0) printf("test_mixed_precision: all passed\n");
  return 0;
}
