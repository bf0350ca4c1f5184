/* Misuse of FSDPContext and FlatParam: each is its error, with a message that
   names the unit, the parameter and the state, raised on every rank that can
   see it; nothing crashes, nothing hangs, and the objects stay usable.
   mpitest: -n 2 */
#include "fsdptest.h"

static FSDPContext two_units(FSDPShardingStrategy strategy, int factor, FlatParam *a, FlatParam *b)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, strategy, factor);
  TEST_OK(FSDPContextAddUnit(ctx, "encoder", a));
  TEST_OK(FlatParamAddParam(*a, "encoder.weight", 2, (int64_t[]){3, 5}, NULL));
  TEST_OK(FSDPContextAddUnit(ctx, "head", b));
  TEST_OK(FlatParamAddParam(*b, "head.weight", 1, (int64_t[]){4}, NULL));
  TEST_OK(FlatParamAddParam(*b, "head.bias", 0, NULL, NULL));
  return ctx;
}

static void test_registration(void)
{
  FlatParam a, b;
  FSDPContext ctx = two_units(FSDP_FULL_SHARD, 0, &a, &b);
  float *x;

  TEST_CODE(FSDP_ERR_ARG, FlatParamAddParam(b, "encoder.weight", 1, (int64_t[]){2}, NULL));
  TEST_MESSAGE_HAS("'encoder.weight' already exists (in unit 'encoder')");
  TEST_CODE(FSDP_ERR_ARG, FSDPContextAddUnit(ctx, "head", &b));
  TEST_MESSAGE_HAS("a unit called 'head' already exists");
  TEST_CODE(FSDP_ERR_ARG, FlatParamAddParam(b, "head.gain", 2, (int64_t[]){2, -3}, NULL));
  TEST_MESSAGE_HAS("'head.gain': extent 1 is -3");
  TEST_CODE(FSDP_ERR_UNSUPPORTED, FlatParamSetDataType(a, FSDP_BFLOAT16));
  TEST_MESSAGE_HAS("not bf16");
  TEST_CODE(FSDP_ERR_STATE, FlatParamGetShard(a, (void **)&x, NULL));
  TEST_MESSAGE_HAS("unit 'encoder' is not set up");
  TEST_CODE(FSDP_ERR_ARG, FSDPContextFindParam(ctx, "head.gain", NULL, NULL));
  TEST_MESSAGE_HAS("no unit has a parameter called 'head.gain'");
  TEST_OK(FSDPContextSetUnitInit(ctx, NULL, NULL));
  TEST_OK(FSDPContextSetShardInit(ctx, (FSDPShardInitFn)NULL, NULL));
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetWaitMode(ctx, (FSDPWaitMode)7));
  TEST_MESSAGE_HAS("7 is not an FSDPWaitMode (auto, poll, sleep)");
  TEST_CODE(FSDP_ERR_STATE, FSDPContextWait(ctx, NULL));
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_CODE(FSDP_ERR_ARG, FSDPContextWait(ctx, NULL));
  TEST_MESSAGE_HAS("FSDPContextWait: request must not be NULL");
  {
    MPI_Request req;
    int one = 1, sum = 0, size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    TEST_ASSERT(MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req) == MPI_SUCCESS, "Iallreduce");
    TEST_OK(FSDPContextWait(ctx, &req));
    TEST_ASSERT(sum == size && req == MPI_REQUEST_NULL, "FSDPContextWait: the sum is %d of %d ranks", sum, size);
  }
  TEST_CODE(FSDP_ERR_STATE, FlatParamAddParam(a, "encoder.bias", 1, (int64_t[]){3}, NULL));
  TEST_MESSAGE_HAS("cannot add parameter 'encoder.bias' to unit 'encoder' after FSDPContextSetUp");
  TEST_CODE(FSDP_ERR_STATE, FSDPContextAddUnit(ctx, "decoder", &b));
  TEST_MESSAGE_HAS("cannot add unit 'decoder' after FSDPContextSetUp");
  TEST_CODE(FSDP_ERR_STATE, FSDPContextSetShardingStrategy(ctx, FSDP_NO_SHARD));
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_state_machine(void)
{
  FlatParam a, b;
  FSDPContext ctx = two_units(FSDP_FULL_SHARD, 0, &a, &b);
  float *x;
  FSDPParamId bias;
  FlatParam found;

  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FSDPContextFindParam(ctx, "head.bias", &found, &bias));
  TEST_ASSERT(found == b && bias == 1, "head.bias found as parameter %d of another unit", bias);
  TEST_CODE(FSDP_ERR_STATE, FlatParamGetParam(a, 0, (void **)&x));
  TEST_MESSAGE_HAS("parameter 'encoder.weight' of unit 'encoder' is not available while the unit is sharded");
  TEST_CODE(FSDP_ERR_STATE, FlatParamGetGrad(b, 1, (void **)&x));
  TEST_MESSAGE_HAS("gradient of parameter 'head.bias' of unit 'head' is not available while the unit is sharded");
  TEST_CODE(FSDP_ERR_STATE, FlatParamReduceGrad(a));
  TEST_MESSAGE_HAS("unit 'encoder' has no gradient to reduce (it is sharded)");
  TEST_CODE(FSDP_ERR_STATE, FlatParamReshard(a));
  TEST_MESSAGE_HAS("unit 'encoder' is sharded, not unsharded");
  TEST_OK(FlatParamUnshard(a));
  TEST_CODE(FSDP_ERR_ARG, FlatParamGetParam(a, 1, (void **)&x));
  TEST_MESSAGE_HAS("parameter id 1 is not one of unit 'encoder''s 1 parameters");
  TEST_CODE(FSDP_ERR_STATE, FlatParamUnshard(a));
  TEST_MESSAGE_HAS("unit 'encoder' is unsharded, not sharded");
  TEST_OK(FlatParamReduceGrad(a)); /* no gradient asked for: zeros are reduced; in flight until the next */
  TEST_CODE(FSDP_ERR_STATE, FlatParamUnshard(a));
  TEST_MESSAGE_HAS("unit 'encoder' is reducing its gradient");
  TEST_CODE(FSDP_ERR_STATE, FlatParamReduceGrad(a));
  TEST_MESSAGE_HAS("unit 'encoder' is already reducing");
  TEST_CODE(FSDP_ERR_STATE, FlatParamGetParam(a, 0, (void **)&x));
  TEST_MESSAGE_HAS("while the unit is reducing");
  TEST_CODE(FSDP_ERR_STATE, FSDPContextZeroGrad(ctx));
  TEST_MESSAGE_HAS("FSDPContextZeroGrad: the gradient reduction of unit 'encoder' is in flight");
  TEST_CODE(FSDP_ERR_STATE, FSDPContextDestroy(&ctx));
  TEST_MESSAGE_HAS("FSDPContextDestroy: the gradient reduction of unit 'encoder' is in flight");
  TEST_ASSERT(ctx != NULL, "a refused FSDPContextDestroy cleared the handle");
  TEST_OK(FSDPContextFinishBackward(ctx)); /* the context still works */
  TEST_OK(FlatParamUnshard(a));
  TEST_OK(FlatParamReshard(a));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* Raised on every rank, collectively, without a hang. */
static void test_collective_errors(void)
{
  FlatParam a, b;
  FSDPContext ctx;
  int rank;

  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  TEST_OK(FSDPContextAddUnit(ctx, "u", &a));
  TEST_OK(FlatParamAddParam(a, "u.w", 1, (int64_t[]){rank == 1 ? 6 : 5}, NULL));
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetUp(ctx));
  TEST_MESSAGE_HAS("differs from rank 0's (1 units, 1 parameters)");
  TEST_OK(FSDPContextDestroy(&ctx));

  /* Views on some ranks only would leave the others in an all-gather nobody joins. */
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  TEST_OK(FSDPContextAddUnit(ctx, "u", &a));
  TEST_OK(FlatParamAddParam(a, "u.w", 1, (int64_t[]){5}, NULL));
  TEST_OK(FSDPContextSetShmViews(ctx, rank != 1));
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetUp(ctx));
  TEST_MESSAGE_HAS("-fsdp_shm_views");
  TEST_OK(FSDPContextDestroy(&ctx));

  ctx = two_units(FSDP_FULL_SHARD, 0, &a, &b);
  {
    ShardGroup g;
    TEST_OK(FSDPContextGetShardGroup(ctx, &g));
    TEST_OK(ShardGroupSetShardingFactor(g, 1));
  }
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetUp(ctx));
  TEST_MESSAGE_HAS("sharding strategy full shards every unit over 2 ranks, but a sharding factor of 1 was asked for");
  TEST_OK(FSDPContextDestroy(&ctx));

  TEST_OK(FSDPOptionsSetValue("-fsdp_sharding_strategy", "zero3"));
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  TEST_CODE(FSDP_ERR_OPTION, FSDPContextSetFromOptions(ctx));
  TEST_MESSAGE_HAS("zero3");
  TEST_OK(FSDPContextDestroy(&ctx));
  TEST_OK(FSDPOptionsClearValue("-fsdp_sharding_strategy"));
}

/* -fsdp_sharding_strategy FROM gives `want`, and the view names it by its canonical name. */
static void expect_strategy(const char *from, FSDPShardingStrategy want)
{
  FSDPContext ctx;
  FSDPShardingStrategy got;
  Capture cap;
  char *out, line[64];

  TEST_OK(FSDPOptionsSetValue("-fsdp_sharding_strategy", from));
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  /* Another strategy first, so that the option, not the default, decides. */
  TEST_OK(FSDPContextSetShardingStrategy(ctx, want == FSDP_NO_SHARD ? FSDP_FULL_SHARD : FSDP_NO_SHARD));
  TEST_OK(FSDPContextSetFromOptions(ctx));
  TEST_OK(FSDPContextGetShardingStrategy(ctx, &got));
  TEST_ASSERT(got == want, "-fsdp_sharding_strategy %s gave %s, expected %s", from, FSDPShardingStrategyName(got),
              FSDPShardingStrategyName(want));
  capture_begin(&cap, 1);
  TEST_OK(FSDPContextView(ctx, NULL));
  out = capture_end(&cap);
  snprintf(line, sizeof line, "sharding strategy %s (not set up yet)", FSDPShardingStrategyName(want));
  if (test_rank() == 0) TEST_ASSERT(strstr(out, line), "the view of -fsdp_sharding_strategy %s says:\n%s", from, out);
  free(out);
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* PyTorch's strategy names, in any case, are aliases of the canonical ones. */
static void test_strategy_aliases(void)
{
  static const struct {
    const char *canonical, *pytorch, *upper;
  } names[] = {
      {"full", "full_shard", "FULL_SHARD"},
      {"grad_op", "shard_grad_op", "SHARD_GRAD_OP"},
      {"none", "no_shard", "NO_SHARD"},
      {"hybrid", "hybrid_shard", "HYBRID_SHARD"},
      {"hybrid_zero2", "hybrid_shard_zero2", "HYBRID_SHARD_ZERO2"},
  };
  FSDPContext ctx;

  TEST_ASSERT(sizeof names / sizeof names[0] == FSDP_NUM_SHARDING_STRATEGIES, "a strategy without its names here");
  for (int s = 0; s < FSDP_NUM_SHARDING_STRATEGIES; s++) {
    TEST_ASSERT(!strcmp(FSDPShardingStrategyName((FSDPShardingStrategy)s), names[s].canonical),
                "strategy %d is called %s, expected %s", s, FSDPShardingStrategyName((FSDPShardingStrategy)s),
                names[s].canonical);
    expect_strategy(names[s].canonical, (FSDPShardingStrategy)s);
    expect_strategy(names[s].pytorch, (FSDPShardingStrategy)s);
    expect_strategy(names[s].upper, (FSDPShardingStrategy)s);
  }
  /* A near miss names the choices, says the aliases exist and suggests the closest name. */
  TEST_OK(FSDPOptionsSetValue("-fsdp_sharding_strategy", "full-shard"));
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  TEST_CODE(FSDP_ERR_OPTION, FSDPContextSetFromOptions(ctx));
  TEST_MESSAGE_HAS("'full-shard' (from the program) is not one of full grad_op none hybrid hybrid_zero2 (or their "
                   "aliases full_shard shard_grad_op no_shard hybrid_shard hybrid_shard_zero2); did you mean "
                   "'full_shard'?");
  TEST_OK(FSDPOptionsSetValue("-fsdp_sharding_strategy", "hybird"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPContextSetFromOptions(ctx));
  TEST_MESSAGE_HAS("did you mean 'hybrid'?");
  TEST_OK(FSDPContextDestroy(&ctx));
  TEST_OK(FSDPOptionsClearValue("-fsdp_sharding_strategy"));
}

static FSDPErrorCode failing_init(FlatParam unit, void *user)
{
  const char *name;
  FSDPCall(FlatParamGetName(unit, &name));
  FSDPCheck(*(int *)user != 1, MPI_COMM_SELF, FSDP_ERR_USER, "cannot read the weights of '%s'", name);
  return FSDP_SUCCESS;
}

static FSDPErrorCode shard_init(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values, void *user)
{
  (void)unit, (void)id, (void)begin, (void)end, (void)values, (void)user;
  return FSDP_SUCCESS;
}

static void test_failing_init(void)
{
  FlatParam a, b;
  int rank;
  FSDPContext ctx = two_units(FSDP_FULL_SHARD, 0, &a, &b);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPContextSetUnitInit(ctx, failing_init, &rank));
  TEST_OK(FSDPContextSetShardInit(ctx, NULL, NULL)); /* clears nothing of the unit initializer's */
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetShardInit(ctx, shard_init, NULL));
  TEST_MESSAGE_HAS("already has a unit initializer");
  TEST_CODE(FSDP_ERR_USER, FSDPContextSetUp(ctx));
  TEST_MESSAGE_HAS("cannot read the weights of 'encoder'");
  TEST_CODE(FSDP_ERR_STATE, FlatParamUnshard(a));
  TEST_MESSAGE_HAS("FSDPContextSetUp failed on this context; destroy it");
  TEST_CODE(FSDP_ERR_STATE, FSDPContextSetUp(ctx));
  TEST_MESSAGE_HAS("FSDPContextSetUp failed on this context; destroy it");
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* An initializer fills parameters; the runtime is not running yet. */
static FSDPErrorCode meddling_init(FlatParam unit, void *user)
{
  float *x;
  (void)user;
  TEST_CODE(FSDP_ERR_STATE, FlatParamReshard(unit));
  TEST_MESSAGE_HAS("is being initialized: an initializer may only fill parameters");
  TEST_CODE(FSDP_ERR_STATE, FlatParamGetGrad(unit, 0, (void **)&x));
  TEST_OK(FlatParamGetParam(unit, 0, (void **)&x));
  x[0] = 42.0f;
  return FSDP_SUCCESS;
}

static void test_meddling_init(void)
{
  FlatParam a, b;
  float *x;
  FSDPContext ctx = two_units(FSDP_FULL_SHARD, 0, &a, &b);
  TEST_OK(FSDPContextSetUnitInit(ctx, meddling_init, NULL));
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FlatParamUnshard(a));
  TEST_OK(FlatParamGetParam(a, 0, (void **)&x));
  TEST_ASSERT(x[0] == 42.0f, "the initializer's value is lost: %g", x[0]);
  TEST_OK(FlatParamReshard(a));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* Hybrid, F = 1, two replicas: skipping the replicate all-reduce on top of
   gradients that already crossed the replicas would count them twice. */
static void test_replicate_accumulation(void)
{
  FlatParam a, b;
  float *g;
  FSDPContext ctx = two_units(FSDP_HYBRID_SHARD, 1, &a, &b);
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FlatParamUnshard(a));
  TEST_OK(FlatParamGetGrad(a, 0, (void **)&g));
  TEST_OK(FlatParamReduceGrad(a));
  TEST_OK(FSDPContextFinishBackward(ctx));
  TEST_OK(FSDPContextSetReplicateGradSync(ctx, false));
  TEST_OK(FlatParamUnshard(a));
  TEST_OK(FlatParamGetGrad(a, 0, (void **)&g));
  TEST_CODE(FSDP_ERR_STATE, FlatParamReduceGrad(a));
  TEST_MESSAGE_HAS("unit 'encoder' holds gradients already averaged across replicas");
  TEST_OK(FSDPContextFinishBackward(ctx));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* A unit whose gradient only some ranks computed (an unused branch on the
   others): those that asked for none reduce zeros, and nobody waits. */
static void test_gradient_on_some_ranks(void)
{
  FlatParam a, b;
  int rank;
  float *g;
  int64_t b0, e0, o0;
  FSDPContext ctx = two_units(FSDP_FULL_SHARD, 0, &a, &b);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FlatParamUnshard(a));
  if (rank == 0) {
    TEST_OK(FlatParamGetGrad(a, 0, (void **)&g));
    for (int i = 0; i < 15; i++) g[i] = 2.0f;
  }
  TEST_OK(FlatParamReduceGrad(a));
  TEST_OK(FSDPContextFinishBackward(ctx));
  TEST_OK(FlatParamGetGradShard(a, (void **)&g, NULL));
  TEST_OK(FlatParamGetShardRange(a, 0, &b0, &e0, &o0));
  for (int64_t i = 0; i < e0 - b0; i++) TEST_ASSERT(g[o0 + i] == 1.0f, "gradient %g, expected (2 + 0) / 2", g[o0 + i]);
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* One rank cannot broadcast: every rank hears why instead of waiting in MPI_Bcast. */
static void test_sync_params_agreed(void)
{
  FlatParam a, b;
  int rank;
  FSDPContext ctx = two_units(FSDP_NO_SHARD, 0, &a, &b);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPContextSetUp(ctx));
  if (rank == 1) TEST_OK(FlatParamUnshard(a)); /* F = 1: no collective */
  TEST_CODE(FSDP_ERR_STATE, FSDPContextBroadcastParams(ctx));
  TEST_MESSAGE_HAS("FSDPContextBroadcastParams: unit 'encoder' is unsharded");
  if (rank == 1) TEST_OK(FlatParamReshard(a));
  TEST_OK(FSDPContextBroadcastParams(ctx));
  TEST_OK(FSDPContextDestroy(&ctx));
}

int main(int argc, char **argv)
{
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  test_registration();
  test_state_machine();
  test_collective_errors();
  test_strategy_aliases();
  test_failing_init();
  test_meddling_init();
  test_replicate_accumulation();
  test_sync_params_agreed();
  test_gradient_on_some_ranks();
  if (test_rank() == 0) printf("test_fsdp_errors: every misuse raised its error\n");
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
