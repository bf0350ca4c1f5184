/* The elementwise activations (ReLU, Tanh, exact GELU, identity), their
   kernels, and the activation layer in a model, which has no parameters. */
#include <math.h>
#include <string.h>

#include "nnimpl.h"
#include "simd.h"

/* GELU (the erf form, PyTorch's default) in float, vectorized: one exp per
   element serves erf and, in backward, the normal density.  Absolute error
   below 3e-7 against the double-precision formula (tests/test_kernels.c). */
FSDP_INLINE void gelu_forward_body(int64_t n, const float *restrict x, float *restrict y)
{
  FSDP_SIMD_LOOP
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], e = fsdp_expf(-0.5f * v * v);
    y[i] = 0.5f * v * (1.0f + fsdp_erf_scaled(v, e));
  }
}
FSDP_SIMD_KERNEL(gelu_forward, (int64_t n, const float *restrict x, float *restrict y), (n, x, y))

/* Phi(x) + x phi(x) */
FSDP_INLINE void gelu_backward_body(int64_t n, const float *restrict x, const float *restrict dy, float *restrict dx)
{
  FSDP_SIMD_LOOP
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], e = fsdp_expf(-0.5f * v * v);
    float cdf = 0.5f * (1.0f + fsdp_erf_scaled(v, e)), pdf = e * (float)FSDP_INV_SQRT_2PI;
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}
FSDP_SIMD_KERNEL(gelu_backward, (int64_t n, const float *restrict x, const float *restrict dy, float *restrict dx),
                 (n, x, dy, dx))

/* ReLU as a select the compiler vectorizes: a branch per element mispredicts
   on half of them.  x and y (dx and dy) may be the same array, never
   overlapping otherwise: each element depends on its own index only. */
FSDP_INLINE void relu_forward_body(int64_t n, const float *x, float *y)
{
  FSDP_SIMD_LOOP
  for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
FSDP_SIMD_KERNEL(relu_forward, (int64_t n, const float *x, float *y), (n, x, y))

FSDP_INLINE void relu_backward_body(int64_t n, const float *x, const float *dy, float *dx)
{
  FSDP_SIMD_LOOP
  for (int64_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}
FSDP_SIMD_KERNEL(relu_backward, (int64_t n, const float *x, const float *dy, float *dx), (n, x, dy, dx))

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
  case FSDP_ACT_RELU: relu_forward(n, x, y); break;
  case FSDP_ACT_TANH:
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
    break;
  case FSDP_ACT_GELU:
    if (x == y) { /* in place: the kernel's arguments do not alias */
      for (int64_t i = 0; i < n; i += 1024) {
        float t[1024];
        int64_t m = n - i < 1024 ? n - i : 1024;
        gelu_forward(m, x + i, t);
        memcpy(y + i, t, (size_t)m * sizeof *t);
      }
    } else gelu_forward(n, x, y);
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
  case FSDP_ACT_RELU: relu_backward(n, x, dy, dx); break; /* the subgradient at 0 is 0, as in PyTorch */
  case FSDP_ACT_TANH:
    for (int64_t i = 0; i < n; i++) {
      float t = tanhf(x[i]);
      dx[i] = dy[i] * (1.0f - t * t);
    }
    break;
  case FSDP_ACT_GELU:
    if (dx == x || dx == dy) {
      for (int64_t i = 0; i < n; i += 1024) {
        float t[1024];
        int64_t m = n - i < 1024 ? n - i : 1024;
        gelu_backward(m, x + i, dy + i, t);
        memcpy(dx + i, t, (size_t)m * sizeof *t);
      }
    } else gelu_backward(n, x, dy, dx);
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
