/* The GPT model (gpt:...): its units and parameter names, its gradient
   through sharded units against finite differences of its loss (untied and
   tied head), activation checkpointing (bit-identical gradients, and exactly
   the activation memory FSDPModelGetActivationBytes predicts, with the
   memory-light attention and the full one), bf16
   parameters, and clear errors for bad specs and tokens.  tests/gpt.sh compares its training with
   PyTorch's.
   mpitest: -n 4
   mpitest: -n 1 */
#include <math.h>
#include <string.h>

#include "fsdp_nn.h"
#include "fsdptest.h"

enum { VOCAB = 11, CTX = 5, ROWS = 3 };
#define SPEC "gpt:vocab=11,ctx=5,dim=8,heads=2,layers=2"
#define SPEC_TIED SPEC ",tied=1"

static float tokens[ROWS * CTX];
static int64_t labels[ROWS * CTX];

static FSDPModel make_model(FSDPContext ctx, const char *spec)
{
  FSDPModel model;
  TEST_OK(FSDPModelCreate(ctx, spec, &model));
  TEST_OK(FSDPModelSetSeed(model, 3));
  TEST_OK(FSDPModelSetFromOptions(model)); /* -fsdp_attention, as main sets it */
  TEST_OK(FSDPModelSetUp(model));
  return model;
}

static double model_loss(FSDPModel model, float **dy)
{
  float *y;
  double loss;
  TEST_OK(FSDPModelForward(model, ROWS, tokens, &y));
  TEST_OK(FSDPModelLoss(model, FSDP_LOSS_CROSS_ENTROPY, labels, 1.0, &loss, dy));
  return loss;
}

static double fd_loss(void *model)
{
  float *dy;
  return model_loss(model, &dy);
}

/* Forward, loss and backward of a step, from zeroed gradients. */
static void step_gradients(FSDPContext ctx, FSDPModel model)
{
  float *dy;
  TEST_OK(FSDPContextZeroGrad(ctx));
  (void)model_loss(model, &dy);
  TEST_OK(FSDPModelBackward(model, dy));
  TEST_OK(FSDPContextFinishBackward(ctx));
}

/* ------------------------------------------------------------------ units and names */

static void test_units(void)
{
  static const char *const untied[] = {"embed", "blocks.0", "blocks.1", "head"};
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  FSDPModel model = make_model(ctx, SPEC);
  FlatParam unit;
  FSDPParamId id;
  int nunits, n;
  int64_t in, out, numel, t, v;
  const char *name;

  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  TEST_ASSERT(nunits == 4, "%d units, expected embed, two blocks and head", nunits);
  for (int u = 0; u < nunits; u++) {
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetName(unit, &name));
    TEST_ASSERT(!strcmp(name, untied[u]), "unit %d is '%s', expected '%s'", u, name, untied[u]);
  }
  TEST_OK(FSDPContextGetUnit(ctx, 1, &unit));
  TEST_OK(FlatParamGetNumParams(unit, &n));
  TEST_ASSERT(n == 12, "a block has %d parameters, expected 12", n);
  /* nanoGPT's names and PyTorch's [out, in] shapes. */
  TEST_OK(FSDPContextFindParam(ctx, "blocks.1.attn.qkv.weight", &unit, &id));
  {
    int ndim;
    const int64_t *shape;
    TEST_OK(FlatParamGetParamInfo(unit, id, &name, &ndim, &shape, &numel));
    TEST_ASSERT(ndim == 2 && shape[0] == 24 && shape[1] == 8, "attn.qkv.weight is not [24, 8]");
  }
  TEST_OK(FSDPContextFindParam(ctx, "wte.weight", &unit, &id));
  TEST_OK(FSDPContextFindParam(ctx, "wpe.weight", &unit, &id));
  TEST_OK(FSDPContextFindParam(ctx, "ln_f.bias", &unit, &id));
  TEST_OK(FSDPContextFindParam(ctx, "lm_head.weight", &unit, &id));
  TEST_OK(FSDPModelGetSizes(model, &in, &out, &numel));
  TEST_OK(FSDPModelGetTokens(model, &t, &v));
  /* wte 88 + wpe 40; a block 2*8 + 24*8 + 24 + 8*8 + 8 + 2*8 + 32*8 + 32 + 8*32 + 8 = 872; ln_f 16; head 88 */
  TEST_ASSERT(in == CTX && out == CTX * VOCAB && t == CTX && v == VOCAB && numel == 88 + 40 + 2 * 872 + 16 + 88,
              "sizes in %lld, out %lld, ctx %lld, vocab %lld, %lld parameters", (long long)in, (long long)out,
              (long long)t, (long long)v, (long long)numel);
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));

  /* Tied: the head has no weight of its own; the embedding's unit holds wte. */
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  model = make_model(ctx, SPEC_TIED);
  TEST_CODE(FSDP_ERR_ARG, FSDPContextFindParam(ctx, "lm_head.weight", &unit, &id));
  TEST_OK(FSDPModelGetSizes(model, NULL, NULL, &numel));
  TEST_ASSERT(numel == 88 + 40 + 2 * 872 + 16, "tied: %lld parameters", (long long)numel);
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* ------------------------------------------------------------------ gradients */

/* Every rank runs the same sequences; about 8 elements of each parameter
   are perturbed by the rank holding them and the loss differentiated. */
static void test_gradients(const char *spec, FSDPShardingStrategy strategy)
{
  int size;
  FSDPContext ctx;
  FSDPModel model;
  char what[128];
  const double h = 1e-3; /* the parameters are ~0.02: a larger step leaves the linear range */

  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ctx = test_context(MPI_COMM_WORLD, strategy, size % 2 == 0 ? 2 : 1);
  model = make_model(ctx, spec);
  step_gradients(ctx, model);
  snprintf(what, sizeof what, "%s %s", spec, FSDPShardingStrategyName(strategy));
  test_fd_gradients(ctx, h, 8, fd_loss, model, NULL, 0, what);
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* ------------------------------------------------------------------ activation checkpointing */

/* The gradient shards of every unit, concatenated into g (at most cap floats). */
static int64_t grads(FSDPContext ctx, float *g, int64_t cap)
{
  int nunits;
  int64_t n = 0;
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam unit;
    float *s;
    int64_t len;
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetGradShard(unit, (void **)&s, &len));
    TEST_ASSERT(n + len <= cap, "gradient shards longer than %lld floats", (long long)cap);
    memcpy(g + n, s, (size_t)len * sizeof *g);
    n += len;
  }
  return n;
}

/* One step's bytes in FSDP_MEM_OTHER beyond what was there before it: the model's buffers. */
static size_t step_bytes(FSDPContext ctx, FSDPModel model)
{
  FSDPMemoryStats st;
  size_t before;
  TEST_OK(FSDPGetMemoryStats(&st));
  before = st.current[FSDP_MEM_OTHER];
  TEST_OK(FSDPMemoryResetPeak());
  step_gradients(ctx, model);
  TEST_OK(FSDPGetMemoryStats(&st));
  return st.peak[FSDP_MEM_OTHER] - before;
}

/* With the memory-light attention (the default) or, full, the t x t probabilities kept. */
static void test_checkpointing(const char *spec, bool full)
{
  static float plain[4096], recomputed[4096];
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  FSDPModel model;
  size_t measured[2], predicted[2];
  int64_t n0 = 0, n1 = 0;
  bool on;

  TEST_OK(FSDPModelCreate(ctx, spec, &model));
  TEST_OK(FSDPModelSetSeed(model, 3));
  TEST_OK(FSDPOptionsSetValue("-fsdp_attention", full ? "full" : "blocked"));
  TEST_OK(FSDPModelSetFromOptions(model));
  TEST_OK(FSDPOptionsClearValue("-fsdp_attention"));
  TEST_OK(FSDPModelSetUp(model));
  for (int ckpt = 0; ckpt < 2; ckpt++) {
    TEST_OK(FSDPModelSetActivationCheckpointing(model, ckpt));
    TEST_OK(FSDPModelGetActivationCheckpointing(model, &on));
    TEST_ASSERT(on == ckpt, "activation checkpointing reads back %d", on);
    measured[ckpt] = step_bytes(ctx, model);
    TEST_OK(FSDPModelGetActivationBytes(model, ROWS, ckpt, &predicted[ckpt]));
    if (ckpt) n1 = grads(ctx, recomputed, 4096);
    else n0 = grads(ctx, plain, 4096);
  }
  TEST_ASSERT(n0 == n1 && !memcmp(plain, recomputed, (size_t)n0 * sizeof *plain),
              "%s: gradients with activation checkpointing differ from those without", spec);
  /* The buffers are all there is: forward and backward allocate nothing else. */
  for (int ckpt = 0; ckpt < 2; ckpt++)
    TEST_ASSERT(measured[ckpt] == predicted[ckpt], "%s: checkpointing %d: a step took %zu bytes, predicted %zu", spec,
                ckpt, measured[ckpt], predicted[ckpt]);
  /* Two blocks' saved state against one: a block's is T(15C + 4) + H T floats per sequence (each query's
     log-sum-exp per head), or with the full attention T(15C + 4) + H T^2. */
  TEST_ASSERT(predicted[0] - predicted[1] ==
                  (size_t)ROWS * (CTX * (15 * 8 + 4) + 2 * CTX * (full ? CTX : 1)) * sizeof(float),
              "%s, %s attention: checkpointing saves %zu bytes, expected one block's saved state", spec,
              full ? "full" : "blocked", predicted[0] - predicted[1]);
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* ------------------------------------------------------------------ errors */

static void expect_spec_error(const char *spec, const char *text)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  FSDPModel model;
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, spec, &model));
  TEST_MESSAGE_HAS(text);
  TEST_ASSERT(model == NULL, "a refused spec left a model");
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_errors(void)
{
  FSDPContext ctx;
  FSDPModel model;
  float *y, bad[ROWS * CTX];

  expect_spec_error("gpt:vocab=11,ctx=5,dim=8,heads=3,layers=2", "heads=3 does not divide dim=8");
  expect_spec_error("gpt:vocab=11,ctx=0,dim=8,heads=2,layers=2", "ctx=0 is not a positive integer");
  expect_spec_error("gpt:vocab=11,ctx=5,dim=8,heads=2", "lacks layers=");
  expect_spec_error("gpt:vocab=11,ctx=5,dim=8,heads=2,layers=1,tied=2", "tied=2 is not 0 or 1");
  expect_spec_error("gpt:vocab=11,ctx=5,dim=8,heads=2,layers=1,hidden=4", "unknown key 'hidden'");
  expect_spec_error("gpt:vocab=99999999,ctx=5,dim=8,heads=2,layers=1", "vocab=99999999 is above 2^24");

  /* A token id outside [0, vocab), or not an integer, is named with its place. */
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  model = make_model(ctx, SPEC);
  memcpy(bad, tokens, sizeof bad);
  bad[2 * CTX + 3] = VOCAB;
  TEST_CODE(FSDP_ERR_ARG, FSDPModelForward(model, ROWS, bad, &y));
  TEST_MESSAGE_HAS("token 11 at row 2, position 3 is not an integer in [0, 11)");
  bad[2 * CTX + 3] = 1.5f;
  TEST_CODE(FSDP_ERR_ARG, FSDPModelForward(model, ROWS, bad, &y));
  TEST_MESSAGE_HAS("token 1.5 at row 2, position 3");
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* bf16 parameters (widened to fp32 layer by layer): the loss is fp32's
   within bf16's precision, and not equal to it. */
static void test_bf16(const char *spec)
{
  FSDPContext ctx;
  FSDPModel model;
  float *dy;
  double loss[2];
  for (int low = 0; low < 2; low++) {
    ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
    if (low) TEST_OK(FSDPContextSetMixedPrecision(ctx, FSDP_BFLOAT16, FSDP_FLOAT32));
    model = make_model(ctx, spec);
    loss[low] = model_loss(model, &dy);
    TEST_OK(FSDPModelBackward(model, dy));
    TEST_OK(FSDPContextFinishBackward(ctx));
    TEST_OK(FSDPModelDestroy(&model));
    TEST_OK(FSDPContextDestroy(&ctx));
  }
  TEST_ASSERT(fabs(loss[1] - loss[0]) <= 1e-2 * loss[0] && loss[1] != loss[0], "%s: bf16 loss %.9g, fp32 %.9g", spec,
              loss[1], loss[0]);
}

int main(int argc, char **argv)
{
  int size;
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 0; i < ROWS * CTX; i++) {
    tokens[i] = (float)((i * 7 + 3) % VOCAB);
    labels[i] = (i * 5 + 2) % VOCAB;
  }
  test_units();
  test_gradients(SPEC, FSDP_FULL_SHARD);
  test_gradients(SPEC_TIED, size % 2 == 0 ? FSDP_HYBRID_SHARD : FSDP_FULL_SHARD);
  /* The memory-light attention (auto keeps the probabilities at this ctx, one block of keys). */
  TEST_OK(FSDPOptionsSetValue("-fsdp_attention", "blocked"));
  test_gradients(SPEC, FSDP_FULL_SHARD);
  TEST_OK(FSDPOptionsClearValue("-fsdp_attention"));
  test_checkpointing(SPEC, false);
  test_checkpointing(SPEC_TIED, false);
  test_checkpointing(SPEC, true);
  test_errors();
  test_bf16(SPEC);
  test_bf16(SPEC_TIED);
  TEST_OK(FSDPFinalize());
  return 0;
}
