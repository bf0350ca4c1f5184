/* The memory check of FSDPContextSetUp (doc/options.md, -fsdp_memory_limit):
   the plan it estimates before allocating is the plan SetUp then allocates,
   byte for byte, for every strategy, mixed precision and the views; a limit
   one byte below it is refused on every rank with each category named, and
   nothing allocated; at the plan it sets up, and a refused context sets up
   once the limit allows it.  The option's spellings, and the default (auto),
   which lets a small model set up (under valgrind too).
   mpitest: -n 2
   mpitest: -n 4 */
#include "fsdptest.h"

static int rank, size;

typedef struct {
  FSDPShardingStrategy strategy;
  int factor; /* hybrid */
  FSDPDataType param, reduce;
  bool views;
} Setting;

static FSDPContext make(const Setting *s, int64_t limit)
{
  FlatParam u;
  FSDPContext ctx = test_context(MPI_COMM_WORLD, s->strategy, s->factor);
  TEST_OK(FSDPContextSetMixedPrecision(ctx, s->param, s->reduce));
  TEST_OK(FSDPContextSetShmViews(ctx, s->views));
  TEST_OK(FSDPContextSetMemoryLimit(ctx, limit));
  TEST_OK(FSDPContextAddUnit(ctx, "embed", &u));
  TEST_OK(FlatParamAddParam(u, "embed.w", 2, (int64_t[]){33, 7}, NULL));
  TEST_OK(FSDPContextAddUnit(ctx, "block", &u));
  TEST_OK(FlatParamAddParam(u, "block.w", 2, (int64_t[]){64, 65}, NULL));
  TEST_OK(FlatParamAddParam(u, "block.b", 1, (int64_t[]){65}, NULL));
  TEST_OK(FSDPContextAddUnit(ctx, "head", &u));
  TEST_OK(FlatParamAddParam(u, "head.w", 1, (int64_t[]){3}, NULL));
  return ctx;
}

static void test_plan_is_the_estimate(void)
{
  const Setting settings[] = {
      {FSDP_FULL_SHARD, 0, FSDP_FLOAT32, FSDP_FLOAT32, true},
      {FSDP_FULL_SHARD, 0, FSDP_FLOAT32, FSDP_FLOAT32, false},
      {FSDP_SHARD_GRAD_OP, 0, FSDP_FLOAT32, FSDP_FLOAT32, false},
      {FSDP_SHARD_GRAD_OP, 0, FSDP_FLOAT32, FSDP_FLOAT32, true},
      {FSDP_NO_SHARD, 0, FSDP_FLOAT32, FSDP_FLOAT32, true},
      {FSDP_HYBRID_SHARD, 2, FSDP_FLOAT32, FSDP_FLOAT32, true},
      {FSDP_HYBRID_SHARD_ZERO2, 2, FSDP_BFLOAT16, FSDP_FLOAT32, true},
      {FSDP_FULL_SHARD, 0, FSDP_BFLOAT16, FSDP_BFLOAT16, true},
      {FSDP_FULL_SHARD, 0, FSDP_FLOAT16, FSDP_FLOAT32, false},
  };
  for (size_t k = 0; k < sizeof settings / sizeof settings[0]; k++) {
    FSDPMemoryPlan plan, again;
    FSDPMemoryStats before, after;
    FSDPContext ctx = make(&settings[k], 0);
    char text[64];
    TEST_OK(FSDPContextSetUp(ctx));
    TEST_OK(FSDPContextGetMemoryPlan(ctx, &plan));
    TEST_OK(FSDPContextDestroy(&ctx));
    TEST_ASSERT(plan.total > 0, "setting %zu: an empty plan", k);

    /* One byte below the plan: refused, on every rank, before a byte of it exists. */
    ctx = make(&settings[k], (int64_t)plan.total - 1);
    TEST_OK(FSDPGetMemoryStats(&before));
    TEST_CODE(FSDP_ERR_MEM, FSDPContextSetUp(ctx));
    TEST_OK(FSDPGetMemoryStats(&after));
    TEST_MESSAGE_HAS("FSDPContextSetUp: the memory plan needs ");
    TEST_MESSAGE_HAS(" per rank (parameter shards ");
    TEST_MESSAGE_HAS(", gradient shards ");
    TEST_MESSAGE_HAS(", unsharded buffers ");
    TEST_MESSAGE_HAS(", communication staging ");
    FSDPFormatBytes(text, sizeof text, (double)(plan.total - 1));
    TEST_MESSAGE_HAS(text);
    TEST_MESSAGE_HAS("(-fsdp_memory_limit): nothing was allocated");
    for (int c = FSDP_MEM_PARAMS; c <= FSDP_MEM_COMM_STAGING; c++)
      TEST_ASSERT(after.peak[c] == before.peak[c] && after.current[c] == before.current[c],
                  "setting %zu: a refused SetUp allocated %zu bytes of category %d", k, after.peak[c] - before.peak[c],
                  c);
    /* At the plan: the same context sets up, with the plan the check estimated. */
    TEST_OK(FSDPContextSetMemoryLimit(ctx, (int64_t)plan.total));
    TEST_OK(FSDPContextSetUp(ctx));
    TEST_OK(FSDPContextGetMemoryPlan(ctx, &again));
    TEST_ASSERT(again.total == plan.total, "setting %zu: plan %zu, then %zu", k, plan.total, again.total);
    TEST_OK(FSDPContextDestroy(&ctx));
  }
}

/* Only the last rank's limit is too small: every rank fails, the others quoting it. */
static void test_one_rank(void)
{
  const Setting s = {FSDP_FULL_SHARD, 0, FSDP_FLOAT32, FSDP_FLOAT32, true};
  FSDPContext ctx = make(&s, rank == size - 1 ? 1000 : 0);
  char text[64];
  TEST_CODE(FSDP_ERR_MEM, FSDPContextSetUp(ctx));
  snprintf(text, sizeof text, "on rank %d: FSDPContextSetUp: the memory plan needs", size - 1);
  TEST_MESSAGE_HAS(rank == size - 1 ? "at most 1000 B (-fsdp_memory_limit)" : text);
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void expect_option(const char *value, FSDPErrorCode code, const char *text)
{
  const Setting s = {FSDP_FULL_SHARD, 0, FSDP_FLOAT32, FSDP_FLOAT32, true};
  FSDPContext ctx = make(&s, FSDP_MEMORY_LIMIT_AUTO);
  TEST_OK(FSDPOptionsSetValue("-fsdp_memory_limit", value));
  if (code == FSDP_ERR_OPTION) TEST_CODE(code, FSDPContextSetFromOptions(ctx));
  else {
    TEST_OK(FSDPContextSetFromOptions(ctx));
    TEST_CODE(code, FSDPContextSetUp(ctx));
  }
  if (text) TEST_MESSAGE_HAS(text);
  TEST_OK(FSDPOptionsClearValue("-fsdp_memory_limit"));
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_option(void)
{
  expect_option("1K", FSDP_ERR_MEM, "but this rank can have at most 1.00 KiB (-fsdp_memory_limit)");
  expect_option("2kib", FSDP_ERR_MEM, "at most 2.00 KiB (-fsdp_memory_limit)");
  expect_option("1500", FSDP_ERR_MEM, "at most 1.46 KiB (-fsdp_memory_limit)");
  expect_option("0.5M", FSDP_SUCCESS, NULL);
  expect_option("1G", FSDP_SUCCESS, NULL);
  expect_option("none", FSDP_SUCCESS, NULL);
  expect_option("0", FSDP_SUCCESS, NULL);
  expect_option("auto", FSDP_SUCCESS, NULL); /* a small model fits this machine */
  expect_option("12GB", FSDP_ERR_OPTION, "-fsdp_memory_limit '12GB': expected auto, none, or a number of bytes");
  expect_option("-5", FSDP_ERR_OPTION, "-fsdp_memory_limit '-5'");
  expect_option("lots", FSDP_ERR_OPTION, "-fsdp_memory_limit 'lots'");
  expect_option("1e999", FSDP_ERR_OPTION, "-fsdp_memory_limit '1e999'");
  {
    FSDPContext ctx;
    TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
    TEST_CODE(FSDP_ERR_ARG, FSDPContextSetMemoryLimit(ctx, -2));
    TEST_MESSAGE_HAS("FSDPContextSetMemoryLimit: -2 is not a number of bytes, 0 (no check) or FSDP_MEMORY_LIMIT_AUTO");
    TEST_OK(FSDPContextDestroy(&ctx));
  }
}

int main(int argc, char **argv)
{
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  test_plan_is_the_estimate();
  test_one_rank();
  test_option();
  if (rank == 0) printf("test_memory_limit: plans estimated exactly, refused below them on every rank\n");
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
