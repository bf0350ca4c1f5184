/* A GPT's embedding: token ids x[n, seq] (floats holding integers in
   [0, vocab)) to y[n, seq, dim] = wte[token] + wpe[position], as nanoGPT's
   transformer.wte and transformer.wpe do.  With a tied head, backward adds
   the head's gradient of wte (the model's scratch) to wte's own.  On the
   model's GPU, kernels of layers.cu do the same (wte's gradient adds
   atomically, rows that share a token in no fixed order). */
#include <math.h>
#include <string.h>

#include "nnimpl.h"

enum { WTE = EMBEDDING_WTE, WPE = 1 };
static const char *const param_names[] = {"wte.weight", "wpe.weight"};

static void embedding_param_shape(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM])
{
  *ndim = 2;
  shape[0] = p == WTE ? l->vocab : l->seq;
  shape[1] = l->dim;
}

FSDPErrorCode FSDPInitStd_Private(uint64_t seed, const char *name, int64_t begin, int64_t end, double std,
                                  float *values)
{
  double bound = std * sqrt(3.0); /* U(-a, a) has standard deviation a / sqrt(3) */
  FSDPCall(FSDPRandomUniform(seed, name, begin, end, -bound, bound, values));
  return FSDP_SUCCESS;
}

/* GPT-2's: standard deviation 0.02 (uniform here, the library's generator). */
static FSDPErrorCode embedding_init(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin, int64_t end,
                                    float *values)
{
  (void)l;
  (void)p;
  FSDPCall(FSDPInitStd_Private(seed, name, begin, end, 0.02, values));
  return FSDP_SUCCESS;
}

/* Before the pass begins (model.c), so that a bad token leaves no unit unsharded. */
static FSDPErrorCode embedding_check_input(const Layer *l, int64_t n, const float *x)
{
  for (int64_t i = 0; i < n * l->seq; i++)
    CHECK_DIMS(x[i] >= 0 && x[i] < (float)l->vocab && x[i] == floorf(x[i]),
               "gpt embedding: token %g at row %lld, position %lld is not an integer in [0, %lld)", (double)x[i],
               (long long)(i / l->seq), (long long)(i % l->seq), (long long)l->vocab);
  return FSDP_SUCCESS;
}

static FSDPErrorCode embedding_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  float *w[2], *wte, *wpe;
  int64_t c = l->dim;
  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  wte = w[WTE];
  wpe = w[WPE];
  if (m->dev)
    return DeviceEmbedding_Private(m->dev, false, n * l->seq, l->seq, c, l->vocab, x, wte, wpe, l->y, NULL, NULL, NULL);
  for (int64_t i = 0; i < n; i++)
    for (int64_t t = 0; t < l->seq; t++) {
      const float *e = wte + (int64_t)x[i * l->seq + t] * c, *pos = wpe + t * c;
      float *y = l->y + (i * l->seq + t) * c;
      for (int64_t j = 0; j < c; j++) y[j] = e[j] + pos[j];
    }
  return FSDP_SUCCESS;
}

static FSDPErrorCode embedding_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                        float *dx)
{
  float *dwte, *dwpe;
  int64_t c = l->dim;
  FSDPCheck(!dx, MPI_COMM_SELF, FSDP_ERR_ARG, "gpt embedding: it takes token ids and must be the model's first layer");
  FSDPCall(FSDPModelGrad_Private(m, l, WTE, &dwte));
  FSDPCall(FSDPModelGrad_Private(m, l, WPE, &dwpe));
  if (m->dev)
    FSDPCall(
        DeviceEmbedding_Private(m->dev, true, n * l->seq, l->seq, c, l->vocab, x, NULL, NULL, NULL, dy, dwte, dwpe));
  else
    for (int64_t i = 0; i < n; i++)
      for (int64_t t = 0; t < l->seq; t++) {
        const float *g = dy + (i * l->seq + t) * c;
        int64_t token = (int64_t)x[i * l->seq + t];
        if (dwte)
          for (int64_t j = 0; j < c; j++) dwte[token * c + j] += g[j];
        if (dwpe)
          for (int64_t j = 0; j < c; j++) dwpe[t * c + j] += g[j];
      }
  /* The tied head's gradient of wte, where the model computes (/ 1: the same sum). */
  if (dwte && m->tied)
    FSDPCall(
        DeviceAccumulate_Private(m->dev, FSDP_FLOAT32, dwte, FSDP_FLOAT32, m->tied_grad, l->vocab * c, 1.0, false));
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_embedding_Private = {
    .type = "embedding",
    .nparams = 2,
    .param_names = param_names,
    .param_shape = embedding_param_shape,
    .init = embedding_init,
    .check_input = embedding_check_input,
    .forward = embedding_forward,
    .backward = embedding_backward,
};
