/* LayerNorm over the last dimension (PyTorch's nn.LayerNorm: biased
   variance, eps 1e-5, affine weight and bias), its kernels (the statistics
   and the parameter gradients summed in double, so that results barely
   depend on the batch split across ranks), and the layer in a model, which
   keeps each row's mean and 1/std for backward. */
#include <math.h>

#include "nnimpl.h"

FSDPErrorCode FSDPLayerNormForward(int64_t n, int64_t h, const float *x, const float *weight, const float *bias,
                                   float *y, float *mean, float *rstd)
{
  CHECK_DIMS(n >= 0 && h > 0, "FSDPLayerNormForward: n is %lld and h %lld: h must be positive", (long long)n,
             (long long)h);
  CHECK_DIMS(!n || (x && y && mean && rstd), "FSDPLayerNormForward: x, y, mean and rstd must not be NULL");
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * h;
    double mu = 0, var = 0, r;
    for (int64_t j = 0; j < h; j++) mu += xi[j];
    mu /= (double)h;
    for (int64_t j = 0; j < h; j++) var += (xi[j] - mu) * (xi[j] - mu); /* two passes: no cancellation */
    var /= (double)h;
    r = 1.0 / sqrt(var + FSDP_LAYERNORM_EPS);
    for (int64_t j = 0; j < h; j++) {
      double v = (xi[j] - mu) * r;
      if (weight) v *= weight[j];
      if (bias) v += bias[j];
      y[i * h + j] = (float)v;
    }
    mean[i] = (float)mu;
    rstd[i] = (float)r;
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLayerNormBackward(int64_t n, int64_t h, const float *x, const float *weight, const float *mean,
                                    const float *rstd, const float *dy, float *dx, float *dweight, float *dbias)
{
  CHECK_DIMS(n >= 0 && h > 0, "FSDPLayerNormBackward: n is %lld and h %lld: h must be positive", (long long)n,
             (long long)h);
  CHECK_DIMS(!n || (x && mean && rstd && dy), "FSDPLayerNormBackward: x, mean, rstd and dy must not be NULL");
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * h, *dyi = dy + i * h;
    double r = rstd[i], mu = mean[i], sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < h; j++) {
      double xhat = (xi[j] - mu) * r, g = dyi[j] * (weight ? weight[j] : 1.0f);
      sum_g += g;
      sum_gx += g * xhat;
    }
    sum_g /= (double)h;
    sum_gx /= (double)h;
    if (dx)
      for (int64_t j = 0; j < h; j++) {
        double xhat = (xi[j] - mu) * r, g = dyi[j] * (weight ? weight[j] : 1.0f);
        dx[i * h + j] = (float)(r * (g - sum_g - xhat * sum_gx));
      }
  }
  /* Parameter gradients column by column, each a sum over the batch in double. */
  for (int64_t j = 0; j < h && (dweight || dbias); j++) {
    double sw = 0, sb = 0;
    for (int64_t i = 0; i < n; i++) {
      sw += dy[i * h + j] * ((x[i * h + j] - (double)mean[i]) * rstd[i]);
      sb += dy[i * h + j];
    }
    if (dweight) dweight[j] += (float)sw;
    if (dbias) dbias[j] += (float)sb;
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ in a model */

enum { WEIGHT = 0, BIAS = 1 };
static const char *const param_names[] = {"weight", "bias"};

static void layernorm_param_shape(const Layer *l, int p, int *ndim, int64_t shape[2])
{
  (void)p;
  *ndim = 1;
  shape[0] = l->out;
  shape[1] = 0;
}

/* PyTorch's default: weight ones, bias zeros. */
static FSDPErrorCode layernorm_init(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin, int64_t end,
                                    float *values)
{
  (void)l;
  (void)seed;
  (void)name;
  for (int64_t e = begin; e < end; e++) values[e - begin] = p == WEIGHT ? 1.0f : 0.0f;
  return FSDP_SUCCESS;
}

/* l->saved holds the rows' means, then their 1/std: [2, n]. */
static FSDPErrorCode layernorm_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  float *w, *b, *mean = l->saved, *rstd = l->saved + n;
  FSDPCall(FSDPModelParam_Private(m, l, WEIGHT, &w));
  FSDPCall(FSDPModelParam_Private(m, l, BIAS, &b));
  if (m->dev) FSDPCall(DeviceLayerNormForward_Private(m->dev, n, l->out, x, w, b, l->y, mean, rstd));
  else FSDPCall(FSDPLayerNormForward(n, l->out, x, w, b, l->y, mean, rstd));
  return FSDP_SUCCESS;
}

static FSDPErrorCode layernorm_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                        float *dx)
{
  float *w, *dw, *db, *mean = l->saved, *rstd = l->saved + n;
  FSDPCall(FSDPModelParam_Private(m, l, WEIGHT, &w));
  FSDPCall(FSDPModelGrad_Private(m, l, WEIGHT, &dw));
  FSDPCall(FSDPModelGrad_Private(m, l, BIAS, &db));
  if (m->dev) FSDPCall(DeviceLayerNormBackward_Private(m->dev, n, l->out, x, w, mean, rstd, dy, dx, dw, db));
  else FSDPCall(FSDPLayerNormBackward(n, l->out, x, w, mean, rstd, dy, dx, dw, db));
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_layernorm_Private = {
    .type = "layernorm",
    .nparams = 2,
    .param_names = param_names,
    .param_shape = layernorm_param_shape,
    .init = layernorm_init,
    .saved_per_row = 2,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
};
