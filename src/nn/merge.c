/* The layers where a model's graph joins a branch back in: y = x + s (add,
   a residual connection) and y = [x, s] (concat: channels-first rows, so
   the skip's channels follow x's, torch.cat((x, s), dim=1), a U-Net's skip
   connection), where s is the output of an earlier layer, l->from (-1: the
   model's input).  Backward passes dy's part for s into that layer's dskip,
   which the model adds to the gradient of its output when backward gets
   there. */
#include <string.h>

#include "nnimpl.h"

static const float *skip_input(FSDPModel m, const Layer *l) { return l->from >= 0 ? m->layers[l->from].y : m->x; }
static float *skip_grad(FSDPModel m, const Layer *l) { return l->from >= 0 ? m->layers[l->from].dskip : NULL; }

static FSDPErrorCode add_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  const float *s = skip_input(m, l);
  for (int64_t i = 0; i < n * l->out; i++) l->y[i] = x[i] + s[i];
  return FSDP_SUCCESS;
}

static FSDPErrorCode add_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy, float *dx)
{
  float *ds = skip_grad(m, l);
  (void)x;
  if (dx) memcpy(dx, dy, (size_t)(n * l->out) * sizeof *dx);
  for (int64_t i = 0; ds && i < n * l->out; i++) ds[i] += dy[i];
  return FSDP_SUCCESS;
}

static FSDPErrorCode concat_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  const float *s = skip_input(m, l);
  int64_t rest = l->out - l->in;
  for (int64_t r = 0; r < n; r++) {
    memcpy(l->y + r * l->out, x + r * l->in, (size_t)l->in * sizeof *x);
    memcpy(l->y + r * l->out + l->in, s + r * rest, (size_t)rest * sizeof *s);
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode concat_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy, float *dx)
{
  float *ds = skip_grad(m, l);
  int64_t rest = l->out - l->in;
  (void)x;
  for (int64_t r = 0; r < n; r++) {
    if (dx) memcpy(dx + r * l->in, dy + r * l->out, (size_t)l->in * sizeof *dx);
    for (int64_t i = 0; ds && i < rest; i++) ds[r * rest + i] += dy[r * l->out + l->in + i];
  }
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_add_Private = {
    .type = "add",
    .forward = add_forward,
    .backward = add_backward,
};

const LayerOps LayerOps_concat_Private = {
    .type = "concat",
    .forward = concat_forward,
    .backward = concat_backward,
};
