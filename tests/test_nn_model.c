/* FSDPModel: the mlp spec's exact parameter names and shapes, the three
   wrapping policies, PyTorch's default initialization read back from the
   shards (the same values at every W, F and wrapping), the model's gradient
   through sharded units against finite differences of its loss, frozen
   parameters, spec errors, and FSDPModelLoss against the loss kernels.
   mpitest: -n 4
   mpitest: -n 3
   mpitest: -n 1 */
#include <math.h>

#include "fsdp_nn.h"
#include "fsdptest.h"

#define SPEC "mlp:in=5,hidden=7,depth=3,out=2,act=gelu,norm=layernorm"
#define SEED 7
enum { IN = 5, HID = 7, DEPTH = 3, OUT = 2, ROWS = 4 };

static FSDPModel make_model(FSDPContext ctx, FSDPWrapPolicy wrap, int64_t min_numel)
{
  FSDPModel model;
  TEST_OK(FSDPModelCreate(ctx, SPEC, &model));
  TEST_OK(FSDPModelSetWrapPolicy(model, wrap, min_numel));
  TEST_OK(FSDPModelSetSeed(model, SEED));
  TEST_OK(FSDPModelSetUp(model));
  return model;
}

/* ------------------------------------------------------------------ spec and wrapping */

static void expect_unit(FSDPContext ctx, int i, const char *name, int nparams, const char *first_param)
{
  FlatParam u;
  const char *got, *p0;
  int n;
  TEST_OK(FSDPContextGetUnit(ctx, i, &u));
  TEST_OK(FlatParamGetName(u, &got));
  TEST_OK(FlatParamGetNumParams(u, &n));
  TEST_OK(FlatParamGetParamInfo(u, 0, &p0, NULL, NULL, NULL));
  TEST_ASSERT(!strcmp(got, name) && n == nparams && !strcmp(p0, first_param),
              "unit %d is '%s' with %d parameters from '%s', expected '%s' with %d from '%s'", i, got, n, p0, name,
              nparams, first_param);
}

static void test_names_and_wrapping(void)
{
  FSDPContext ctx;
  FSDPModel model;
  FlatParam u;
  FSDPParamId id;
  int nunits, ndim;
  const int64_t *shape;
  int64_t numel, total = 0, sum = 0;

  /* block: one unit per block, the head in the root unit, in execution order. */
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  model = make_model(ctx, FSDP_WRAP_BLOCK, 0);
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  TEST_ASSERT(nunits == DEPTH + 1, "block wrapping made %d units", nunits);
  expect_unit(ctx, 0, "blocks.0", 4, "blocks.0.fc.weight");
  expect_unit(ctx, 2, "blocks.2", 4, "blocks.2.fc.weight");
  expect_unit(ctx, 3, "root", 2, "head.weight");
  /* The spec's exact names and shapes. */
  {
    static const struct {
      const char *name;
      int ndim;
      int64_t d0, d1;
    } want[] = {{"blocks.0.fc.weight", 2, HID, IN},
                {"blocks.0.fc.bias", 1, HID, 0},
                {"blocks.1.fc.weight", 2, HID, HID},
                {"blocks.1.norm.weight", 1, HID, 0},
                {"blocks.2.norm.bias", 1, HID, 0},
                {"head.weight", 2, OUT, HID},
                {"head.bias", 1, OUT, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
      TEST_OK(FSDPContextFindParam(ctx, want[i].name, &u, &id));
      TEST_OK(FlatParamGetParamInfo(u, id, NULL, &ndim, &shape, NULL));
      TEST_ASSERT(ndim == want[i].ndim && shape[0] == want[i].d0 && (ndim == 1 || shape[1] == want[i].d1),
                  "%s has %d dims [%lld, ...]", want[i].name, ndim, (long long)shape[0]);
    }
  }
  TEST_OK(FSDPModelGetSizes(model, NULL, NULL, &total));
  TEST_ASSERT(total == (HID * IN + HID + 2 * HID) + (DEPTH - 1) * (HID * HID + 3 * HID) + OUT * HID + OUT,
              "the model has %lld parameters", (long long)total);
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));

  /* model: everything in one root unit. */
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  model = make_model(ctx, FSDP_WRAP_MODEL, 0);
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  TEST_ASSERT(nunits == 1, "model wrapping made %d units", nunits);
  expect_unit(ctx, 0, "root", 4 * DEPTH + 2, "blocks.0.fc.weight");
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));

  /* size:60: greedy units of at least 60 elements, the remainder in root. */
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  model = make_model(ctx, FSDP_WRAP_SIZE, 60);
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  for (int i = 0; i < nunits; i++) {
    const char *name;
    TEST_OK(FSDPContextGetUnit(ctx, i, &u));
    TEST_OK(FlatParamGetName(u, &name));
    TEST_OK(FlatParamGetSizes(u, &numel, NULL, NULL));
    if (i < nunits - 1)
      TEST_ASSERT(numel >= 60 && strcmp(name, "root"), "unit %d '%s' has %lld elements", i, name, (long long)numel);
    else
      TEST_ASSERT(!strcmp(name, "root") ? numel < 60 : numel >= 60, "last unit '%s' has %lld", name, (long long)numel);
    sum += numel;
  }
  TEST_ASSERT(sum == total && nunits == 3, "size:60 made %d units of %lld elements in all", nunits, (long long)sum);
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));

  /* Spec errors name the key and the value. */
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "mlp:in=5,hidden=7,depth=3,out=2,width=9", &model));
  TEST_MESSAGE_HAS("unknown key 'width'");
  TEST_ASSERT(model == NULL, "a failed create left a model");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "mlp:in=5,hidden=64,depth=3,hidden=32,out=2", &model));
  TEST_MESSAGE_HAS("model spec 'mlp:in=5,hidden=64,depth=3,hidden=32,out=2': key 'hidden' is given twice (64 and 32)");
  /* Empty items are slips, not specs: each is named by its place. */
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "mlp:in=16,,hidden=32,depth=2,out=4", &model));
  TEST_MESSAGE_HAS("model spec 'mlp:in=16,,hidden=32,depth=2,out=4': item 2 is empty (the ',' at character 11)");
  TEST_ASSERT(model == NULL, "a failed create left a model");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "mlp:in=16,hidden=32,depth=2,out=4,", &model));
  TEST_MESSAGE_HAS("model spec 'mlp:in=16,hidden=32,depth=2,out=4,': item 5 is empty (a trailing comma)");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "mlp:,in=16,hidden=32,depth=2,out=4", &model));
  TEST_MESSAGE_HAS("item 1 is empty (the ',' at character 5)");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "gpt:vocab=16,ctx=4,dim=8,,heads=2,layers=1", &model));
  TEST_MESSAGE_HAS(
      "model spec 'gpt:vocab=16,ctx=4,dim=8,,heads=2,layers=1': item 4 is empty (the ',' at character 26)");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "gpt:vocab=16,ctx=4,dim=8,heads=2,layers=1,dim=16", &model));
  TEST_MESSAGE_HAS("key 'dim' is given twice (8 and 16)");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "mlp:in=5,hidden=7,out=2", &model));
  TEST_MESSAGE_HAS("lacks depth=");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "mlp:in=5,hidden=7,depth=3,out=2,act=swish", &model));
  TEST_MESSAGE_HAS("act=swish");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "mlp:in=0,hidden=7,depth=3,out=2", &model));
  TEST_MESSAGE_HAS("in=0");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, "rnn:in=5", &model));
  TEST_MESSAGE_HAS("unknown model type");
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* ------------------------------------------------------------------ initialization */

/* Each rank's shards hold exactly the PyTorch-default values, drawn for the
   parameter's name: uniform(+-1/sqrt(fan_in)) for fc and head, ones and
   zeros for LayerNorm, whatever the strategy, W, F and wrapping. */
static void check_init(FSDPContext ctx)
{
  int nunits, nparams;
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam unit;
    float *shard;
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetShard(unit, (void **)&shard, NULL));
    TEST_OK(FlatParamGetNumParams(unit, &nparams));
    for (int i = 0; i < nparams; i++) {
      const char *name;
      int64_t begin, end, offset, fan_in;
      float want[HID * HID];
      TEST_OK(FlatParamGetParamInfo(unit, i, &name, NULL, NULL, NULL));
      TEST_OK(FlatParamGetShardRange(unit, i, &begin, &end, &offset));
      if (strstr(name, ".norm.")) {
        for (int64_t e = begin; e < end; e++)
          TEST_ASSERT(shard[offset + e - begin] == (strstr(name, "weight") ? 1.0f : 0.0f), "%s[%lld] = %g", name,
                      (long long)e, shard[offset + e - begin]);
        continue;
      }
      fan_in = !strncmp(name, "blocks.0.", 9) ? IN : HID;
      TEST_OK(FSDPRandomUniform(SEED, name, begin, end, -1 / sqrt((double)fan_in), 1 / sqrt((double)fan_in), want));
      TEST_ASSERT(!memcmp(want, shard + offset, (size_t)(end - begin) * sizeof(float)),
                  "%s: elements [%lld, %lld) differ from the default initialization", name, (long long)begin,
                  (long long)end);
      for (int64_t e = begin; e < end; e++)
        TEST_ASSERT(fabsf(shard[offset + e - begin]) <= 1 / sqrtf((float)fan_in), "%s[%lld] = %g is out of bounds",
                    name, (long long)e, shard[offset + e - begin]);
    }
  }
}

static void test_init(void)
{
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int s = 0; s < TEST_NUM_STRATEGIES; s++)
    for (int w = 0; w < 3; w++) {
      FSDPContext ctx = test_context(MPI_COMM_WORLD, test_strategies[s], size % 2 == 0 ? 2 : 1);
      FSDPModel model = make_model(ctx, (FSDPWrapPolicy)w, 150);
      check_init(ctx);
      TEST_OK(FSDPModelDestroy(&model));
      TEST_OK(FSDPContextDestroy(&ctx));
    }
}

/* ------------------------------------------------------------------ gradients */

static float gx[ROWS * IN], gt[ROWS * OUT];

/* The model's loss, and its gradient in the model's buffer (*dy). */
static double model_loss(FSDPModel model, float **dy)
{
  float *y;
  double loss;
  TEST_OK(FSDPModelForward(model, ROWS, gx, &y));
  TEST_OK(FSDPModelLoss(model, FSDP_LOSS_MSE, gt, 1.0, &loss, dy));
  return loss;
}

static double fd_loss(void *model)
{
  float *dy;
  return model_loss(model, &dy);
}

/* Every rank runs the same rows, so the averaged gradient is the gradient of
   the loss.  Each element this rank's shard holds is perturbed by every
   rank holding it (replicas too) and the loss differentiated numerically. */
static void test_gradients(FSDPShardingStrategy strategy, FSDPWrapPolicy wrap)
{
  int size;
  FSDPContext ctx;
  FSDPModel model;
  float *dy;
  FlatParam frozen_unit;
  FSDPParamId frozen_id;
  const double h = 1e-2;

  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ctx = test_context(MPI_COMM_WORLD, strategy, size % 2 == 0 ? 2 : 1);
  model = make_model(ctx, wrap, 200);
  for (int i = 0; i < ROWS * IN; i++) gx[i] = 2 * test_value(21, i);
  for (int i = 0; i < ROWS * OUT; i++) gt[i] = test_value(22, i);
  TEST_OK(FSDPContextFindParam(ctx, "blocks.1.norm.weight", &frozen_unit, &frozen_id));
  TEST_OK(FlatParamSetTrainable(frozen_unit, frozen_id, false));

  TEST_OK(FSDPContextZeroGrad(ctx));
  (void)model_loss(model, &dy);
  TEST_OK(FSDPModelBackward(model, dy));
  TEST_OK(FSDPContextFinishBackward(ctx));
  TEST_CODE(FSDP_ERR_STATE, FSDPModelBackward(model, dy));
  TEST_MESSAGE_HAS("no forward pass");

  test_fd_gradients(ctx, h, 10, fd_loss, model, frozen_unit, frozen_id, FSDPShardingStrategyName(strategy));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* ------------------------------------------------------------------ FSDPModelLoss */

/* The model's loss is the loss kernels' on its output, and its gradient is
   theirs times the scale (powers of 2 here, so exactly); misuse is refused. */
static void test_model_loss(void)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  FSDPModel model = make_model(ctx, FSDP_WRAP_BLOCK, 0);
  float *y, *dy, ref[ROWS * OUT];
  int64_t labels[ROWS];
  double loss, want;

  for (int i = 0; i < ROWS * IN; i++) gx[i] = 2 * test_value(23, i);
  for (int i = 0; i < ROWS * OUT; i++) gt[i] = test_value(24, i);
  for (int i = 0; i < ROWS; i++) labels[i] = (i * 3 + 1) % OUT;
  TEST_CODE(FSDP_ERR_STATE, FSDPModelLoss(model, FSDP_LOSS_MSE, gt, 1.0, &loss, &dy));
  TEST_MESSAGE_HAS("call FSDPModelForward first");

  TEST_OK(FSDPModelForward(model, ROWS, gx, &y));
  TEST_OK(FSDPContextSynchronize(ctx)); /* on the host: nothing to wait for */
  TEST_OK(FSDPMSELoss(ROWS, OUT, y, gt, &want, ref));
  TEST_OK(FSDPModelLoss(model, FSDP_LOSS_MSE, gt, 0.25, &loss, &dy));
  TEST_ASSERT(loss == want && loss > 0, "FSDPModelLoss (MSE) %.17g, FSDPMSELoss %.17g", loss, want);
  for (int i = 0; i < ROWS * OUT; i++)
    TEST_ASSERT(dy[i] == ref[i] * 0.25f, "MSE dy[%d] = %g, expected %g", i, dy[i], ref[i] * 0.25f);

  TEST_OK(FSDPCrossEntropyLoss(ROWS, OUT, y, labels, &want, ref));
  TEST_OK(FSDPModelLoss(model, FSDP_LOSS_CROSS_ENTROPY, labels, 0.5, &loss, &dy));
  TEST_ASSERT(loss == want && loss > 0, "FSDPModelLoss (cross-entropy) %.17g, FSDPCrossEntropyLoss %.17g", loss, want);
  for (int i = 0; i < ROWS * OUT; i++)
    TEST_ASSERT(dy[i] == ref[i] * 0.5f, "cross-entropy dy[%d] = %g, expected %g", i, dy[i], ref[i] * 0.5f);

  labels[1] = OUT + 3;
  TEST_CODE(FSDP_ERR_ARG, FSDPModelLoss(model, FSDP_LOSS_CROSS_ENTROPY, labels, 1.0, &loss, &dy));
  TEST_MESSAGE_HAS("FSDPModelLoss: label 5 of row 1 is not in [0, 2)");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelLoss(model, (FSDPLossType)9, gt, 1.0, &loss, &dy));
  TEST_MESSAGE_HAS("loss type 9");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelLoss(model, FSDP_LOSS_MSE, gt, NAN, &loss, &dy));
  TEST_MESSAGE_HAS("scale nan is not finite");
  TEST_CODE(FSDP_ERR_ARG, FSDPModelLoss(model, FSDP_LOSS_MSE, NULL, 1.0, &loss, &dy));
  TEST_MESSAGE_HAS("target, loss and dy must not be NULL");

  /* Backward from the model's own gradient buffer, then the output is consumed. */
  TEST_OK(FSDPModelLoss(model, FSDP_LOSS_MSE, gt, 1.0, &loss, &dy));
  TEST_OK(FSDPContextZeroGrad(ctx));
  TEST_OK(FSDPModelBackward(model, dy));
  TEST_OK(FSDPContextFinishBackward(ctx));
  TEST_CODE(FSDP_ERR_STATE, FSDPModelLoss(model, FSDP_LOSS_MSE, gt, 1.0, &loss, &dy));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

int main(int argc, char **argv)
{
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  test_names_and_wrapping();
  test_init();
  test_gradients(FSDP_FULL_SHARD, FSDP_WRAP_BLOCK);
  test_gradients(FSDP_HYBRID_SHARD, FSDP_WRAP_SIZE);
  test_gradients(FSDP_NO_SHARD, FSDP_WRAP_MODEL);
  test_model_loss();
  TEST_OK(FSDPFinalize());
  return 0;
}
