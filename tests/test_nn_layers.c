/* The layer library's kernels: every backward against central finite
   differences of its forward, the accumulate-into-gradient contract, known
   values (GELU, LayerNorm statistics, losses), numerically hard inputs
   (cross-entropy of huge logits), and the counter-based generator.
   mpitest: -n 1 */
#include <math.h>

#include "fsdp_nn.h"
#include "fsdptest.h"

#define H 1e-2 /* finite-difference step: float forward passes */

/* |a - b| small against the larger of 1e-2 and |b|. */
static void expect_close(double fd, double an, const char *what, int i)
{
  double scale = fabs(an) > 1e-2 ? fabs(an) : 1e-2;
  TEST_ASSERT(fabs(fd - an) <= 2e-3 * scale + 2e-4, "%s[%d]: finite difference %.7g, backward %.7g", what, i, fd, an);
}

static void fill(float *v, int n, uint64_t key, float scale)
{
  for (int i = 0; i < n; i++) v[i] = scale * test_value(key, i);
}

static double dot(const float *a, const float *b, int n)
{
  double s = 0;
  for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

/* ------------------------------------------------------------------ Linear */

enum { N = 3, IN = 4, OUT = 5 };
static float lx[N * IN], lw[OUT * IN], lb[OUT], lr[N * OUT];

static double linear_objective(void)
{
  float y[N * OUT];
  TEST_OK(FSDPLinearForward(N, IN, OUT, lx, lw, lb, y));
  return dot(y, lr, N * OUT);
}

static void check_fd(float *v, int n, const float *an, double (*objective)(void), const char *what)
{
  for (int i = 0; i < n; i++) {
    float keep = v[i];
    double up, down;
    v[i] = keep + (float)H;
    up = objective();
    v[i] = keep - (float)H;
    down = objective();
    v[i] = keep;
    expect_close((up - down) / (2 * H), an[i], what, i);
  }
}

static void test_linear(void)
{
  float y[N * OUT], dx[N * IN], dw[OUT * IN], db[OUT];
  fill(lx, N * IN, 1, 1.0f);
  fill(lw, OUT * IN, 2, 0.5f);
  fill(lb, OUT, 3, 0.5f);
  fill(lr, N * OUT, 4, 1.0f);
  /* y = x W^T + b, PyTorch's layout, by hand for one entry. */
  TEST_OK(FSDPLinearForward(N, IN, OUT, lx, lw, lb, y));
  {
    double want = lb[2];
    for (int k = 0; k < IN; k++) want += (double)lx[1 * IN + k] * lw[2 * IN + k];
    TEST_ASSERT(fabs(y[1 * OUT + 2] - want) < 1e-6, "y[1,2] = %g, expected %g", y[1 * OUT + 2], want);
  }
  /* Gradients add to what is there. */
  for (int i = 0; i < OUT * IN; i++) dw[i] = 1.0f;
  for (int i = 0; i < OUT; i++) db[i] = -1.0f;
  TEST_OK(FSDPLinearBackward(N, IN, OUT, lx, lw, lr, dx, dw, db));
  for (int i = 0; i < OUT * IN; i++) dw[i] -= 1.0f;
  for (int i = 0; i < OUT; i++) db[i] += 1.0f;
  check_fd(lx, N * IN, dx, linear_objective, "linear dx");
  check_fd(lw, OUT * IN, dw, linear_objective, "linear dweight");
  check_fd(lb, OUT, db, linear_objective, "linear dbias");
  /* Any output may be skipped; dx alone matches. */
  {
    float dx2[N * IN];
    TEST_OK(FSDPLinearBackward(N, IN, OUT, NULL, lw, lr, dx2, NULL, NULL));
    TEST_ASSERT(!memcmp(dx, dx2, sizeof dx), "dx differs when dweight and dbias are not asked for");
  }
  TEST_CODE(FSDP_ERR_ARG, FSDPLinearForward(-1, IN, OUT, lx, lw, lb, y));
  TEST_MESSAGE_HAS("n is -1");
}

/* ------------------------------------------------------------------ activations */

enum { NA = 16 };
static float ax[NA], ar[NA];
static FSDPActivation current_act;

static double act_objective(void)
{
  float y[NA];
  TEST_OK(FSDPActivationForward(current_act, NA, ax, y));
  return dot(y, ar, NA);
}

static void test_activations(void)
{
  float y[NA], dx[NA];
  fill(ar, NA, 6, 1.0f);
  for (int a = FSDP_ACT_RELU; a <= FSDP_ACT_IDENTITY; a++) {
    current_act = (FSDPActivation)a;
    fill(ax, NA, 5, 2.5f);
    for (int i = 0; i < NA; i++)
      if (fabsf(ax[i]) < 0.05f) ax[i] = 0.3f; /* keep ReLU's kink out of the differences */
    TEST_OK(FSDPActivationBackward(current_act, NA, ax, ar, dx));
    check_fd(ax, NA, dx, act_objective, FSDPActivationName(current_act));
    /* In place, as the model runs it. */
    memcpy(y, ar, sizeof y);
    TEST_OK(FSDPActivationBackward(current_act, NA, ax, y, y));
    TEST_ASSERT(!memcmp(y, dx, sizeof y), "%s: in-place backward differs", FSDPActivationName(current_act));
  }
  /* Known values: exact (erf) GELU, not the tanh approximation, which gives 0.841192. */
  {
    float x[4] = {1.0f, -1.0f, 0.0f, 3.0f}, g[4], r[4], t[4];
    TEST_OK(FSDPActivationForward(FSDP_ACT_GELU, 4, x, g));
    TEST_ASSERT(fabs(g[0] - 0.8413447460685429) < 1e-6, "gelu(1) = %.9g", g[0]);
    TEST_ASSERT(fabs(g[1] + 0.15865525393145707) < 1e-6, "gelu(-1) = %.9g", g[1]);
    TEST_ASSERT(g[2] == 0.0f, "gelu(0) = %g", g[2]);
    TEST_OK(FSDPActivationForward(FSDP_ACT_RELU, 4, x, r));
    TEST_ASSERT(r[0] == 1.0f && r[1] == 0.0f && r[3] == 3.0f, "relu wrong");
    TEST_OK(FSDPActivationForward(FSDP_ACT_TANH, 4, x, t));
    TEST_ASSERT(fabs(t[3] - tanh(3.0)) < 1e-6, "tanh(3) = %g", t[3]);
  }
  TEST_CODE(FSDP_ERR_ARG, FSDPActivationForward((FSDPActivation)9, NA, ax, y));
  TEST_MESSAGE_HAS("activation 9");
}

/* ------------------------------------------------------------------ LayerNorm */

enum { LN = 3, LH = 6 };
static float nx[LN * LH], nw[LH], nb[LH], nr[LN * LH];

static double norm_objective(void)
{
  float y[LN * LH], mean[LN], rstd[LN];
  TEST_OK(FSDPLayerNormForward(LN, LH, nx, nw, nb, y, mean, rstd));
  return dot(y, nr, LN * LH);
}

static void test_layernorm(void)
{
  float y[LN * LH], mean[LN], rstd[LN], dx[LN * LH], dw[LH] = {0}, db[LH] = {0};
  fill(nx, LN * LH, 7, 2.0f);
  for (int i = 0; i < LH; i++) nx[i] += 10.0f; /* a large mean must not hurt */
  fill(nw, LH, 8, 1.0f);
  fill(nb, LH, 9, 1.0f);
  fill(nr, LN * LH, 10, 1.0f);
  TEST_OK(FSDPLayerNormForward(LN, LH, nx, NULL, NULL, y, mean, rstd));
  for (int i = 0; i < LN; i++) {
    double m = 0, v = 0;
    for (int j = 0; j < LH; j++) m += y[i * LH + j];
    m /= LH;
    for (int j = 0; j < LH; j++) v += (y[i * LH + j] - m) * (y[i * LH + j] - m);
    v /= LH;
    TEST_ASSERT(fabs(m) < 1e-6, "row %d: normalized mean %g", i, m);
    /* Biased variance plus eps 1e-5, as torch.nn.LayerNorm. */
    {
      double xv = 0, xm = mean[i];
      for (int j = 0; j < LH; j++) xv += (nx[i * LH + j] - xm) * (nx[i * LH + j] - xm);
      xv /= LH;
      TEST_ASSERT(fabs(v - xv / (xv + 1e-5)) < 1e-5, "row %d: normalized variance %g, expected %g", i, v,
                  xv / (xv + 1e-5));
      TEST_ASSERT(fabs(rstd[i] - 1 / sqrt(xv + 1e-5)) < 1e-5 * rstd[i], "row %d: rstd %g", i, rstd[i]);
    }
  }
  TEST_OK(FSDPLayerNormForward(LN, LH, nx, nw, nb, y, mean, rstd));
  TEST_OK(FSDPLayerNormBackward(LN, LH, nx, nw, mean, rstd, nr, dx, dw, db));
  check_fd(nx, LN * LH, dx, norm_objective, "layernorm dx");
  check_fd(nw, LH, dw, norm_objective, "layernorm dweight");
  check_fd(nb, LH, db, norm_objective, "layernorm dbias");
  TEST_CODE(FSDP_ERR_ARG, FSDPLayerNormForward(LN, 0, nx, nw, nb, y, mean, rstd));
  TEST_MESSAGE_HAS("h must be positive");
}

/* ------------------------------------------------------------------ losses */

enum { MN = 4, MM = 3, CLASSES = 5 };
static float my[MN * MM], mt[MN * MM], logits[MN * CLASSES];
static int64_t labels[MN] = {0, 4, 2, 2};

static double mse_objective(void)
{
  double loss;
  TEST_OK(FSDPMSELoss(MN, MM, my, mt, &loss, NULL));
  return loss;
}

static double ce_objective(void)
{
  double loss;
  TEST_OK(FSDPCrossEntropyLoss(MN, CLASSES, logits, labels, &loss, NULL));
  return loss;
}

static void test_losses(void)
{
  float dy[MN * MM], dl[MN * CLASSES];
  double loss, want = 0;
  fill(my, MN * MM, 11, 1.0f);
  fill(mt, MN * MM, 12, 1.0f);
  TEST_OK(FSDPMSELoss(MN, MM, my, mt, &loss, dy));
  for (int i = 0; i < MN * MM; i++) want += ((double)my[i] - mt[i]) * ((double)my[i] - mt[i]);
  want /= MN * MM; /* the mean over all elements */
  TEST_ASSERT(fabs(loss - want) < 1e-12, "mse %.12g, expected %.12g", loss, want);
  check_fd(my, MN * MM, dy, mse_objective, "mse dy");

  fill(logits, MN * CLASSES, 13, 3.0f);
  TEST_OK(FSDPCrossEntropyLoss(MN, CLASSES, logits, labels, &loss, dl));
  want = 0;
  for (int i = 0; i < MN; i++) { /* -log softmax, the mean over rows */
    double s = 0;
    for (int c = 0; c < CLASSES; c++) s += exp(logits[i * CLASSES + c]);
    want += log(s) - logits[i * CLASSES + labels[i]];
  }
  want /= MN;
  TEST_ASSERT(fabs(loss - want) < 1e-9, "cross-entropy %.12g, expected %.12g", loss, want);
  check_fd(logits, MN * CLASSES, dl, ce_objective, "cross-entropy dlogits");
  /* Huge logits: a naive exp overflows; log-sum-exp gives log 2 and a finite gradient. */
  {
    float big[3] = {1000.0f, 1000.0f, -1000.0f}, g[3];
    int64_t l0 = 0;
    TEST_OK(FSDPCrossEntropyLoss(1, 3, big, &l0, &loss, g));
    TEST_ASSERT(fabs(loss - log(2.0)) < 1e-9, "loss of [1000, 1000, -1000] is %g, expected log 2", loss);
    TEST_ASSERT(fabsf(g[0] + 0.5f) < 1e-6f && fabsf(g[1] - 0.5f) < 1e-6f && g[2] == 0.0f, "gradient %g %g %g", g[0],
                g[1], g[2]);
  }
  {
    int64_t bad[MN] = {0, 5, 0, 0};
    TEST_CODE(FSDP_ERR_ARG, FSDPCrossEntropyLoss(MN, CLASSES, logits, bad, &loss, dl));
    TEST_MESSAGE_HAS("label 5 of row 1 is not in [0, 5)");
  }
}

/* ------------------------------------------------------------------ random numbers */

static void test_random(void)
{
  enum { R = 1000 };
  float all[R], part[300], other[R];
  double mean = 0;
  TEST_OK(FSDPRandomUniform(42, "blocks.0.fc.weight", 0, R, -0.5, 0.5, all));
  /* Any range, generated alone, equals the same range of the whole. */
  TEST_OK(FSDPRandomUniform(42, "blocks.0.fc.weight", 517, 817, -0.5, 0.5, part));
  TEST_ASSERT(!memcmp(part, all + 517, sizeof part), "a range generated alone differs from the whole");
  for (int i = 0; i < R; i++) {
    TEST_ASSERT(all[i] >= -0.5f && all[i] < 0.5f, "value %d = %g is outside [-0.5, 0.5)", i, all[i]);
    mean += all[i];
  }
  TEST_ASSERT(fabs(mean / R) < 0.05, "mean %g of 1000 uniform values in [-0.5, 0.5)", mean / R);
  /* Another stream, or another seed, is another sequence. */
  TEST_OK(FSDPRandomUniform(42, "blocks.0.fc.bias", 0, R, -0.5, 0.5, other));
  TEST_ASSERT(memcmp(all, other, sizeof all), "two streams gave the same values");
  TEST_OK(FSDPRandomUniform(43, "blocks.0.fc.weight", 0, R, -0.5, 0.5, other));
  TEST_ASSERT(memcmp(all, other, sizeof all), "two seeds gave the same values");
  /* The formula doc/nn.md gives, so that the values can be reproduced outside libfsdp. */
  {
    const char *name = "blocks.0.fc.weight";
    uint64_t h = 14695981039346656037ULL, key;
    for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    key = test_mix(42 ^ h);
    for (int e = 0; e < R; e += 111) {
      uint64_t bits = test_mix(key + (uint64_t)(e + 1) * 0x9E3779B97F4A7C15ULL);
      float v = (float)(-0.5 + 1.0 * ((double)(bits >> 40) * 0x1p-24));
      TEST_ASSERT(all[e] == v, "element %d is %.9g, the documented formula gives %.9g", e, all[e], v);
    }
  }
  TEST_CODE(FSDP_ERR_ARG, FSDPRandomUniform(1, "s", 5, 4, 0, 1, all));
  TEST_MESSAGE_HAS("range [5, 4)");
}

int main(int argc, char **argv)
{
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  test_linear();
  test_activations();
  test_layernorm();
  test_losses();
  test_random();
  TEST_OK(FSDPFinalize());
  return 0;
}
