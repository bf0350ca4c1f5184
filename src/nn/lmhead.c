/* A GPT's language-model head: logits[n, seq, vocab] = x[n, seq, dim]
   W[vocab, dim]^T, no bias (nanoGPT's lm_head).  Tied (gpt:...,tied=1), W is
   the token embedding's wte: the head has no parameter of its own, runs
   while the embedding's unit is unsharded again, and leaves its gradient of
   W in the model's scratch for the embedding's backward to add. */

#include "nnimpl.h"

static const char *const param_names[] = {"weight"};

static void lmhead_param_shape(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM])
{
  (void)p;
  *ndim = 2;
  shape[0] = l->vocab;
  shape[1] = l->dim;
}

static FSDPErrorCode lmhead_init(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin, int64_t end,
                                 float *values)
{
  (void)l;
  (void)p;
  FSDPCall(FSDPInitStd_Private(seed, name, begin, end, 0.02, values));
  return FSDP_SUCCESS;
}

/* The weight, and the gradient to add into (NULL: frozen). */
static FSDPErrorCode weight(FSDPModel m, const Layer *l, float **w, float **g)
{
  if (l->tie >= 0) FSDPCall(FSDPModelTiedWeight_Private(m, l, w, g));
  else {
    FSDPCall(FSDPModelLayerParams_Private(m, l, w));
    if (g) FSDPCall(FSDPModelGrad_Private(m, l, 0, g));
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode lmhead_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  float *w;
  FSDPCall(weight(m, l, &w, NULL));
  FSDPCall(FSDPModelLinearForward_Private(m, n * l->seq, l->dim, l->vocab, x, w, NULL, l->y));
  return FSDP_SUCCESS;
}

static FSDPErrorCode lmhead_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy, float *dx)
{
  float *w, *dw;
  FSDPCall(weight(m, l, &w, &dw));
  if (dw && l->tie >= 0) /* this pass's alone */
    FSDPCall(DeviceZero_Private(m->dev, dw, (size_t)(l->vocab * l->dim) * sizeof *dw));
  FSDPCall(FSDPModelLinearBackward_Private(m, n * l->seq, l->dim, l->vocab, x, w, dy, dx, dw, NULL));
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_lmhead_Private = {
    .type = "lmhead",
    .nparams = 1,
    .param_names = param_names,
    .param_shape = lmhead_param_shape,
    .init = lmhead_init,
    .forward = lmhead_forward,
    .backward = lmhead_backward,
};
