/* Group normalization (PyTorch's nn.GroupNorm): a row is one sample's
   channels-first field [C, points]; each of G groups of C / G consecutive
   channels is normalized over its channels and points together (biased
   variance, eps 1e-5), then each channel scaled and shifted.  Per sample:
   no statistics cross the batch, so none cross ranks.  Host, fp32, with
   the sums in double. */
#include <math.h>

#include "nnimpl.h"

enum { WEIGHT = 0, BIAS = 1 };
static const char *const param_names[] = {"weight", "bias"};

static int64_t points(const Layer *l) { return l->conv.size[0] * l->conv.size[1] * l->conv.size[2]; }

static void groupnorm_param_shape(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM])
{
  (void)p;
  *ndim = 1;
  shape[0] = l->conv.cin;
}

/* The mean and 1/std of each sample's groups. */
static int64_t groupnorm_saved(const Layer *l) { return 2 * l->conv.groups; }

static FSDPErrorCode groupnorm_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  int64_t G = l->conv.groups, cg = l->conv.cin / G, P = points(l), size = cg * P;
  float *w[LAYER_MAX_PARAMS], *mean = l->saved, *rstd = l->saved + n * G;
  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  for (int64_t s = 0; s < n * G; s++) { /* sample s / G, group s % G: size consecutive values */
    const float *xg = x + s * size;
    float *yg = l->y + s * size;
    double sum = 0, sq = 0, mu, r;
    for (int64_t i = 0; i < size; i++) sum += xg[i];
    mu = sum / (double)size;
    for (int64_t i = 0; i < size; i++) sq += (xg[i] - mu) * (xg[i] - mu);
    r = 1.0 / sqrt(sq / (double)size + 1e-5);
    mean[s] = (float)mu;
    rstd[s] = (float)r;
    for (int64_t c = 0; c < cg; c++) {
      int64_t ch = s % G * cg + c;
      float a = (float)r * w[WEIGHT][ch], b = w[BIAS][ch] - (float)mu * a;
      for (int64_t p = 0; p < P; p++) yg[c * P + p] = xg[c * P + p] * a + b;
    }
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode groupnorm_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                        float *dx)
{
  int64_t C = l->conv.cin, G = l->conv.groups, cg = C / G, P = points(l), size = cg * P;
  float *w[LAYER_MAX_PARAMS], *dw, *db, *mean = l->saved, *rstd = l->saved + n * G;
  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  FSDPCall(FSDPModelGrad_Private(m, l, WEIGHT, &dw));
  FSDPCall(FSDPModelGrad_Private(m, l, BIAS, &db));
  /* dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy weight, over each group. */
  for (int64_t s = 0; dx && s < n * G; s++) {
    const float *xg = x + s * size, *dg = dy + s * size;
    double sum_g = 0, sum_gx = 0, mu = mean[s], r = rstd[s];
    for (int64_t c = 0; c < cg; c++) {
      double wc = w[WEIGHT][s % G * cg + c];
      for (int64_t p = 0; p < P; p++) {
        double g = dg[c * P + p] * wc;
        sum_g += g;
        sum_gx += g * (xg[c * P + p] - mu) * r;
      }
    }
    sum_g /= (double)size;
    sum_gx /= (double)size;
    for (int64_t c = 0; c < cg; c++) {
      double wc = w[WEIGHT][s % G * cg + c];
      for (int64_t p = 0; p < P; p++) {
        double xhat = (xg[c * P + p] - mu) * r;
        dx[s * size + c * P + p] = (float)(r * (dg[c * P + p] * wc - sum_g - xhat * sum_gx));
      }
    }
  }
  /* Each channel's weight and bias gradients over the batch, in double. */
  for (int64_t ch = 0; (dw || db) && ch < C; ch++) {
    double sw = 0, sb = 0;
    for (int64_t i = 0; i < n; i++) {
      int64_t s = i * G + ch / cg;
      const float *xc = x + i * C * P + ch * P, *dc = dy + i * C * P + ch * P;
      for (int64_t p = 0; p < P; p++) {
        sw += (double)dc[p] * ((xc[p] - mean[s]) * rstd[s]);
        sb += dc[p];
      }
    }
    if (dw) dw[ch] += (float)sw;
    if (db) db[ch] += (float)sb;
  }
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_groupnorm_Private = {
    .type = "groupnorm",
    .nparams = 2,
    .param_names = param_names,
    .param_shape = groupnorm_param_shape,
    .init = FSDPInitNormAffine_Private,
    .saved = groupnorm_saved,
    .forward = groupnorm_forward,
    .backward = groupnorm_backward,
};
