/* A GPT's transformer block (nanoGPT's Block, pre-LayerNorm):
     x1 = x + proj(attention(ln_1(x))),  y = x1 + mlp.proj(gelu(mlp.fc(ln_2(x1))))
   with causal multi-head self-attention from one QKV projection: for each
   head, softmax(q k^T / sqrt(dim / heads)) over the positions up to the
   query's own (a numerically stable softmax: the row's maximum first), times
   v.  A row of x and y is a sequence [seq, dim]; the projections run as
   GEMMs over all n * seq positions at once, the attention as GEMMs per
   sequence and head.  On the host or the model's GPU (cuBLAS, and the
   softmax's kernels in layers.cu); on the host 16-bit parameters are
   widened to fp32, and the GPU takes fp32 parameters only (model.c). */
#include <math.h>

#include "nnimpl.h"

enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, MLP_W, MLP_B, NPARAMS };
static const char *const param_names[NPARAMS] = {
    "ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.fc.weight",   "mlp.fc.bias",   "mlp.proj.weight",  "mlp.proj.bias",
};

static void transformer_param_shape(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM])
{
  static const int rows[NPARAMS] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1}; /* in units of dim */
  int64_t c = l->dim;
  *ndim = p == QKV_W || p == PROJ_W || p == FC_W || p == MLP_W ? 2 : 1;
  shape[0] = rows[p] * c;
  shape[1] = p == MLP_W ? 4 * c : c;
}

/* GPT-2's: LayerNorms ones and zeros, biases zeros, weights standard
   deviation 0.02, the two projections into the residual stream scaled by
   1 / sqrt(2 * blocks). */
static FSDPErrorCode transformer_init(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin,
                                      int64_t end, float *values)
{
  if (p == LN1_W || p == LN2_W || p % 2 == 1) {
    float v = p == LN1_W || p == LN2_W ? 1.0f : 0.0f;
    for (int64_t e = begin; e < end; e++) values[e - begin] = v;
    return FSDP_SUCCESS;
  }
  FSDPCall(FSDPInitStd_Private(seed, name, begin, end,
                               p == PROJ_W || p == MLP_W ? 0.02 / sqrt(2.0 * (double)l->nblocks) : 0.02, values));
  return FSDP_SUCCESS;
}

/* What forward keeps, per sequence, in this order; each array spans all n rows. */
typedef struct {
  float *ln1, *mean1, *rstd1, *qkv, *att, *ao, *x1, *ln2, *mean2, *rstd2, *fc, *act;
} Saved;

static int64_t transformer_saved(const Layer *l)
{
  int64_t t = l->seq, c = l->dim;
  return t * (15 * c + 4) + l->heads * t * t;
}

static Saved saved_arrays(const Layer *l, int64_t n)
{
  int64_t r = n * l->seq, c = l->dim;
  Saved s;
  s.ln1 = l->saved;
  s.mean1 = s.ln1 + r * c;
  s.rstd1 = s.mean1 + r;
  s.qkv = s.rstd1 + r;
  s.att = s.qkv + r * 3 * c;
  s.ao = s.att + n * l->heads * l->seq * l->seq;
  s.x1 = s.ao + r * c;
  s.ln2 = s.x1 + r * c;
  s.mean2 = s.ln2 + r * c;
  s.rstd2 = s.mean2 + r;
  s.fc = s.rstd2 + r;
  s.act = s.fc + r * 4 * c;
  return s;
}

/* Backward's scratch per sequence: the MLP's hidden gradient, three of the
   residual stream's width, the QKV gradient, and one attention matrix. */
static int64_t transformer_work(const Layer *l)
{
  int64_t t = l->seq, c = l->dim;
  return t * 10 * c + t * t;
}

/* The parameters as fp32, and their gradients (NULL: frozen). */
static FSDPErrorCode params(FSDPModel m, const Layer *l, float *w[NPARAMS], float *g[NPARAMS])
{
  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  for (int p = 0; p < NPARAMS && g; p++) FSDPCall(FSDPModelGrad_Private(m, l, p, &g[p]));
  return FSDP_SUCCESS;
}

/* ---- each step where the model computes: its GPU (m->dev) or the host */

/* dst[count] += src (src / 1: the same sum on the host) */
static FSDPErrorCode add_into(FSDPModel m, int64_t count, float *dst, const float *src)
{
  return DeviceAccumulate_Private(m->dev, FSDP_FLOAT32, dst, FSDP_FLOAT32, src, count, 1.0, false);
}

static FSDPErrorCode layernorm_forward(FSDPModel m, int64_t r, int64_t c, const float *x, const float *w,
                                       const float *b, float *y, float *mean, float *rstd)
{
  if (m->dev) return DeviceLayerNormForward_Private(m->dev, r, c, x, w, b, y, mean, rstd);
  return FSDPLayerNormForward(r, c, x, w, b, y, mean, rstd);
}

static FSDPErrorCode layernorm_backward(FSDPModel m, int64_t r, int64_t c, const float *x, const float *w,
                                        const float *mean, const float *rstd, const float *dy, float *dx, float *dw,
                                        float *db)
{
  if (m->dev) return DeviceLayerNormBackward_Private(m->dev, r, c, x, w, mean, rstd, dy, dx, dw, db);
  return FSDPLayerNormBackward(r, c, x, w, mean, rstd, dy, dx, dw, db);
}

/* out = gelu(x), or (backward) out = dy gelu'(x); out may alias dy. */
static FSDPErrorCode gelu(FSDPModel m, bool backward, int64_t count, const float *x, const float *dy, float *out)
{
  if (m->dev) return DeviceActivation_Private(m->dev, FSDP_ACT_GELU, backward, count, x, dy, out);
  if (backward) return FSDPActivationBackward(FSDP_ACT_GELU, count, x, dy, out);
  return FSDPActivationForward(FSDP_ACT_GELU, count, x, out);
}

/* Causal softmax of each row of s[t, t] in place, scores beyond the diagonal zeroed. */
static void causal_softmax(int64_t t, float *s)
{
  for (int64_t i = 0; i < t; i++) {
    float *row = s + i * t, mx = row[0];
    double sum = 0;
    for (int64_t j = 1; j <= i; j++) mx = row[j] > mx ? row[j] : mx;
    for (int64_t j = 0; j <= i; j++) {
      row[j] = expf(row[j] - mx);
      sum += row[j];
    }
    for (int64_t j = 0; j <= i; j++) row[j] = (float)(row[j] / sum);
    for (int64_t j = i + 1; j < t; j++) row[j] = 0.0f;
  }
}

/* dS = P (dP - sum_j P dP) in place of dp[t, t], row by row (the backward of causal_softmax). */
static void causal_softmax_backward(int64_t t, const float *att, float *dp)
{
  for (int64_t i = 0; i < t; i++) {
    const float *pi = att + i * t;
    float *di = dp + i * t;
    double dot = 0;
    for (int64_t j = 0; j <= i; j++) dot += (double)pi[j] * di[j];
    for (int64_t j = 0; j <= i; j++) di[j] = (float)(pi[j] * (di[j] - dot));
    for (int64_t j = i + 1; j < t; j++) di[j] = 0.0f;
  }
}

/* One sequence's and head's attention probabilities: the causal softmax of
   the scores att[t, t] in place, or (dp) its backward in place of dp. */
static FSDPErrorCode softmax(FSDPModel m, int64_t t, float *att, const float *p, float *dp)
{
  if (m->dev)
    return dp ? DeviceCausalSoftmaxBackward_Private(m->dev, t, t, p, dp)
              : DeviceCausalSoftmax_Private(m->dev, t, t, att);
  if (dp) causal_softmax_backward(t, p, dp);
  else causal_softmax(t, att);
  return FSDP_SUCCESS;
}

/* Forward up to what backward needs: everything but the last projection. */
static FSDPErrorCode forward_saved(FSDPModel m, const Layer *l, int64_t n, const float *x, float *const w[NPARAMS])
{
  int64_t t = l->seq, c = l->dim, h = l->heads, hd = c / h, r = n * t;
  float scale = (float)(1.0 / sqrt((double)hd));
  Saved s = saved_arrays(l, n);

  FSDPCall(layernorm_forward(m, r, c, x, w[LN1_W], w[LN1_B], s.ln1, s.mean1, s.rstd1));
  FSDPCall(FSDPModelLinearForward_Private(m, r, c, 3 * c, s.ln1, w[QKV_W], w[QKV_B], s.qkv));
  for (int64_t b = 0; b < n; b++)
    for (int64_t k = 0; k < h; k++) {
      const float *q = s.qkv + b * t * 3 * c + k * hd, *key = q + c, *v = q + 2 * c;
      float *att = s.att + (b * h + k) * t * t;
      FSDPCall(FSDPModelGemm_Private(m, false, true, t, t, hd, scale, q, 3 * c, key, 3 * c, 0.0f, att, t));
      FSDPCall(softmax(m, t, att, NULL, NULL));
      FSDPCall(
          FSDPModelGemm_Private(m, false, false, t, hd, t, 1.0f, att, t, v, 3 * c, 0.0f, s.ao + b * t * c + k * hd, c));
    }
  FSDPCall(FSDPModelLinearForward_Private(m, r, c, c, s.ao, w[PROJ_W], w[PROJ_B], s.x1));
  FSDPCall(add_into(m, r * c, s.x1, x));
  FSDPCall(layernorm_forward(m, r, c, s.x1, w[LN2_W], w[LN2_B], s.ln2, s.mean2, s.rstd2));
  FSDPCall(FSDPModelLinearForward_Private(m, r, c, 4 * c, s.ln2, w[FC_W], w[FC_B], s.fc));
  FSDPCall(gelu(m, false, r * 4 * c, s.fc, NULL, s.act));
  return FSDP_SUCCESS;
}

static FSDPErrorCode transformer_recompute(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  float *w[NPARAMS];
  FSDPCall(params(m, l, w, NULL));
  FSDPCall(forward_saved(m, l, n, x, w));
  return FSDP_SUCCESS;
}

static FSDPErrorCode transformer_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  int64_t r = n * l->seq, c = l->dim;
  Saved s = saved_arrays(l, n);
  float *w[NPARAMS];
  FSDPCall(params(m, l, w, NULL));
  FSDPCall(forward_saved(m, l, n, x, w));
  FSDPCall(FSDPModelLinearForward_Private(m, r, 4 * c, c, s.act, w[MLP_W], w[MLP_B], l->y));
  FSDPCall(add_into(m, r * c, l->y, s.x1));
  return FSDP_SUCCESS;
}

/* dqkv from dao through each sequence's and head's attention (dp: one t x t scratch). */
static FSDPErrorCode attention_backward(FSDPModel m, const Layer *l, int64_t n, const Saved *s, const float *dao,
                                        float *dqkv, float *dp)
{
  int64_t t = l->seq, c = l->dim, h = l->heads, hd = c / h;
  float scale = (float)(1.0 / sqrt((double)hd));
  for (int64_t b = 0; b < n; b++)
    for (int64_t k = 0; k < h; k++) {
      const float *q = s->qkv + b * t * 3 * c + k * hd, *key = q + c, *v = q + 2 * c;
      const float *att = s->att + (b * h + k) * t * t, *dout = dao + b * t * c + k * hd;
      float *dq = dqkv + b * t * 3 * c + k * hd, *dk = dq + c, *dv = dq + 2 * c;
      FSDPCall(FSDPModelGemm_Private(m, true, false, t, hd, t, 1.0f, att, t, dout, c, 0.0f, dv, 3 * c)); /* P^T dO */
      FSDPCall(FSDPModelGemm_Private(m, false, true, t, t, hd, 1.0f, dout, c, v, 3 * c, 0.0f, dp, t));   /* dO v^T */
      FSDPCall(softmax(m, t, NULL, att, dp));                                                            /* dS */
      FSDPCall(FSDPModelGemm_Private(m, false, false, t, hd, t, scale, dp, t, key, 3 * c, 0.0f, dq, 3 * c)); /* dS k */
      FSDPCall(FSDPModelGemm_Private(m, true, false, t, hd, t, scale, dp, t, q, 3 * c, 0.0f, dk, 3 * c)); /* dS^T q */
    }
  return FSDP_SUCCESS;
}

static FSDPErrorCode transformer_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                          float *dx)
{
  int64_t t = l->seq, c = l->dim, r = n * t;
  float *w[NPARAMS], *g[NPARAMS];
  float *dhid = m->work, *dres = dhid + r * 4 * c, *dln = dres + r * c, *dtmp = dln + r * c;
  float *dqkv = dtmp + r * c, *dp = dqkv + r * 3 * c;
  Saved s = saved_arrays(l, n);

  FSDPCall(params(m, l, w, g));
  /* The MLP branch: dres collects the residual stream's gradient at x1. */
  FSDPCall(DeviceCopy_Private(m->dev, dres, dy, (size_t)(r * c) * sizeof *dres));
  FSDPCall(FSDPModelLinearBackward_Private(m, r, 4 * c, c, s.act, w[MLP_W], dy, dhid, g[MLP_W], g[MLP_B]));
  FSDPCall(gelu(m, true, r * 4 * c, s.fc, dhid, dhid));
  FSDPCall(FSDPModelLinearBackward_Private(m, r, c, 4 * c, s.ln2, w[FC_W], dhid, dln, g[FC_W], g[FC_B]));
  FSDPCall(layernorm_backward(m, r, c, s.x1, w[LN2_W], s.mean2, s.rstd2, dln, dtmp, g[LN2_W], g[LN2_B]));
  FSDPCall(add_into(m, r * c, dres, dtmp));
  /* The attention branch, from x1's gradient back to x's. */
  FSDPCall(FSDPModelLinearBackward_Private(m, r, c, c, s.ao, w[PROJ_W], dres, dtmp, g[PROJ_W], g[PROJ_B]));
  FSDPCall(attention_backward(m, l, n, &s, dtmp, dqkv, dp));
  FSDPCall(FSDPModelLinearBackward_Private(m, r, c, 3 * c, s.ln1, w[QKV_W], dqkv, dln, g[QKV_W], g[QKV_B]));
  FSDPCall(layernorm_backward(m, r, c, x, w[LN1_W], s.mean1, s.rstd1, dln, dx, g[LN1_W], g[LN1_B]));
  if (dx) FSDPCall(add_into(m, r * c, dx, dres));
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_transformer_Private = {
    .type = "transformer",
    .nparams = NPARAMS,
    .param_names = param_names,
    .param_shape = transformer_param_shape,
    .init = transformer_init,
    .saved = transformer_saved,
    .work = transformer_work,
    .recompute = transformer_recompute,
    .forward = transformer_forward,
    .backward = transformer_backward,
};
