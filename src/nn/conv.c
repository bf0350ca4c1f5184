/* The convolution layer (PyTorch's nn.Conv1d, Conv2d and Conv3d): a row is
   a sample's channels-first field [cin, size...], the output [cout,
   osize...].  Kernel size, stride, dilation, groups, and padding with
   zeros, circularly (periodic fields) or by reflection.  On the host in
   fp32, as im2col and one GEMM per sample and group: the im2col matrix of
   one sample is the layer's scratch, whatever the batch. */
#include <math.h>
#include <string.h>

#include "nnimpl.h"

enum { WEIGHT = 0, BIAS = 1 };
static const char *const param_names[] = {"weight", "bias"};

/* Rows of one group's im2col matrix: its input channels times the kernel's taps. */
static int64_t group_rows(const ConvGeom *g) { return g->cin / g->groups * ConvTaps(g); }

/* The input index that output position o reads through kernel tap k along
   dimension d, or -1 where that is zero padding. */
static int64_t source(const ConvGeom *g, int d, int64_t k, int64_t o)
{
  int64_t i = o * g->stride[d] - g->pad[d] + k * g->dilation[d], n = g->size[d];
  if (i >= 0 && i < n) return i;
  switch (g->padding) {
  case CONV_PAD_CIRCULAR: return (i % n + n) % n;             /* pad <= n: one wrap */
  case CONV_PAD_REFLECT: return i < 0 ? -i : 2 * (n - 1) - i; /* pad < n: one reflection */
  default: return -1;
  }
}

/* Along the last axis, for tap e: the output positions [*lo, *hi) that read
   inside the input line, at input index o * stride + *off; the others read
   padding (source()). */
static void interior(const ConvGeom *g, int64_t e, int64_t *lo, int64_t *hi, int64_t *off)
{
  int64_t s = g->stride[2], n = g->osize[2];
  *off = e * g->dilation[2] - g->pad[2];
  *lo = *off >= 0 ? 0 : (-*off + s - 1) / s;
  *hi = g->size[2] - *off <= 0 ? 0 : (g->size[2] - *off + s - 1) / s;
  *lo = *lo < n ? *lo : n;
  *hi = *hi < n ? (*hi > *lo ? *hi : *lo) : n;
}

/* Output positions [from, to) of a line of the last axis, for tap e, through
   source(): gather from the input line xl into r, or (dl) add r into dl.
   NULL lines: the line is zero padding of an outer axis. */
static void line_ends(const ConvGeom *g, int64_t e, int64_t from, int64_t to, const float *xl, float *r, float *dl,
                      bool adjoint)
{
  for (int64_t o = from; o < to; o++) {
    int64_t i = source(g, 2, e, o);
    if (adjoint) {
      if (dl && i >= 0) dl[i] += r[o];
    } else r[o] = xl && i >= 0 ? xl[i] : 0.0f;
  }
}

/* d[i] += r[i]: the adjoint's contiguous runs. */
static void add_line(int64_t n, const float *restrict r, float *restrict d)
{
  for (int64_t i = 0; i < n; i++) d[i] += r[i];
}

/* Line by line of the last axis: the interior is a strided copy, only the
   ends look up padding. */
void FSDPIm2Col_Private(const ConvGeom *g, const float *x, float *col, float *dx)
{
  int64_t points = ConvOutPoints(g), plane = ConvInPoints(g), s = g->stride[2], n = g->osize[2];
  for (int64_t c = 0; c < g->cin; c++)
    for (int64_t a = 0; a < g->kernel[0]; a++)
      for (int64_t b = 0; b < g->kernel[1]; b++)
        for (int64_t e = 0; e < g->kernel[2]; e++) {
          float *row = col + (((c * g->kernel[0] + a) * g->kernel[1] + b) * g->kernel[2] + e) * points;
          int64_t lo, hi, off;
          interior(g, e, &lo, &hi, &off);
          for (int64_t o0 = 0; o0 < g->osize[0]; o0++) {
            int64_t i0 = source(g, 0, a, o0);
            for (int64_t o1 = 0; o1 < g->osize[1]; o1++) {
              int64_t i1 = source(g, 1, b, o1);
              float *r = row + (o0 * g->osize[1] + o1) * n, *dl = NULL;
              const float *xl = NULL;
              if (i0 >= 0 && i1 >= 0) { /* else the line is zero padding */
                size_t at = (size_t)(c * plane + (i0 * g->size[1] + i1) * g->size[2]);
                if (dx) dl = dx + at;
                else xl = x + at;
              }
              if (g->padding != CONV_PAD_ZEROS) {
                line_ends(g, e, 0, lo, xl, r, dl, dx != NULL);
                line_ends(g, e, hi, n, xl, r, dl, dx != NULL);
              } else if (!dx) { /* zero padding: the ends read zeros, and their adjoint adds nothing */
                memset(r, 0, (size_t)lo * sizeof *r);
                memset(r + hi, 0, (size_t)(n - hi) * sizeof *r);
              }
              if (dl && s == 1) add_line(hi - lo, r + lo, dl + lo + off);
              else if (dl)
                for (int64_t o2 = lo; o2 < hi; o2++) dl[o2 * s + off] += r[o2];
              else if (xl && s == 1) memcpy(r + lo, xl + lo + off, (size_t)(hi - lo) * sizeof *r);
              else if (xl)
                for (int64_t o2 = lo; o2 < hi; o2++) r[o2] = xl[o2 * s + off];
              else if (!dx) memset(r + lo, 0, (size_t)(hi - lo) * sizeof *r);
            }
          }
        }
}

static void conv_param_shape(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM])
{
  const ConvGeom *g = &l->conv;
  shape[0] = g->cout;
  if (p == BIAS) {
    *ndim = 1;
    return;
  }
  *ndim = 2 + g->nd;
  shape[1] = g->cin / g->groups;
  for (int d = 0; d < g->nd; d++) shape[2 + d] = g->kernel[3 - g->nd + d];
}

/* PyTorch's default: weight and bias uniform in +-1/sqrt(fan_in), fan_in = cin / groups * taps. */
static FSDPErrorCode conv_init(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin, int64_t end,
                               float *values)
{
  double bound = 1.0 / sqrt((double)group_rows(&l->conv));
  (void)p;
  FSDPCall(FSDPRandomUniform(seed, name, begin, end, -bound, bound, values));
  return FSDP_SUCCESS;
}

/* One sample's im2col matrix, and backward's gradient of it. */
static int64_t conv_work_fixed(const Layer *l)
{
  return 2 * l->conv.cin * ConvTaps(&l->conv) * ConvOutPoints(&l->conv);
}

static FSDPErrorCode conv_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  const ConvGeom *g = &l->conv;
  int64_t rows = group_rows(g), og = g->cout / g->groups, points = ConvOutPoints(g);
  float *w[LAYER_MAX_PARAMS], *col = m->work;

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  for (int64_t s = 0; s < n; s++) {
    float *y = l->y + s * l->out;
    FSDPIm2Col_Private(g, x + s * l->in, col, NULL);
    for (int64_t k = 0; k < g->groups; k++)
      FSDPGemm_Private(false, false, og, points, rows, 1.0f, w[WEIGHT] + k * og * rows, rows, col + k * rows * points,
                       points, 0.0f, y + k * og * points, points);
    for (int64_t c = 0; c < g->cout; c++)
      for (int64_t q = 0; q < points; q++) y[c * points + q] += w[BIAS][c];
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode conv_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy, float *dx)
{
  const ConvGeom *g = &l->conv;
  int64_t rows = group_rows(g), og = g->cout / g->groups, points = ConvOutPoints(g);
  float *w[LAYER_MAX_PARAMS], *dw, *db, *col = m->work, *dcol = col + g->cin * ConvTaps(g) * points;

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  FSDPCall(FSDPModelGrad_Private(m, l, WEIGHT, &dw));
  FSDPCall(FSDPModelGrad_Private(m, l, BIAS, &db));
  for (int64_t s = 0; s < n; s++) {
    const float *d = dy + s * l->out;
    if (dw) {
      FSDPIm2Col_Private(g, x + s * l->in, col, NULL);
      for (int64_t k = 0; k < g->groups; k++)
        FSDPGemm_Private(false, true, og, rows, points, 1.0f, d + k * og * points, points, col + k * rows * points,
                         points, 1.0f, dw + k * og * rows, rows);
    }
    if (dx) {
      for (int64_t k = 0; k < g->groups; k++)
        FSDPGemm_Private(true, false, rows, points, og, 1.0f, w[WEIGHT] + k * og * rows, rows, d + k * og * points,
                         points, 0.0f, dcol + k * rows * points, points);
      memset(dx + s * l->in, 0, (size_t)l->in * sizeof *dx);
      FSDPIm2Col_Private(g, NULL, dcol, dx + s * l->in);
    }
  }
  if (db) FSDPConvBiasGrad_Private(n, g->cout, points, dy, db);
  return FSDP_SUCCESS;
}

/* Summed in double, so that it barely depends on the batch's split across ranks. */
void FSDPConvBiasGrad_Private(int64_t n, int64_t channels, int64_t points, const float *dy, float *db)
{
  for (int64_t c = 0; c < channels; c++) {
    double sum = 0;
    for (int64_t s = 0; s < n; s++)
      for (int64_t q = 0; q < points; q++) sum += dy[(s * channels + c) * points + q];
    db[c] += (float)sum;
  }
}

const LayerOps LayerOps_conv_Private = {
    .type = "conv",
    .nparams = 2,
    .param_names = param_names,
    .param_shape = conv_param_shape,
    .init = conv_init,
    .work_fixed = conv_work_fixed,
    .forward = conv_forward,
    .backward = conv_backward,
};
