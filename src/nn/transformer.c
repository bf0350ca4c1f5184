/* A GPT's transformer block (nanoGPT's Block, pre-LayerNorm):
     x1 = x + proj(attention(ln_1(x))),  y = x1 + mlp.proj(gelu(mlp.fc(ln_2(x1))))
   with causal multi-head self-attention from one QKV projection: for each
   head, softmax(q k^T / sqrt(dim / heads)) over the positions up to the
   query's own (a numerically stable softmax: the row's maximum first), times
   v.  A row of x and y is a sequence [seq, dim]; the projections run as
   GEMMs over all n * seq positions at once, the attention as GEMMs per
   sequence and head (on a GPU, per head, one batched GEMM over all the
   sequences for each product: a launch per small product was most of the
   step there).  On the host or the model's GPU (cuBLAS, and the softmax's
   kernels in layers.cu); on the host 16-bit parameters are
   widened to fp32, and the GPU takes fp32 parameters only (model.c).

   On the host the attention is memory-light by default (l->attn_block
   keys per block, FlashAttention's algorithm): forward takes the keys a
   block at a time with a running maximum and sum per query (the online
   softmax) and keeps only each query's log-sum-exp; backward recomputes
   each block's probabilities from it.  What a sequence keeps is then
   heads x t floats instead of heads x t x t.  With attn_block 0 (a GPU, or
   -fsdp_attention full) forward keeps the probabilities themselves. */
#include <math.h>
#include <string.h>

#include "nnimpl.h"
#include "simd.h"

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

/* What forward keeps, per sequence, in this order; each array spans all n
   rows.  att: each head's probabilities [t, t], or with the memory-light
   attention each query's log-sum-exp of its scores [t]. */
typedef struct {
  float *ln1, *mean1, *rstd1, *qkv, *att, *ao, *x1, *ln2, *mean2, *rstd2, *fc, *act;
} Saved;

/* Floats per sequence and head in Saved.att. */
static int64_t att_floats(const Layer *l) { return l->attn_block ? l->seq : l->seq * l->seq; }

static int64_t transformer_saved(const Layer *l)
{
  int64_t t = l->seq, c = l->dim;
  return t * (15 * c + 4) + l->heads * att_floats(l);
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
  s.ao = s.att + n * l->heads * att_floats(l);
  s.x1 = s.ao + r * c;
  s.ln2 = s.x1 + r * c;
  s.mean2 = s.ln2 + r * c;
  s.rstd2 = s.mean2 + r;
  s.fc = s.rstd2 + r;
  s.act = s.fc + r * 4 * c;
  return s;
}

/* Backward's scratch per sequence: the MLP's hidden gradient, three of the
   residual stream's width, the QKV gradient, and (full attention) room for
   an attention matrix (the host uses one, a GPU one per sequence). */
static int64_t transformer_work(const Layer *l)
{
  int64_t t = l->seq, c = l->dim;
  return t * 10 * c + (l->attn_block ? 0 : t * t);
}

/* The memory-light attention's scratch, after the above: two blocks of
   scores (probabilities and their gradient) and one value per query. */
static int64_t transformer_work_fixed(const Layer *l)
{
  return l->attn_block ? 2 * l->attn_block * l->attn_block + l->seq : 0;
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
FSDP_INLINE void causal_softmax_body(int64_t t, float *restrict s)
{
  for (int64_t i = 0; i < t; i++) {
    float *row = s + i * t, mx = row[0];
    double sum;
    FSDP_PRAGMA(omp simd reduction(max : mx))
    for (int64_t j = 1; j <= i; j++) mx = row[j] > mx ? row[j] : mx;
    FSDP_SIMD_LOOP
    for (int64_t j = 0; j <= i; j++) row[j] = fsdp_expf(row[j] - mx);
#define P(j) (double)row[j]
    sum = FSDP_LANE_SUM(i + 1, P);
#undef P
    FSDP_SIMD_LOOP
    for (int64_t j = 0; j <= i; j++) row[j] = (float)(row[j] / sum);
    for (int64_t j = i + 1; j < t; j++) row[j] = 0.0f;
  }
}
FSDP_SIMD_KERNEL(causal_softmax, (int64_t t, float *restrict s), (t, s))

/* dS = P (dP - sum_j P dP) in place of dp[t, t], row by row (the backward of causal_softmax). */
FSDP_INLINE void causal_softmax_backward_body(int64_t t, const float *restrict att, float *restrict dp)
{
  for (int64_t i = 0; i < t; i++) {
    const float *pi = att + i * t;
    float *di = dp + i * t;
    double dot;
#define PD(j) (double)pi[j] * di[j]
    dot = FSDP_LANE_SUM(i + 1, PD);
#undef PD
    FSDP_SIMD_LOOP
    for (int64_t j = 0; j <= i; j++) di[j] = (float)(pi[j] * (di[j] - dot));
    for (int64_t j = i + 1; j < t; j++) di[j] = 0.0f;
  }
}
FSDP_SIMD_KERNEL(causal_softmax_backward, (int64_t t, const float *restrict att, float *restrict dp), (t, att, dp))

/* row[j] = e^(row[j] - top) for j <= last (0 <= last < n: a query sees a
   block's first key), 0 after, in a row of n; *sum (not NULL): their sum. */
FSDP_INLINE void exp_row_body(int64_t n, int64_t last, float top, float *restrict row, double *restrict sum)
{
  FSDP_SIMD_LOOP
  for (int64_t j = 0; j <= last; j++) row[j] = fsdp_expf(row[j] - top);
#define P(j) (double)row[j]
  if (sum) *sum = FSDP_LANE_SUM(last + 1, P);
#undef P
  for (int64_t j = last + 1; j < n; j++) row[j] = 0.0f;
}
FSDP_SIMD_KERNEL(exp_row, (int64_t n, int64_t last, float top, float *restrict row, double *restrict sum),
                 (n, last, top, row, sum))

/* The memory-light attention of one sequence and head: o[t, hd] (row
   stride c) from q, k, v [t, hd] (row stride 3c), taking the keys bk at a
   time.  Each query keeps its scores' running maximum mx and the sum of
   their exponentials below it; a block with a larger maximum rescales what
   came before.  lse: each query's log-sum-exp, all backward needs to
   recompute the probabilities.  sblk: one block of scores [bq, bk]. */
static FSDPErrorCode blocked_attention(FSDPModel m, const Layer *l, const float *q, const float *key, const float *v,
                                       float *o, float *lse, float *sblk)
{
  int64_t t = l->seq, c = l->dim, hd = c / l->heads, bs = l->attn_block;
  float scale = (float)(1.0 / sqrt((double)hd));
  for (int64_t i0 = 0; i0 < t; i0 += bs) {
    int64_t bq = t - i0 < bs ? t - i0 : bs;
    float mx[FSDP_ATTENTION_BLOCK];
    double sum[FSDP_ATTENTION_BLOCK];
    for (int64_t i = 0; i < bq; i++) {
      mx[i] = -INFINITY;
      sum[i] = 0;
      for (int64_t d = 0; d < hd; d++) o[(i0 + i) * c + d] = 0.0f;
    }
    for (int64_t j0 = 0; j0 < i0 + bq; j0 += bs) { /* causal: the keys up to the block's last query */
      int64_t bk = t - j0 < bs ? t - j0 : bs;
      FSDPCall(FSDPModelGemm_Private(m, false, true, bq, bk, hd, scale, q + i0 * 3 * c, 3 * c, key + j0 * 3 * c, 3 * c,
                                     0.0f, sblk, bk));
      for (int64_t i = 0; i < bq; i++) {
        float *row = sblk + i * bk, top = mx[i], alpha;
        /* The last key this query sees in this block: j0 <= i0, so it sees at least the first. */
        int64_t last = i0 + i - j0 < bk - 1 ? i0 + i - j0 : bk - 1;
        double add;
        for (int64_t j = 0; j <= last; j++) top = row[j] > top ? row[j] : top;
        alpha = expf(mx[i] - top);
        exp_row(bk, last, top, row, &add);
        if (alpha != 1.0f)
          for (int64_t d = 0; d < hd; d++) o[(i0 + i) * c + d] *= alpha;
        sum[i] = sum[i] * alpha + add;
        mx[i] = top;
      }
      FSDPCall(FSDPModelGemm_Private(m, false, false, bq, hd, bk, 1.0f, sblk, bk, v + j0 * 3 * c, 3 * c, 1.0f,
                                     o + i0 * c, c));
    }
    for (int64_t i = 0; i < bq; i++) {
      float inv = (float)(1.0 / sum[i]);
      for (int64_t d = 0; d < hd; d++) o[(i0 + i) * c + d] *= inv;
      lse[i0 + i] = mx[i] + (float)log(sum[i]);
    }
  }
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
  for (int64_t b = 0; b < n && l->attn_block; b++)
    for (int64_t k = 0; k < h; k++) {
      const float *q = s.qkv + b * t * 3 * c + k * hd;
      FSDPCall(
          blocked_attention(m, l, q, q + c, q + 2 * c, s.ao + b * t * c + k * hd, s.att + (b * h + k) * t, m->work));
    }
  if (m->dev && !l->attn_block) { /* a head's products over all sequences at once, one softmax for all */
    for (int64_t k = 0; k < h; k++) {
      const float *q = s.qkv + k * hd;
      FSDPCall(DeviceGemmBatched_Private(m->dev, m->tf32, false, true, t, t, hd, scale, q, 3 * c, t * 3 * c, q + c,
                                         3 * c, t * 3 * c, 0.0f, s.att + k * t * t, t, h * t * t, n));
    }
    FSDPCall(DeviceCausalSoftmax_Private(m->dev, n * h * t, t, s.att));
    for (int64_t k = 0; k < h; k++)
      FSDPCall(DeviceGemmBatched_Private(m->dev, m->tf32, false, false, t, hd, t, 1.0f, s.att + k * t * t, t, h * t * t,
                                         s.qkv + k * hd + 2 * c, 3 * c, t * 3 * c, 0.0f, s.ao + k * hd, c, t * c, n));
  }
  for (int64_t b = 0; b < n && !l->attn_block && !m->dev; b++)
    for (int64_t k = 0; k < h; k++) {
      const float *q = s.qkv + b * t * 3 * c + k * hd, *key = q + c, *v = q + 2 * c;
      float *att = s.att + (b * h + k) * t * t;
      FSDPCall(FSDPModelGemm_Private(m, false, true, t, t, hd, scale, q, 3 * c, key, 3 * c, 0.0f, att, t));
      causal_softmax(t, att);
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

/* The memory-light attention's backward for one sequence and head: each
   block's probabilities again from the scores and the saved log-sum-exp,
   then dV += P^T dO, dS = P (dO V^T - D) with D the rowwise dO . O (which
   is sum_j P dP), dQ += dS K scale, dK += dS^T Q scale (dq, dk, dv start at
   zero).  scratch: two [bk, bk] blocks and t values. */
static FSDPErrorCode blocked_attention_backward(FSDPModel m, const Layer *l, const float *q, const float *key,
                                                const float *v, const float *o, const float *lse, const float *dout,
                                                float *dq, float *dk, float *dv, float *scratch)
{
  int64_t t = l->seq, c = l->dim, hd = c / l->heads, bs = l->attn_block;
  float scale = (float)(1.0 / sqrt((double)hd)), *p = scratch, *dp = p + bs * bs, *drow = dp + bs * bs;
  for (int64_t i = 0; i < t; i++) {
    double dot = 0;
    for (int64_t d = 0; d < hd; d++) dot += (double)dout[i * c + d] * o[i * c + d];
    drow[i] = (float)dot;
  }
  for (int64_t i0 = 0; i0 < t; i0 += bs) {
    int64_t bq = t - i0 < bs ? t - i0 : bs;
    for (int64_t j0 = 0; j0 < i0 + bq; j0 += bs) {
      int64_t bk = t - j0 < bs ? t - j0 : bs;
      FSDPCall(FSDPModelGemm_Private(m, false, true, bq, bk, hd, scale, q + i0 * 3 * c, 3 * c, key + j0 * 3 * c, 3 * c,
                                     0.0f, p, bk));
      for (int64_t i = 0; i < bq; i++) {
        int64_t last = i0 + i - j0 < bk - 1 ? i0 + i - j0 : bk - 1;
        exp_row(bk, last, lse[i0 + i], p + i * bk, NULL);
      }
      FSDPCall(FSDPModelGemm_Private(m, true, false, bk, hd, bq, 1.0f, p, bk, dout + i0 * c, c, 1.0f, dv + j0 * 3 * c,
                                     3 * c)); /* P^T dO */
      FSDPCall(FSDPModelGemm_Private(m, false, true, bq, bk, hd, 1.0f, dout + i0 * c, c, v + j0 * 3 * c, 3 * c, 0.0f,
                                     dp, bk)); /* dO V^T */
      for (int64_t i = 0; i < bq; i++)
        for (int64_t j = 0; j < bk; j++) dp[i * bk + j] = p[i * bk + j] * (dp[i * bk + j] - drow[i0 + i]);
      FSDPCall(FSDPModelGemm_Private(m, false, false, bq, hd, bk, scale, dp, bk, key + j0 * 3 * c, 3 * c, 1.0f,
                                     dq + i0 * 3 * c, 3 * c)); /* dS K */
      FSDPCall(FSDPModelGemm_Private(m, true, false, bk, hd, bq, scale, dp, bk, q + i0 * 3 * c, 3 * c, 1.0f,
                                     dk + j0 * 3 * c, 3 * c)); /* dS^T Q */
    }
  }
  return FSDP_SUCCESS;
}

/* dqkv from dao through each sequence's and head's attention (dp: one t x t
   scratch on the host, n of them on a GPU, or the memory-light attention's). */
static FSDPErrorCode attention_backward(FSDPModel m, const Layer *l, int64_t n, const Saved *s, const float *dao,
                                        float *dqkv, float *dp)
{
  int64_t t = l->seq, c = l->dim, h = l->heads, hd = c / h;
  float scale = (float)(1.0 / sqrt((double)hd));
  if (l->attn_block) {
    memset(dqkv, 0, (size_t)(n * t * 3 * c) * sizeof *dqkv);
    for (int64_t b = 0; b < n; b++)
      for (int64_t k = 0; k < h; k++) {
        const float *q = s->qkv + b * t * 3 * c + k * hd;
        float *dq = dqkv + b * t * 3 * c + k * hd;
        FSDPCall(blocked_attention_backward(m, l, q, q + c, q + 2 * c, s->ao + b * t * c + k * hd,
                                            s->att + (b * h + k) * t, dao + b * t * c + k * hd, dq, dq + c, dq + 2 * c,
                                            dp));
      }
    return FSDP_SUCCESS;
  }
  if (m->dev) { /* a head over all sequences at once; dp holds n matrices (transformer_work) */
    for (int64_t k = 0; k < h; k++) {
      const float *q = s->qkv + k * hd, *key = q + c, *v = q + 2 * c, *att = s->att + k * t * t;
      const float *dout = dao + k * hd;
      float *dq = dqkv + k * hd, *dk = dq + c, *dv = dq + 2 * c;
      const int64_t ps = h * t * t, qs = t * 3 * c, os = t * c, ds = t * t;
      FSDPCall(DeviceGemmBatched_Private(m->dev, m->tf32, true, false, t, hd, t, 1.0f, att, t, ps, dout, c, os, 0.0f,
                                         dv, 3 * c, qs, n)); /* P^T dO */
      FSDPCall(DeviceGemmBatched_Private(m->dev, m->tf32, false, true, t, t, hd, 1.0f, dout, c, os, v, 3 * c, qs, 0.0f,
                                         dp, t, ds, n));                                /* dO v^T */
      FSDPCall(DeviceCausalSoftmaxBackward_Private(m->dev, n * t, t, att, ps, dp, ds)); /* dS */
      FSDPCall(DeviceGemmBatched_Private(m->dev, m->tf32, false, false, t, hd, t, scale, dp, t, ds, key, 3 * c, qs,
                                         0.0f, dq, 3 * c, qs, n)); /* dS k */
      FSDPCall(DeviceGemmBatched_Private(m->dev, m->tf32, true, false, t, hd, t, scale, dp, t, ds, q, 3 * c, qs, 0.0f,
                                         dk, 3 * c, qs, n)); /* dS^T q */
    }
    return FSDP_SUCCESS;
  }
  /* dqkv zeroed in one pass, the products added into it: with beta = 0
     OpenBLAS zeroes each head's strided t x hd block first, a row at a time. */
  memset(dqkv, 0, (size_t)(n * t * 3 * c) * sizeof *dqkv);
  for (int64_t b = 0; b < n; b++)
    for (int64_t k = 0; k < h; k++) {
      const float *q = s->qkv + b * t * 3 * c + k * hd, *key = q + c, *v = q + 2 * c;
      const float *att = s->att + (b * h + k) * t * t, *dout = dao + b * t * c + k * hd;
      float *dq = dqkv + b * t * 3 * c + k * hd, *dk = dq + c, *dv = dq + 2 * c;
      FSDPCall(FSDPModelGemm_Private(m, true, false, t, hd, t, 1.0f, att, t, dout, c, 1.0f, dv, 3 * c)); /* P^T dO */
      FSDPCall(FSDPModelGemm_Private(m, false, true, t, t, hd, 1.0f, dout, c, v, 3 * c, 0.0f, dp, t));   /* dO v^T */
      causal_softmax_backward(t, att, dp);                                                               /* dS */
      FSDPCall(FSDPModelGemm_Private(m, false, false, t, hd, t, scale, dp, t, key, 3 * c, 1.0f, dq, 3 * c)); /* dS k */
      FSDPCall(FSDPModelGemm_Private(m, true, false, t, hd, t, scale, dp, t, q, 3 * c, 1.0f, dk, 3 * c)); /* dS^T q */
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
    .work_fixed = transformer_work_fixed,
    .recompute = transformer_recompute,
    .forward = transformer_forward,
    .backward = transformer_backward,
};
