/* The spectral convolution of a Fourier neural operator (Li et al., 2020;
   neuraloperator's SpectralConv): y = irfft(W . rfft(x)), where rfft is the
   real FFT over the grid's axes, and W a learned complex matrix [cin, cout]
   for each kept mode: the lowest `modes` frequencies of the last axis (of
   its size / 2 + 1), and the lowest `modes` positive and negative ones of
   each other axis; every other mode is zeroed.  The weight is [cin, cout,
   2 m..., m, 2] (real and imaginary parts last, torch.view_as_real's
   layout; along an axis other than the last, index j < m is frequency j and
   j >= m frequency size - 2 m + j).  No bias.

   Backward, with G = dL/dRe(Y) + i dL/dIm(Y) of the kept spectrum Y:
   G = c rfft(dy) / P (P the grid's points, c 2 where the half spectrum
   stands for a mode and its mirror, 1 at the last axis's 0 and size / 2),
   dW = G conj(X), and dx = irfft's adjoint of G conj(W), which is the
   unnormalized inverse transform of rfft(dy) conj(W) / P: c cancels.  FFTW
   in single precision does the transforms, a sample's channels in one
   plan. */
#include <string.h>

#include "nnimpl.h"

#ifdef FSDP_HAVE_FFTW
#include <fftw3.h>

enum { X_FORWARD, DY_FORWARD, Y_INVERSE, DX_INVERSE, NPLANS };
static const char *const param_names[] = {"weight"};

/* The half spectrum: the last axis's size / 2 + 1 modes, the others' all. */
static int64_t half_points(const ConvGeom *g) { return g->size[0] * g->size[1] * (g->size[2] / 2 + 1); }
/* The weight's extent along axis d: 1 off the grid, m on the last, 2 m on the others. */
static int64_t extent(const ConvGeom *g, int d) { return d < 3 - g->nd ? 1 : d == 2 ? g->kernel[2] : 2 * g->kernel[d]; }
static int64_t kept_modes(const ConvGeom *g) { return extent(g, 0) * extent(g, 1) * extent(g, 2); }
/* The frequency that weight index j along axis d stands for. */
static int64_t frequency(const ConvGeom *g, int d, int64_t j)
{
  return d == 2 || j < g->kernel[d] ? j : g->size[d] - 2 * g->kernel[d] + j;
}

static void spectral_param_shape(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM])
{
  const ConvGeom *g = &l->conv;
  (void)p;
  *ndim = 3 + g->nd;
  shape[0] = g->cin;
  shape[1] = g->cout;
  for (int d = 0; d < g->nd; d++) shape[2 + d] = extent(g, 3 - g->nd + d);
  shape[2 + g->nd] = 2;
}

/* neuraloperator's: scale * U[0, 1) for the real and imaginary parts, scale = 1 / (cin cout). */
static FSDPErrorCode spectral_init(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin, int64_t end,
                                   float *values)
{
  (void)p;
  FSDPCall(FSDPRandomUniform(seed, name, begin, end, 0.0, 1.0 / (double)(l->conv.cin * l->conv.cout), values));
  return FSDP_SUCCESS;
}

/* One sample's spectra: the input's [cin, half] and the output's [cout, half], complex. */
static int64_t spectral_work_fixed(const Layer *l) { return 2 * (l->conv.cin + l->conv.cout) * half_points(&l->conv); }

/* The plans, made at SetUp on scratch arrays (FFTW_ESTIMATE leaves them
   untouched) and executed on any arrays (FFTW_UNALIGNED): a sample's
   channels in one call. */
static FSDPErrorCode spectral_setup(Layer *l)
{
  const ConvGeom *g = &l->conv;
  int n[3], nd = g->nd;
  int64_t points = ConvInPoints(g), half = half_points(g), channels = g->cin > g->cout ? g->cin : g->cout;
  unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
  fftwf_plan *plans = NULL;
  float *real = NULL;
  fftwf_complex *spectrum;
  for (int d = 0; d < nd; d++) n[d] = (int)g->size[3 - nd + d];
  FSDPCall(FSDPCalloc(NPLANS, sizeof *plans, FSDP_MEM_OTHER, &plans));
  l->state = plans;
  FSDPCall(FSDPMalloc((size_t)(channels * (points + 2 * half)) * sizeof *real, FSDP_MEM_OTHER, &real));
  spectrum = (fftwf_complex *)(void *)(real + channels * points);
  plans[X_FORWARD] =
      fftwf_plan_many_dft_r2c(nd, n, (int)g->cin, real, NULL, 1, (int)points, spectrum, NULL, 1, (int)half, flags);
  plans[DY_FORWARD] =
      fftwf_plan_many_dft_r2c(nd, n, (int)g->cout, real, NULL, 1, (int)points, spectrum, NULL, 1, (int)half, flags);
  plans[Y_INVERSE] =
      fftwf_plan_many_dft_c2r(nd, n, (int)g->cout, spectrum, NULL, 1, (int)half, real, NULL, 1, (int)points, flags);
  plans[DX_INVERSE] =
      fftwf_plan_many_dft_c2r(nd, n, (int)g->cin, spectrum, NULL, 1, (int)half, real, NULL, 1, (int)points, flags);
  FSDPCall(FSDPFree(&real));
  for (int k = 0; k < NPLANS; k++)
    FSDPCheck(plans[k], MPI_COMM_SELF, FSDP_ERR_INTERNAL, "layer %s: FFTW made no plan for a %d-D grid of %lld points",
              l->name, nd, (long long)points);
  return FSDP_SUCCESS;
}

static void spectral_destroy(Layer *l)
{
  fftwf_plan *plans = l->state;
  for (int k = 0; plans && k < NPLANS; k++)
    if (plans[k]) fftwf_destroy_plan(plans[k]);
  (void)FSDPFree(&l->state);
}

/* Calls body with q, the kept mode's place in the half spectrum, and mode, its index in the weight's modes. */
#define FOR_KEPT_MODES(g, ...)                                                                                         \
  for (int64_t j0 = 0, mode = 0; j0 < extent(g, 0); j0++)                                                              \
    for (int64_t j1 = 0; j1 < extent(g, 1); j1++)                                                                      \
      for (int64_t j2 = 0; j2 < extent(g, 2); j2++, mode++) {                                                          \
        int64_t q = (frequency(g, 0, j0) * (g)->size[1] + frequency(g, 1, j1)) * ((g)->size[2] / 2 + 1) + j2;          \
        __VA_ARGS__;                                                                                                   \
      }

static FSDPErrorCode spectral_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  const ConvGeom *g = &l->conv;
  int64_t half = half_points(g), modes = kept_modes(g), points = ConvInPoints(g);
  fftwf_complex *xs = (fftwf_complex *)(void *)m->work, *ys = xs + g->cin * half;
  float *w[LAYER_MAX_PARAMS], scale = 1.0f / (float)points;
  fftwf_plan *plans = l->state;

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  for (int64_t s = 0; s < n; s++) {
    float *y = l->y + s * l->out;
    fftwf_execute_dft_r2c(plans[X_FORWARD], (float *)x + s * l->in, xs);
    memset(ys, 0, (size_t)(g->cout * half) * sizeof *ys);
    for (int64_t i = 0; i < g->cin; i++)
      for (int64_t o = 0; o < g->cout; o++) {
        const float *wio = w[0] + 2 * (i * g->cout + o) * modes;
        FOR_KEPT_MODES(g, {
          const float *a = xs[i * half + q], *b = wio + 2 * mode;
          ys[o * half + q][0] += a[0] * b[0] - a[1] * b[1];
          ys[o * half + q][1] += a[0] * b[1] + a[1] * b[0];
        })
      }
    fftwf_execute_dft_c2r(plans[Y_INVERSE], ys, y); /* it overwrites ys, which is scratch */
    for (int64_t e = 0; e < l->out; e++) y[e] *= scale;
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode spectral_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                       float *dx)
{
  const ConvGeom *g = &l->conv;
  int64_t half = half_points(g), modes = kept_modes(g), points = ConvInPoints(g), nyquist = g->size[2] / 2;
  bool even = g->size[2] % 2 == 0;
  fftwf_complex *xs = (fftwf_complex *)(void *)m->work, *gs = xs + g->cin * half;
  float *w[LAYER_MAX_PARAMS], *dw, scale = 1.0f / (float)points;
  fftwf_plan *plans = l->state;

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  FSDPCall(FSDPModelGrad_Private(m, l, 0, &dw));
  for (int64_t s = 0; s < n; s++) {
    fftwf_execute_dft_r2c(plans[DY_FORWARD], (float *)dy + s * l->out, gs); /* rfft(dy) */
    if (dw) fftwf_execute_dft_r2c(plans[X_FORWARD], (float *)x + s * l->in, xs);
    for (int64_t i = 0; dw && i < g->cin; i++) {
      float *dwi = dw + 2 * i * g->cout * modes;
      for (int64_t o = 0; o < g->cout; o++)
        FOR_KEPT_MODES(g, {
          /* the mode stands for its mirror too, except the last axis's 0 and Nyquist frequencies */
          float c = (j2 == 0 || (even && j2 == nyquist) ? 1.0f : 2.0f) * scale;
          const float *gq = gs[o * half + q], *xq = xs[i * half + q];
          float *d = dwi + 2 * (o * modes + mode);
          d[0] += c * (gq[0] * xq[0] + gq[1] * xq[1]);
          d[1] += c * (gq[1] * xq[0] - gq[0] * xq[1]);
        })
    }
    if (dx) { /* dX = rfft(dy) conj(W) / P on the kept modes, then the unnormalized inverse */
      memset(xs, 0, (size_t)(g->cin * half) * sizeof *xs);
      for (int64_t i = 0; i < g->cin; i++)
        for (int64_t o = 0; o < g->cout; o++) {
          const float *wio = w[0] + 2 * (i * g->cout + o) * modes;
          FOR_KEPT_MODES(g, {
            const float *gq = gs[o * half + q], *b = wio + 2 * mode;
            xs[i * half + q][0] += scale * (gq[0] * b[0] + gq[1] * b[1]);
            xs[i * half + q][1] += scale * (gq[1] * b[0] - gq[0] * b[1]);
          })
        }
      fftwf_execute_dft_c2r(plans[DX_INVERSE], xs, dx + s * l->in);
    }
  }
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_spectral_Private = {
    .type = "spectral",
    .nparams = 1,
    .param_names = param_names,
    .param_shape = spectral_param_shape,
    .init = spectral_init,
    .work_fixed = spectral_work_fixed,
    .forward = spectral_forward,
    .backward = spectral_backward,
    .setup = spectral_setup,
    .destroy = spectral_destroy,
};
#else
/* Without FFTW the kind exists for the registry; the fno: spec is refused before a layer is made. */
const LayerOps LayerOps_spectral_Private = {.type = "spectral"};
#endif
