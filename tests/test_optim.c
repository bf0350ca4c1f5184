/* FSDPOptimizer on shards against updates computed here by hand, in double,
   from the documented rules of torch.optim.SGD and torch.optim.AdamW: three
   steps with momentum, nesterov, weight decay and bias correction, under
   every sharding strategy; global-norm clipping (each distinct shard once,
   replicas and padding excluded); frozen parameters (unchanged, no state);
   the warmup + cosine schedule; the non-finite guard (-fsdp_check_finite);
   parameter groups (b with its own weight decay and learning-rate scale,
   also in shards that hold the end of a and the start of b); and the errors.
   mpitest: -n 4
   mpitest: -n 3
   mpitest: -n 1 */
#include <math.h>

#include "fsdptest.h"

enum { NA = 5, NB = 3, STEPS = 3 };
#define LR 0.1

static float p0(int param, int64_t e) { return test_value(100 + (uint64_t)param, e); }
static float grad_of(int param, int64_t e, int step)
{
  return 0.5f * test_value(200 + 10 * (uint64_t)param + (uint64_t)step, e);
}

static FSDPErrorCode init_shard(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values, void *user)
{
  (void)unit;
  (void)user;
  for (int64_t e = begin; e < end; e++) ((float *)values)[e - begin] = p0(id, e);
  return FSDP_SUCCESS;
}

typedef struct {
  FSDPOptimizerType type;
  bool nesterov, freeze_b;
  double momentum, weight_decay, clip;
  const char *group_b; /* a pattern that selects b (and not a): b takes wd_b and lr x lr_b */
  double wd_b, lr_b;
} Case;

/* The reference: both parameters as one vector [a | b], W = 1, in double. */
static void reference(const Case *c, double p[NA + NB], double norms[STEPS])
{
  double buf[NA + NB] = {0}, m[NA + NB] = {0}, v[NA + NB] = {0};
  for (int i = 0; i < NA + NB; i++) p[i] = i < NA ? p0(0, i) : p0(1, i - NA);
  for (int t = 0; t < STEPS; t++) {
    double g[NA + NB], sumsq = 0, coef = 1;
    for (int i = 0; i < NA + NB; i++) {
      bool frozen = c->freeze_b && i >= NA;
      g[i] = frozen ? 0 : (i < NA ? grad_of(0, i, t) : grad_of(1, i - NA, t));
      sumsq += g[i] * g[i];
    }
    norms[t] = sqrt(sumsq);
    if (c->clip > 0 && c->clip / (norms[t] + 1e-6) < 1) coef = c->clip / (norms[t] + 1e-6);
    for (int i = 0; i < NA + NB; i++) {
      double d;
      double wd = c->group_b && i >= NA ? c->wd_b : c->weight_decay, lr = c->group_b && i >= NA ? LR * c->lr_b : LR;
      if (c->freeze_b && i >= NA) continue;
      d = g[i] * coef;
      if (c->type == FSDP_OPTIMIZER_SGD) {
        d += wd * p[i];
        if (c->momentum > 0) {
          buf[i] = t == 0 ? d : c->momentum * buf[i] + d;
          d = c->nesterov ? d + c->momentum * buf[i] : buf[i];
        }
        p[i] -= lr * d;
      } else {
        double b1 = 0.9, b2 = 0.999;
        p[i] *= 1 - lr * wd;
        m[i] = b1 * m[i] + (1 - b1) * d;
        v[i] = b2 * v[i] + (1 - b2) * d * d;
        p[i] -= lr / (1 - pow(b1, t + 1)) * m[i] / (sqrt(v[i]) / sqrt(1 - pow(b2, t + 1)) + 1e-8);
      }
    }
  }
}

static void run_case(FSDPShardingStrategy strategy, const Case *c)
{
  int size;
  FSDPContext ctx;
  FlatParam unit;
  FSDPParamId a, b;
  FSDPOptimizer opt;
  double want[NA + NB], norms[STEPS], norm;
  int64_t state, begin, end, offset, trainable_in_shard = 0;
  float *shard;
  const char *sname = FSDPShardingStrategyName(strategy), *oname = FSDPOptimizerTypeName(c->type);

  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ctx = test_context(MPI_COMM_WORLD, strategy, size % 2 == 0 ? 2 : 1);
  TEST_OK(FSDPContextAddUnit(ctx, "u", &unit));
  TEST_OK(FlatParamAddParam(unit, "a", 1, (int64_t[]){NA}, &a));
  TEST_OK(FlatParamAddParam(unit, "b", 1, (int64_t[]){NB}, &b));
  TEST_OK(FSDPContextSetShardInit(ctx, init_shard, NULL));
  TEST_OK(FSDPContextSetUp(ctx));
  if (c->freeze_b) TEST_OK(FlatParamSetTrainable(unit, b, false));
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_OK(FSDPOptimizerSetType(opt, c->type));
  TEST_OK(FSDPOptimizerSetLearningRate(opt, LR));
  TEST_OK(FSDPOptimizerSetWeightDecay(opt, c->weight_decay));
  if (c->type == FSDP_OPTIMIZER_SGD) TEST_OK(FSDPOptimizerSetMomentum(opt, c->momentum, c->nesterov));
  TEST_OK(FSDPOptimizerSetClipGradNorm(opt, c->clip));
  if (c->group_b) {
    double wd, scale;
    TEST_OK(FSDPOptimizerAddParamGroup(opt, c->group_b, c->wd_b, c->lr_b));
    TEST_OK(FSDPOptimizerGetParamSettings(opt, "b", &wd, &scale));
    TEST_ASSERT(wd == c->wd_b && scale == c->lr_b, "%s: b takes weight decay %g and lr x%g, expected %g and x%g",
                c->group_b, wd, scale, c->wd_b, c->lr_b);
    TEST_OK(FSDPOptimizerGetParamSettings(opt, "a", &wd, &scale));
    TEST_ASSERT(wd == c->weight_decay && scale == 1, "%s selects a: weight decay %g, lr x%g", c->group_b, wd, scale);
  }
  TEST_OK(FSDPOptimizerSetUp(opt));

  /* State exists for the trainable elements of this rank's shard only. */
  for (int i = 0; i < 2; i++) {
    TEST_OK(FlatParamGetShardRange(unit, i, &begin, &end, NULL));
    if (!(c->freeze_b && i == b)) trainable_in_shard += end - begin;
  }
  TEST_OK(FSDPOptimizerGetStateSize(opt, &state));
  {
    int nstates = c->type == FSDP_OPTIMIZER_ADAMW ? 2 : c->momentum > 0 ? 1 : 0;
    TEST_ASSERT(state == nstates * trainable_in_shard, "%s %s: %lld state elements, expected %d x %lld", sname, oname,
                (long long)state, nstates, (long long)trainable_in_shard);
  }

  reference(c, want, norms);
  for (int t = 0; t < STEPS; t++) {
    float *ga, *gb;
    TEST_OK(FSDPContextZeroGrad(ctx));
    TEST_OK(FlatParamUnshard(unit));
    TEST_OK(FlatParamGetGrad(unit, a, (void **)&ga));
    for (int i = 0; i < NA; i++) ga[i] = grad_of(0, i, t);
    if (!c->freeze_b) { /* a frozen parameter gets no gradient, as in the layer library */
      TEST_OK(FlatParamGetGrad(unit, b, (void **)&gb));
      for (int i = 0; i < NB; i++) gb[i] = grad_of(1, i, t);
    }
    TEST_OK(FlatParamReduceGrad(unit));
    /* Measuring alone (max_norm 0) finishes the reduction in flight first. */
    TEST_OK(FSDPOptimizerClipGradNorm(opt, 0, &norm));
    TEST_ASSERT(fabs(norm - norms[t]) < 1e-6 * norms[t], "%s %s step %d: measured norm %.9g, expected %.9g", sname,
                oname, t, norm, norms[t]);
    TEST_OK(FSDPOptimizerStep(opt));
    TEST_OK(FSDPOptimizerGetGradNorm(opt, &norm));
    /* Measured for clipping, or for the finite check (on by default). */
    TEST_ASSERT(fabs(norm - norms[t]) < 1e-6 * norms[t], "%s %s step %d: gradient norm %.9g, expected %.9g", sname,
                oname, t, norm, norms[t]);
  }
  TEST_OK(FlatParamGetShard(unit, (void **)&shard, NULL));
  for (int i = 0; i < 2; i++) {
    TEST_OK(FlatParamGetShardRange(unit, i, &begin, &end, &offset));
    for (int64_t e = begin; e < end; e++) {
      double w = want[(i == a ? 0 : NA) + e];
      TEST_ASSERT(fabs(shard[offset + e - begin] - w) <= 2e-6 * (1 + fabs(w)), "%s %s: %s[%lld] = %.9g, expected %.9g",
                  sname, oname, i == a ? "a" : "b", (long long)e, shard[offset + e - begin], w);
      if (c->freeze_b && i == b)
        TEST_ASSERT(shard[offset + e - begin] == p0(1, e), "frozen b[%lld] changed", (long long)e);
    }
  }
  /* Freezing after SetUp is refused at the next step, not silently ignored. */
  TEST_OK(FlatParamSetTrainable(unit, a, false));
  TEST_CODE(FSDP_ERR_STATE, FSDPOptimizerStep(opt));
  TEST_MESSAGE_HAS("after FSDPOptimizerSetUp");
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* One step with a NaN in one rank's gradient of a[0]: every rank stops before
   changing anything; with the check off the NaN spreads; with the gradient
   scaler the step is skipped instead. */
static FSDPErrorCode nan_step(FSDPContext ctx, FlatParam unit, FSDPOptimizer opt)
{
  int rank, size;
  float *ga;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  TEST_OK(FSDPContextZeroGrad(ctx));
  TEST_OK(FlatParamUnshard(unit));
  TEST_OK(FlatParamGetGrad(unit, 0, (void **)&ga));
  for (int i = 0; i < NA; i++) ga[i] = grad_of(0, i, 0);
  if (rank == size - 1) ga[0] = NAN;
  TEST_OK(FlatParamReduceGrad(unit));
  return FSDPOptimizerStep(opt);
}

static void test_finite_guard(FSDPShardingStrategy strategy)
{
  int size;
  FSDPContext ctx;
  FlatParam unit;
  FSDPParamId a;
  FSDPOptimizer opt, scaled;
  float *shard, *before;
  int64_t n, step, skipped;
  double norm;
  bool check;

  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ctx = test_context(MPI_COMM_WORLD, strategy, size % 2 == 0 ? 2 : 1);
  TEST_OK(FSDPContextAddUnit(ctx, "u", &unit));
  TEST_OK(FlatParamAddParam(unit, "a", 1, (int64_t[]){NA}, &a));
  TEST_OK(FSDPContextSetShardInit(ctx, init_shard, NULL));
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FSDPContextGetCheckFinite(ctx, &check));
  TEST_ASSERT(check, "-fsdp_check_finite is not on by default");
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_OK(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_ADAMW));
  TEST_OK(FSDPOptimizerSetUp(opt));
  TEST_OK(FlatParamGetShard(unit, (void **)&shard, &n));
  before = malloc((size_t)(n + 1) * sizeof *before);
  memcpy(before, shard, (size_t)n * sizeof *before);

  TEST_CODE(FSDP_ERR_NOT_FINITE, nan_step(ctx, unit, opt));
  TEST_MESSAGE_HAS(
      "FSDPOptimizerStep: step 1: the global gradient norm is nan: non-finite gradients; nothing was updated");
  TEST_OK(FSDPOptimizerGetStep(opt, &step));
  TEST_ASSERT(step == 0 && !memcmp(before, shard, (size_t)n * sizeof *shard),
              "a refused step changed the step (%lld) or the shard", (long long)step);

  TEST_OK(FSDPContextSetCheckFinite(ctx, false));
  TEST_OK(nan_step(ctx, unit, opt));
  TEST_OK(FSDPOptimizerGetGradNorm(opt, &norm));
  TEST_OK(FSDPOptimizerGetStep(opt, &step));
  TEST_ASSERT(step == 1 && isnan(norm), "with the check off the step is taken (step %lld, norm %g)", (long long)step,
              norm);
  TEST_OK(FSDPContextSetCheckFinite(ctx, true));
  TEST_OK(FSDPOptimizerDestroy(&opt));

  /* The gradient scaler skips an overflowed step and backs off, as before. */
  memcpy(shard, before, (size_t)n * sizeof *shard);
  TEST_OK(FSDPOptimizerCreate(ctx, &scaled));
  TEST_OK(FSDPOptimizerSetGradScaler(scaled, true));
  TEST_OK(FSDPOptimizerSetUp(scaled));
  TEST_OK(nan_step(ctx, unit, scaled));
  TEST_OK(FSDPOptimizerGetGradScale(scaled, NULL, &skipped));
  TEST_OK(FSDPOptimizerGetStep(scaled, &step));
  TEST_ASSERT(skipped == 1 && step == 0 && !memcmp(before, shard, (size_t)n * sizeof *shard),
              "the scaler did not skip the step (skipped %lld, step %lld)", (long long)skipped, (long long)step);
  TEST_OK(FSDPOptimizerDestroy(&scaled));
  free(before);
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* Groups chosen by dimension, the last match winning; and what is refused. */
static void test_param_groups(void)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  FlatParam unit;
  FSDPOptimizer opt;
  double wd, scale;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPContextAddUnit(ctx, "u", &unit));
  TEST_OK(FlatParamAddParam(unit, "fc.weight", 2, (int64_t[]){3, 4}, NULL));
  TEST_OK(FlatParamAddParam(unit, "fc.bias", 1, (int64_t[]){3}, NULL));
  TEST_OK(FlatParamAddParam(unit, "ln.weight", 1, (int64_t[]){4}, NULL));
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_OK(FSDPOptimizerAddParamGroup(opt, "ndim<2", 0.0, 1.0)); /* nanoGPT's rule */
  TEST_OK(FSDPOptimizerAddParamGroup(opt, "ln.*", 0.05, 0.1));  /* later: wins for ln.weight */
  TEST_OK(FSDPOptimizerGetParamSettings(opt, "fc.weight", &wd, &scale));
  TEST_ASSERT(wd == 0.01 && scale == 1, "fc.weight: %g x%g, expected the optimizer's 0.01 x1", wd, scale);
  TEST_OK(FSDPOptimizerGetParamSettings(opt, "fc.bias", &wd, &scale));
  TEST_ASSERT(wd == 0 && scale == 1, "fc.bias: %g x%g, expected ndim<2's 0 x1", wd, scale);
  TEST_OK(FSDPOptimizerGetParamSettings(opt, "ln.weight", &wd, &scale));
  TEST_ASSERT(wd == 0.05 && scale == 0.1, "ln.weight: %g x%g, expected ln.*'s 0.05 x0.1", wd, scale);
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerGetParamSettings(opt, "nothing", &wd, &scale));
  TEST_MESSAGE_HAS("no parameter 'nothing'");
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerAddParamGroup(opt, "", 0, 1));
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerAddParamGroup(opt, "ndim<two", 0, 1));
  TEST_MESSAGE_HAS("'ndim<two' is not a dimension test");
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerAddParamGroup(opt, "*.bias", -1, 1));
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerAddParamGroup(opt, "*.bias", 0, NAN));
  TEST_OK(FSDPOptimizerSetUp(opt));
  TEST_CODE(FSDP_ERR_STATE, FSDPOptimizerAddParamGroup(opt, "*.bias", 0, 1));
  TEST_OK(FSDPOptimizerDestroy(&opt));

  TEST_OK(FSDPOptimizerCreate(ctx, &opt)); /* a typo selects nothing: refused, naming it */
  TEST_OK(FSDPOptimizerAddParamGroup(opt, "*.bais", 0, 1));
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerSetUp(opt));
  TEST_MESSAGE_HAS("parameter group '*.bais' selects no trainable parameter");
  TEST_OK(FSDPOptimizerDestroy(&opt));

  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) { /* ranks with other groups: every rank refuses, none hangs */
    TEST_OK(FSDPOptimizerCreate(ctx, &opt));
    if (rank == 0) TEST_OK(FSDPOptimizerAddParamGroup(opt, "*.bias", 0, 1));
    TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerSetUp(opt));
    TEST_MESSAGE_HAS("parameter-group hash differs across ranks");
    TEST_OK(FSDPOptimizerDestroy(&opt));
    TEST_OK(FSDPOptimizerCreate(ctx, &opt)); /* another rate on one rank: named, with both values */
    TEST_OK(FSDPOptimizerSetLearningRate(opt, rank == 1 ? 0.5 : 0.25));
    TEST_OK(FSDPOptimizerSetClipGradNorm(opt, rank == 1 ? 1.0 : 0.0));
    TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerSetUp(opt));
    TEST_MESSAGE_HAS("-fsdp_lr differs across ranks: rank 0 has 0.25, rank 1 has 0.5");
    TEST_MESSAGE_HAS("-fsdp_clip_grad_norm differs across ranks: rank 0 has 0, rank 1 has 1");
    TEST_OK(FSDPOptimizerDestroy(&opt));
  }
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_schedule(void)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  FSDPOptimizer opt;
  FlatParam unit;
  double lr, want[10], got[10];
  TEST_OK(FSDPContextAddUnit(ctx, "u", &unit));
  TEST_OK(FlatParamAddParam(unit, "w", 1, (int64_t[]){4}, NULL));
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  /* Defaults are PyTorch's: AdamW with lr 1e-3 and weight decay 0.01; SGD's decay is 0. */
  TEST_OK(FSDPOptimizerGetLearningRate(opt, &lr));
  TEST_ASSERT(lr == 1e-3, "default lr %g", lr);
  TEST_OK(FSDPOptimizerSetLearningRate(opt, 2.0));
  TEST_OK(FSDPOptimizerSetSchedule(opt, FSDP_LR_COSINE, 2, 10));
  TEST_OK(FSDPOptimizerSetUp(opt));
  /* Warmup (t+1)/2, then 0.5 (1 + cos(pi (t-2)/8)). */
  for (int t = 0; t < 10; t++)
    want[t] = t < 2 ? 2.0 * (t + 1) / 2 : 2.0 * 0.5 * (1 + cos(3.14159265358979323846 * (t - 2) / 8.0));
  for (int t = 0; t < 10; t++) {
    TEST_OK(FSDPOptimizerGetLearningRate(opt, &lr));
    TEST_ASSERT(fabs(lr - want[t]) < 1e-12, "lr at step %d is %.12g, expected %.12g", t, lr, want[t]);
    got[t] = lr;
    TEST_OK(FSDPOptimizerStep(opt));
  }
  /* Landmarks worked out by hand: half the rate after one warmup step, the
     full rate at the end of warmup, half again midway through the decay. */
  TEST_ASSERT(got[0] == 1.0 && got[1] == 2.0 && got[2] == 2.0 && fabs(got[6] - 1.0) < 1e-12,
              "lr at steps 0, 1, 2, 6: %g %g %g %g, expected 1 2 2 1", got[0], got[1], got[2], got[6]);
  TEST_OK(FSDPOptimizerDestroy(&opt));

  /* Errors name the value. */
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerSetMomentum(opt, 0, true));
  TEST_MESSAGE_HAS("nesterov momentum needs a momentum above 0");
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerSetBetas(opt, 0.9, 1.0));
  TEST_MESSAGE_HAS("beta2 1 is out of range");
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerSetLearningRate(opt, -1));
  TEST_MESSAGE_HAS("learning rate -1");
  TEST_CODE(FSDP_ERR_ARG, FSDPOptimizerSetSchedule(opt, FSDP_LR_COSINE, 5, 5));
  TEST_MESSAGE_HAS("more total steps (5) than warmup steps (5)");
  TEST_CODE(FSDP_ERR_STATE, FSDPOptimizerStep(opt));
  TEST_MESSAGE_HAS("not set up");
  TEST_OK(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_SGD));
  TEST_OK(FSDPOptimizerView(opt, NULL));
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPContextDestroy(&ctx));
}

int main(int argc, char **argv)
{
  const Case cases[] = {
      {FSDP_OPTIMIZER_SGD, false, false, 0.0, 0.0, 0.0, NULL, 0, 0},    /* plain SGD */
      {FSDP_OPTIMIZER_SGD, false, false, 0.9, 0.1, 0.0, NULL, 0, 0},    /* momentum and weight decay */
      {FSDP_OPTIMIZER_SGD, true, true, 0.9, 0.1, 0.3, NULL, 0, 0},      /* nesterov, frozen b, clipped */
      {FSDP_OPTIMIZER_ADAMW, false, false, 0.0, 0.01, 0.0, NULL, 0, 0}, /* the defaults but lr */
      {FSDP_OPTIMIZER_ADAMW, false, true, 0.0, 0.1, 0.3, NULL, 0, 0},   /* frozen b, clipped */
      {FSDP_OPTIMIZER_ADAMW, false, false, 0.0, 0.1, 100, NULL, 0, 0},  /* a clip that does not bite */
      /* parameter groups: b decays otherwise and steps at another rate (a name, and a glob bracket) */
      {FSDP_OPTIMIZER_ADAMW, false, false, 0.0, 0.1, 0.0, "b", 0.0, 0.5},
      {FSDP_OPTIMIZER_SGD, false, false, 0.9, 0.1, 0.3, "[b]", 0.3, 2.0},
  };
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  for (int s = 0; s < TEST_NUM_STRATEGIES; s++)
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) run_case(test_strategies[s], &cases[c]);
  test_schedule();
  test_param_groups();
  for (int s = 0; s < TEST_NUM_STRATEGIES; s++) test_finite_guard(test_strategies[s]);
  TEST_OK(FSDPFinalize());
  return 0;
}
