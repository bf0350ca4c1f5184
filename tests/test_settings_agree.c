/* Settings that must agree across ranks (doc/options.md, "Settings that must
   agree"): when the last rank sets one otherwise than the others, through the
   API or the options database, FSDPContextSetUp fails on every rank with an
   error that names the option, both values and the ranks, and nothing hangs.
   The context can then be destroyed.  Settings that may differ set up.
   mpitest: -n 2
   mpitest: -n 3 */
#include "fsdptest.h"

static int rank, size;

static FSDPErrorCode shard_init(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values, void *user)
{
  (void)unit, (void)id, (void)user;
  memset(values, 0, (size_t)(end - begin) * sizeof(float));
  return FSDP_SUCCESS;
}

typedef struct {
  const char *option;           /* as the message names it */
  const char *mine, *theirs;    /* the value of ranks 0 .. W-2, and of the last rank */
  void (*set)(FSDPContext ctx); /* on the last rank only */
} Case;

static void set_strategy(FSDPContext c) { TEST_OK(FSDPContextSetShardingStrategy(c, FSDP_SHARD_GRAD_OP)); }
static void set_param_dtype(FSDPContext c) { TEST_OK(FSDPContextSetMixedPrecision(c, FSDP_BFLOAT16, FSDP_FLOAT32)); }
static void set_reduce_dtype(FSDPContext c) { TEST_OK(FSDPContextSetMixedPrecision(c, FSDP_FLOAT32, FSDP_FLOAT16)); }
static void set_device(FSDPContext c) { TEST_OK(FSDPContextSetDevice(c, FSDP_DEVICE_CUDA)); }
static void set_replicate(FSDPContext c) { TEST_OK(FSDPContextSetReplicateEngine(c, FSDP_REPLICATE_ENGINE_NCCL)); }
static void set_sync(FSDPContext c) { TEST_OK(FSDPContextSetSyncParams(c, true)); }
static void set_engine(FSDPContext c) { TEST_OK(FSDPContextSetCommEngine(c, FSDP_COMM_ENGINE_SYNC)); }
static void set_shm_reduce(FSDPContext c) { TEST_OK(FSDPContextSetShmReduce(c, false)); }
static void set_shm_views(FSDPContext c) { TEST_OK(FSDPContextSetShmViews(c, false)); }
static void set_backward(FSDPContext c) { TEST_OK(FSDPContextSetBackwardPrefetch(c, FSDP_BACKWARD_PREFETCH_POST)); }
static void set_forward(FSDPContext c) { TEST_OK(FSDPContextSetForwardPrefetch(c, true)); }
static void set_limit(FSDPContext c) { TEST_OK(FSDPContextSetLimitAllGathers(c, 1)); }
static void set_wait(FSDPContext c) { TEST_OK(FSDPContextSetWaitMode(c, FSDP_WAIT_SLEEP)); }
static void set_debug(FSDPContext c) { TEST_OK(FSDPContextSetDebugCollectives(c, true)); }
static void set_keep(FSDPContext c) { TEST_OK(FSDPContextSetCheckpointKeep(c, 3)); }
static void set_io(FSDPContext c) { TEST_OK(FSDPContextSetCheckpointIO(c, FSDP_CHECKPOINT_IO_INDEPENDENT)); }
static void set_strict(FSDPContext c) { TEST_OK(FSDPContextSetCheckpointStrict(c, false)); }
static void set_finite(FSDPContext c) { TEST_OK(FSDPContextSetCheckFinite(c, false)); }
static void set_init(FSDPContext c) { TEST_OK(FSDPContextSetShardInit(c, shard_init, NULL)); }

/* Through the options database, as fsdp-train's command line sets it. */
static void set_view(FSDPContext c)
{
  TEST_OK(FSDPOptionsSetValue("-fsdp_view", "true"));
  TEST_OK(FSDPContextSetFromOptions(c));
  TEST_OK(FSDPOptionsClearValue("-fsdp_view"));
}

static void set_io_option(FSDPContext c)
{
  TEST_OK(FSDPOptionsSetValue("-fsdp_checkpoint_io", "independent"));
  TEST_OK(FSDPContextSetFromOptions(c));
  TEST_OK(FSDPOptionsClearValue("-fsdp_checkpoint_io"));
}

static void set_finite_option(FSDPContext c)
{
  TEST_OK(FSDPOptionsSetValue("-fsdp_check_finite", "false"));
  TEST_OK(FSDPContextSetFromOptions(c));
  TEST_OK(FSDPOptionsClearValue("-fsdp_check_finite"));
}

static const Case cases[] = {
    {"-fsdp_sharding_strategy", "full", "grad_op", set_strategy},
    {"-fsdp_param_dtype", "fp32", "bf16", set_param_dtype},
    {"-fsdp_reduce_dtype", "fp32", "fp16", set_reduce_dtype},
    {"-fsdp_device", "host", "cuda", set_device},
    {"-fsdp_replicate_engine", "mpi", "nccl", set_replicate},
    {"-fsdp_sync_params", "false", "true", set_sync},
    {"-fsdp_view", "false", "true", set_view},
    {"-fsdp_comm_engine", "auto", "sync", set_engine},
    {"-fsdp_shm_reduce", "true", "false", set_shm_reduce},
    {"-fsdp_shm_views", "true", "false", set_shm_views},
    {"-fsdp_backward_prefetch", "pre", "post", set_backward},
    {"-fsdp_forward_prefetch", "false", "true", set_forward},
    {"-fsdp_limit_all_gathers", "2", "1", set_limit},
    {"-fsdp_wait", "auto", "sleep", set_wait},
    {"-fsdp_debug_collectives", "false", "true", set_debug},
    {"-fsdp_checkpoint_keep", "1", "3", set_keep},
    {"-fsdp_checkpoint_io", "auto", "independent", set_io},
    {"-fsdp_checkpoint_io", "auto", "independent", set_io_option},
    {"-fsdp_checkpoint_strict", "true", "false", set_strict},
    {"-fsdp_check_finite", "true", "false", set_finite},
    {"-fsdp_check_finite", "true", "false", set_finite_option},
    {"the initializer", "none", "a shard initializer (FSDPContextSetShardInit)", set_init},
};

static FSDPContext one_unit(void)
{
  FlatParam u;
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  TEST_OK(FSDPContextAddUnit(ctx, "u", &u));
  TEST_OK(FlatParamAddParam(u, "u.w", 2, (int64_t[]){6, 5}, NULL));
  return ctx;
}

static void expect_refused(FSDPContext *ctx, const char *text)
{
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetUp(*ctx));
  TEST_MESSAGE_HAS(text);
  TEST_OK(FSDPContextDestroy(ctx));
}

static void test_each_setting(void)
{
  char text[512];
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    FSDPContext ctx = one_unit();
    if (rank == size - 1) cases[k].set(ctx);
    snprintf(text, sizeof text, "FSDPContextSetUp: %s differs across ranks: rank 0 has %s, rank %d has %s",
             cases[k].option, cases[k].mine, size - 1, cases[k].theirs);
    expect_refused(&ctx, text);
  }
}

/* Rank 0 holds the odd value: the first other rank is named; every differing setting is. */
static void test_rank_zero_and_several(void)
{
  FSDPContext ctx = one_unit();
  if (rank == 0) {
    set_finite(ctx);
    set_io(ctx);
  }
  expect_refused(&ctx, "-fsdp_checkpoint_io differs across ranks: rank 0 has independent, rank 1 has auto; "
                       "-fsdp_check_finite differs across ranks: rank 0 has false, rank 1 has true");
}

/* A refused SetUp leaves a context that sets up once the ranks agree. */
static void test_agree_then(void)
{
  FSDPContext ctx = one_unit();
  bool finite;
  if (rank == size - 1) set_finite(ctx);
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetUp(ctx));
  TEST_OK(FSDPContextSetCheckFinite(ctx, false));
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FSDPContextGetCheckFinite(ctx, &finite));
  TEST_ASSERT(!finite, "-fsdp_check_finite is %d after SetUp", finite);
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* What each rank may set alone: a local watchdog, a signal's grace, per-unit
   log events, the memory limit (its check is agreed). */
static void test_may_differ(void)
{
  FSDPContext ctx = one_unit();
  if (rank == size - 1) {
    TEST_OK(FSDPContextSetCollectiveTimeout(ctx, 300));
    TEST_OK(FSDPContextSetSignalGrace(ctx, 1));
    TEST_OK(FSDPContextSetMemoryLimit(ctx, 0));
    TEST_OK(FSDPOptionsSetValue("-fsdp_log_view_units", "true"));
    TEST_OK(FSDPContextSetFromOptions(ctx));
    TEST_OK(FSDPOptionsClearValue("-fsdp_log_view_units"));
  }
  TEST_OK(FSDPContextSetUp(ctx));
  /* After SetUp, auto is what SetUp decided; anything else is refused by name. */
  TEST_OK(FSDPContextSetCheckpointIO(ctx, FSDP_CHECKPOINT_IO_AUTO));
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetCheckpointIO(ctx, FSDP_NUM_CHECKPOINT_IO));
  TEST_MESSAGE_HAS("FSDPContextSetCheckpointIO: io 4 is not collective, independent, auto or posix");
  TEST_OK(FSDPContextDestroy(&ctx));
}

int main(int argc, char **argv)
{
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  test_each_setting();
  test_rank_zero_and_several();
  test_agree_then();
  test_may_differ();
  if (rank == 0)
    printf("test_settings_agree: %zu settings refused when one rank differs\n", sizeof cases / sizeof cases[0]);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return FSDP_SUCCESS;
}
