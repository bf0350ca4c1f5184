/* The host kernels on every SIMD path this CPU runs (FSDPSetSimd): GELU
   forward and backward against the double-precision formula, LayerNorm
   forward and backward against a plain double-precision reference, and, for
   each path, the same bits as the generic path, for the kernels and for a
   few AdamW and SGD steps of a model (the optimizers' updates, the gradient
   norm of clipping) and of a GPT with the full and with the blocked
   attention (the softmax kernels); the cross-entropy against libm's
   double-precision log-sum-exp, in place too, raising no invalid,
   overflow or division-by-zero flag on rows with a -inf logit or a span
   beyond its vectorized exponentials'; a level the CPU lacks is refused.
   mpitest: -n 1 */
#include <fenv.h>
#include <math.h>
#include <string.h>

#include "fsdp_nn.h"
#include "fsdptest.h"

#define SPEC "mlp:in=13,hidden=70,depth=3,out=3,act=gelu,norm=layernorm"
enum { NG = 4099, LN = 7, MAXH = 600, ROWS = 5, IN = 13, OUT = 3, MAXP = 1 << 15 };
/* ctx 40 fits one block of keys: the full attention; ctx 80 takes two (the second partial): the blocked one. */
static const char *const gpt_specs[2] = {"gpt:vocab=32,ctx=40,dim=16,heads=2,layers=1",
                                         "gpt:vocab=32,ctx=80,dim=16,heads=2,layers=1"};
enum { GPT_ROWS = 2, GPT_MAXP = 8192 };

typedef struct {
  float gelu[NG], dgelu[NG];
  float y[LN * MAXH], mean[LN], rstd[LN], dx[LN * MAXH], dw[MAXH], db[MAXH];
  float adamw[MAXP], sgd[MAXP], gpt[2][GPT_MAXP];
  int64_t nparams, gpt_nparams[2];
} Out;

static float gx[NG], gdy[NG], lx[LN * MAXH], lw[MAXH], lb[MAXH], ldy[LN * MAXH];
static const int64_t widths[] = {1, 7, 8, 37, 256, 300, 600};
#define NWIDTHS (int)(sizeof widths / sizeof widths[0])

/* GELU's inputs: a grid over [-12, 12], the exp's clamps, zeros and tiny values. */
static void make_inputs(void)
{
  for (int i = 0; i < NG; i++) {
    gx[i] = -12.0f + 24.0f * (float)i / (NG - 1);
    gdy[i] = test_value(3, i);
  }
  gx[0] = 0.0f;
  gx[1] = -0.0f;
  gx[2] = 1e-30f;
  gx[3] = -1e-30f;
  gx[4] = 30.0f;
  gx[5] = -30.0f;
  gx[6] = 1e4f;
  gx[7] = -1e4f;
  for (int i = 0; i < LN * MAXH; i++) {
    lx[i] = 3.0f + 2.0f * test_value(4, i); /* an offset: the two-pass variance matters */
    ldy[i] = test_value(5, i);
  }
  for (int j = 0; j < MAXH; j++) {
    lw[j] = 1.0f + 0.5f * test_value(6, j);
    lb[j] = 0.1f * test_value(7, j);
  }
}

static void check_gelu(FSDPSimd level, Out *o)
{
  double worst = 0, worst_d = 0;
  TEST_OK(FSDPActivationForward(FSDP_ACT_GELU, NG, gx, o->gelu));
  TEST_OK(FSDPActivationBackward(FSDP_ACT_GELU, NG, gx, gdy, o->dgelu));
  for (int i = 0; i < NG; i++) {
    double x = gx[i], cdf = 0.5 * (1 + erf(x / sqrt(2.0))), pdf = exp(-0.5 * x * x) / sqrt(2 * 3.14159265358979323846);
    double e = fabs(o->gelu[i] - x * cdf) / (1 + fabs(x)), ed = fabs(o->dgelu[i] - gdy[i] * (cdf + x * pdf));
    if (e > worst) worst = e;
    if (ed > worst_d) worst_d = ed;
  }
  TEST_ASSERT(worst < 3e-7, "%s: GELU differs from x Phi(x) by %.3g (x 1 + |x|)", FSDPSimdName(level), worst);
  TEST_ASSERT(worst_d < 3e-7, "%s: GELU's derivative differs by %.3g", FSDPSimdName(level), worst_d);
  TEST_ASSERT(o->gelu[0] == 0.0f && o->gelu[6] == 1e4f && o->gelu[7] == 0.0f, "%s: gelu(0, 1e4, -1e4) = %g %g %g",
              FSDPSimdName(level), o->gelu[0], o->gelu[6], o->gelu[7]);
  printf("%s: GELU within %.2g (x 1 + |x|) of the double formula, its derivative within %.2g\n", FSDPSimdName(level),
         worst, worst_d);
}

static void check_layernorm(FSDPSimd level, int64_t h, Out *o)
{
  double worst = 0;
  memset(o->dw, 0, sizeof o->dw);
  memset(o->db, 0, sizeof o->db);
  TEST_OK(FSDPLayerNormForward(LN, h, lx, lw, lb, o->y, o->mean, o->rstd));
  TEST_OK(FSDPLayerNormBackward(LN, h, lx, lw, o->mean, o->rstd, ldy, o->dx, o->dw, o->db));
  for (int64_t i = 0; i < LN; i++) {
    const float *x = lx + i * h, *dy = ldy + i * h;
    double mu = 0, var = 0, r, sg = 0, sgx = 0;
    for (int64_t j = 0; j < h; j++) mu += x[j];
    mu /= (double)h;
    for (int64_t j = 0; j < h; j++) var += (x[j] - mu) * (x[j] - mu);
    r = 1 / sqrt(var / (double)h + 1e-5);
    for (int64_t j = 0; j < h; j++) {
      double xh = (x[j] - mu) * r, g = dy[j] * (double)lw[j];
      sg += g;
      sgx += g * xh;
    }
    for (int64_t j = 0; j < h; j++) {
      double xh = (x[j] - mu) * r, g = dy[j] * (double)lw[j];
      double y = xh * lw[j] + lb[j], dx = r * (g - sg / (double)h - xh * sgx / (double)h);
      double e = fmax(fabs(o->y[i * h + j] - y) / (1 + fabs(y)), fabs(o->dx[i * h + j] - dx) / (1 + fabs(dx)));
      if (e > worst) worst = e;
    }
  }
  for (int64_t j = 0; j < h; j++) {
    double sw = 0, sb = 0;
    for (int64_t i = 0; i < LN; i++) {
      sw += ldy[i * h + j] * ((lx[i * h + j] - (double)o->mean[i]) * o->rstd[i]);
      sb += ldy[i * h + j];
    }
    double e = fmax(fabs(o->dw[j] - sw) / (1 + fabs(sw)), fabs(o->db[j] - sb) / (1 + fabs(sb)));
    if (e > worst) worst = e;
  }
  TEST_ASSERT(worst < 2e-6, "%s: LayerNorm with h = %lld differs from the double reference by %.3g",
              FSDPSimdName(level), (long long)h, worst);
}

/* This rank's shards, one after another. */
static int64_t copy_shards(FSDPContext ctx, float *params, int64_t max)
{
  int nunits;
  int64_t total = 0;
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam unit;
    float *p;
    int64_t n;
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetShard(unit, (void **)&p, &n));
    TEST_ASSERT(total + n <= max, "the model is too large for the test");
    memcpy(params + total, p, (size_t)n * sizeof *p);
    total += n;
  }
  return total;
}

/* Three steps of an optimizer on a model: its update runs on the chosen path. */
static void train(FSDPOptimizerType type, float *params, int64_t *nparams)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  FSDPModel model;
  FSDPOptimizer opt;
  float x[ROWS * IN], t[ROWS * OUT], dy[ROWS * OUT], *y;

  TEST_OK(FSDPModelCreate(ctx, SPEC, &model));
  TEST_OK(FSDPModelSetSeed(model, 5));
  TEST_OK(FSDPModelSetUp(model));
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_OK(FSDPOptimizerSetType(opt, type));
  TEST_OK(FSDPOptimizerSetLearningRate(opt, 1e-2));
  if (type == FSDP_OPTIMIZER_SGD) {
    TEST_OK(FSDPOptimizerSetMomentum(opt, 0.9, true));
    TEST_OK(FSDPOptimizerSetWeightDecay(opt, 1e-3));
    TEST_OK(FSDPOptimizerSetClipGradNorm(opt, 0.05)); /* the gradient norm's kernel matters too */
  }
  TEST_OK(FSDPOptimizerSetUp(opt));
  for (int step = 0; step < 3; step++) {
    double loss;
    for (int i = 0; i < ROWS * IN; i++) x[i] = test_value(10 + (uint64_t)step, i);
    for (int i = 0; i < ROWS * OUT; i++) t[i] = test_value(20 + (uint64_t)step, i);
    TEST_OK(FSDPContextZeroGrad(ctx));
    TEST_OK(FSDPModelForward(model, ROWS, x, &y));
    TEST_OK(FSDPMSELoss(ROWS, OUT, y, t, &loss, dy));
    TEST_OK(FSDPModelBackward(model, dy));
    TEST_OK(FSDPOptimizerStep(opt));
  }
  *nparams = copy_shards(ctx, params, MAXP);
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* Three AdamW steps of a GPT on fixed tokens: its attention's softmax runs on the chosen path. */
static void train_gpt(const char *spec, int64_t ctxlen, float *params, int64_t *nparams)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  FSDPModel model;
  FSDPOptimizer opt;
  float tokens[GPT_ROWS * 80], *y, *dy;
  int64_t labels[GPT_ROWS * 80];
  TEST_OK(FSDPModelCreate(ctx, spec, &model));
  TEST_OK(FSDPModelSetSeed(model, 5));
  TEST_OK(FSDPModelSetUp(model));
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_OK(FSDPOptimizerSetLearningRate(opt, 1e-2));
  TEST_OK(FSDPOptimizerSetUp(opt));
  for (int step = 0; step < 3; step++) {
    double loss;
    for (int64_t i = 0; i < GPT_ROWS * ctxlen; i++) {
      tokens[i] = (float)((i * 7 + 3 * step) % 32);
      labels[i] = (i * 5 + step + 1) % 32;
    }
    TEST_OK(FSDPContextZeroGrad(ctx));
    TEST_OK(FSDPModelForward(model, GPT_ROWS, tokens, &y));
    TEST_OK(FSDPModelLoss(model, FSDP_LOSS_CROSS_ENTROPY, labels, 1.0, &loss, &dy));
    TEST_OK(FSDPModelBackward(model, dy));
    TEST_OK(FSDPOptimizerStep(opt));
  }
  *nparams = copy_shards(ctx, params, GPT_MAXP);
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* Cross-entropy rows of 1 to 300 classes (the vector body and its
   remainders), one with a -inf logit among 20, one spanning 2000 units. */
enum { CE_ROWS = 6, CE_MAXC = 300 };
static const int64_t ce_classes[CE_ROWS] = {1, 3, 17, 20, 64, 300};

static void check_cross_entropy(FSDPSimd level, float dl_ref[CE_ROWS][CE_MAXC], double loss_ref[CE_ROWS])
{
  for (int r = 0; r < CE_ROWS; r++) {
    int64_t n = ce_classes[r], label = (r * 7) % n;
    float z[CE_MAXC], dl[CE_MAXC], inplace[CE_MAXC];
    double loss, zmax = -INFINITY, sum = 0, want;
    for (int64_t c = 0; c < n; c++) z[c] = 8.0f * test_value(40 + r, (int)c);
    if (n == 20) z[(label + 3) % n] = -INFINITY;
    if (n == 64) z[(label + 5) % n] = -2000.0f;
    for (int64_t c = 0; c < n; c++) zmax = z[c] > zmax ? z[c] : zmax;
    for (int64_t c = 0; c < n; c++) sum += exp(z[c] - zmax);
    want = zmax + log(sum) - z[label];
    feclearexcept(FE_ALL_EXCEPT);
    TEST_OK(FSDPCrossEntropyLoss(1, n, z, &label, &loss, dl));
    TEST_ASSERT(!fetestexcept(FE_INVALID | FE_OVERFLOW | FE_DIVBYZERO),
                "%s: the cross-entropy of %lld classes raised a floating-point exception", FSDPSimdName(level),
                (long long)n);
    TEST_ASSERT(fabs(loss - want) <= 1e-12 * fabs(want), "%s: cross-entropy of %lld classes %.17g, libm's %.17g",
                FSDPSimdName(level), (long long)n, loss, want);
    memcpy(inplace, z, sizeof z);
    TEST_OK(FSDPCrossEntropyLoss(1, n, inplace, &label, &loss, inplace));
    TEST_ASSERT(!memcmp(inplace, dl, (size_t)n * sizeof *dl), "%s: the cross-entropy's gradient in place differs",
                FSDPSimdName(level));
    if (level == FSDP_SIMD_GENERIC) {
      memcpy(dl_ref[r], dl, (size_t)n * sizeof *dl);
      loss_ref[r] = loss;
    } else
      TEST_ASSERT(loss == loss_ref[r] && !memcmp(dl, dl_ref[r], (size_t)n * sizeof *dl),
                  "%s: the cross-entropy of %lld classes is not the generic path's, bit for bit", FSDPSimdName(level),
                  (long long)n);
  }
}

static Out ref, out;

static void run_level(FSDPSimd level, Out *o)
{
  TEST_OK(FSDPSetSimd(level));
  check_gelu(level, o);
  train(FSDP_OPTIMIZER_ADAMW, o->adamw, &o->nparams);
  train(FSDP_OPTIMIZER_SGD, o->sgd, &o->nparams);
  train_gpt(gpt_specs[0], 40, o->gpt[0], &o->gpt_nparams[0]);
  train_gpt(gpt_specs[1], 80, o->gpt[1], &o->gpt_nparams[1]);
}

int main(int argc, char **argv)
{
  FSDPSimd best, level;

  TEST_OK(FSDPInitialize(&argc, &argv));
  make_inputs();
  TEST_OK(FSDPGetSimd(&level, &best));
  TEST_ASSERT(level == best, "by default the kernels take %s, the best is %s", FSDPSimdName(level), FSDPSimdName(best));
  printf("this CPU runs: %s kernels at best\n", FSDPSimdName(best));
  run_level(FSDP_SIMD_GENERIC, &ref);
  for (int l = FSDP_SIMD_GENERIC; l <= (int)best; l++) {
    Out *o = l == FSDP_SIMD_GENERIC ? &ref : &out;
    const char *name = FSDPSimdName((FSDPSimd)l);
    if (l != FSDP_SIMD_GENERIC) {
      run_level((FSDPSimd)l, o);
      TEST_ASSERT(!memcmp(o->gelu, ref.gelu, sizeof ref.gelu) && !memcmp(o->dgelu, ref.dgelu, sizeof ref.dgelu),
                  "%s: GELU is not the generic path's, bit for bit", name);
      TEST_ASSERT(o->nparams == ref.nparams && !memcmp(o->adamw, ref.adamw, (size_t)ref.nparams * sizeof(float)),
                  "%s: three AdamW steps end with other parameters than the generic path's", name);
      TEST_ASSERT(!memcmp(o->sgd, ref.sgd, (size_t)ref.nparams * sizeof(float)),
                  "%s: three SGD steps (momentum, nesterov, weight decay, clipping) end with other parameters", name);
      for (int g = 0; g < 2; g++)
        TEST_ASSERT(o->gpt_nparams[g] == ref.gpt_nparams[g] &&
                        !memcmp(o->gpt[g], ref.gpt[g], (size_t)ref.gpt_nparams[g] * sizeof(float)),
                    "%s: three AdamW steps of %s end with other parameters than the generic path's", name,
                    gpt_specs[g]);
    }
    for (int w = 0; w < NWIDTHS; w++) {
      int64_t h = widths[w];
      static Out g;
      TEST_OK(FSDPSetSimd(FSDP_SIMD_GENERIC));
      check_layernorm(FSDP_SIMD_GENERIC, h, &g);
      TEST_OK(FSDPSetSimd((FSDPSimd)l));
      check_layernorm((FSDPSimd)l, h, o);
      TEST_ASSERT(!memcmp(o->y, g.y, (size_t)(LN * h) * sizeof(float)) && !memcmp(o->dx, g.dx, (size_t)(LN * h) * 4) &&
                      !memcmp(o->dw, g.dw, (size_t)h * 4) && !memcmp(o->db, g.db, (size_t)h * 4) &&
                      !memcmp(o->mean, g.mean, sizeof g.mean) && !memcmp(o->rstd, g.rstd, sizeof g.rstd),
                  "%s: LayerNorm with h = %lld is not the generic path's, bit for bit", name, (long long)h);
    }
    {
      static float dl_ref[CE_ROWS][CE_MAXC];
      static double loss_ref[CE_ROWS];
      TEST_OK(FSDPSetSimd(FSDP_SIMD_GENERIC));
      check_cross_entropy(FSDP_SIMD_GENERIC, dl_ref, loss_ref);
      TEST_OK(FSDPSetSimd((FSDPSimd)l));
      check_cross_entropy((FSDPSimd)l, dl_ref, loss_ref);
    }
    printf("%s: GELU, LayerNorm (h = 1 to 600), the cross-entropy, AdamW, SGD and the GPTs give the generic path's "
           "bits\n",
           name);
  }
  if (best < FSDP_SIMD_AVX512) {
    TEST_CODE(FSDP_ERR_UNSUPPORTED, FSDPSetSimd((FSDPSimd)(best + 1)));
    TEST_MESSAGE_HAS("this CPU (or this build) runs at most");
  }
  TEST_CODE(FSDP_ERR_ARG, FSDPSetSimd((FSDPSimd)9));
  TEST_MESSAGE_HAS("9 is not an FSDPSimd (generic, avx2, avx512)");
  TEST_OK(FSDPFinalize());
  return 0;
}
