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
   plan; the products with W run one kept mode at a time for the whole
   batch, as real GEMMs (weight_block). */
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

/* Floats rounded up to 64 bytes, so that the arrays after them stay aligned for FFTW's SIMD plans. */
static int64_t aligned_floats(int64_t floats) { return (floats + 15) / 16 * 16; }

/* Per row: the batch's kept modes, [modes, n, 2 cin] and [modes, n, 2 cout].
   Whatever the batch: one sample's spectra, [cin, half] and [cout, half]
   complex, and one mode's weight as a real block [2 cin, 2 cout]. */
static int64_t spectral_work(const Layer *l) { return 2 * (l->conv.cin + l->conv.cout) * kept_modes(&l->conv); }
static int64_t spectral_work_fixed(const Layer *l)
{
  const ConvGeom *g = &l->conv;
  return aligned_floats(2 * g->cin * half_points(g)) + aligned_floats(2 * g->cout * half_points(g)) +
         aligned_floats(4 * g->cin * g->cout);
}

/* The scratch above, in m->work: the input's and the output's spectra and kept modes. */
typedef struct {
  fftwf_complex *in, *out;
  float *block, *in_modes, *out_modes;
} Scratch;
static Scratch scratch(FSDPModel m, const ConvGeom *g, int64_t n)
{
  Scratch s;
  float *f = m->work;
  s.in = (fftwf_complex *)(void *)f;
  f += aligned_floats(2 * g->cin * half_points(g));
  s.out = (fftwf_complex *)(void *)f;
  f += aligned_floats(2 * g->cout * half_points(g));
  s.block = f;
  s.in_modes = f + aligned_floats(4 * g->cin * g->cout);
  s.out_modes = s.in_modes + 2 * g->cin * kept_modes(g) * n;
  return s;
}

/* The plans, made at SetUp on scratch arrays (FFTW_ESTIMATE leaves them
   untouched) and executed on the model's arrays: a sample's channels in one
   call.  Two of each: for arrays aligned as FFTW's SIMD code needs (the
   model's, as a rule), and for any arrays (FFTW_UNALIGNED, which forgoes
   SIMD: the benchmark FNO's transforms took 1.5 times as long). */
static FSDPErrorCode spectral_setup(Layer *l)
{
  const ConvGeom *g = &l->conv;
  int n[3], nd = g->nd;
  int64_t points = ConvInPoints(g), half = half_points(g), channels = g->cin > g->cout ? g->cin : g->cout;
  fftwf_plan *plans = NULL;
  float *real = NULL;
  fftwf_complex *spectrum;
  for (int d = 0; d < nd; d++) n[d] = (int)g->size[3 - nd + d];
  FSDPCall(FSDPCalloc(2 * NPLANS, sizeof *plans, FSDP_MEM_OTHER, &plans));
  l->state = plans;
  FSDPCall(FSDPMalloc((size_t)(channels * (points + 2 * half) + 16) * sizeof *real, FSDP_MEM_OTHER, &real));
  spectrum = (fftwf_complex *)(void *)(real + aligned_floats(channels * points));
  for (int a = 0; a < 2; a++) {
    unsigned flags = FFTW_ESTIMATE | (a ? FFTW_UNALIGNED : 0);
    fftwf_plan *p = plans + a * NPLANS;
    p[X_FORWARD] =
        fftwf_plan_many_dft_r2c(nd, n, (int)g->cin, real, NULL, 1, (int)points, spectrum, NULL, 1, (int)half, flags);
    p[DY_FORWARD] =
        fftwf_plan_many_dft_r2c(nd, n, (int)g->cout, real, NULL, 1, (int)points, spectrum, NULL, 1, (int)half, flags);
    p[Y_INVERSE] =
        fftwf_plan_many_dft_c2r(nd, n, (int)g->cout, spectrum, NULL, 1, (int)half, real, NULL, 1, (int)points, flags);
    p[DX_INVERSE] =
        fftwf_plan_many_dft_c2r(nd, n, (int)g->cin, spectrum, NULL, 1, (int)half, real, NULL, 1, (int)points, flags);
  }
  FSDPCall(FSDPFree(&real));
  for (int k = 0; k < 2 * NPLANS; k++)
    FSDPCheck(plans[k], MPI_COMM_SELF, FSDP_ERR_INTERNAL, "layer %s: FFTW made no plan for a %d-D grid of %lld points",
              l->name, nd, (long long)points);
  return FSDP_SUCCESS;
}

/* The aligned plan k where both arrays are aligned as at planning, else the unaligned one. */
static void real_to_spectrum(const fftwf_plan *plans, int k, const float *real, fftwf_complex *spectrum)
{
  bool aligned = fftwf_alignment_of((float *)real) == 0 && fftwf_alignment_of((float *)spectrum) == 0;
  fftwf_execute_dft_r2c(plans[aligned ? k : NPLANS + k], (float *)real, spectrum);
}
static void spectrum_to_real(const fftwf_plan *plans, int k, fftwf_complex *spectrum, float *real)
{
  bool aligned = fftwf_alignment_of(real) == 0 && fftwf_alignment_of((float *)spectrum) == 0;
  fftwf_execute_dft_c2r(plans[aligned ? k : NPLANS + k], spectrum, real);
}

static void spectral_destroy(Layer *l)
{
  fftwf_plan *plans = l->state;
  for (int k = 0; plans && k < 2 * NPLANS; k++)
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

/* Sample s's kept modes of spectrum[c, half] into kept[modes, n, 2 c], or back (a zeroed spectrum). */
static void gather_modes(const ConvGeom *g, int64_t c, int64_t n, int64_t s, const fftwf_complex *spectrum, float *kept)
{
  int64_t half = half_points(g);
  FOR_KEPT_MODES(g, {
    float *k = kept + (mode * n + s) * 2 * c;
    for (int64_t i = 0; i < c; i++) k[2 * i] = spectrum[i * half + q][0], k[2 * i + 1] = spectrum[i * half + q][1];
  })
}
static void scatter_modes(const ConvGeom *g, int64_t c, int64_t n, int64_t s, const float *kept,
                          fftwf_complex *spectrum)
{
  int64_t half = half_points(g);
  memset(spectrum, 0, (size_t)(c * half) * sizeof *spectrum);
  FOR_KEPT_MODES(g, {
    const float *k = kept + (mode * n + s) * 2 * c;
    for (int64_t i = 0; i < c; i++) spectrum[i * half + q][0] = k[2 * i], spectrum[i * half + q][1] = k[2 * i + 1];
  })
}

/* The complex product by W[:, :, mode] as a real one: a row of complex
   numbers (re, im, re, im, ...) is a real row twice as long, and (a + ib)
   (c + id) its block [[c, d], [-d, c]].  So block[2 cin, 2 cout] turns a
   batch's kept mode [n, 2 cin] into the output's [n, 2 cout] in one GEMM,
   and its transpose takes an output gradient back to the input's, with
   conj(W): the whole batch against one mode's weight, which stays in cache. */
static void weight_block(const ConvGeom *g, const float *w, int64_t mode, float *block)
{
  int64_t modes = kept_modes(g), cols = 2 * g->cout;
  for (int64_t i = 0; i < g->cin; i++)
    for (int64_t o = 0; o < g->cout; o++) {
      const float *b = w + 2 * ((i * g->cout + o) * modes + mode);
      block[2 * i * cols + 2 * o] = b[0], block[2 * i * cols + 2 * o + 1] = b[1];
      block[(2 * i + 1) * cols + 2 * o] = -b[1], block[(2 * i + 1) * cols + 2 * o + 1] = b[0];
    }
}

static FSDPErrorCode spectral_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  const ConvGeom *g = &l->conv;
  int64_t modes = kept_modes(g);
  Scratch t = scratch(m, g, n);
  fftwf_complex *xs = t.in, *ys = t.out;
  float *block = t.block, *xk = t.in_modes, *yk = t.out_modes;
  float *w[LAYER_MAX_PARAMS], scale = 1.0f / (float)ConvInPoints(g);
  fftwf_plan *plans = l->state;

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  for (int64_t s = 0; s < n; s++) {
    real_to_spectrum(plans, X_FORWARD, x + s * l->in, xs);
    gather_modes(g, g->cin, n, s, xs, xk);
  }
  for (int64_t mode = 0; mode < modes; mode++) { /* Y = X W / P, the batch at once: the inverse is unnormalized */
    weight_block(g, w[0], mode, block);
    FSDPGemm_Private(false, false, n, 2 * g->cout, 2 * g->cin, scale, xk + mode * n * 2 * g->cin, 2 * g->cin, block,
                     2 * g->cout, 0.0f, yk + mode * n * 2 * g->cout, 2 * g->cout);
  }
  for (int64_t s = 0; s < n; s++) {
    scatter_modes(g, g->cout, n, s, yk, ys);
    spectrum_to_real(plans, Y_INVERSE, ys, l->y + s * l->out); /* it overwrites ys, which is scratch */
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode spectral_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                       float *dx)
{
  const ConvGeom *g = &l->conv;
  int64_t modes = kept_modes(g), nyquist = g->size[2] / 2, cin2 = 2 * g->cin, cout2 = 2 * g->cout;
  bool even = g->size[2] % 2 == 0;
  Scratch t = scratch(m, g, n);
  fftwf_complex *xs = t.in, *gs = t.out;
  float *block = t.block, *xk = t.in_modes, *gk = t.out_modes;
  float *w[LAYER_MAX_PARAMS], *dw, scale = 1.0f / (float)ConvInPoints(g);
  fftwf_plan *plans = l->state;

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  FSDPCall(FSDPModelGrad_Private(m, l, 0, &dw));
  for (int64_t s = 0; s < n; s++) {
    real_to_spectrum(plans, DY_FORWARD, dy + s * l->out, gs); /* rfft(dy) */
    gather_modes(g, g->cout, n, s, gs, gk);
    if (dw) {
      real_to_spectrum(plans, X_FORWARD, x + s * l->in, xs);
      gather_modes(g, g->cin, n, s, xs, xk);
    }
  }
  FOR_KEPT_MODES(g, {
    float *xm = xk + mode * n * cin2, *gm = gk + mode * n * cout2;
    (void)q;
    if (dw) {
      /* dW = c G conj(X) / P over the batch, c = 2 where the mode stands for
         its mirror too (not the last axis's 0 and Nyquist frequencies).  The
         block X^T G [2 cin, 2 cout] holds the four real products of each pair. */
      float c = (j2 == 0 || (even && j2 == nyquist) ? 1.0f : 2.0f) * scale;
      FSDPGemm_Private(true, false, cin2, cout2, n, c, xm, cin2, gm, cout2, 0.0f, block, cout2);
      for (int64_t i = 0; i < g->cin; i++)
        for (int64_t o = 0; o < g->cout; o++) {
          const float *re = block + 2 * i * cout2 + 2 * o, *im = re + cout2;
          float *d = dw + 2 * ((i * g->cout + o) * modes + mode);
          d[0] += re[0] + im[1];
          d[1] += re[1] - im[0];
        }
    }
    if (dx) { /* dX = rfft(dy) conj(W) / P: the transposed block; X's kept modes are done with */
      weight_block(g, w[0], mode, block);
      FSDPGemm_Private(false, true, n, cin2, cout2, scale, gm, cout2, block, cout2, 0.0f, xm, cin2);
    }
  })
  for (int64_t s = 0; dx && s < n; s++) { /* the unnormalized inverse: irfft's adjoint, c cancelled */
    scatter_modes(g, g->cin, n, s, xk, xs);
    spectrum_to_real(plans, DX_INVERSE, xs, dx + s * l->in);
  }
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_spectral_Private = {
    .type = "spectral",
    .nparams = 1,
    .param_names = param_names,
    .param_shape = spectral_param_shape,
    .init = spectral_init,
    .work = spectral_work,
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
