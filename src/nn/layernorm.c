/* LayerNorm over the last dimension (PyTorch's nn.LayerNorm: biased
   variance, eps 1e-5, affine weight and bias), its kernels (the statistics
   and the parameter gradients summed in double, so that results barely
   depend on the batch split across ranks), and the layer in a model, which
   keeps each row's mean and 1/std for backward.  In a GPT a row holds seq
   positions, each normalized on its own over out / seq features. */
#include <math.h>

#include "nnimpl.h"
#include "simd.h"

/* y may be x: each element is read before it is written. */
FSDP_INLINE void ln_forward_body(int64_t n, int64_t h, const float *x, const float *restrict weight,
                                 const float *restrict bias, float *y, float *restrict mean, float *restrict rstd)
{
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * h;
    float *yi = y + i * h;
    double mu, var, r;
#define X(k) (double)xi[k]
    mu = FSDP_LANE_SUM(h, X) / (double)h;
#undef X
#define DEV2(k) (((double)xi[k] - mu) * ((double)xi[k] - mu)) /* two passes: no cancellation */
    var = FSDP_LANE_SUM(h, DEV2) / (double)h;
#undef DEV2
    r = 1.0 / sqrt(var + FSDP_LAYERNORM_EPS);
    if (weight && bias) {
      FSDP_SIMD_LOOP
      for (int64_t j = 0; j < h; j++) yi[j] = (float)(((double)xi[j] - mu) * r * weight[j] + bias[j]);
    } else {
      FSDP_SIMD_LOOP
      for (int64_t j = 0; j < h; j++) {
        double v = ((double)xi[j] - mu) * r;
        if (weight) v *= weight[j];
        if (bias) v += bias[j];
        yi[j] = (float)v;
      }
    }
    mean[i] = (float)mu;
    rstd[i] = (float)r;
  }
}
FSDP_SIMD_KERNEL(ln_forward,
                 (int64_t n, int64_t h, const float *x, const float *restrict weight, const float *restrict bias,
                  float *y, float *restrict mean, float *restrict rstd),
                 (n, h, x, weight, bias, y, mean, rstd))

/* The parameter gradients, sums over the rows in double, are taken COLS
   columns at a time, row after row: each column still adds its rows in
   order, and the rows are read contiguously. */
#define COLS 256

FSDP_INLINE void ln_backward_body(int64_t n, int64_t h, const float *restrict x, const float *restrict weight,
                                  const float *restrict mean, const float *restrict rstd, const float *restrict dy,
                                  float *restrict dx, float *restrict dweight, float *restrict dbias)
{
  for (int64_t i = 0; i < n && dx; i++) {
    const float *xi = x + i * h, *dyi = dy + i * h;
    float *dxi = dx + i * h;
    double r = rstd[i], mu = mean[i], sum_g, sum_gx;
#define G(k) ((double)dyi[k] * (weight ? weight[k] : 1.0f))
#define GX(k) (G(k) * (((double)xi[k] - mu) * r))
    sum_g = FSDP_LANE_SUM(h, G) / (double)h;
    sum_gx = FSDP_LANE_SUM(h, GX) / (double)h;
    FSDP_SIMD_LOOP
    for (int64_t j = 0; j < h; j++) dxi[j] = (float)(r * (G(j) - sum_g - ((double)xi[j] - mu) * r * sum_gx));
#undef GX
#undef G
  }
  for (int64_t j0 = 0; j0 < h && (dweight || dbias); j0 += COLS) {
    int64_t m = h - j0 < COLS ? h - j0 : COLS;
    double sw[COLS] = {0}, sb[COLS] = {0};
    for (int64_t i = 0; i < n; i++) {
      const float *xi = x + i * h + j0, *dyi = dy + i * h + j0;
      double mu = mean[i], r = rstd[i];
      FSDP_SIMD_LOOP
      for (int64_t j = 0; j < m; j++) {
        sw[j] += dyi[j] * (((double)xi[j] - mu) * r);
        sb[j] += dyi[j];
      }
    }
    for (int64_t j = 0; j < m; j++) {
      if (dweight) dweight[j0 + j] += (float)sw[j];
      if (dbias) dbias[j0 + j] += (float)sb[j];
    }
  }
}
FSDP_SIMD_KERNEL(ln_backward,
                 (int64_t n, int64_t h, const float *restrict x, const float *restrict weight,
                  const float *restrict mean, const float *restrict rstd, const float *restrict dy, float *restrict dx,
                  float *restrict dweight, float *restrict dbias),
                 (n, h, x, weight, mean, rstd, dy, dx, dweight, dbias))

FSDPErrorCode FSDPLayerNormForward(int64_t n, int64_t h, const float *x, const float *weight, const float *bias,
                                   float *y, float *mean, float *rstd)
{
  CHECK_DIMS(n >= 0 && h > 0, "FSDPLayerNormForward: n is %lld and h %lld: h must be positive", (long long)n,
             (long long)h);
  CHECK_DIMS(!n || (x && y && mean && rstd), "FSDPLayerNormForward: x, y, mean and rstd must not be NULL");
  ln_forward(n, h, x, weight, bias, y, mean, rstd);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLayerNormBackward(int64_t n, int64_t h, const float *x, const float *weight, const float *mean,
                                    const float *rstd, const float *dy, float *dx, float *dweight, float *dbias)
{
  CHECK_DIMS(n >= 0 && h > 0, "FSDPLayerNormBackward: n is %lld and h %lld: h must be positive", (long long)n,
             (long long)h);
  CHECK_DIMS(!n || (x && mean && rstd && dy), "FSDPLayerNormBackward: x, mean, rstd and dy must not be NULL");
  CHECK_DIMS(!dx || (dx != x && dx != dy), "FSDPLayerNormBackward: dx must not be x or dy (out of place only)");
  ln_backward(n, h, x, weight, mean, rstd, dy, dx, dweight, dbias);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ in a model */

enum { WEIGHT = 0, BIAS = 1 };
static const char *const param_names[] = {"weight", "bias"};

/* Features normalized together: a row, or one position of a GPT's row. */
static int64_t features(const Layer *l) { return l->out / l->seq; }

static void layernorm_param_shape(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM])
{
  (void)p;
  *ndim = 1;
  shape[0] = features(l);
  shape[1] = 0;
}

/* PyTorch's default for a normalization's affine parameters (LayerNorm, GroupNorm): weight ones, bias zeros. */
FSDPErrorCode FSDPInitNormAffine_Private(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin,
                                         int64_t end, float *values)
{
  (void)l;
  (void)seed;
  (void)name;
  for (int64_t e = begin; e < end; e++) values[e - begin] = p == WEIGHT ? 1.0f : 0.0f;
  return FSDP_SUCCESS;
}

static int64_t layernorm_saved(const Layer *l) { return 2 * l->seq; }

/* l->saved holds the means, then the 1/std, of the n * seq normalized rows. */
static FSDPErrorCode layernorm_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  int64_t rows = n * l->seq;
  float *w, *b, *mean = l->saved, *rstd = l->saved + rows;
  FSDPCall(FSDPModelParam_Private(m, l, WEIGHT, &w));
  FSDPCall(FSDPModelParam_Private(m, l, BIAS, &b));
  if (m->dev) FSDPCall(DeviceLayerNormForward_Private(m->dev, rows, features(l), x, w, b, l->y, mean, rstd));
  else FSDPCall(FSDPLayerNormForward(rows, features(l), x, w, b, l->y, mean, rstd));
  return FSDP_SUCCESS;
}

static FSDPErrorCode layernorm_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                        float *dx)
{
  int64_t rows = n * l->seq;
  float *w, *dw, *db, *mean = l->saved, *rstd = l->saved + rows;
  FSDPCall(FSDPModelParam_Private(m, l, WEIGHT, &w));
  FSDPCall(FSDPModelGrad_Private(m, l, WEIGHT, &dw));
  FSDPCall(FSDPModelGrad_Private(m, l, BIAS, &db));
  if (m->dev) FSDPCall(DeviceLayerNormBackward_Private(m->dev, rows, features(l), x, w, mean, rstd, dy, dx, dw, db));
  else FSDPCall(FSDPLayerNormBackward(rows, features(l), x, w, mean, rstd, dy, dx, dw, db));
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_layernorm_Private = {
    .type = "layernorm",
    .nparams = 2,
    .param_names = param_names,
    .param_shape = layernorm_param_shape,
    .init = FSDPInitNormAffine_Private,
    .saved = layernorm_saved,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
};
