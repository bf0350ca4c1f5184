/* The elementwise activations (ReLU, Tanh, exact GELU, identity), their
   kernels, and the activation layer in a model, which has no parameters. */
#include <math.h>
#include <string.h>

#include "nnimpl.h"

static const char *const act_names[] = {"relu", "tanh", "gelu", "identity"};

const char *FSDPActivationName(FSDPActivation act)
{
  if ((int)act < 0 || act > FSDP_ACT_IDENTITY) return "unknown activation";
  return act_names[act];
}

#define CHECK_ACT(act)                                                                                                 \
  CHECK_DIMS((int)(act) >= 0 && (act) <= FSDP_ACT_IDENTITY,                                                            \
             "%s: activation %d is not one of relu, tanh, gelu, "                                                      \
             "identity",                                                                                               \
             __func__, (int)(act))

FSDPErrorCode FSDPActivationForward(FSDPActivation act, int64_t n, const float *x, float *y)
{
  CHECK_ACT(act);
  CHECK_DIMS(n >= 0 && (x || !n) && (y || !n), "FSDPActivationForward: n is %lld, x and y must not be NULL",
             (long long)n);
  switch (act) {
  case FSDP_ACT_RELU:
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0f;
    break;
  case FSDP_ACT_TANH:
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
    break;
  case FSDP_ACT_GELU:
    for (int64_t i = 0; i < n; i++) y[i] = (float)(0.5 * x[i] * (1.0 + erf(x[i] * FSDP_SQRT1_2)));
    break;
  case FSDP_ACT_IDENTITY:
    if (y != x) memmove(y, x, (size_t)n * sizeof *y);
    break;
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPActivationBackward(FSDPActivation act, int64_t n, const float *x, const float *dy, float *dx)
{
  CHECK_ACT(act);
  CHECK_DIMS(n >= 0 && (x || !n) && (dy || !n) && (dx || !n),
             "FSDPActivationBackward: n is %lld, x, dy and dx must not be NULL", (long long)n);
  switch (act) {
  case FSDP_ACT_RELU: /* the subgradient at 0 is 0, as in PyTorch */
    for (int64_t i = 0; i < n; i++) dx[i] = x[i] > 0 ? dy[i] : 0.0f;
    break;
  case FSDP_ACT_TANH:
    for (int64_t i = 0; i < n; i++) {
      float t = tanhf(x[i]);
      dx[i] = dy[i] * (1.0f - t * t);
    }
    break;
  case FSDP_ACT_GELU: /* Phi(x) + x phi(x) */
    for (int64_t i = 0; i < n; i++) {
      double v = x[i];
      double cdf = 0.5 * (1.0 + erf(v * FSDP_SQRT1_2)), pdf = exp(-0.5 * v * v) * FSDP_INV_SQRT_2PI;
      dx[i] = (float)(dy[i] * (cdf + v * pdf));
    }
    break;
  case FSDP_ACT_IDENTITY:
    if (dx != dy) memmove(dx, dy, (size_t)n * sizeof *dx);
    break;
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ in a model */

static FSDPErrorCode activation_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  if (m->dev) FSDPCall(DeviceActivation_Private(m->dev, (int)l->act, false, n * l->out, x, NULL, l->y));
  else FSDPCall(FSDPActivationForward(l->act, n * l->out, x, l->y));
  return FSDP_SUCCESS;
}

static FSDPErrorCode activation_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                         float *dx)
{
  if (dx && m->dev) FSDPCall(DeviceActivation_Private(m->dev, (int)l->act, true, n * l->out, x, dy, dx));
  else if (dx) FSDPCall(FSDPActivationBackward(l->act, n * l->out, x, dy, dx));
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_activation_Private = {
    .type = "activation",
    .nparams = 0,
    .forward = activation_forward,
    .backward = activation_backward,
};
