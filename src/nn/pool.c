/* Max and average pooling (PyTorch's nn.MaxPool1d/2d/3d and AvgPool1d/2d/3d
   without padding, floor mode): l->conv holds the channels (cin = cout),
   the window (kernel) and its stride over size, giving osize.  Max pooling
   keeps, per output, the index of the input it took (the first maximum, or
   the last NaN, as PyTorch's CPU kernel does), for backward. */
#include <math.h>
#include <string.h>

#include "nnimpl.h"

/* Calls f(o, i) for every output o of one channel plane and every input i in
   its window: the windows are the convolution's taps without padding. */
#define FOR_WINDOWS(g, ...)                                                                                            \
  for (int64_t o0 = 0; o0 < (g)->osize[0]; o0++)                                                                       \
    for (int64_t o1 = 0; o1 < (g)->osize[1]; o1++)                                                                     \
      for (int64_t o2 = 0; o2 < (g)->osize[2]; o2++) {                                                                 \
        int64_t o = (o0 * (g)->osize[1] + o1) * (g)->osize[2] + o2, first = 1;                                         \
        for (int64_t a = 0; a < (g)->kernel[0]; a++)                                                                   \
          for (int64_t b = 0; b < (g)->kernel[1]; b++)                                                                 \
            for (int64_t e = 0; e < (g)->kernel[2]; e++, first = 0) {                                                  \
              int64_t i = ((o0 * (g)->stride[0] + a) * (g)->size[1] + o1 * (g)->stride[1] + b) * (g)->size[2] +        \
                          o2 * (g)->stride[2] + e;                                                                     \
              __VA_ARGS__;                                                                                             \
            }                                                                                                          \
      }

/* Max pooling's saved state: an int32 input index per output, in a float's bits. */
static int64_t maxpool_saved(const Layer *l) { return l->out; }

static FSDPErrorCode maxpool_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  const ConvGeom *g = &l->conv;
  int64_t plane = ConvInPoints(g), points = ConvOutPoints(g);
  (void)m;
  for (int64_t s = 0; s < n * g->cin; s++) { /* one channel plane of one sample at a time */
    const float *xp = x + s * plane;
    float *y = l->y + s * points;
    int32_t *arg = (int32_t *)(void *)(l->saved + s * points);
    FOR_WINDOWS(g, {
      if (first || xp[i] > y[o] || isnan(xp[i])) {
        y[o] = xp[i];
        arg[o] = (int32_t)i;
      }
    })
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode maxpool_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                      float *dx)
{
  const ConvGeom *g = &l->conv;
  int64_t plane = ConvInPoints(g), points = ConvOutPoints(g);
  (void)m, (void)x;
  if (!dx) return FSDP_SUCCESS;
  memset(dx, 0, (size_t)(n * l->in) * sizeof *dx);
  for (int64_t s = 0; s < n * g->cin; s++) {
    const int32_t *arg = (const int32_t *)(const void *)(l->saved + s * points);
    for (int64_t o = 0; o < points; o++) dx[s * plane + arg[o]] += dy[s * points + o];
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode avgpool_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  const ConvGeom *g = &l->conv;
  int64_t plane = ConvInPoints(g), points = ConvOutPoints(g);
  float scale = 1.0f / (float)ConvTaps(g);
  (void)m;
  for (int64_t s = 0; s < n * g->cin; s++) {
    const float *xp = x + s * plane;
    float *y = l->y + s * points;
    FOR_WINDOWS(g, { y[o] = (first ? 0.0f : y[o]) + xp[i]; })
    for (int64_t o = 0; o < points; o++) y[o] *= scale;
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode avgpool_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                      float *dx)
{
  const ConvGeom *g = &l->conv;
  int64_t plane = ConvInPoints(g), points = ConvOutPoints(g);
  float scale = 1.0f / (float)ConvTaps(g);
  (void)m, (void)x;
  if (!dx) return FSDP_SUCCESS;
  memset(dx, 0, (size_t)(n * l->in) * sizeof *dx);
  for (int64_t s = 0; s < n * g->cin; s++) {
    float *d = dx + s * plane;
    const float *dys = dy + s * points;
    FOR_WINDOWS(g, {
      d[i] += dys[o] * scale;
      (void)first;
    })
  }
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_maxpool_Private = {
    .type = "maxpool",
    .saved = maxpool_saved,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
};

const LayerOps LayerOps_avgpool_Private = {
    .type = "avgpool",
    .forward = avgpool_forward,
    .backward = avgpool_backward,
};
