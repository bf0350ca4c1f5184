/* The transposed convolution (PyTorch's nn.ConvTranspose1d/2d/3d, zero
   padding): the adjoint of a convolution, the upsampling of a U-Net's
   decoder.  l->conv is the convolution it is the adjoint of, so a row is
   [cout channels, osize...] of that convolution in and [cin, size...] out,
   and the weight [cout, cin / groups, kernel...] is PyTorch's
   [in_channels, out_channels / groups, kernel...] as it stands.  Forward is
   the convolution's input gradient (GEMM, then the adjoint of im2col),
   backward its forward (im2col, then GEMMs); one sample's columns are the
   scratch, whatever the batch. */
#include <string.h>

#include "nnimpl.h"

enum { WEIGHT = 0, BIAS = 1 };
static const char *const param_names[] = {"weight", "bias"};

/* Rows of one group's column matrix: the output's channels per group times the taps. */
static int64_t group_rows(const ConvGeom *g) { return g->cin / g->groups * ConvTaps(g); }

static void convt_param_shape(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM])
{
  const ConvGeom *g = &l->conv;
  if (p == BIAS) {
    *ndim = 1;
    shape[0] = g->cin;
    return;
  }
  LayerOps_conv_Private.param_shape(l, p, ndim, shape);
}

/* PyTorch's default is the convolution's: uniform in +-1/sqrt(fan_in), fan_in
   the weight's second dimension times the taps (group_rows), for both. */
static FSDPErrorCode convt_init(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin, int64_t end,
                                float *values)
{
  return LayerOps_conv_Private.init(l, p, seed, name, begin, end, values);
}

static int64_t convt_work_fixed(const Layer *l) { return l->conv.cin * ConvTaps(&l->conv) * ConvOutPoints(&l->conv); }

static FSDPErrorCode convt_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  const ConvGeom *g = &l->conv;
  int64_t rows = group_rows(g), og = g->cout / g->groups, points = ConvOutPoints(g), plane = ConvInPoints(g);
  float *w[LAYER_MAX_PARAMS], *col = m->work;

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  for (int64_t s = 0; s < n; s++) {
    const float *xs = x + s * l->in;
    float *y = l->y + s * l->out;
    for (int64_t k = 0; k < g->groups; k++)
      FSDPGemm_Private(true, false, rows, points, og, 1.0f, w[WEIGHT] + k * og * rows, rows, xs + k * og * points,
                       points, 0.0f, col + k * rows * points, points);
    for (int64_t c = 0; c < g->cin; c++)
      for (int64_t q = 0; q < plane; q++) y[c * plane + q] = w[BIAS][c];
    FSDPIm2Col_Private(g, NULL, col, y);
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode convt_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy, float *dx)
{
  const ConvGeom *g = &l->conv;
  int64_t rows = group_rows(g), og = g->cout / g->groups, points = ConvOutPoints(g), plane = ConvInPoints(g);
  float *w[LAYER_MAX_PARAMS], *dw, *db, *dcol = m->work;

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  FSDPCall(FSDPModelGrad_Private(m, l, WEIGHT, &dw));
  FSDPCall(FSDPModelGrad_Private(m, l, BIAS, &db));
  for (int64_t s = 0; s < n && (dw || dx); s++) {
    FSDPIm2Col_Private(g, dy + s * l->out, dcol, NULL);
    for (int64_t k = 0; k < g->groups; k++) {
      if (dw)
        FSDPGemm_Private(false, true, og, rows, points, 1.0f, x + s * l->in + k * og * points, points,
                         dcol + k * rows * points, points, 1.0f, dw + k * og * rows, rows);
      if (dx)
        FSDPGemm_Private(false, false, og, points, rows, 1.0f, w[WEIGHT] + k * og * rows, rows,
                         dcol + k * rows * points, points, 0.0f, dx + s * l->in + k * og * points, points);
    }
  }
  if (db) FSDPConvBiasGrad_Private(n, g->cin, plane, dy, db);
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_convtranspose_Private = {
    .type = "convtranspose",
    .nparams = 2,
    .param_names = param_names,
    .param_shape = convt_param_shape,
    .init = convt_init,
    .work_fixed = convt_work_fixed,
    .forward = convt_forward,
    .backward = convt_backward,
};
