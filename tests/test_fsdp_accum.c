/* Gradient accumulation over K micro-batches, every way: reducing each
   micro-batch, accumulating unsharded gradients without communication
   (FSDPContextSetGradSync false) and reducing once, and, for hybrid
   sharding, reduce-scattering each micro-batch but all-reducing across
   replicas once (FSDPContextSetReplicateGradSync false).  Each must give the
   gradient of the whole batch: the sum over micro-batches of the average
   over ranks.  Also checks what no-sync accumulation costs in memory: each
   unit's unsharded gradient stays allocated until it is reduced.
   mpitest: -n 4
   mpitest: -n 3 */
#include <math.h>

#include "fsdptest.h"

enum { K = 3, NUNITS = 2 };
static const int64_t sizes[NUNITS] = {37, 10};

/* The _AT_FINISH modes never reduce with sync on: sync is turned back on
   before FSDPContextFinishBackward, which must finish the job. */
typedef enum { SYNC_EACH, SYNC_LAST, REPLICATE_LAST, SYNC_AT_FINISH, REPLICATE_AT_FINISH, NUM_MODES } Mode;
static const char *const mode_names[] = {"reduce every micro-batch", "no sync until the last",
                                         "replicate all-reduce only on the last", "no sync until FinishBackward",
                                         "replicate all-reduce at FinishBackward"};

static float micro_grad(int rank, int k, int u, int64_t e)
{
  return test_value((uint64_t)(1000 * rank + 10 * k + u), e) / K; /* loss scaled by 1/K, as with a mean */
}

static void run(FSDPShardingStrategy strategy, int factor, Mode mode)
{
  int W, rank, R;
  FSDPContext ctx = test_context(MPI_COMM_WORLD, strategy, factor);
  FlatParam unit[NUNITS];
  ShardGroup group;

  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int u = 0; u < NUNITS; u++) {
    char name[16];
    snprintf(name, sizeof name, "u%d", u);
    TEST_OK(FSDPContextAddUnit(ctx, name, &unit[u]));
    snprintf(name, sizeof name, "u%d.w", u);
    TEST_OK(FlatParamAddParam(unit[u], name, 1, &sizes[u], NULL));
  }
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FSDPContextGetShardGroup(ctx, &group));
  TEST_OK(ShardGroupGetReplicateComm(group, NULL, NULL, &R));
  for (int step = 0; step < 2; step++) { /* the second step checks that ZeroGrad starts afresh */
    for (int k = 0; k < K; k++) {
      bool last = k == K - 1, at_finish = mode == SYNC_AT_FINISH || mode == REPLICATE_AT_FINISH;
      bool no_sync = mode == SYNC_AT_FINISH || (mode == SYNC_LAST && !last);
      FSDPMemoryStats mem;
      FSDPCommStats stats;
      FSDPMemoryPlan plan;
      TEST_OK(FSDPContextSetGradSync(ctx, !no_sync));
      TEST_OK(
          FSDPContextSetReplicateGradSync(ctx, !(mode == REPLICATE_AT_FINISH || (mode == REPLICATE_LAST && !last))));
      for (int u = NUNITS - 1; u >= 0; u--) {
        float *g;
        TEST_OK(FlatParamUnshard(unit[u]));
        TEST_OK(FlatParamGetGrad(unit[u], 0, (void **)&g));
        for (int64_t e = 0; e < sizes[u]; e++) g[e] += micro_grad(rank, k, u, e);
        TEST_OK(FlatParamReduceGrad(unit[u]));
      }
      if (last && at_finish) {
        TEST_OK(FSDPContextSetGradSync(ctx, true));
        TEST_OK(FSDPContextSetReplicateGradSync(ctx, true));
      }
      TEST_OK(FSDPContextFinishBackward(ctx));
      TEST_OK(FSDPGetMemoryStats(&mem));
      TEST_OK(FSDPContextGetCommStats(ctx, &stats));
      TEST_OK(FSDPContextGetMemoryPlan(ctx, &plan));
      if (no_sync && !last) /* every unit's unsharded gradient is still held */
        TEST_ASSERT(stats.grads_in_use == NUNITS, "without sync %d gradient buffers held, expected %d",
                    stats.grads_in_use, NUNITS);
      else
        TEST_ASSERT(stats.grads_in_use == 0 && stats.params_in_use == 0,
                    "%d gradient and %d parameter buffers still held after micro-batch %d", stats.grads_in_use,
                    stats.params_in_use, k);
      TEST_ASSERT(mem.current[FSDP_MEM_COMM_STAGING] == plan.bytes[FSDP_MEM_COMM_STAGING],
                  "%zu bytes of staging, the plan has %zu", mem.current[FSDP_MEM_COMM_STAGING],
                  plan.bytes[FSDP_MEM_COMM_STAGING]);
    }
    for (int u = 0; u < NUNITS; u++) {
      float *gs;
      int64_t b, e, o;
      TEST_OK(FlatParamGetGradShard(unit[u], (void **)&gs, NULL));
      TEST_OK(FlatParamGetShardRange(unit[u], 0, &b, &e, &o));
      for (int64_t i = b; i < e; i++) {
        double want = 0, mag = 0;
        for (int r = 0; r < W; r++)
          for (int k = 0; k < K; k++) {
            want += micro_grad(r, k, u, i);
            mag += fabs(micro_grad(r, k, u, i));
          }
        want /= W;
        /* fp32 sums of W*K terms in some order, a division, K additions */
        TEST_ASSERT(fabs(gs[o + i - b] - want) <= 4.0 * K * W * 0x1.0p-24 * mag / W + 1e-30,
                    "%s, %s, F = %d, R = %d: unit %d element %lld: %.9g, the whole batch gives %.9g",
                    FSDPShardingStrategyName(strategy), mode_names[mode], W / R, R, u, (long long)i, gs[o + i - b],
                    want);
      }
    }
    TEST_OK(FSDPContextZeroGrad(ctx));
  }
  TEST_OK(FSDPContextDestroy(&ctx));
}

int main(int argc, char **argv)
{
  int W, ncases = 0;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  for (int m = SYNC_EACH; m < NUM_MODES; m++) {
    run(FSDP_FULL_SHARD, 0, (Mode)m);
    run(FSDP_NO_SHARD, 0, (Mode)m);
    for (int F = 1; F < W; F++)
      if (W % F == 0) run(FSDP_HYBRID_SHARD, F, (Mode)m), ncases++;
    ncases += 2;
  }
  if (test_rank() == 0) printf("test_fsdp_accum: W = %d, %d cases passed\n", W, ncases);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
