/* FSDPPlan predicts what a job allocates, exactly: for every strategy at
   W = 1, 2 and 4 and for an MLP, a GPT and the grid models, the candidate
   with the job's settings must give, byte for byte, the memory plan the
   job's context reports (FSDPContextGetMemoryPlan, what -fsdp_view prints),
   the optimizer state its FSDPOptimizerSetUp allocates on rank 0, and the
   activations its first step allocates.  Then the refusal (nothing fits:
   the least memory, its layout and the dominant category), the ranking
   with rates, the probe's rates, and the argument errors.
   mpitest: -n 4
   mpitest: -n 2
   mpitest: -n 1 */
#include <math.h>

#include "fsdp_config.h"
#include "fsdp_nn.h"
#include "fsdptest.h"

#define BATCH 8 /* rows per step, all ranks together */

/* The GPT ties its embeddings: SetUp keeps a gradient of them besides the plan. */
#define GPT_UNTIED "gpt:vocab=13,ctx=9,dim=16,heads=2,layers=2"
static const char *const specs[] = {
    "mlp:in=6,hidden=40,depth=3,out=3,norm=layernorm",  GPT_UNTIED ",tied=1",
    "cnn:grid=8x8,in=2,out=1,depth=2,channels=4",       "unet:grid=8x8,in=2,out=1,channels=4,levels=2",
#if FSDP_HAVE_FFTW
    "fno:grid=8x8,in=2,out=1,width=4,modes=3,layers=2",
#endif
};
#define NSPECS ((int)(sizeof specs / sizeof specs[0]))

static int find_candidate(FSDPPlan plan, FSDPShardingStrategy s, int factor, bool ckpt, FSDPPlanCandidate *out)
{
  int n;
  TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
  for (int i = 0; i < n; i++) {
    TEST_OK(FSDPPlanGetCandidate(plan, i, out));
    if (out->strategy == s && out->factor == factor && out->wrap == FSDP_WRAP_BLOCK && out->grad_accum == 1 &&
        out->activation_checkpointing == ckpt)
      return i;
  }
  return -1;
}

/* One step of the real job: forward, loss, backward, optimizer. */
static void train_step(FSDPModel model, FSDPContext ctx, FSDPOptimizer opt, int64_t rows)
{
  int64_t in, out, tokens = 0, vocab = 0;
  float *x, *y, *target, *dy;
  int64_t *labels;
  double loss;
  TEST_OK(FSDPModelGetSizes(model, &in, &out, NULL));
  (void)FSDPModelGetTokens(model, &tokens, &vocab); /* FSDP_ERR_ARG for a model that is not a GPT */
  x = malloc((size_t)(rows * in) * sizeof *x);
  target = malloc((size_t)(rows * out) * sizeof *target);
  labels = malloc((size_t)(rows * in) * sizeof *labels);
  TEST_ASSERT(x && target && labels, "out of memory");
  for (int64_t i = 0; i < rows * in; i++) {
    labels[i] = vocab ? (int64_t)(i * 7 % vocab) : 0;
    x[i] = vocab ? (float)(i * 5 % vocab) : test_value(1, i);
  }
  for (int64_t i = 0; i < rows * out; i++) target[i] = test_value(2, i);
  TEST_OK(FSDPModelForward(model, rows, x, &y));
  if (vocab) TEST_OK(FSDPModelLoss(model, FSDP_LOSS_CROSS_ENTROPY, labels, 1.0, &loss, &dy));
  else TEST_OK(FSDPModelLoss(model, FSDP_LOSS_MSE, target, 1.0, &loss, &dy));
  TEST_OK(FSDPModelBackward(model, dy));
  TEST_OK(FSDPContextFinishBackward(ctx));
  TEST_OK(FSDPOptimizerStep(opt));
  free(x);
  free(target);
  free(labels);
}

/* A context with candidate c's layout and param_dtype. */
static void layout_context(const FSDPPlanCandidate *c, FSDPDataType param_dtype, FSDPContext *ctx)
{
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, ctx));
  TEST_OK(FSDPContextSetShardingStrategy(*ctx, c->strategy));
  TEST_OK(FSDPContextSetMixedPrecision(*ctx, param_dtype, FSDP_FLOAT32));
  if (test_is_hybrid(c->strategy)) {
    ShardGroup group;
    TEST_OK(FSDPContextGetShardGroup(*ctx, &group));
    TEST_OK(ShardGroupSetShardingFactor(group, c->factor));
  }
}

/* Bytes of FSDP_MEM_OTHER that spec's SetUp keeps with c's layout in fp32: the context's own bookkeeping, to
   tell it from what a tied or 16-bit model keeps. */
static size_t setup_other(const char *spec, const FSDPPlanCandidate *c)
{
  FSDPContext ctx;
  FSDPModel model;
  FSDPMemoryStats a, b;
  layout_context(c, FSDP_FLOAT32, &ctx);
  TEST_OK(FSDPModelCreate(ctx, spec, &model));
  TEST_OK(FSDPGetMemoryStats(&a));
  TEST_OK(FSDPModelSetUp(model));
  TEST_OK(FSDPGetMemoryStats(&b));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
  return b.current[FSDP_MEM_OTHER] - a.current[FSDP_MEM_OTHER];
}

/* The job with candidate c's settings, set up and stepped once, against c.  twin: spec untied in fp32, whose
   SetUp keeps only the context's bookkeeping; NULL where spec is that itself (nothing predicted beyond the
   activations). */
static void check_case(const char *spec, const char *twin, const FSDPPlanCandidate *c, FSDPDataType param_dtype,
                       int rank, int size)
{
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  FSDPMemoryPlan mp;
  FSDPMemoryStats s0, s1, s2, before;
  size_t act, own;
  int64_t rows = BATCH / size;
  const char *what = FSDPShardingStrategyName(c->strategy);

  layout_context(c, param_dtype, &ctx);
  TEST_OK(FSDPModelCreate(ctx, spec, &model));
  TEST_OK(FSDPModelSetActivationCheckpointing(model, c->activation_checkpointing));
  TEST_OK(FSDPGetMemoryStats(&before));
  TEST_OK(FSDPModelSetUp(model));
  /* What SetUp keeps beside the plan (a tied GPT's embedding gradient, 16-bit parameters' widening scratch). */
  TEST_OK(FSDPGetMemoryStats(&s0));
  own = s0.current[FSDP_MEM_OTHER] - before.current[FSDP_MEM_OTHER];
  TEST_OK(FSDPContextGetMemoryPlan(ctx, &mp));
  for (int k = 0; k < FSDP_MEM_NUM_CATEGORIES; k++) {
    if (k == FSDP_MEM_OPTIM_STATE || k == FSDP_MEM_OTHER) continue;
    TEST_ASSERT(c->bytes[k] == mp.bytes[k], "%s, %s, F = %d, W = %d: %s predicted %zu bytes, the plan has %zu", spec,
                what, c->factor, size, FSDPMemCategoryName((FSDPMemCategory)k), c->bytes[k], mp.bytes[k]);
  }
  TEST_OK(FSDPGetMemoryStats(&s0));
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_OK(FSDPOptimizerSetUp(opt));
  TEST_OK(FSDPGetMemoryStats(&s1));
  if (rank == 0) /* the prediction is rank 0's, whose shards hold no padding */
    TEST_ASSERT(c->bytes[FSDP_MEM_OPTIM_STATE] == s1.current[FSDP_MEM_OPTIM_STATE] - s0.current[FSDP_MEM_OPTIM_STATE],
                "%s, %s, W = %d: optimizer state predicted %zu bytes, allocated %zu", spec, what, size,
                c->bytes[FSDP_MEM_OPTIM_STATE], s1.current[FSDP_MEM_OPTIM_STATE] - s0.current[FSDP_MEM_OPTIM_STATE]);
  TEST_OK(FSDPModelGetActivationBytes(model, rows, c->activation_checkpointing, &act));
  {
    /* The twin's bookkeeping differs by a few names' bytes (a GPT untied names its head's weight): within 128. */
    size_t base = twin ? setup_other(twin, c) : own, slack = twin ? 128 : 0;
    TEST_ASSERT(c->bytes[FSDP_MEM_OTHER] + slack >= act + own - base &&
                    c->bytes[FSDP_MEM_OTHER] <= act + own - base + slack,
                "%s, %s, %s, W = %d: other memory predicted %zu bytes; the activations are %zu, SetUp kept %zu "
                "beside the context's %zu",
                spec, FSDPDataTypeName(param_dtype), what, size, c->bytes[FSDP_MEM_OTHER], act, own - base, base);
  }
  train_step(model, ctx, opt, rows);
  TEST_OK(FSDPGetMemoryStats(&s2));
  /* The first step allocates the activations, and nothing the plan did not count. */
  TEST_ASSERT(s2.current[FSDP_MEM_OTHER] - s1.current[FSDP_MEM_OTHER] == act,
              "%s, %s, W = %d: the first step allocated %zu bytes besides the plan, the activations are %zu", spec,
              what, size, s2.current[FSDP_MEM_OTHER] - s1.current[FSDP_MEM_OTHER], act);
  for (int k = 0; k < FSDP_MEM_NUM_CATEGORIES; k++)
    if (k != FSDP_MEM_OTHER)
      TEST_ASSERT(s2.current[k] == s1.current[k], "%s, %s, W = %d: the step allocated %s beyond the plan", spec, what,
                  size, FSDPMemCategoryName((FSDPMemCategory)k));
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* Every spec in fp32; under bf16 parameters, the MLP and the tied GPT (their widening scratch differs). */
static void check_predictions(int rank, int size)
{
  int ncases = 0;
  for (int m = 0; m < NSPECS + 2; m++) {
    FSDPDataType dtype = m < NSPECS ? FSDP_FLOAT32 : FSDP_BFLOAT16;
    const char *spec = specs[m < NSPECS ? m : m - NSPECS]; /* specs[0] and [1]: the MLP and the GPT */
    FSDPPlan plan;
    if (dtype != FSDP_FLOAT32) TEST_OK(FSDPOptionsSetValue("-fsdp_param_dtype", FSDPDataTypeName(dtype)));
    TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
    TEST_OK(FSDPPlanSetJob(plan, 1, size));
    TEST_OK(FSDPPlanSetBatch(plan, BATCH));
    TEST_OK(FSDPPlanSetModel(plan, spec));
    TEST_OK(FSDPPlanSetUp(plan));
    for (int s = 0; s < TEST_NUM_STRATEGIES; s++) {
      FSDPShardingStrategy st = test_strategies[s];
      int factor = st == FSDP_NO_SHARD ? 1 : test_is_hybrid(st) ? 2 : size;
      FSDPPlanCandidate c;
      if (test_is_hybrid(st) && size < 4) continue; /* F = 2 below W needs 4 ranks */
      for (int ckpt = 0; ckpt < 2; ckpt++) {
        TEST_ASSERT(find_candidate(plan, st, factor, ckpt, &c) >= 0, "%s: no candidate %s with F = %d at W = %d", spec,
                    FSDPShardingStrategyName(st), factor, size);
        TEST_ASSERT(c.replicas * c.factor == size && c.batch == BATCH && c.total > 0, "%s: candidate fields", spec);
        check_case(spec, spec == specs[1] ? GPT_UNTIED : dtype != FSDP_FLOAT32 ? spec : NULL, &c, dtype, rank, size);
        ncases++;
      }
    }
    TEST_OK(FSDPPlanDestroy(&plan));
    TEST_OK(FSDPOptionsClearValue("-fsdp_param_dtype"));
  }
  if (rank == 0) printf("test_plan: %d layouts at W = %d predicted to the byte\n", ncases, size);
}

/* A budget below every layout: the error names the least memory, its layout and the dominant category. */
static void check_refusal(void)
{
  FSDPPlan plan;
  FSDPPlanCandidate best;
  char line[256] = "x", want[64];
  int index = 7, n, most = 0;
  TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  TEST_OK(FSDPPlanSetJob(plan, 2, 4));
  TEST_OK(FSDPPlanSetBatch(plan, 64));
  TEST_OK(FSDPPlanSetModel(plan, "mlp:in=64,hidden=512,depth=4,out=8"));
  TEST_OK(FSDPPlanSetMemoryBudget(plan, 100000));
  TEST_OK(FSDPPlanSetUp(plan));
  TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
  TEST_OK(FSDPPlanGetCandidate(plan, 0, &best));
  TEST_ASSERT(!best.fits && best.total > 100000, "candidate 0 (%zu bytes) does not fit", best.total);
  for (int i = 1; i < n; i++) {
    FSDPPlanCandidate c;
    TEST_OK(FSDPPlanGetCandidate(plan, i, &c));
    TEST_ASSERT(!c.fits && c.total >= best.total, "candidate %d (%zu bytes) is below the least (%zu)", i, c.total,
                best.total);
  }
  /* Sharded over all 8 ranks, the least; its largest part is named. */
  TEST_ASSERT(best.factor == 8 && best.strategy == FSDP_FULL_SHARD, "the least is %s with F = %d",
              FSDPShardingStrategyName(best.strategy), best.factor);
  for (int k = 0; k < FSDP_MEM_NUM_CATEGORIES; k++)
    if (best.bytes[k] > best.bytes[most]) most = k;
  TEST_CODE(FSDP_ERR_MEM, FSDPPlanGetChoice(plan, &index, line, sizeof line));
  TEST_ASSERT(index == -1 && line[0] == '\0', "a refusal chooses nothing (index %d, '%s')", index, line);
  FSDPFormatBytes(want, sizeof want, (double)best.total);
  TEST_MESSAGE_HAS("fits no layout within the budget of 97.66 KiB per rank at W = 8");
  TEST_MESSAGE_HAS(want);
  snprintf(want, sizeof want, "is %s", FSDPMemCategoryName((FSDPMemCategory)most));
  TEST_MESSAGE_HAS(most == FSDP_MEM_OTHER ? "are activations" : want);
  TEST_OK(FSDPPlanDestroy(&plan));
}

/* The least memory of a strategy (and F) among the candidates. */
static size_t least_total(FSDPPlan plan, FSDPShardingStrategy s, int factor)
{
  FSDPPlanCandidate c;
  size_t least = SIZE_MAX;
  int n;
  TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
  for (int i = 0; i < n; i++) {
    TEST_OK(FSDPPlanGetCandidate(plan, i, &c));
    if (c.strategy == s && c.factor == factor && c.total < least) least = c.total;
  }
  return least;
}

/* With rates, 4 nodes of 4 behind a slow link, and a budget no unsharded
   replica fits in: the choice shards within the node and replicates across
   (nothing but an all-reduce of shards crosses the link), not over all 16
   ranks; the rows are in predicted order; the options line says so. */
/* The full-sharding, model-wrapped, one-micro-batch candidate of a plan for nodes x rpn ranks, no budget. */
static FSDPPlanCandidate full_model_wrapped(int nodes, int rpn, int64_t batch, const char *spec)
{
  FSDPPlan plan;
  FSDPPlanCandidate c;
  int n, i = 0;
  TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  TEST_OK(FSDPPlanSetJob(plan, nodes, rpn));
  TEST_OK(FSDPPlanSetBatch(plan, batch));
  TEST_OK(FSDPPlanSetModel(plan, spec));
  TEST_OK(FSDPPlanSetMemoryBudget(plan, 0));
  TEST_OK(FSDPPlanSetUp(plan));
  TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
  do {
    TEST_ASSERT(i < n, "no full-sharding candidate with model wrapping for %s at %d x %d", spec, nodes, rpn);
    TEST_OK(FSDPPlanGetCandidate(plan, i++, &c));
  } while (c.strategy != FSDP_FULL_SHARD || c.wrap != FSDP_WRAP_MODEL || c.grad_accum != 1);
  TEST_OK(FSDPPlanDestroy(&plan));
  return c;
}

static void check_ranking(void)
{
  FSDPPlan plan;
  FSDPPlanCandidate c, prev;
  char line[256];
  int index, n;
  size_t none, hybrid;
  TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  TEST_OK(FSDPPlanSetJob(plan, 4, 4));
  TEST_OK(FSDPPlanSetBatch(plan, 64));
  TEST_OK(FSDPPlanSetModel(plan, "mlp:in=64,hidden=512,depth=4,out=8"));
  TEST_OK(FSDPPlanSetMemoryBudget(plan, 0));
  TEST_OK(FSDPPlanSetRates(plan, 1e11, 1e10, 1e8, 1e-6));
  TEST_OK(FSDPPlanSetUp(plan));
  none = least_total(plan, FSDP_NO_SHARD, 1);
  hybrid = least_total(plan, FSDP_HYBRID_SHARD_ZERO2, 4);
  TEST_ASSERT(hybrid < none, "hybrid_zero2 with F = 4 (%zu bytes) needs less than none (%zu)", hybrid, none);
  TEST_OK(FSDPPlanSetMemoryBudget(plan, (hybrid + none) / 2));
  TEST_OK(FSDPPlanSetUp(plan));
  TEST_OK(FSDPPlanGetChoice(plan, &index, line, sizeof line));
  TEST_OK(FSDPPlanGetCandidate(plan, 0, &c));
  TEST_ASSERT(index == 0 && c.fits && c.seconds > 0, "the choice is candidate 0, which fits, with a time");
  TEST_ASSERT(test_is_hybrid(c.strategy) && c.factor == 4 && c.replicas == 4 && !c.activation_checkpointing,
              "a slow inter-node link should choose hybrid with F = 4, not %s F = %d (checkpointing %d)",
              FSDPShardingStrategyName(c.strategy), c.factor, c.activation_checkpointing);
  TEST_ASSERT(fabs(c.seconds - c.compute_seconds - c.comm_seconds) < 1e-12 * c.seconds, "step = compute + comm");
  /* Of the 2 (R-1)/R of each shard a rank sends its replicas, 2 (1 - 1/R) cross nodes: one replica per node. */
  TEST_ASSERT(c.inter_node_bytes == c.replicate_bytes, "only the replicas' all-reduce crosses nodes");
  TEST_ASSERT(strstr(line, "-fsdp_sharding_strategy hybrid") && strstr(line, "-fsdp_sharding_factor 4") &&
                  strstr(line, "-batch 64 -grad_accum 1"),
              "options line '%s'", line);
  TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
  prev = c;
  for (int i = 1; i < n; i++) {
    TEST_OK(FSDPPlanGetCandidate(plan, i, &c));
    TEST_ASSERT(!c.fits || (prev.fits && c.seconds >= prev.seconds), "candidate %d (%g s) ranks after %d (%g s)", i,
                c.seconds, i - 1, prev.seconds);
    if (c.strategy == FSDP_FULL_SHARD && c.wrap == FSDP_WRAP_MODEL && c.grad_accum == 1) {
      /* The paper's volumes, each rank's sends: one unit is gathered for forward and still there for backward.
         Between nodes, each link each way: the gather (3.4 MB, past MPICH's 512 KiB too) as a ring, crossing
         once per node, 15/16 of the unit; the reduce-scatter as a ring, or by MPICH's recursive halving, where
         each of a node's 4 ranks sends the 12 shards of the other nodes' ranks across, 4 x 12/16 of the unit.
         A node's 4 ranks share its link. */
      int64_t numel = (64 * 512 + 512) + 3 * (512 * 512 + 512) + (512 * 8 + 8), padded = (numel + 15) / 16 * 16;
      double unit = (double)padded * 4, want = 2.0 * 15.0 / 16.0 * unit; /* the gather and the reduce-scatter */
      double link = 15.0 / 16.0 * unit + (test_mpi_is_mpich() ? 4.0 * 12.0 / 16.0 : 15.0 / 16.0) * unit;
      TEST_ASSERT(c.shard_bytes == want && c.replicate_bytes == 0 && fabs(c.inter_node_bytes - link / 4) < 1e-12 * link,
                  "full, model wrapping: %g bytes (%g across nodes), not %g (%g)", c.shard_bytes, c.inter_node_bytes,
                  want, link / 4);
    }
    if (c.strategy == FSDP_NO_SHARD && c.wrap == FSDP_WRAP_MODEL) {
      /* 16 replicas, 4 on a node: reduced within the node first, 2 (1/4 - 1/16) of the gradient crosses. */
      int64_t numel = (64 * 512 + 512) + 3 * (512 * 512 + 512) + (512 * 8 + 8);
      TEST_ASSERT(fabs(c.inter_node_bytes - 2.0 * (0.25 - 1.0 / 16) * (double)numel * 4) < 1e-6 * c.inter_node_bytes,
                  "none: %g bytes across nodes", c.inter_node_bytes);
    }
    prev = c;
  }
  TEST_OK(FSDPPlanDestroy(&plan));

  /* 2 nodes of 2, full sharding over F = 4, the same unit, below 512 KiB: MPICH gathers by recursive doubling
     and reduces by recursive halving, each of a node's 2 ranks sending the other node's 2 shards across: a
     whole unit leaves a node for each.  Rings: 3/4 of it. */
  c = full_model_wrapped(2, 2, 8, "mlp:in=16,hidden=64,depth=3,out=4");
  {
    double unit = c.shard_bytes / (2 * 3.0 / 4.0), link = (test_mpi_is_mpich() ? 2.0 : 2 * 3.0 / 4.0) * unit;
    TEST_ASSERT(fabs(c.inter_node_bytes - link / 2) < 1e-9 * link,
                "full sharding over 2 nodes of 2: %g bytes across nodes a rank, not %g (a unit of %g bytes)",
                c.inter_node_bytes, link / 2, unit);
  }

  /* 3 nodes of 2, full sharding over F = 6 (not a power of two), one unit.  Of 39 KB: MPICH all-gathers it by
     Bruck's algorithm (below 80 KiB), whose steps send 1, 2 and 2 shards to the ranks 1, 2 and 4 before: 9 of a
     node's shards leave it.  It reduce-scatters by recursive halving: ranks 0 and 2 hand theirs to 1 and 3
     within their nodes; then 1 and 4 exchange 2 and 4 shards, as do 3 and 5, and 1 and 3 2 each: 16 shards
     cross, 16/3 leave a node on average.  Of 3.4 MB: the all-gather is a ring, 5; the reduce-scatter a
     pairwise exchange (from 512 KiB, blocking as the default thread engine calls it), each of a node's 2
     ranks sending 4 shards to the other nodes, 8.  Other MPIs: rings, 5 and 5. */
  for (int big = 0; big < 2; big++) {
    double unit, link, mpich = big ? 5.0 + 8.0 : 9.0 + 16.0 / 3.0;
    c = full_model_wrapped(3, 2, 12, big ? "mlp:in=64,hidden=512,depth=4,out=8" : "mlp:in=16,hidden=64,depth=3,out=4");
    unit = c.shard_bytes / (2 * 5.0 / 6.0); /* one gather (still there for backward), one reduce-scatter */
    link = (test_mpi_is_mpich() ? mpich : 5.0 + 5.0) / 6.0 * unit;
    TEST_ASSERT((big ? unit > 512 * 1024 : unit < 80 * 1024) && fabs(c.inter_node_bytes - link / 2) < 1e-9 * link,
                "full sharding over 3 nodes of 2: %g bytes across nodes a rank, not %g (a unit of %g bytes)",
                c.inter_node_bytes, link / 2, unit);
  }
}

/* The planner's view, as rank 0 wrote it, into text on every rank. */
static void view_text(FSDPPlan plan, int rank, char *text, size_t len)
{
  FSDPViewer v;
  FILE *f;
  size_t got = 0;
  TEST_OK(FSDPViewerASCIIOpen(MPI_COMM_WORLD, "test_plan_view.txt", &v));
  TEST_OK(FSDPPlanView(plan, v));
  TEST_OK(FSDPViewerDestroy(&v));
  MPI_Barrier(MPI_COMM_WORLD);
  if ((f = fopen("test_plan_view.txt", "r"))) {
    got = fread(text, 1, len - 1, f);
    fclose(f);
  }
  text[got] = '\0';
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) remove("test_plan_view.txt");
}

static void check_probe(int rank, int size)
{
  FSDPPlan plan;
  double flops, intra, inter, latency, t0 = MPI_Wtime();
  TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  TEST_OK(FSDPPlanProbe(plan));
  TEST_OK(FSDPPlanGetRates(plan, &flops, &intra, &inter, &latency));
  TEST_ASSERT(MPI_Wtime() - t0 < 30, "the probe took %g s", MPI_Wtime() - t0);
  TEST_ASSERT(flops > 1e6 && isfinite(flops), "probe: %g FLOP/s", flops);
  TEST_ASSERT(size == 1 ? intra == 0 && latency == 0 : intra > 1e5 && latency > 0 && latency < 1,
              "probe at W = %d: intra-node %g B/s, latency %g s", size, intra, latency);
  TEST_ASSERT(inter == 0, "one node: no inter-node rate (%g)", inter);
  TEST_OK(FSDPPlanDestroy(&plan));
  /* With a model, the probe times it too: every layout's compute comes out positive, and recomputing
     forward under checkpointing costs more. */
  t0 = MPI_Wtime();
  TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  TEST_OK(FSDPPlanSetModel(plan, "gpt:vocab=16,ctx=8,dim=16,heads=2,layers=2"));
  TEST_OK(FSDPPlanSetBatch(plan, 8 * size));
  TEST_OK(FSDPPlanProbe(plan));
  TEST_ASSERT(MPI_Wtime() - t0 < 30, "the probe with a model took %g s", MPI_Wtime() - t0);
  TEST_OK(FSDPPlanSetUp(plan));
  { /* the view says the model was timed */
    char text[8192];
    view_text(plan, rank, text, sizeof text);
    TEST_ASSERT(strstr(text, "the model's step (measured by FSDPPlanProbe"),
                "the view does not show the model's timing: %s", text);
    TEST_ASSERT(size == 1 || strstr(text, "collectives (timed by FSDPPlanProbe on 1 node x "),
                "the view does not show the timed collectives: %s", text);
  }
  {
    FSDPPlanCandidate c, d;
    int n;
    TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
    for (int i = 0; i < n; i++) {
      TEST_OK(FSDPPlanGetCandidate(plan, i, &c));
      TEST_ASSERT(c.compute_seconds > 0 && c.seconds >= c.compute_seconds, "candidate %d: compute %g s, step %g s", i,
                  c.compute_seconds, c.seconds);
      for (int j = 0; j < n && !c.activation_checkpointing; j++) {
        TEST_OK(FSDPPlanGetCandidate(plan, j, &d));
        if (d.activation_checkpointing && d.strategy == c.strategy && d.factor == c.factor && d.wrap == c.wrap &&
            d.grad_accum == c.grad_accum)
          TEST_ASSERT(d.compute_seconds > c.compute_seconds, "checkpointing: compute %g s, without %g s",
                      d.compute_seconds, c.compute_seconds);
      }
    }
  }
  /* The step's collectives, timed on this job, stand for the rates on a job of its shape, and only there: a
     latency of 10 s changes no candidate here (each one's timed collectives take less), and sets every one's on
     2 nodes of this size (each runs a collective). */
  if (size > 1) {
    FSDPPlanCandidate c;
    int n;
    TEST_OK(FSDPPlanSetRates(plan, 0, 0, 1e9, 10.0));
    TEST_OK(FSDPPlanSetUp(plan));
    TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
    for (int i = 0; i < n; i++) {
      TEST_OK(FSDPPlanGetCandidate(plan, i, &c));
      TEST_ASSERT(c.comm_seconds > 0 && c.comm_seconds < 10,
                  "candidate %d (F = %d, R = %d): comm %g s on the job timed", i, c.factor, c.replicas, c.comm_seconds);
    }
    TEST_OK(FSDPPlanSetJob(plan, 2, size));
    TEST_OK(FSDPPlanSetBatch(plan, 16 * size));
    TEST_OK(FSDPPlanSetUp(plan));
    TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
    for (int i = 0; i < n; i++) {
      TEST_OK(FSDPPlanGetCandidate(plan, i, &c));
      TEST_ASSERT(c.comm_seconds >= 10, "candidate %d (F = %d, R = %d) on 2 nodes: comm %g s, not at the rates", i,
                  c.factor, c.replicas, c.comm_seconds);
    }
  }
  TEST_OK(FSDPPlanDestroy(&plan));
  /* A model too large to time on one rank (its budget is its own) is timed on none, and the ranks, which time
     each pass together, all return. */
  TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  TEST_OK(FSDPPlanSetModel(plan, "gpt:vocab=16,ctx=8,dim=16,heads=2,layers=2"));
  TEST_OK(FSDPPlanSetBatch(plan, 8 * size));
  if (rank == size - 1) TEST_OK(FSDPPlanSetMemoryBudget(plan, 1000));
  TEST_OK(FSDPPlanProbe(plan));
  TEST_OK(FSDPPlanSetMemoryBudget(plan, 0));
  TEST_OK(FSDPPlanSetUp(plan));
  {
    char text[8192];
    view_text(plan, rank, text, sizeof text);
    TEST_ASSERT(strstr(text, "the model's step: not timed"), "one rank's budget too small to time the model: %s", text);
  }
  TEST_OK(FSDPPlanDestroy(&plan));
}

static void check_errors(void)
{
  FSDPPlan plan;
  FSDPPlanCandidate c;
  int n;
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanCreate(MPI_COMM_WORLD, NULL));
  TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  TEST_CODE(FSDP_ERR_STATE, FSDPPlanGetNumCandidates(plan, &n));
  TEST_MESSAGE_HAS("not set up");
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetUp(plan));
  TEST_MESSAGE_HAS("no model");
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetModel(plan, "mlp:in=4,hidden=8,depth=2,out=2,bogus=1"));
  TEST_MESSAGE_HAS("bogus");
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetJob(plan, 0, 4));
  TEST_MESSAGE_HAS("0 nodes of 4 ranks");
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetBatch(plan, -3));
  TEST_MESSAGE_HAS("-3 rows");
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetRates(plan, 1e9, -1, 0, 0));
  TEST_MESSAGE_HAS("intra is -1");
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetOptimizer(plan, (FSDPOptimizerType)9, 0));
  TEST_OK(FSDPPlanSetModel(plan, "mlp:in=4,hidden=8,depth=2,out=2"));
  TEST_OK(FSDPPlanSetJob(plan, 1, 3));
  TEST_OK(FSDPPlanSetBatch(plan, 10));
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetUp(plan));
  TEST_MESSAGE_HAS("batch of 10 rows does not divide evenly over W = 3");
  TEST_OK(FSDPPlanSetBatch(plan, 12));
  TEST_OK(FSDPPlanSetOptimizer(plan, FSDP_OPTIMIZER_SGD, 0));
  TEST_OK(FSDPPlanSetUp(plan));
  TEST_OK(FSDPPlanGetCandidate(plan, 0, &c));
  TEST_ASSERT(c.bytes[FSDP_MEM_OPTIM_STATE] == 0 && c.seconds < 0, "SGD without momentum keeps no state; no rates");
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanGetCandidate(plan, 100000, &c));
  TEST_MESSAGE_HAS("candidate 100000 does not exist");
  TEST_OK(FSDPOptionsSetValue("-fsdp_plan_batch", "0"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPPlanSetFromOptions(plan));
  TEST_MESSAGE_HAS("-fsdp_plan_batch 0: the batch must be positive");
  TEST_OK(FSDPOptionsSetValue("-fsdp_plan_batch", "12"));
  TEST_OK(FSDPOptionsSetValue("-fsdp_plan_memory", "0.4"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPPlanSetFromOptions(plan));
  TEST_MESSAGE_HAS("-fsdp_plan_memory '0.4': expected auto, none, or a number of bytes");
  TEST_OK(FSDPOptionsClearValue("-fsdp_plan_batch"));
  TEST_OK(FSDPOptionsClearValue("-fsdp_plan_memory"));
  TEST_OK(FSDPPlanSetJob(plan, 1 << 20, 16));
#if FSDP_HAVE_HWLOC
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetTopology(plan, "pack:1 core:32 pu:1"));
  TEST_MESSAGE_HAS("FSDPPlanSetTopology: 1048576 nodes of 32 ranks is more ranks than MPI numbers");
#endif
  TEST_OK(FSDPPlanDestroy(&plan));
  {
    int index = 5;
    TEST_CODE(FSDP_ERR_ARG, FSDPPlanGetChoice(NULL, &index, NULL, 0));
    TEST_ASSERT(index == -1, "FSDPPlanGetChoice's index on an error: %d", index);
  }
  TEST_OK(FSDPPlanDestroy(&plan)); /* NULL: nothing to do */
}

/* With the intra-node rate unknown, layouts with traffic within a node have no time: then every layout is
   ranked by the bytes it moves, not some by seconds and others by bytes. */
static void check_partial_rates(void)
{
  FSDPPlan plan;
  FSDPPlanCandidate c;
  double last = -1;
  int n, timed = 0;
  TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  TEST_OK(FSDPPlanSetModel(plan, "mlp:in=8,hidden=64,depth=3,out=2"));
  TEST_OK(FSDPPlanSetJob(plan, 2, 4));
  TEST_OK(FSDPPlanSetBatch(plan, 64));
  TEST_OK(FSDPPlanSetRates(plan, 1e10, 0, 1e8, 1e-5));
  TEST_OK(FSDPPlanSetUp(plan));
  TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
  for (int i = 0; i < n; i++) {
    TEST_OK(FSDPPlanGetCandidate(plan, i, &c));
    timed += c.seconds >= 0;
    TEST_ASSERT(c.shard_bytes + c.replicate_bytes >= last, "candidate %d moves %g bytes, after one of %g", i,
                c.shard_bytes + c.replicate_bytes, last);
    last = c.shard_bytes + c.replicate_bytes;
  }
  TEST_ASSERT(timed > 0 && timed < n, "%d of %d candidates timed: the case needs some of each", timed, n);
  TEST_OK(FSDPPlanDestroy(&plan));
}

/* A node's topology sets the ranks per node (a rank per core); a later
   FSDPPlanSetJob with other ranks per node overrides it. */
static void check_topology(void)
{
  FSDPPlan plan;
  FSDPPlanCandidate c;
  int n;
  TEST_OK(FSDPPlanCreate(MPI_COMM_WORLD, &plan));
  TEST_OK(FSDPPlanSetModel(plan, "mlp:in=4,hidden=8,depth=2,out=2"));
  TEST_OK(FSDPPlanSetBatch(plan, 24));
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetTopology(plan, ""));
  TEST_MESSAGE_HAS("source must name an hwloc XML file or a synthetic description");
#if FSDP_HAVE_HWLOC
  TEST_OK(FSDPPlanSetTopology(plan, "pack:1 core:3 pu:2"));
  TEST_OK(FSDPPlanSetJob(plan, 2, 3)); /* 2 such nodes */
  TEST_OK(FSDPPlanSetUp(plan));
  TEST_OK(FSDPPlanGetNumCandidates(plan, &n));
  for (int i = 0; i < n; i++) {
    TEST_OK(FSDPPlanGetCandidate(plan, i, &c));
    TEST_ASSERT(c.factor * c.replicas == 6, "candidate %d: F %d x R %d on 2 nodes of 3 cores", i, c.factor, c.replicas);
  }
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetTopology(plan, "pack:two core:2"));
  TEST_MESSAGE_HAS("FSDPPlanSetTopology 'pack:two core:2': no such file");
  TEST_CODE(FSDP_ERR_ARG, FSDPPlanSetTopology(plan, "/"));
  TEST_MESSAGE_HAS("FSDPPlanSetTopology '/' is not a regular file");
#else
  TEST_CODE(FSDP_ERR_UNSUPPORTED, FSDPPlanSetTopology(plan, "pack:1 core:3 pu:2"));
  TEST_MESSAGE_HAS("FSDPPlanSetTopology 'pack:1 core:3 pu:2' needs hwloc");
  (void)c;
  (void)n;
#endif
  TEST_OK(FSDPPlanDestroy(&plan));
}

int main(int argc, char **argv)
{
  int rank, size;
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check_predictions(rank, size);
  check_refusal();
  check_ranking();
  check_probe(rank, size);
  check_errors();
  check_topology();
  check_partial_rates();
  TEST_OK(FSDPFinalize());
  if (rank == 0) printf("test_plan: ok\n");
  return 0;
}
