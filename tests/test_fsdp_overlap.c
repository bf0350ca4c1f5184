/* The overlap engine: training with every engine, prefetch mode and limit
   ends with the same parameters as the synchronous path (bit for bit where
   the collectives are the same MPI calls); after the first step a step
   allocates nothing; peak memory is the plan; the limiter holds; with the
   units as views of the node's shards (-fsdp_shm_views) backward finds every
   unit still unsharded from forward; a rank that
   skips a unit's collective is caught by -fsdp_debug_collectives.
   (tests/overlap.sh runs the watchdog, which aborts a job.)
   mpitest: -n 2
   mpitest: -n 4 */
#include <math.h>
#include <string.h>

#include "fsdp_nn.h"
#include "fsdptest.h"

#define SPEC "mlp:in=6,hidden=24,depth=4,out=3,act=tanh,norm=layernorm"
enum { IN = 6, OUT = 3, ROWS = 8, STEPS = 4, MAXSHARD = 1 << 14 };

typedef struct {
  const char *name;
  FSDPCommEngine engine;
  FSDPBackwardPrefetch backward;
  bool forward;
  int limit;
  bool exact; /* the same blocking MPI calls as the reference: bit for bit */
  FSDPWaitMode wait;
  bool views; /* -fsdp_shm_views: the others gather into buffers, whose prefetching and limiter they check */
} Setting;

static const Setting settings[] = {
    /* The reference polls: sleeping would make the blocking engines nonblocking. */
    {"sync, no prefetch (reference)", FSDP_COMM_ENGINE_SYNC, FSDP_BACKWARD_PREFETCH_NONE, false, 2, true,
     FSDP_WAIT_POLL, false},
    {"sync, pre + forward, L=2", FSDP_COMM_ENGINE_SYNC, FSDP_BACKWARD_PREFETCH_PRE, true, 2, true, FSDP_WAIT_POLL,
     false},
    {"thread, no prefetch", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_NONE, false, 2, true, FSDP_WAIT_POLL,
     false},
    {"thread, pre, L=2", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_PRE, false, 2, true, FSDP_WAIT_POLL, false},
    {"thread, post + forward, L=1", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_POST, true, 1, true, FSDP_WAIT_POLL,
     false},
    {"thread, pre + forward, unlimited", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_PRE, true, 0, true,
     FSDP_WAIT_POLL, false},
    {"nonblocking, pre + forward, L=2", FSDP_COMM_ENGINE_NONBLOCKING, FSDP_BACKWARD_PREFETCH_PRE, true, 2, false,
     FSDP_WAIT_POLL, false},
    /* Waits that sleep between tests run the collectives nonblocking. */
    {"sync, sleep", FSDP_COMM_ENGINE_SYNC, FSDP_BACKWARD_PREFETCH_NONE, false, 2, false, FSDP_WAIT_SLEEP, false},
    {"thread, pre + forward, L=2, sleep", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_PRE, true, 2, false,
     FSDP_WAIT_SLEEP, false},
    {"nonblocking, pre + forward, L=2, sleep", FSDP_COMM_ENGINE_NONBLOCKING, FSDP_BACKWARD_PREFETCH_PRE, true, 2, false,
     FSDP_WAIT_SLEEP, false},
    {"sync, views", FSDP_COMM_ENGINE_SYNC, FSDP_BACKWARD_PREFETCH_NONE, false, 2, true, FSDP_WAIT_POLL, true},
    {"thread, pre + forward, L=2, views", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_PRE, true, 2, true,
     FSDP_WAIT_POLL, true},
    {"nonblocking, pre + forward, L=1, views, sleep", FSDP_COMM_ENGINE_NONBLOCKING, FSDP_BACKWARD_PREFETCH_PRE, true, 1,
     false, FSDP_WAIT_SLEEP, true},
};
#define NSETTINGS (int)(sizeof settings / sizeof settings[0])

typedef struct {
  float params[MAXSHARD];
  int64_t n;
  FSDPCommStats stats;
  int factor, nunits;
  bool views; /* the units are views */
} Result;

static void train(FSDPShardingStrategy strategy, int factor, const Setting *s, Result *r)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, strategy, factor);
  FSDPModel model;
  FSDPOptimizer opt;
  FSDPMemoryPlan plan;
  FSDPMemoryStats mem;
  uint64_t allocs = 0, frees = 0;
  float x[ROWS * IN], t[ROWS * OUT], dy[ROWS * OUT], *y;
  int rank;
  const char *sname = FSDPShardingStrategyName(strategy);

  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPContextSetCommEngine(ctx, s->engine));
  TEST_OK(FSDPContextSetBackwardPrefetch(ctx, s->backward));
  TEST_OK(FSDPContextSetForwardPrefetch(ctx, s->forward));
  TEST_OK(FSDPContextSetLimitAllGathers(ctx, s->limit));
  TEST_OK(FSDPContextSetShmViews(ctx, s->views));
  if (s->wait != FSDP_WAIT_AUTO) TEST_OK(FSDPContextSetWaitMode(ctx, s->wait));
  TEST_OK(FSDPModelCreate(ctx, SPEC, &model));
  TEST_OK(FSDPModelSetSeed(model, 11));
  TEST_OK(FSDPModelSetUp(model));
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_OK(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_ADAMW));
  TEST_OK(FSDPOptimizerSetLearningRate(opt, 1e-2));
  TEST_OK(FSDPOptimizerSetUp(opt));
  TEST_OK(FSDPContextGetMemoryPlan(ctx, &plan));
  TEST_OK(FSDPContextGetShmViews(ctx, &r->views));
  {
    FSDPWaitMode wait;
    int ranks, cpus;
    TEST_OK(FSDPContextGetWaitMode(ctx, &wait, &ranks, &cpus));
    TEST_ASSERT(ranks >= 1 && cpus >= 1, "%s: %d ranks on %d CPUs", s->name, ranks, cpus);
    if (s->wait != FSDP_WAIT_AUTO)
      TEST_ASSERT(wait == s->wait, "%s: waits in mode %d, set to %d", s->name, (int)wait, (int)s->wait);
  }
  TEST_OK(FSDPMemoryResetPeak());
  for (int step = 0; step < STEPS; step++) {
    double loss;
    /* Each rank its own rows: gradients differ across ranks, so reductions matter. */
    for (int i = 0; i < ROWS * IN; i++) x[i] = test_value(100 + (uint64_t)step * 16 + (uint64_t)rank, i);
    for (int i = 0; i < ROWS * OUT; i++) t[i] = test_value(200 + (uint64_t)step * 16 + (uint64_t)rank, i);
    TEST_OK(FSDPContextZeroGrad(ctx));
    TEST_OK(FSDPModelForward(model, ROWS, x, &y));
    TEST_OK(FSDPMSELoss(ROWS, OUT, y, t, &loss, dy));
    TEST_OK(FSDPModelBackward(model, dy));
    TEST_OK(FSDPOptimizerStep(opt));
    TEST_OK(FSDPGetMemoryStats(&mem));
    if (step == 0) {
      allocs = mem.nallocs;
      frees = mem.nfrees;
    }
  }
  TEST_ASSERT(mem.nallocs == allocs && mem.nfrees == frees,
              "%s, %s: steps 2 to %d allocated %llu times and freed %llu times", sname, s->name, STEPS,
              (unsigned long long)(mem.nallocs - allocs), (unsigned long long)(mem.nfrees - frees));
  for (int c = FSDP_MEM_PARAMS; c <= FSDP_MEM_COMM_STAGING; c++) {
    if (c == FSDP_MEM_OPTIM_STATE) continue; /* the optimizer's, not the context's plan */
    TEST_ASSERT(mem.peak[c] == plan.bytes[c], "%s, %s: %s peaked at %zu bytes, the plan is %zu", sname, s->name,
                FSDPMemCategoryName((FSDPMemCategory)c), mem.peak[c], plan.bytes[c]);
  }
  TEST_OK(FSDPContextGetCommStats(ctx, &r->stats));
  TEST_OK(FSDPContextGetNumUnits(ctx, &r->nunits));
  {
    ShardGroup group;
    TEST_OK(FSDPContextGetShardGroup(ctx, &group));
    TEST_OK(ShardGroupGetShardComm(group, NULL, NULL, &r->factor));
  }
  r->n = 0;
  for (int u = 0; u < r->nunits; u++) {
    FlatParam unit;
    float *p;
    int64_t n;
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetShard(unit, (void **)&p, &n));
    TEST_ASSERT(r->n + n <= MAXSHARD, "shards too large for the test");
    memcpy(r->params + r->n, p, (size_t)n * sizeof(float));
    r->n += n;
  }
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_equivalence(FSDPShardingStrategy strategy, int factor)
{
  static Result ref, r;
  const char *sname = FSDPShardingStrategyName(strategy);

  train(strategy, factor, &settings[0], &ref);
  TEST_ASSERT(ref.stats.prefetches == 0, "%s: %lld prefetches with prefetching off", sname,
              (long long)ref.stats.prefetches);
  for (int k = 1; k < NSETTINGS; k++) {
    const Setting *s = &settings[k];
    bool prefetching = s->forward || s->backward != FSDP_BACKWARD_PREFETCH_NONE;
    bool keeps = strategy == FSDP_SHARD_GRAD_OP || strategy == FSDP_HYBRID_SHARD_ZERO2;
    double worst = 0;
    train(strategy, factor, s, &r);
    TEST_ASSERT(r.n == ref.n, "%s, %s: %lld shard elements, the reference has %lld", sname, s->name, (long long)r.n,
                (long long)ref.n);
    for (int64_t i = 0; i < r.n; i++) {
      double d = fabs((double)r.params[i] - ref.params[i]) / (fabs(ref.params[i]) + 1e-3);
      if (d > worst) worst = d;
    }
    if (s->exact)
      TEST_ASSERT(memcmp(r.params, ref.params, (size_t)r.n * sizeof(float)) == 0,
                  "%s, %s: parameters differ from the synchronous path (worst relative difference %.3g)", sname,
                  s->name, worst);
    else
      TEST_ASSERT(worst <= 1e-5, "%s, %s: parameters differ from the synchronous path by %.3g relative", sname, s->name,
                  worst);
    /* The limiter, through the library's own counter. */
    if (s->limit > 0)
      TEST_ASSERT(r.stats.max_unsharded <= s->limit, "%s, %s: %d units unsharded at once, the limit is %d", sname,
                  s->name, r.stats.max_unsharded, s->limit);
    TEST_ASSERT(r.views == (s->views && r.factor > 1), "%s, %s: views %s with -fsdp_shm_views %s and F = %d", sname,
                s->name, r.views ? "on" : "off", s->views ? "true" : "false", r.factor);
    if (r.views) /* Every backward unshard finds its unit from forward: no all-gather in backward. */
      TEST_ASSERT(r.stats.cache_hits == (int64_t)STEPS * r.nunits,
                  "%s, %s: %lld units found unsharded from forward in %d steps of %d units", sname, s->name,
                  (long long)r.stats.cache_hits, STEPS, r.nunits);
    else if (r.factor > 1 && !keeps) {
      /* AG0: the root unit, last in forward, is still unsharded when backward starts. */
      TEST_ASSERT(r.stats.cache_hits >= STEPS, "%s, %s: %lld units found unsharded from forward in %d steps", sname,
                  s->name, (long long)r.stats.cache_hits, STEPS);
      if (!prefetching)
        TEST_ASSERT(r.stats.prefetches == 0, "%s, %s: %lld prefetches with prefetching off", sname, s->name,
                    (long long)r.stats.prefetches);
      else if (s->limit != 1) {
        TEST_ASSERT(r.stats.prefetches > 0 && r.stats.prefetch_hits > 0, "%s, %s: %lld prefetches, %lld of them used",
                    sname, s->name, (long long)r.stats.prefetches, (long long)r.stats.prefetch_hits);
        TEST_ASSERT(s->limit == 0 || r.stats.max_unsharded == s->limit,
                    "%s, %s: prefetching never held %d units at once (at most %d)", sname, s->name, s->limit,
                    r.stats.max_unsharded);
      } else
        TEST_ASSERT(r.stats.deferred > 0, "%s, %s: with L = 1 the limiter never held a prefetch back", sname, s->name);
    }
    TEST_ASSERT(r.stats.buffer_growths == 0, "%s, %s: %lld buffers allocated beyond the plan", sname, s->name,
                (long long)r.stats.buffer_growths);
  }
}

/* Rank 1 skips unit b: before the next collective the check names both sides. */
static void test_desync(void)
{
  FSDPContext ctx;
  FlatParam unit[3];
  FSDPErrorCode code = FSDP_SUCCESS;
  int rank;
  static const char *const names[3] = {"a", "b", "c"};

  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  TEST_OK(FSDPContextSetFromOptions(ctx));
  TEST_OK(FSDPContextSetDebugCollectives(ctx, true));
  TEST_OK(FSDPContextSetBackwardPrefetch(ctx, FSDP_BACKWARD_PREFETCH_NONE));
  for (int u = 0; u < 3; u++) {
    TEST_OK(FSDPContextAddUnit(ctx, names[u], &unit[u]));
    TEST_OK(FlatParamAddParam(unit[u], names[u], 1, (int64_t[]){64}, NULL));
  }
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FSDPContextBeginForward(ctx));
  for (int u = 0; u < 3 && !code; u++) {
    if (rank == 1 && u == 1) continue;
    code = FlatParamUnshard(unit[u]);
    if (!code) TEST_OK(FlatParamReshard(unit[u]));
  }
  TEST_ASSERT(code == FSDP_ERR_STATE, "rank %d: a skipped all-gather gave code %d, not FSDP_ERR_STATE", rank, code);
  TEST_MESSAGE_HAS("collective mismatch at step 0");
  TEST_MESSAGE_HAS("rank 0 is about to run the AllGather of unit 'b'");
  TEST_MESSAGE_HAS("rank 1 the AllGather of unit 'c'");
  for (int u = 0; u < 3; u++) {
    FlatParamState state;
    TEST_OK(FlatParamGetState(unit[u], &state));
    TEST_ASSERT(state == FSDP_FLATPARAM_SHARDED, "after the mismatch unit %s is %s", names[u],
                FlatParamStateName(state));
  }
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* For tests/overlap.sh: rank 1 skips unit c's all-gather and waits elsewhere. */
static void hang(void)
{
  FSDPContext ctx;
  FlatParam unit[3];
  int rank;
  static const char *const names[3] = {"a", "b", "c"};

  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  TEST_OK(FSDPContextSetFromOptions(ctx));
  for (int u = 0; u < 3; u++) {
    TEST_OK(FSDPContextAddUnit(ctx, names[u], &unit[u]));
    TEST_OK(FlatParamAddParam(unit[u], names[u], 1, (int64_t[]){64}, NULL));
  }
  TEST_OK(FSDPContextSetUp(ctx));
  for (int u = 0; u < 3; u++) {
    if (rank == 1 && u == 2) continue;
    TEST_OK(FlatParamUnshard(unit[u]));
    TEST_OK(FlatParamReshard(unit[u]));
  }
  MPI_Barrier(MPI_COMM_WORLD); /* rank 1 waits here; the others never come */
  TEST_OK(FSDPContextDestroy(&ctx));
}

int main(int argc, char **argv)
{
  int size;
  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && !strcmp(argv[1], "hang")) hang();
  else {
    test_equivalence(FSDP_FULL_SHARD, 0);
    if (size % 2 == 0 && size >= 4) test_equivalence(FSDP_HYBRID_SHARD, 2);
    if (size == 2) test_equivalence(FSDP_SHARD_GRAD_OP, 0);
    if (size >= 2) test_desync();
  }
  TEST_OK(FSDPFinalize());
  return 0;
}
