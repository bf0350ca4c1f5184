/* The convolution layer (PyTorch's nn.Conv1d, Conv2d and Conv3d): a row is
   a sample's channels-first field [cin, size...], the output [cout,
   osize...].  Kernel size, stride, dilation, groups, and padding with
   zeros, circularly (periodic fields) or by reflection.  On the host in
   fp32, one sample at a time, whatever the batch, in the layer's scratch.
   With stride 1 and more than one tap both passes are direct (below): the
   output and the input gradient are correlations in register tiles (3 x 3
   kernels between 8 channels or more: Winograd's F(2 x 2, 3 x 3)), the
   weight gradient sums in tiles too, and no column matrix is built.
   Otherwise they are im2col and one GEMM per group (a 1 x 1 kernel with
   stride 1 and no padding takes its input as its columns). */
#include <math.h>
#include <string.h>

#include "nnimpl.h"
#include "simd.h"

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

/* ---- The direct backward pass: stride 1, any padding, dilation and
   groups, no column matrix.  The input gradient is a correlation of the
   zero-padded output gradient with the flipped, transposed kernel: each of
   its lines a sum of shifted lines times scalar weights, the vector loop
   along the last axis; for circular and reflect padding it is computed on
   the padded input and folded back through the padding.  The weight
   gradient sums the output gradient times the padded input, shifted by
   each tap. */

typedef float f8 __attribute__((vector_size(32)));
/* The same vector at any float's address: unaligned loads and stores. */
typedef float f8u __attribute__((vector_size(32), aligned(4), may_alias));
#define F8 8

/* A field's padded extents: the kernel reads x[c, o + t * dilation] along each axis. */
typedef struct {
  int64_t nin, nout, taps;   /* channels in and out of one group, kernel taps */
  int64_t kernel[3], dil[3]; /* the kernel, its dilation */
  int64_t in1, in2, inplane; /* the padded input's last two extents, and points per channel */
  int64_t out[3], outplane;  /* the output's extents, and points per channel */
  const float *bias;         /* added to each output channel's sums (forward), or NULL */
  float *wino;               /* winograd()'s scratch where it fits, or NULL: the direct sum */
  bool wino_kept;            /* the scratch holds this kernel's transform from the sample before */
} Correlation;

typedef void TileFn(const Correlation *k, const float *w, const float *xline, float *yline, int64_t co, int64_t w0);

/* y[co .. co + CO, line, w0 .. w0 + NV * 8) = the sum over input
   channels and taps of w times the shifted input, in that order (plus the
   bias, after the sum, as a separate pass would add it), each term
   added by MADD(acc, s, x): acc + s * x rounded once, as fmaf does, so that
   every path gives the same bits.  A GEMM fuses its multiply-adds too; the
   rest of the library does not (-ffp-contract=off). */
#define CORRELATE_TILE(name, attr, CO, NV, MADD, KW)                                                                   \
  attr static void name(const Correlation *k, const float *w, const float *xline, float *yline, int64_t co,            \
                        int64_t w0)                                                                                    \
  {                                                                                                                    \
    f8 acc[CO][NV]; /* 12 at most: with the loads, within 16 registers */                                              \
    int64_t wco = k->nin * k->taps;                                                                                    \
    FSDP_PRAGMA(GCC unroll 8)                                                                                          \
    for (int j = 0; j < CO; j++) FSDP_PRAGMA(GCC unroll 8) for (int v = 0; v < NV; v++) acc[j][v] = (f8){0};           \
    for (int64_t ci = 0; ci < k->nin; ci++) {                                                                          \
      const float *xc = xline + ci * k->inplane + w0, *wc = w + co * wco + ci * k->taps;                               \
      int64_t t = 0;                                                                                                   \
      for (int64_t a = 0; a < k->kernel[0]; a++)                                                                       \
        for (int64_t b = 0; b < k->kernel[1]; b++) {                                                                   \
          const float *xr = xc + (a * k->dil[0] * k->in1 + b * k->dil[1]) * k->in2;                                    \
          FSDP_PRAGMA(GCC unroll 3) for (int64_t e = 0; e < (KW ? KW : k->kernel[2]); e++, t++)                        \
          {                                                                                                            \
            f8 x[NV];                                                                                                  \
            FSDP_PRAGMA(GCC unroll 8) for (int v = 0; v < NV; v++) x[v] = *(const f8u *)(xr + e * k->dil[2] + v * F8); \
            FSDP_PRAGMA(GCC unroll 8)                                                                                  \
            for (int j = 0; j < CO; j++)                                                                               \
              FSDP_PRAGMA(GCC unroll 8) for (int v = 0; v < NV; v++) MADD(acc[j][v], wc[j * wco + t], x[v]);           \
          }                                                                                                            \
        }                                                                                                              \
    }                                                                                                                  \
    FSDP_PRAGMA(GCC unroll 8)                                                                                          \
    for (int j = 0; j < CO; j++) FSDP_PRAGMA(GCC unroll 2) for (int v = 0; v < NV; v++)                                \
      {                                                                                                                \
        if (k->bias) acc[j][v] = acc[j][v] + k->bias[co + j];                                                          \
        *(f8u *)(yline + (co + j) * k->outplane + w0 + v * F8) = acc[j][v];                                            \
      }                                                                                                                \
  }

#define MADD_LANES(acc, s, x)                                                                                          \
  FSDP_PRAGMA(GCC unroll 8) for (int l_ = 0; l_ < F8; l_++)(acc)[l_] = fmaf((s), (x)[l_], (acc)[l_])
/* Each path's tiles, in the order they are tried: the widest of each
   channel count first; a single channel needs more points for its sums to
   be independent enough. */
typedef struct {
  int co, nv;
  TileFn *fn;
} Tile;
#define TILES(path, attr, MADD, KW)                                                                                    \
  CORRELATE_TILE(tile_6x2_##path, attr, 6, 2, MADD, KW)                                                                \
  CORRELATE_TILE(tile_6x1_##path, attr, 6, 1, MADD, KW)                                                                \
  CORRELATE_TILE(tile_4x2_##path, attr, 4, 2, MADD, KW)                                                                \
  CORRELATE_TILE(tile_4x1_##path, attr, 4, 1, MADD, KW)                                                                \
  CORRELATE_TILE(tile_1x8_##path, attr, 1, 8, MADD, KW)                                                                \
  CORRELATE_TILE(tile_1x2_##path, attr, 1, 2, MADD, KW)                                                                \
  CORRELATE_TILE(tile_1x1_##path, attr, 1, 1, MADD, KW)                                                                \
  static const Tile tiles_##path[] = {{6, 2, tile_6x2_##path}, {6, 1, tile_6x1_##path}, {4, 2, tile_4x2_##path},       \
                                      {4, 1, tile_4x1_##path}, {1, 8, tile_1x8_##path}, {1, 2, tile_1x2_##path},       \
                                      {1, 1, tile_1x1_##path}};
/* Each path twice: for any kernel, and for kernels 3 wide along the last
   axis (the usual 3 x 3), whose taps along a line the compiler unrolls. */
TILES(lanes, , MADD_LANES, 0)
TILES(lanes3, , MADD_LANES, 3)
#if FSDP_SIMD_X86
#include <immintrin.h>
#define MADD_FMA(acc, s, x) ((acc) = _mm256_fmadd_ps(_mm256_set1_ps(s), (x), (acc)))
TILES(fma, FSDP_TARGET_AVX2, MADD_FMA, 0)
TILES(fma3, FSDP_TARGET_AVX2, MADD_FMA, 3)
#endif

/* The same sum for one output point: lines shorter than 8.  (A longer
   line's last points are a tile that ends with the line: the points it
   computes again come out the same.) */
static void correlate_point(const Correlation *k, const float *w, const float *xline, float *yline, int64_t co,
                            int64_t w0)
{
  float acc = 0.0f;
  const float *wc = w + co * k->nin * k->taps;
  for (int64_t ci = 0; ci < k->nin; ci++)
    for (int64_t a = 0; a < k->kernel[0]; a++)
      for (int64_t b = 0; b < k->kernel[1]; b++)
        for (int64_t e = 0; e < k->kernel[2]; e++)
          acc = fmaf(*wc++,
                     xline[ci * k->inplane + (a * k->dil[0] * k->in1 + b * k->dil[1]) * k->in2 + e * k->dil[2] + w0],
                     acc);
  yline[co * k->outplane + w0] = k->bias ? acc + k->bias[co] : acc;
}

/* Output channels [co, co + n) of one line, n a tile's channel count:
   the widest tiles first, then one that ends with the line. */
static void correlate_channels(const Correlation *k, const Tile *tiles, int n, const float *w, const float *xline,
                               float *yline, int64_t co)
{
  int64_t n2 = k->out[2], w0 = 0;
  const Tile *t = tiles;
  while (t->co != n) t++;
  for (; t->co == n && t->nv > 1; t++)
    for (; w0 + t->nv * F8 <= n2; w0 += t->nv * F8) t->fn(k, w, xline, yline, co, w0);
  for (; w0 + F8 <= n2; w0 += F8) t->fn(k, w, xline, yline, co, w0);
  if (w0 < n2 && n2 >= F8) t->fn(k, w, xline, yline, co, n2 - F8);
  else
    for (; w0 < n2; w0++)
      for (int j = 0; j < n; j++) correlate_point(k, w, xline, yline, co + j, w0);
}

/* ---- Winograd's F(2 x 2, 3 x 3) (Lavin and Gray, "Fast Algorithms for
   Convolutional Neural Networks", 2016): a 3 x 3 correlation with dilation 1
   in output tiles of 2 x 2 points, each from a 4 x 4 input tile d, in 16
   products per pair of channels where the direct sum takes 36:
   Y = A^T [(G g G^T) (.) (B^T d B)] A.  The kernel's transform U = G g G^T
   (16 x nout x nin), the input tiles' V = B^T d B (16 x nin x tiles), then
   16 products of matrices M = U V summed over the input channels (the tiles
   above, a point per tile), and Y = A^T M A plus the bias.  One row of tiles
   at a time, so that V and M stay in cache; the transforms add, subtract
   and halve (exactly), in one order on every path, so every path gives the
   same bits, though not the direct sum's. */

/* Wide enough that the products outweigh the transforms (nin and nout of 8
   and more per group), even extents of the output's last two axes, and 16
   points or more along the last (rows of 8 tiles or more: the products run
   on whole vectors of 8 tiles, so shorter rows would waste most of them). */
enum { WINO_MIN_CHANNELS = 8, WINO_MIN_POINTS = 16 };
static bool winograd_fits(const Correlation *k)
{
  return k->kernel[0] == 1 && k->kernel[1] == 3 && k->kernel[2] == 3 && k->dil[1] == 1 && k->dil[2] == 1 &&
         k->out[1] % 2 == 0 && k->out[2] % 2 == 0 && k->out[2] >= WINO_MIN_POINTS && k->nin >= WINO_MIN_CHANNELS &&
         k->nout >= WINO_MIN_CHANNELS;
}

/* Tiles along a row of them, rounded up to whole vectors. */
static int64_t winograd_row(const Correlation *k) { return (k->out[2] / 2 + F8 - 1) / F8 * F8; }

/* Floats between the 16 planes of V or M: a whole number of vectors, plus 16
   floats so that the planes a transform reads or writes together do not all
   fall in the same sets of the L1 cache (planes a multiple of 4 KiB apart
   took the transforms as long as the products). */
static int64_t winograd_plane(int64_t channels, const Correlation *k) { return channels * winograd_row(k) + 16; }

/* The scratch of winograd(): U, and V and M for one row of tiles; 0 where it does not fit. */
static int64_t winograd_floats(const Correlation *k)
{
  return winograd_fits(k) ? 16 * (k->nout * k->nin + winograd_plane(k->nin, k) + winograd_plane(k->nout, k)) : 0;
}

#if defined(__clang__)
#define SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int i8 __attribute__((vector_size(32)));
#define SHUFFLE(a, b, ...) __builtin_shuffle(a, b, (i8){__VA_ARGS__})
#endif

/* u[i, j, co, ci] = (G g G^T)[i, j] of the kernel g = w[co, ci] (3 x 3), G
   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. */
static void winograd_kernel(const Correlation *k, const float *w, float *u)
{
  int64_t pairs = k->nout * k->nin;
  for (int64_t p = 0; p < pairs; p++) {
    const float *g = w + p * 9;
    float gg[4][3];
    for (int c = 0; c < 3; c++) {
      gg[0][c] = g[c];
      gg[1][c] = (g[c] + g[3 + c] + g[6 + c]) * 0.5f;
      gg[2][c] = (g[c] - g[3 + c] + g[6 + c]) * 0.5f;
      gg[3][c] = g[6 + c];
    }
    for (int i = 0; i < 4; i++) {
      float *ui = u + i * 4 * pairs + p;
      ui[0] = gg[i][0];
      ui[pairs] = (gg[i][0] + gg[i][1] + gg[i][2]) * 0.5f;
      ui[2 * pairs] = (gg[i][0] - gg[i][1] + gg[i][2]) * 0.5f;
      ui[3 * pairs] = gg[i][2];
    }
  }
}

/* v[i, j, t0 .. t0 + 8) (stride `plane` between i, j) = B^T d B of 8 input
   tiles whose top row starts at xr (rows `in2` apart), B^T = [1 0 -1 0; 0 1
   1 0; 0 -1 1 0; 0 1 0 -1]; `valid` floats of each row may be read (18 for
   the whole 8 tiles), the others are zeros. */
FSDP_INLINE void winograd_input_body(const float *xr, int64_t in2, int64_t valid, float *v, int64_t plane)
{
  f8 r[4][4];
  for (int i = 0; i < 4; i++) {
    const float *p = xr + i * in2;
    float line[24];
    if (valid < 18) {
      memset(line, 0, sizeof line);
      memcpy(line, p, (size_t)valid * sizeof *p);
      p = line;
    }
    f8 a = *(const f8u *)p, b = *(const f8u *)(p + 8), c = *(const f8u *)(p + 2), d = *(const f8u *)(p + 10);
    f8 e0 = SHUFFLE(a, b, 0, 2, 4, 6, 8, 10, 12, 14), o0 = SHUFFLE(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
    f8 e1 = SHUFFLE(c, d, 0, 2, 4, 6, 8, 10, 12, 14), o1 = SHUFFLE(c, d, 1, 3, 5, 7, 9, 11, 13, 15);
    r[i][0] = e0 - e1;
    r[i][1] = o0 + e1;
    r[i][2] = e1 - o0;
    r[i][3] = o0 - o1;
  }
  for (int j = 0; j < 4; j++) {
    *(f8u *)(v + j * plane) = r[0][j] - r[2][j];
    *(f8u *)(v + (4 + j) * plane) = r[1][j] + r[2][j];
    *(f8u *)(v + (8 + j) * plane) = r[2][j] - r[1][j];
    *(f8u *)(v + (12 + j) * plane) = r[1][j] - r[3][j];
  }
}

/* Two output rows of 8 tiles (yr, yr + out2; `valid` points of each written)
   = A^T M A + bias of m[i, j, t0 .. t0 + 8) (stride `plane`), A^T = [1 1 1
   0; 0 1 -1 -1]. */
FSDP_INLINE void winograd_output_body(const float *m, int64_t plane, float bias, float *yr, int64_t out2, int64_t valid)
{
  f8 s[4], d[4], y[2][2];
  for (int j = 0; j < 4; j++) {
    f8 m0 = *(const f8u *)(m + j * plane), m1 = *(const f8u *)(m + (4 + j) * plane),
       m2 = *(const f8u *)(m + (8 + j) * plane), m3 = *(const f8u *)(m + (12 + j) * plane);
    s[j] = m0 + m1 + m2;
    d[j] = m1 - m2 - m3;
  }
  y[0][0] = s[0] + s[1] + s[2] + bias;
  y[0][1] = s[1] - s[2] - s[3] + bias;
  y[1][0] = d[0] + d[1] + d[2] + bias;
  y[1][1] = d[1] - d[2] - d[3] + bias;
  for (int i = 0; i < 2; i++) {
    f8 lo = SHUFFLE(y[i][0], y[i][1], 0, 8, 1, 9, 2, 10, 3, 11),
       hi = SHUFFLE(y[i][0], y[i][1], 4, 12, 5, 13, 6, 14, 7, 15);
    float *p = yr + i * out2, line[16];
    if (valid < 16) p = line;
    *(f8u *)p = lo;
    *(f8u *)(p + 8) = hi;
    if (valid < 16) memcpy(yr + i * out2, line, (size_t)valid * sizeof *line);
  }
}

/* m[co .. co + CO, t0 .. t0 + NV * 8) = u[co.., :] v[:, t0..]: the sum over
   the input channels in order, each term added by MADD as the direct tiles do. */
typedef void WinoFn(int64_t nin, int64_t tiles, const float *u, const float *v, float *m, int64_t co, int64_t t0);
#define WINO_TILE(name, attr, CO, NV, MADD)                                                                            \
  attr static void name(int64_t nin, int64_t tiles, const float *u, const float *v, float *m, int64_t co, int64_t t0)  \
  {                                                                                                                    \
    f8 acc[CO][NV];                                                                                                    \
    FSDP_PRAGMA(GCC unroll 8)                                                                                          \
    for (int j = 0; j < CO; j++) FSDP_PRAGMA(GCC unroll 2) for (int v_ = 0; v_ < NV; v_++) acc[j][v_] = (f8){0};       \
    for (int64_t ci = 0; ci < nin; ci++) {                                                                             \
      f8 x[NV];                                                                                                        \
      FSDP_PRAGMA(GCC unroll 2) for (int v_ = 0; v_ < NV; v_++) x[v_] = *(const f8u *)(v + ci * tiles + t0 + v_ * F8); \
      FSDP_PRAGMA(GCC unroll 8)                                                                                        \
      for (int j = 0; j < CO; j++)                                                                                     \
        FSDP_PRAGMA(GCC unroll 2) for (int v_ = 0; v_ < NV; v_++) MADD(acc[j][v_], u[(co + j) * nin + ci], x[v_]);     \
    }                                                                                                                  \
    FSDP_PRAGMA(GCC unroll 8)                                                                                          \
    for (int j = 0; j < CO; j++) FSDP_PRAGMA(GCC unroll 2)                                                             \
    for (int v_ = 0; v_ < NV; v_++) *(f8u *)(m + (co + j) * tiles + t0 + v_ * F8) = acc[j][v_];                        \
  }

/* The output channels in tiles of 6, then 4, then 1 (correlate()'s split),
   each tile's row of tiles 16 and then 8 at a time. */
typedef struct {
  WinoFn *fn[3][2]; /* [6, 4, 1 channels][8, 16 tiles] */
} WinoTiles;

static void channel_split(int64_t nout, int64_t *n6, int64_t *n4)
{
  int64_t even = nout - nout % 2;
  *n4 = even % 6 == 4 ? 1 : even % 6 == 2 ? 2 : 0;
  if (4 * *n4 > even) *n4 = 0;
  *n6 = (even - 4 * *n4) / 6;
}

FSDP_INLINE void winograd_body(const Correlation *k, const float *w, const float *x, float *y, const WinoTiles *tiles)
{
  int64_t nin = k->nin, nout = k->nout, tc = k->out[2] / 2, tp = winograd_row(k), n6, n4, out2 = k->out[2];
  int64_t vplane = winograd_plane(nin, k), mplane = winograd_plane(nout, k);
  float *u = k->wino, *v = u + 16 * nout * nin, *m = v + 16 * vplane;
  channel_split(nout, &n6, &n4);
  int64_t tile_count[3] = {n6, n4, nout - 6 * n6 - 4 * n4}, tile_width[3] = {6, 4, 1};
  if (!k->wino_kept) winograd_kernel(k, w, u);
  for (int64_t o0 = 0; o0 < k->out[0]; o0++)
    for (int64_t r = 0; r < k->out[1] / 2; r++) {
      for (int64_t ci = 0; ci < nin; ci++)
        for (int64_t t0 = 0; t0 < tp; t0 += F8) {
          const float *xr = x + ci * k->inplane + (o0 * k->in1 + 2 * r) * k->in2 + 2 * t0;
          int64_t valid = 2 * (tc - t0) + 2;
          winograd_input_body(xr, k->in2, valid < 18 ? valid : 18, v + ci * tp + t0, vplane);
        }
      for (int xi = 0; xi < 16; xi++) {
        const float *ux = u + xi * nout * nin, *vx = v + xi * vplane;
        float *mx = m + xi * mplane;
        int64_t co = 0;
        for (int size = 0; size < 3; size++) {
          int64_t count = tile_count[size], width = tile_width[size];
          for (int64_t i = 0; i < count; i++, co += width) {
            int64_t t0 = 0;
            for (; t0 + 2 * F8 <= tp; t0 += 2 * F8) tiles->fn[size][1](nin, tp, ux, vx, mx, co, t0);
            if (t0 < tp) tiles->fn[size][0](nin, tp, ux, vx, mx, co, t0);
          }
        }
      }
      for (int64_t co = 0; co < nout; co++)
        for (int64_t t0 = 0; t0 < tp; t0 += F8) {
          int64_t valid = 2 * (tc - t0);
          float *yr = y + co * k->outplane + (o0 * k->out[1] + 2 * r) * out2 + 2 * t0;
          winograd_output_body(m + co * tp + t0, mplane, k->bias ? k->bias[co] : 0.0f, yr, out2,
                               valid < 16 ? valid : 16);
        }
    }
}

#define WINOGRAD(path, attr, MADD)                                                                                     \
  WINO_TILE(wino_6x2_##path, attr, 6, 2, MADD)                                                                         \
  WINO_TILE(wino_6x1_##path, attr, 6, 1, MADD)                                                                         \
  WINO_TILE(wino_4x2_##path, attr, 4, 2, MADD)                                                                         \
  WINO_TILE(wino_4x1_##path, attr, 4, 1, MADD)                                                                         \
  WINO_TILE(wino_1x2_##path, attr, 1, 2, MADD)                                                                         \
  WINO_TILE(wino_1x1_##path, attr, 1, 1, MADD)                                                                         \
  attr static void winograd_##path(const Correlation *k, const float *w, const float *x, float *y)                     \
  {                                                                                                                    \
    static const WinoTiles tiles = {                                                                                   \
        {{wino_6x1_##path, wino_6x2_##path}, {wino_4x1_##path, wino_4x2_##path}, {wino_1x1_##path, wino_1x2_##path}}}; \
    winograd_body(k, w, x, y, &tiles);                                                                                 \
  }
WINOGRAD(lanes, , MADD_LANES)
#if FSDP_SIMD_X86
WINOGRAD(fma, FSDP_TARGET_AVX2, MADD_FMA)
#endif

/* One group: y[nout, out...] = correlation of x[nin, padded...] with w[nout,
   nin, taps].  The channels in tiles of 6 and 4 (32 = 4 x 6 + 2 x
   4), what is left one by one. */
static void correlate(const Correlation *k, const float *w, const float *x, float *y)
{
  bool three = k->kernel[2] == 3, simd = false;
  const Tile *tiles = three ? tiles_lanes3 : tiles_lanes;
  int64_t n6, n4;
#if FSDP_SIMD_X86
  simd = FSDPSimdLevel_Private() != FSDP_SIMD_GENERIC;
  if (simd) tiles = three ? tiles_fma3 : tiles_fma;
#endif
  if (k->wino && winograd_fits(k)) {
#if FSDP_SIMD_X86
    if (simd) winograd_fma(k, w, x, y);
    else
#endif
      winograd_lanes(k, w, x, y);
    return;
  }
  (void)simd;
  channel_split(k->nout, &n6, &n4);
  for (int64_t o0 = 0; o0 < k->out[0]; o0++)
    for (int64_t o1 = 0; o1 < k->out[1]; o1++) {
      const float *xline = x + (o0 * k->in1 + o1) * k->in2;
      float *yline = y + (o0 * k->out[1] + o1) * k->out[2];
      int64_t co = 0;
      for (int64_t i = 0; i < n6; i++, co += 6) correlate_channels(k, tiles, 6, w, xline, yline, co);
      for (int64_t i = 0; i < n4; i++, co += 4) correlate_channels(k, tiles, 4, w, xline, yline, co);
      for (; co < k->nout; co++) correlate_channels(k, tiles, 1, w, xline, yline, co);
    }
}

/* ---- The weight gradient, direct: dw[co, ci, t] is the sum over output
   points of dy[co, p] times the padded input at p shifted by tap t.  Each
   weight keeps 8 partial sums, one per vector lane, over the batch
   (dwv[co, ci, t, 8], in the layer's scratch); they are added into dw in
   lane order at the end, so the bits do not depend on the path. */

/* Tiles of CO output channels by E taps along the last axis, for one input
   channel and one tap of the other axes: CO x E sums over every output point
   of one sample, each added to its dwv.  MADDV(acc, a, b): acc + a * b
   rounded once, lane by lane. */
typedef void WgradFn(const Correlation *k, const float *dy, const float *x, float *dwv, int64_t co, int64_t ci,
                     int64_t a, int64_t b, int64_t e0);
#define WGRAD_TILE(name, attr, CO, E, MADDV)                                                                           \
  attr static void name(const Correlation *k, const float *dy, const float *x, float *dwv, int64_t co, int64_t ci,     \
                        int64_t a, int64_t b, int64_t e0)                                                              \
  {                                                                                                                    \
    f8 acc[CO][E];                                                                                                     \
    int64_t n2 = k->out[2], d2 = k->dil[2];                                                                            \
    FSDP_PRAGMA(GCC unroll 4)                                                                                          \
    for (int j = 0; j < CO; j++) FSDP_PRAGMA(GCC unroll 3) for (int e = 0; e < E; e++) acc[j][e] = (f8){0};            \
    for (int64_t o0 = 0; o0 < k->out[0]; o0++)                                                                         \
      for (int64_t o1 = 0; o1 < k->out[1]; o1++) {                                                                     \
        const float *dl = dy + co * k->outplane + (o0 * k->out[1] + o1) * n2;                                          \
        const float *xl =                                                                                              \
            x + ci * k->inplane + ((o0 + a * k->dil[0]) * k->in1 + o1 + b * k->dil[1]) * k->in2 + e0 * d2;             \
        int64_t w0 = 0;                                                                                                \
        for (; w0 + F8 <= n2; w0 += F8) {                                                                              \
          f8 xv[E];                                                                                                    \
          FSDP_PRAGMA(GCC unroll 3) for (int e = 0; e < E; e++) xv[e] = *(const f8u *)(xl + w0 + e * d2);              \
          FSDP_PRAGMA(GCC unroll 4) for (int j = 0; j < CO; j++)                                                       \
          {                                                                                                            \
            f8 dv = *(const f8u *)(dl + j * k->outplane + w0);                                                         \
            FSDP_PRAGMA(GCC unroll 3) for (int e = 0; e < E; e++) MADDV(acc[j][e], dv, xv[e]);                         \
          }                                                                                                            \
        }                                                                                                              \
        if (w0 < n2) { /* the line's last points in the first lanes, zeros in the others */                            \
          f8 xv[E], dv;                                                                                                \
          for (int e = 0; e < E; e++) {                                                                                \
            xv[e] = (f8){0};                                                                                           \
            memcpy(&xv[e], xl + w0 + e * d2, (size_t)(n2 - w0) * sizeof(float));                                       \
          }                                                                                                            \
          for (int j = 0; j < CO; j++) {                                                                               \
            dv = (f8){0};                                                                                              \
            memcpy(&dv, dl + j * k->outplane + w0, (size_t)(n2 - w0) * sizeof(float));                                 \
            for (int e = 0; e < E; e++) MADDV(acc[j][e], dv, xv[e]);                                                   \
          }                                                                                                            \
        }                                                                                                              \
      }                                                                                                                \
    for (int j = 0; j < CO; j++)                                                                                       \
      for (int e = 0; e < E; e++) {                                                                                    \
        f8u *sum =                                                                                                     \
            (f8u *)(dwv + (((co + j) * k->nin + ci) * k->taps + (a * k->kernel[1] + b) * k->kernel[2] + e0 + e) * F8); \
        *sum += acc[j][e];                                                                                             \
      }                                                                                                                \
  }
#define WGRAD_TILES(path, attr, MADDV)                                                                                 \
  WGRAD_TILE(wgrad_4x3_##path, attr, 4, 3, MADDV)                                                                      \
  WGRAD_TILE(wgrad_4x1_##path, attr, 4, 1, MADDV)                                                                      \
  WGRAD_TILE(wgrad_1x3_##path, attr, 1, 3, MADDV)                                                                      \
  WGRAD_TILE(wgrad_1x1_##path, attr, 1, 1, MADDV)                                                                      \
  static WgradFn *const wgrad_##path[2][2] = {{wgrad_1x1_##path, wgrad_1x3_##path},                                    \
                                              {wgrad_4x1_##path, wgrad_4x3_##path}};
#define MADDV_LANES(acc, a, b)                                                                                         \
  FSDP_PRAGMA(GCC unroll 8) for (int l_ = 0; l_ < F8; l_++)(acc)[l_] = fmaf((a)[l_], (b)[l_], (acc)[l_])
WGRAD_TILES(lanes, , MADDV_LANES)
#if FSDP_SIMD_X86
#define MADDV_FMA(acc, a, b) ((acc) = _mm256_fmadd_ps((a), (b), (acc)))
WGRAD_TILES(fma, FSDP_TARGET_AVX2, MADDV_FMA)
#endif

/* One sample and group: dwv += its partial sums (dy[nout, out...], x the padded input [nin, padded...]). */
static void weight_grad(const Correlation *k, const float *dy, const float *x, float *dwv)
{
  WgradFn *const(*tile)[2] = wgrad_lanes;
#if FSDP_SIMD_X86
  if (FSDPSimdLevel_Private() != FSDP_SIMD_GENERIC) tile = wgrad_fma;
#endif
  for (int64_t co = 0; co < k->nout;) {
    int four = co + 4 <= k->nout;
    for (int64_t ci = 0; ci < k->nin; ci++)
      for (int64_t a = 0; a < k->kernel[0]; a++)
        for (int64_t b = 0; b < k->kernel[1]; b++) {
          int64_t e0 = 0;
          for (; e0 + 3 <= k->kernel[2]; e0 += 3) tile[four][1](k, dy, x, dwv, co, ci, a, b, e0);
          for (; e0 < k->kernel[2]; e0++) tile[four][0](k, dy, x, dwv, co, ci, a, b, e0);
        }
    co += four ? 4 : 1;
  }
}

/* The direct path's extents along axis d: the input padded (stride 1), and
   the output gradient zero-padded by the kernel's reach for the input gradient. */
static int64_t padded_in(const ConvGeom *g, int d) { return g->size[d] + 2 * g->pad[d]; }
static int64_t padded_dy(const ConvGeom *g, int d) { return g->osize[d] + 2 * (g->kernel[d] - 1) * g->dilation[d]; }
static int64_t padded_in_points(const ConvGeom *g) { return padded_in(g, 0) * padded_in(g, 1) * padded_in(g, 2); }
static int64_t padded_dy_points(const ConvGeom *g) { return padded_dy(g, 0) * padded_dy(g, 1) * padded_dy(g, 2); }
/* Stride 1 and more than one tap: a 1 x 1 convolution's columns are its
   input, and a GEMM serves it better than tiles (an FNO's lifting and
   bypass layers: the FNO's step 1.50 times PyTorch's with them direct,
   1.23 with GEMMs). */
static bool direct(const ConvGeom *g)
{
  return g->stride[0] == 1 && g->stride[1] == 1 && g->stride[2] == 1 && ConvTaps(g) > 1;
}

/* A 1 x 1 convolution with stride 1 and no padding (an FNO's lifting and
   bypass layers): its column matrix is its input, and its input gradient's
   columns are that gradient, so the GEMMs take them in place. */
static bool pointwise(const ConvGeom *g)
{
  for (int d = 0; d < 3; d++)
    if (g->stride[d] != 1 || g->pad[d] != 0) return false;
  return ConvTaps(g) == 1;
}

/* One sample's column matrix: its im2col in col, or the sample itself for pointwise(g). */
static const float *columns(const ConvGeom *g, const float *x, float *col)
{
  if (pointwise(g)) return x;
  FSDPIm2Col_Private(g, x, col, NULL);
  return col;
}

/* xp[cin, padded...] = x padded as g says; or (x NULL) its adjoint: dx += xp
   folded back through the padding. */
static void pad_input(const ConvGeom *g, const float *x, float *xp, float *dx)
{
  int64_t n0 = padded_in(g, 0), n1 = padded_in(g, 1), n2 = padded_in(g, 2), pad = g->pad[2], n = g->size[2];
  for (int64_t c = 0; c < g->cin; c++)
    for (int64_t p0 = 0; p0 < n0; p0++)
      for (int64_t p1 = 0; p1 < n1; p1++) {
        int64_t i0 = source(g, 0, 0, p0), i1 = source(g, 1, 0, p1);
        float *r = xp + ((c * n0 + p0) * n1 + p1) * n2;
        if (i0 < 0 || i1 < 0) { /* a line of zero padding */
          if (!dx) memset(r, 0, (size_t)n2 * sizeof *r);
          continue;
        }
        size_t at = (size_t)(((c * g->size[0] + i0) * g->size[1] + i1) * n);
        const float *xl = dx ? NULL : x + at;
        float *dl = dx ? dx + at : NULL;
        line_ends(g, 0, 0, pad, xl, r, dl, dx != NULL);
        line_ends(g, 0, pad + n, n2, xl, r, dl, dx != NULL);
        if (dx) add_line(n, r + pad, dl);
        else memcpy(r + pad, xl, (size_t)n * sizeof *r);
      }
}

/* dyp[cout, padded_dy...]: dy with zeros around it, as far as the kernel reaches. */
static void pad_output_grad(const ConvGeom *g, const float *dy, float *dyp)
{
  int64_t n1 = padded_dy(g, 1), n2 = padded_dy(g, 2), q[3];
  for (int d = 0; d < 3; d++) q[d] = (g->kernel[d] - 1) * g->dilation[d];
  memset(dyp, 0, (size_t)(g->cout * padded_dy_points(g)) * sizeof *dyp);
  for (int64_t c = 0; c < g->cout; c++)
    for (int64_t o0 = 0; o0 < g->osize[0]; o0++)
      for (int64_t o1 = 0; o1 < g->osize[1]; o1++)
        memcpy(dyp + ((c * padded_dy(g, 0) + o0 + q[0]) * n1 + o1 + q[1]) * n2 + q[2],
               dy + ((c * g->osize[0] + o0) * g->osize[1] + o1) * g->osize[2], (size_t)g->osize[2] * sizeof *dy);
}

/* A group's correlation: forward's (x the padded input, y the output: the
   weight gradient's shapes) or, adjoint, the input gradient (x the padded
   dy, y the padded input or, `inner`, the input itself, all that zero
   padding needs). */
static Correlation correlation(const ConvGeom *g, bool adjoint, bool inner)
{
  Correlation k = {.taps = ConvTaps(g)};
  for (int d = 0; d < 3; d++) {
    k.kernel[d] = g->kernel[d];
    k.dil[d] = g->dilation[d];
    k.out[d] = !adjoint ? g->osize[d] : inner ? g->size[d] : padded_in(g, d);
  }
  k.nin = (adjoint ? g->cout : g->cin) / g->groups;
  k.nout = (adjoint ? g->cin : g->cout) / g->groups;
  k.in1 = adjoint ? padded_dy(g, 1) : padded_in(g, 1);
  k.in2 = adjoint ? padded_dy(g, 2) : padded_in(g, 2);
  k.inplane = adjoint ? padded_dy_points(g) : padded_in_points(g);
  k.outplane = k.out[0] * k.out[1] * k.out[2];
  return k;
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

/* direct_backward()'s scratch: the padded input (forward's too), padded
   output gradient, padded input's gradient (not with zero padding), flipped
   kernel and the weight gradient's partial sums. */
static int64_t direct_backward_floats(const ConvGeom *g)
{
  int64_t weights = g->cout * g->cin / g->groups * ConvTaps(g);
  int64_t dxp = g->padding == CONV_PAD_ZEROS ? 0 : g->cin * padded_in_points(g);
  return g->cin * padded_in_points(g) + g->cout * padded_dy_points(g) + dxp + weights * (1 + F8);
}

/* After that, winograd()'s for forward or the input gradient, whichever is larger. */
static int64_t winograd_scratch(const ConvGeom *g)
{
  Correlation f = correlation(g, false, false), b = correlation(g, true, g->padding == CONV_PAD_ZEROS);
  int64_t nf = winograd_floats(&f), nb = winograd_floats(&b);
  return nf > nb ? nf : nb;
}

/* One sample's im2col matrix, and backward's gradient of it; on the direct
   path direct_backward_floats() and winograd_scratch(). */
static int64_t conv_work_fixed(const Layer *l)
{
  const ConvGeom *g = &l->conv;
  int64_t col = g->cin * ConvTaps(g) * ConvOutPoints(g);
  if (pointwise(g)) return 0;
  if (!direct(g)) return 2 * col;
  return direct_backward_floats(g) + winograd_scratch(g);
}

static FSDPErrorCode conv_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  const ConvGeom *g = &l->conv;
  int64_t rows = group_rows(g), og = g->cout / g->groups, points = ConvOutPoints(g);
  float *w[LAYER_MAX_PARAMS], *col = m->work;

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  if (direct(g)) { /* the correlation of the padded input with the kernel, as backward's input gradient */
    Correlation k = correlation(g, false, false);
    k.wino = m->winograd ? col + direct_backward_floats(g) : NULL;
    for (int64_t s = 0; s < n; s++) {
      float *y = l->y + s * l->out;
      pad_input(g, x + s * l->in, col, NULL);
      k.wino_kept = s > 0 && g->groups == 1;
      for (int64_t j = 0; j < g->groups; j++) {
        k.bias = w[BIAS] + j * og;
        correlate(&k, w[WEIGHT] + j * og * rows, col + j * k.nin * k.inplane, y + j * og * points);
      }
    }
    return FSDP_SUCCESS;
  }
  for (int64_t s = 0; s < n; s++) {
    float *y = l->y + s * l->out;
    const float *cols = columns(g, x + s * l->in, col);
    for (int64_t k = 0; k < g->groups; k++)
      FSDPGemm_Private(false, false, og, points, rows, 1.0f, w[WEIGHT] + k * og * rows, rows, cols + k * rows * points,
                       points, 0.0f, y + k * og * points, points);
    for (int64_t c = 0; c < g->cout; c++) {
      float b = w[BIAS][c], *yc = y + c * points;
      for (int64_t q = 0; q < points; q++) yc[q] += b;
    }
  }
  return FSDP_SUCCESS;
}

/* The backward pass of direct(g): m->work holds the padded input, the
   padded output gradient, the padded input's gradient (not with zero
   padding), the flipped kernel and the weight gradient's partial sums. */
static FSDPErrorCode direct_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy, float *dx,
                                     const float *w, float *dw, float *db)
{
  const ConvGeom *g = &l->conv;
  int64_t rows = group_rows(g), og = g->cout / g->groups, points = ConvOutPoints(g);
  bool zeros = g->padding == CONV_PAD_ZEROS;
  Correlation k = correlation(g, true, zeros), kw = correlation(g, false, false);
  int64_t taps = ConvTaps(g), ig = rows / taps, weights = g->cout * rows;
  float *xp = m->work, *dyp = xp + g->cin * kw.inplane, *dxp = dyp + g->cout * k.inplane,
        *wt = dxp + (zeros ? 0 : g->cin * kw.inplane), *dwv = wt + weights;
  k.wino = m->winograd ? xp + direct_backward_floats(g) : NULL;
  /* with zero padding, dx[i] = dxp[i + pad]: the correlation writes dx, reading dyp from there */
  int64_t from = zeros ? (g->pad[0] * k.in1 + g->pad[1]) * k.in2 + g->pad[2] : 0;
  if (dx) /* wt[group, ci, co, taps - 1 - t] = w[group, co, ci, t] */
    for (int64_t j = 0; j < g->groups; j++)
      for (int64_t ci = 0; ci < ig; ci++)
        for (int64_t co = 0; co < og; co++)
          for (int64_t t = 0; t < taps; t++)
            wt[((j * ig + ci) * og + co) * taps + taps - 1 - t] = w[((j * og + co) * ig + ci) * taps + t];
  if (dw) memset(dwv, 0, (size_t)(weights * F8) * sizeof *dwv);
  for (int64_t s = 0; s < n; s++) {
    const float *d = dy + s * l->out;
    if (dw) {
      pad_input(g, x + s * l->in, xp, NULL);
      for (int64_t j = 0; j < g->groups; j++)
        weight_grad(&kw, d + j * og * points, xp + j * kw.nin * kw.inplane, dwv + j * og * rows * F8);
    }
    if (dx) {
      pad_output_grad(g, d, dyp);
      k.wino_kept = s > 0 && g->groups == 1;
      for (int64_t j = 0; j < g->groups; j++)
        correlate(&k, wt + j * k.nout * k.nin * taps, dyp + from + j * k.nin * k.inplane,
                  (zeros ? dx + s * l->in : dxp) + j * k.nout * k.outplane);
      if (!zeros) {
        memset(dx + s * l->in, 0, (size_t)l->in * sizeof *dx);
        pad_input(g, NULL, dxp, dx + s * l->in);
      }
    }
  }
  if (dw)
    for (int64_t i = 0; i < weights; i++) {
      float sum = 0.0f;
      for (int lane = 0; lane < F8; lane++) sum += dwv[i * F8 + lane];
      dw[i] += sum;
    }
  if (db) FSDPConvBiasGrad_Private(n, g->cout, points, dy, db);
  return FSDP_SUCCESS;
}

static FSDPErrorCode conv_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy, float *dx)
{
  const ConvGeom *g = &l->conv;
  int64_t rows = group_rows(g), og = g->cout / g->groups, points = ConvOutPoints(g);
  float *w[LAYER_MAX_PARAMS], *dw, *db,
      *col = m->work, *dcol = col ? col + g->cin * ConvTaps(g) * points : NULL; /* no scratch for 1 x 1 */

  FSDPCall(FSDPModelLayerParams_Private(m, l, w));
  FSDPCall(FSDPModelGrad_Private(m, l, WEIGHT, &dw));
  FSDPCall(FSDPModelGrad_Private(m, l, BIAS, &db));
  if (direct(g)) return direct_backward(m, l, n, x, dy, dx, w[WEIGHT], dw, db);
  for (int64_t s = 0; s < n; s++) {
    const float *d = dy + s * l->out;
    if (dw) {
      const float *cols = columns(g, x + s * l->in, col);
      for (int64_t k = 0; k < g->groups; k++)
        FSDPGemm_Private(false, true, og, rows, points, 1.0f, d + k * og * points, points, cols + k * rows * points,
                         points, 1.0f, dw + k * og * rows, rows);
    }
    if (dx) {
      float *dcols = pointwise(g) ? dx + s * l->in : dcol;
      for (int64_t k = 0; k < g->groups; k++)
        FSDPGemm_Private(true, false, rows, points, og, 1.0f, w[WEIGHT] + k * og * rows, rows, d + k * og * points,
                         points, 0.0f, dcols + k * rows * points, points);
      if (!pointwise(g)) {
        memset(dx + s * l->in, 0, (size_t)l->in * sizeof *dx);
        FSDPIm2Col_Private(g, NULL, dcol, dx + s * l->in);
      }
    }
  }
  if (db) FSDPConvBiasGrad_Private(n, g->cout, points, dy, db);
  return FSDP_SUCCESS;
}

/* Summed in double, so that it barely depends on the batch's split across
   ranks: a sample's points in FSDP_LANES partial sums, the samples in order. */
#define DY_POINT(q) ((double)dyc[q])
FSDP_INLINE void bias_grad_body(int64_t n, int64_t channels, int64_t points, const float *restrict dy,
                                float *restrict db)
{
  for (int64_t c = 0; c < channels; c++) {
    double sum = 0;
    for (int64_t s = 0; s < n; s++) {
      const float *dyc = dy + (s * channels + c) * points;
      sum += FSDP_LANE_SUM(points, DY_POINT);
    }
    db[c] += (float)sum;
  }
}
FSDP_SIMD_KERNEL(bias_grad, (int64_t n, int64_t channels, int64_t points, const float *restrict dy, float *restrict db),
                 (n, channels, points, dy, db))

void FSDPConvBiasGrad_Private(int64_t n, int64_t channels, int64_t points, const float *dy, float *db)
{
  bias_grad(n, channels, points, dy, db);
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
