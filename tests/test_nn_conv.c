/* The layers of the grid models (cnn: and unet:): parameter names and
   shapes as PyTorch's nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d; forward
   against a direct convolution of an explicitly padded field (zeros,
   circular, reflect; stride, dilation, groups); the model's gradients
   through sharded units against finite differences for every padding mode,
   stride, dilation, groups, GroupNorm, residual blocks, U-Nets (max and
   average pooling, transposed convolutions, skip concatenation), Fourier
   neural operators (spectral convolutions on even and odd grids, the
   Nyquist mode kept or not) and 1 to 3 spatial dimensions; and the specs'
   errors, each naming the key and value (without FFTW: fno: refused).
   Model files: the U-Net and the FNO written out layer by layer give the
   spec's outputs and gradients bit for bit; a graph no spec makes (a
   residual from the input, pooling, then linear layers) against finite
   differences; and the files' errors, each naming the file, line and key.
   mpitest: -n 4
   mpitest: -n 1 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsdp_config.h" /* FSDP_HAVE_FFTW */
#include "fsdp_nn.h"
#include "fsdptest.h"

#define SEED 11
enum { ROWS = 3 };

static int64_t wrap_size; /* make_model: size wrapping of that many elements per unit; 0: block wrapping */
static bool direct_sums;  /* make_model: -fsdp_conv_winograd false */

static FSDPModel make_model(FSDPContext ctx, const char *spec)
{
  FSDPModel model;
  TEST_OK(FSDPModelCreate(ctx, spec, &model));
  TEST_OK(FSDPModelSetSeed(model, SEED));
  if (wrap_size) TEST_OK(FSDPModelSetWrapPolicy(model, FSDP_WRAP_SIZE, wrap_size));
  if (direct_sums) {
    TEST_OK(FSDPOptionsSetValue("-fsdp_conv_winograd", "false"));
    TEST_OK(FSDPModelSetFromOptions(model));
    TEST_OK(FSDPOptionsClearValue("-fsdp_conv_winograd"));
  }
  TEST_OK(FSDPModelSetUp(model));
  return model;
}

static void expect_param(FSDPContext ctx, const char *name, int ndim, const int64_t *shape)
{
  FlatParam unit;
  FSDPParamId id;
  int got_ndim;
  const int64_t *got;
  TEST_OK(FSDPContextFindParam(ctx, name, &unit, &id));
  TEST_OK(FlatParamGetParamInfo(unit, id, NULL, &got_ndim, &got, NULL));
  TEST_ASSERT(got_ndim == ndim, "%s has %d dimensions, expected %d", name, got_ndim, ndim);
  for (int d = 0; d < ndim && got_ndim == ndim; d++)
    TEST_ASSERT(got[d] == shape[d], "%s: dimension %d is %lld, expected %lld", name, d, (long long)got[d],
                (long long)shape[d]);
}

/* PyTorch's shapes: weight [out, in / groups, kernel...], bias [out]; the
   model's sizes follow the grid through strides. */
static void test_shapes(void)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  FSDPModel model = make_model(ctx, "cnn:grid=9x8x7,in=4,out=5,depth=1,channels=6,kernel=3,stride=2,groups=2");
  int64_t in, out, numel;
  TEST_OK(FSDPModelGetSizes(model, &in, &out, &numel));
  TEST_ASSERT(in == 4 * 9 * 8 * 7, "in is %lld", (long long)in);
  TEST_ASSERT(out == 5 * 3 * 2 * 2, "out is %lld (5 channels on the 3x2x2 grid two strides of 2 leave)",
              (long long)out);
  TEST_ASSERT(numel == 6 * 2 * 27 + 6 + 5 * 6 * 27 + 5, "%lld parameters", (long long)numel);
  expect_param(ctx, "blocks.0.conv.weight", 5, (int64_t[]){6, 2, 3, 3, 3});
  expect_param(ctx, "blocks.0.conv.bias", 1, (int64_t[]){6});
  expect_param(ctx, "head.weight", 5, (int64_t[]){5, 6, 3, 3, 3});
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));

  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  model = make_model(ctx, "cnn:grid=10,in=1,out=2,kernel=4,pad=0");
  TEST_OK(FSDPModelGetSizes(model, &in, &out, NULL));
  TEST_ASSERT(in == 10 && out == 2 * 7, "a 1-D kernel of 4 without padding: %lld -> %lld", (long long)in,
              (long long)out);
  expect_param(ctx, "head.weight", 3, (int64_t[]){2, 1, 4});
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));

  /* A U-Net of 3 levels: 4, 8 and 16 channels on 8x8, 4x4 and 2x2; the
     decoder's transposed convolutions are [in, out, 2, 2], and its first
     convolutions take the concatenation, twice their output. */
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  model = make_model(ctx, "unet:grid=8x8,in=2,out=3,channels=4,levels=3");
  TEST_OK(FSDPModelGetSizes(model, &in, &out, &numel));
  TEST_ASSERT(in == 2 * 64 && out == 3 * 64, "in %lld, out %lld", (long long)in, (long long)out);
  expect_param(ctx, "down.0.conv1.weight", 4, (int64_t[]){4, 2, 3, 3});
  expect_param(ctx, "down.0.conv2.weight", 4, (int64_t[]){4, 4, 3, 3});
  expect_param(ctx, "down.1.conv1.weight", 4, (int64_t[]){8, 4, 3, 3});
  expect_param(ctx, "down.2.conv2.weight", 4, (int64_t[]){16, 16, 3, 3});
  expect_param(ctx, "up.1.up.weight", 4, (int64_t[]){16, 8, 2, 2});
  expect_param(ctx, "up.1.up.bias", 1, (int64_t[]){8});
  expect_param(ctx, "up.1.conv1.weight", 4, (int64_t[]){8, 16, 3, 3});
  expect_param(ctx, "up.0.up.weight", 4, (int64_t[]){8, 4, 2, 2});
  expect_param(ctx, "up.0.conv1.weight", 4, (int64_t[]){4, 8, 3, 3});
  expect_param(ctx, "head.weight", 4, (int64_t[]){3, 4, 1, 1});
  TEST_ASSERT(numel == (4 * 2 * 9 + 4) + (4 * 4 * 9 + 4) + (8 * 4 * 9 + 8) + (8 * 8 * 9 + 8) + (16 * 8 * 9 + 16) +
                           (16 * 16 * 9 + 16) + (16 * 8 * 4 + 8) + (8 * 16 * 9 + 8) + (8 * 8 * 9 + 8) +
                           (8 * 4 * 4 + 4) + (4 * 8 * 9 + 4) + (4 * 4 * 9 + 4) + (3 * 4 + 3),
              "%lld parameters", (long long)numel);
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* ------------------------------------------------------------------ forward against a direct convolution */

/* Index i of an axis of n points, padded by `mode`; -1: a zero. */
static int padded(const char *mode, int i, int n)
{
  if (i >= 0 && i < n) return i;
  if (!strcmp(mode, "circular")) return (i + n) % n;
  if (!strcmp(mode, "reflect")) return i < 0 ? -i : 2 * n - 2 - i;
  return -1;
}

/* A one-layer 2-D model (the head alone) against
   y[o, p, q] = b[o] + sum_{c, a, e} w[o, c, a, e] xpad[g*C + c, p*s + a*d, q*s + e*d],
   its parameters regenerated from the default initialization's stream. */
static void check_direct(const char *mode, int stride, int dilation, int pad, int C, int O, int W)
{
  enum { H = 6, K = 3, CMAX = 9, OMAX = 10, WMAX = 40 };
  char spec[160];
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_NO_SHARD, 1);
  FSDPModel model;
  float x[ROWS * CMAX * H * WMAX], w[OMAX * CMAX * K * K], b[OMAX], *y;
  int64_t out;
  int oh, ow;
  double bound = 1.0 / sqrt((double)(C * K * K));

  snprintf(spec, sizeof spec, "cnn:grid=%dx%d,in=%d,out=%d,kernel=%d,stride=%d,dilation=%d,pad=%d,padding=%s", H, W, C,
           O, K, stride, dilation, pad, mode);
  model = make_model(ctx, spec);
  oh = (H + 2 * pad - dilation * (K - 1) - 1) / stride + 1;
  ow = (W + 2 * pad - dilation * (K - 1) - 1) / stride + 1;
  TEST_OK(FSDPModelGetSizes(model, NULL, &out, NULL));
  TEST_ASSERT(out == O * oh * ow, "%s: out %lld, expected %d", spec, (long long)out, O * oh * ow);
  TEST_OK(FSDPRandomUniform(SEED, "head.weight", 0, O * C * K * K, -bound, bound, w));
  TEST_OK(FSDPRandomUniform(SEED, "head.bias", 0, O, -bound, bound, b));
  for (int i = 0; i < ROWS * C * H * W; i++) x[i] = test_value(31, i);
  TEST_OK(FSDPModelForward(model, ROWS, x, &y));
  for (int n = 0; n < ROWS; n++)
    for (int o = 0; o < O; o++)
      for (int p = 0; p < oh; p++)
        for (int q = 0; q < ow; q++) {
          double want = b[o];
          for (int c = 0; c < C; c++)
            for (int a = 0; a < K; a++)
              for (int e = 0; e < K; e++) {
                int i = padded(mode, p * stride + a * dilation - pad, H);
                int j = padded(mode, q * stride + e * dilation - pad, W);
                if (i >= 0 && j >= 0)
                  want += (double)w[((o * C + c) * K + a) * K + e] * x[((n * C + c) * H + i) * W + j];
              }
          float got = y[((n * O + o) * oh + p) * ow + q];
          TEST_ASSERT(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "%s: y[%d, %d, %d, %d] = %.7g, direct %.7g", spec, n,
                      o, p, q, got, want);
        }
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_direct(void)
{
  check_direct("zeros", 1, 1, 1, 3, 2, 5);
  check_direct("circular", 1, 1, 1, 3, 2, 5);
  check_direct("reflect", 1, 1, 1, 3, 2, 5);
  check_direct("zeros", 2, 1, 2, 3, 2, 5);
  check_direct("circular", 2, 2, 2, 3, 2, 5);
  check_direct("reflect", 1, 2, 2, 3, 2, 5);
  check_direct("circular", 3, 1, 5, 3, 2, 5); /* a pad as long as the axis: every point wraps once */
  check_direct("zeros", 1, 2, 0, 3, 2, 5);
  /* wider lines and more channels: the shapes whose gradients take conv.c's tiles (test_gradients) */
  check_direct("circular", 1, 1, 1, 3, 10, 21);
  check_direct("zeros", 1, 2, 2, 3, 7, 19);
  check_direct("reflect", 1, 1, 1, 3, 1, 8);
  /* Winograd's tiles (8 channels and more in and out, a 3 x 3 kernel, even output extents, 16 points or more
     along the last): rows of 10 tiles (a whole vector of them and a part), 8 (one vector), 20 (products on 16 and
     then 8 tiles), output channels 6 + 4, 4 + 4 + 1 and 4 + 4; too short a row for them (the direct tiles) */
  check_direct("zeros", 1, 1, 1, 8, 10, 20);
  check_direct("circular", 1, 1, 1, 9, 9, 16);
  check_direct("reflect", 1, 1, 1, 8, 8, 40);
  check_direct("reflect", 1, 1, 1, 8, 8, 6);
}

/* Every SIMD path this CPU runs gives the generic path's outputs and
   gradients, bit for bit (the tiles' multiply-adds are fused on every path).
   The outputs and then every unit's gradient, in got[0, n). */
static int64_t simd_run(const char *spec, FSDPSimd level, float *got)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_NO_SHARD, 1);
  FSDPModel model = make_model(ctx, spec);
  int64_t in, out, n;
  int nunits;
  float *x, *t, *y, *dy;
  double loss;

  TEST_OK(FSDPSetSimd(level));
  TEST_OK(FSDPModelGetSizes(model, &in, &out, NULL));
  x = malloc((size_t)(ROWS * in) * sizeof *x);
  t = malloc((size_t)(ROWS * out) * sizeof *t);
  TEST_ASSERT(x && t, "out of memory");
  for (int64_t i = 0; i < ROWS * in; i++) x[i] = test_value(43, i);
  for (int64_t i = 0; i < ROWS * out; i++) t[i] = test_value(44, i);
  TEST_OK(FSDPContextZeroGrad(ctx));
  TEST_OK(FSDPModelForward(model, ROWS, x, &y));
  memcpy(got, y, (size_t)(ROWS * out) * sizeof *got);
  n = ROWS * out;
  TEST_OK(FSDPModelLoss(model, FSDP_LOSS_MSE, t, 1.0, &loss, &dy));
  TEST_OK(FSDPModelBackward(model, dy));
  TEST_OK(FSDPContextFinishBackward(ctx));
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam unit;
    float *g;
    int64_t numel;
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetGradShard(unit, (void **)&g, &numel));
    memcpy(got + n, g, (size_t)numel * sizeof *got);
    n += numel;
  }
  free(x);
  free(t);
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
  return n;
}

static void test_simd_paths(void)
{
  /* The output's tiles take a layer's output channels, the input gradient's its input channels (cin), the weight
     gradient's its outputs: 10 inputs
     are tiles of 6 and 4 on lines of 70 points padded by reflection to 72; 7 are 6 + 1 with a kernel 2 wide (the
     tiles for any kernel) and zero padding; 5 are 4 + 1, tiles of 16 and 64 points and then one that ends with
     a line of 70, for any kernel and, with circular padding, for kernels 3 wide; Winograd's tiles for 8 to 10
     channels */
  const char *specs[] = {"cnn:grid=3x70,in=2,out=3,depth=2,channels=10,padding=reflect",
                         "cnn:grid=4x19,in=1,out=2,depth=1,channels=7,kernel=2,pad=1,dilation=2",
                         "cnn:grid=3x70,in=1,out=1,depth=2,channels=5,kernel=2,pad=1,dilation=2",
                         "cnn:grid=3x70,in=1,out=1,depth=2,channels=5,padding=circular",
                         "cnn:grid=4x20,in=8,out=9,depth=1,channels=10,padding=circular"};
  enum { MAX = 16384 };
  static float ref[MAX], got[MAX];
  FSDPSimd level, best;

  TEST_OK(FSDPGetSimd(&level, &best));
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    int64_t n = simd_run(specs[i], FSDP_SIMD_GENERIC, ref);
    TEST_ASSERT(n <= MAX, "%s: %lld values", specs[i], (long long)n);
    for (int l = FSDP_SIMD_GENERIC + 1; l <= (int)best; l++)
      TEST_ASSERT(simd_run(specs[i], (FSDPSimd)l, got) == n && !memcmp(ref, got, (size_t)n * sizeof *ref),
                  "%s: %s: not the generic path's outputs and gradients", FSDPSimdName((FSDPSimd)l), specs[i]);
  }
  TEST_OK(FSDPSetSimd(level));
}

/* -fsdp_conv_winograd false: the direct sums, whose outputs and gradients
   differ from Winograd's in the last bits (the option is taken) and agree
   with them within rounding. */
static void test_winograd_option(void)
{
  const char *spec = "cnn:grid=4x20,in=8,out=9,depth=1,channels=10,padding=circular";
  enum { MAX = 16384 };
  static float wino[MAX], direct[MAX];
  int64_t n = simd_run(spec, FSDP_SIMD_GENERIC, wino), differ = 0;
  direct_sums = true;
  TEST_ASSERT(simd_run(spec, FSDP_SIMD_GENERIC, direct) == n, "%s: another number of values", spec);
  direct_sums = false;
  for (int64_t i = 0; i < n; i++) {
    differ += wino[i] != direct[i];
    TEST_ASSERT(fabsf(wino[i] - direct[i]) <= 1e-5f * (1 + fabsf(direct[i])),
                "%s: value %lld: Winograd %.9g, direct %.9g", spec, (long long)i, wino[i], direct[i]);
  }
  TEST_ASSERT(differ > 0, "%s: -fsdp_conv_winograd false gave Winograd's bits: the option was not taken", spec);
}

/* ------------------------------------------------------------------ gradients */

static float *gx, *gt;

static double model_loss(FSDPModel model, float **dy)
{
  float *y;
  double loss;
  TEST_OK(FSDPModelForward(model, ROWS, gx, &y));
  TEST_OK(FSDPModelLoss(model, FSDP_LOSS_MSE, gt, 1.0, &loss, dy));
  return loss;
}

static double fd_loss(void *model)
{
  float *dy;
  return model_loss(model, &dy);
}

/* Every rank runs the same rows: the averaged gradient is the loss's. */
static void check_gradients(const char *spec, FSDPShardingStrategy strategy)
{
  int size;
  FSDPContext ctx;
  FSDPModel model;
  float *dy;
  int64_t in, out;

  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ctx = test_context(MPI_COMM_WORLD, strategy, size % 2 == 0 ? 2 : 1);
  model = make_model(ctx, spec);
  TEST_OK(FSDPModelGetSizes(model, &in, &out, NULL));
  gx = malloc((size_t)(ROWS * in) * sizeof *gx);
  gt = malloc((size_t)(ROWS * out) * sizeof *gt);
  TEST_ASSERT(gx && gt, "out of memory");
  for (int64_t i = 0; i < ROWS * in; i++) gx[i] = test_value(41, i);
  for (int64_t i = 0; i < ROWS * out; i++) gt[i] = test_value(42, i);
  TEST_OK(FSDPContextZeroGrad(ctx));
  (void)model_loss(model, &dy);
  TEST_OK(FSDPModelBackward(model, dy));
  TEST_OK(FSDPContextFinishBackward(ctx));
  test_fd_gradients(ctx, 1e-2, 12, fd_loss, model, NULL, 0, spec);
  free(gx);
  free(gt);
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_gradients(void)
{
  /* tanh: smooth, so that central differences hold everywhere */
  check_gradients("cnn:grid=12,in=2,out=3,depth=2,channels=4,kernel=3,stride=2,act=tanh", FSDP_FULL_SHARD);
  check_gradients("cnn:grid=6x5,in=4,out=2,depth=2,channels=6,dilation=2,groups=2,padding=circular,act=tanh",
                  FSDP_HYBRID_SHARD);
  check_gradients("cnn:grid=4x5x3,in=2,out=2,depth=1,channels=3,padding=reflect,act=tanh", FSDP_FULL_SHARD);
  check_gradients("cnn:grid=7x6,in=1,out=2,depth=1,channels=2,kernel=2,stride=2,pad=1,act=tanh", FSDP_SHARD_GRAD_OP);
  check_gradients("cnn:grid=8x8,in=1,out=1,kernel=3,padding=circular", FSDP_FULL_SHARD); /* TorchFort's */
  /* conv.c's direct passes (test_simd_paths says which tiles): a head of 10 input channels (6 + 4) on lines of
     70; 7 channels (6 + 1) with a kernel 2 wide, zero padding (the input gradient's inner points alone); 5
     channels (4 + 1, a single channel's tile of 64 points) for any kernel and for kernels 3 wide; circular
     padding as long as an axis; 3-D lines of 20 */
  check_gradients("cnn:grid=3x70,in=2,out=1,depth=1,channels=10,padding=circular,act=tanh", FSDP_FULL_SHARD);
  check_gradients("cnn:grid=5x19,in=1,out=2,depth=1,channels=7,kernel=2,pad=1,dilation=2,act=tanh", FSDP_HYBRID_SHARD);
  check_gradients("cnn:grid=3x70,in=1,out=1,depth=2,channels=5,kernel=2,pad=1,dilation=2,act=tanh", FSDP_FULL_SHARD);
  check_gradients("cnn:grid=3x70,in=1,out=1,depth=2,channels=5,padding=circular,act=tanh", FSDP_SHARD_GRAD_OP);
  check_gradients("cnn:grid=3x9,in=1,out=1,depth=1,channels=2,pad=3,padding=circular,act=tanh", FSDP_FULL_SHARD);
  check_gradients("cnn:grid=3x3x20,in=1,out=1,depth=1,channels=3,padding=reflect,act=tanh", FSDP_HYBRID_SHARD);
  /* Winograd's tiles, forward and for the input gradient: its inner points alone (zero padding, rows of 10 tiles)
     and the padded field's (circular: 8 x 22, rows of 11) */
  check_gradients("cnn:grid=6x20,in=8,out=8,depth=1,channels=10,act=tanh", FSDP_FULL_SHARD);
  check_gradients("cnn:grid=6x20,in=9,out=8,depth=1,channels=8,padding=circular,act=tanh", FSDP_HYBRID_SHARD);
  /* and in groups of 8 channels (the kernel's transform once per group and sample), without padding (the input
     gradient's reads end at the padded gradient's last point) */
  check_gradients("cnn:grid=4x16,in=16,out=2,depth=1,channels=16,groups=2,act=tanh", FSDP_FULL_SHARD);
  check_gradients("cnn:grid=6x18,in=8,out=8,depth=1,channels=8,pad=0,act=tanh", FSDP_SHARD_GRAD_OP);
  /* 1 x 1 convolutions: their input is their column matrix (groups of 2 here), unless a stride or padding says
     otherwise (im2col) */
  check_gradients("cnn:grid=6x5,in=4,out=2,depth=2,channels=6,kernel=1,groups=2,act=tanh", FSDP_FULL_SHARD);
  check_gradients("cnn:grid=7x6,in=2,out=1,depth=1,channels=3,kernel=1,stride=2,pad=1,act=tanh", FSDP_HYBRID_SHARD);
  /* GroupNorm: groups of 2 channels, one channel each (instance norm), all channels (one group) */
  check_gradients("cnn:grid=6x5,in=2,out=2,depth=2,channels=4,norm=groupnorm:2,padding=circular,act=tanh",
                  FSDP_FULL_SHARD);
  check_gradients("cnn:grid=9,in=1,out=1,depth=1,channels=3,norm=groupnorm:3,act=tanh", FSDP_HYBRID_SHARD);
  check_gradients("cnn:grid=3x4x2,in=1,out=1,depth=1,channels=2,norm=groupnorm:1,act=gelu", FSDP_FULL_SHARD);
  /* Residual blocks: from the model's input (every block keeps 3 channels), and from a block's output (the first
     block changes the channels, so it adds nothing) */
  check_gradients("cnn:grid=6x5,in=3,out=2,depth=3,channels=3,residual=1,act=tanh", FSDP_FULL_SHARD);
  check_gradients("cnn:grid=6x5,in=1,out=2,depth=3,channels=3,residual=1,norm=groupnorm:3,act=tanh", FSDP_HYBRID_SHARD);
  /* U-Nets: max and average pooling, transposed convolutions, the skips' concatenation; 1 to 3 dimensions */
  check_gradients("unet:grid=8x4,in=2,out=2,channels=2,levels=2,act=tanh", FSDP_FULL_SHARD);
  check_gradients("unet:grid=16,in=1,out=1,channels=2,levels=3,pool=avg,norm=groupnorm:2,padding=circular,act=tanh",
                  FSDP_HYBRID_SHARD);
  check_gradients("unet:grid=4x4x2,in=1,out=2,channels=2,levels=2,act=tanh", FSDP_SHARD_GRAD_OP);
#if FSDP_HAVE_FFTW
  /* FNOs: the last axis even with its Nyquist mode kept (8 / 2 + 1 = 5), odd (7: modes 0 to 3), and 3-D */
  check_gradients("fno:grid=8,in=2,out=1,width=3,modes=5,layers=2,act=tanh", FSDP_FULL_SHARD);
  check_gradients("fno:grid=6x7,in=1,out=2,width=2,modes=3,layers=2,act=tanh", FSDP_HYBRID_SHARD);
  check_gradients("fno:grid=4x4x6,in=1,out=1,width=2,modes=2,layers=1", FSDP_SHARD_GRAD_OP);
  /* samples of 45 floats: all but every fourth are not aligned for FFTW's SIMD plans (spectral.c's second set) */
  check_gradients("fno:grid=5x3,in=1,out=1,width=3,modes=2,layers=1,act=tanh", FSDP_FULL_SHARD);
#endif
}

/* ------------------------------------------------------------------ model files */

static char file_dir[256];

/* Rank 0 writes `text` to file_dir/name; every rank gets "file:<path>" in spec. */
static void write_model_file(const char *name, const char *text, char *spec, size_t len)
{
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  snprintf(spec, len, "file:%s/%s", file_dir, name);
  MPI_Barrier(MPI_COMM_WORLD); /* every rank has read the file's last text */
  if (rank == 0) {
    FILE *f = fopen(spec + 5, "w");
    TEST_ASSERT(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", spec + 5);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* The spec's model and the file's (or the spec's again, with activation
   checkpointing), from one seed: the same outputs and gradient shards, bit
   for bit, in a step of ROWS rows and one of fewer.  The first step's
   bytes, measured, are in bytes[]: the model's buffers are all it allocates,
   as FSDPModelGetActivationBytes predicts; the second allocates nothing. */
static void check_same_model(const char *spec, const char *file_spec, bool checkpointing, size_t bytes[2])
{
  FSDPContext ctx[2];
  FSDPModel model[2];
  float *y[2], *dy;
  int64_t in, out, numel[2];
  int nunits[2];
  for (int k = 0; k < 2; k++) {
    ctx[k] = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
    model[k] = make_model(ctx[k], k ? file_spec : spec);
    TEST_OK(FSDPModelSetActivationCheckpointing(model[k], k && checkpointing));
    TEST_OK(FSDPModelGetSizes(model[k], &in, &out, &numel[k]));
    TEST_OK(FSDPContextGetNumUnits(ctx[k], &nunits[k]));
  }
  TEST_ASSERT(numel[0] == numel[1] && nunits[0] == nunits[1], "%s: %lld parameters in %d units, the spec's %lld in %d",
              file_spec, (long long)numel[1], nunits[1], (long long)numel[0], nunits[0]);
  gx = malloc((size_t)(ROWS * in) * sizeof *gx);
  gt = malloc((size_t)(ROWS * out) * sizeof *gt);
  TEST_ASSERT(gx && gt, "out of memory");
  for (int64_t i = 0; i < ROWS * in; i++) gx[i] = test_value(43, i);
  for (int64_t i = 0; i < ROWS * out; i++) gt[i] = test_value(44, i);
  /* Two steps each; the second of fewer rows than the buffers hold, and allocating nothing. */
  for (int64_t rows = ROWS; rows >= ROWS - 1; rows--) {
    for (int k = 0; k < 2; k++) {
      double loss;
      size_t before, predicted;
      FSDPMemoryStats st;
      TEST_OK(FSDPContextZeroGrad(ctx[k]));
      TEST_OK(FSDPGetMemoryStats(&st));
      before = st.current[FSDP_MEM_OTHER];
      TEST_OK(FSDPMemoryResetPeak());
      TEST_OK(FSDPModelForward(model[k], rows, gx, &y[k]));
      TEST_OK(FSDPModelLoss(model[k], FSDP_LOSS_MSE, gt, 1.0, &loss, &dy));
      TEST_OK(FSDPModelBackward(model[k], dy));
      TEST_OK(FSDPContextFinishBackward(ctx[k]));
      TEST_OK(FSDPGetMemoryStats(&st));
      TEST_OK(FSDPModelGetActivationBytes(model[k], ROWS, k && checkpointing, &predicted));
      if (rows == ROWS) bytes[k] = st.peak[FSDP_MEM_OTHER] - before;
      TEST_ASSERT(st.peak[FSDP_MEM_OTHER] - before == (rows == ROWS ? predicted : 0),
                  "%s: a step of %lld rows took %zu bytes, FSDPModelGetActivationBytes says %zu for the first",
                  k ? file_spec : spec, (long long)rows, st.peak[FSDP_MEM_OTHER] - before, predicted);
    }
    TEST_ASSERT(!memcmp(y[0], y[1], (size_t)(rows * out) * sizeof *y[0]), "%s: the outputs differ from %s's%s",
                file_spec, spec, checkpointing ? " without checkpointing" : "");
    for (int u = 0; u < nunits[0]; u++) {
      FlatParam unit[2];
      float *g[2];
      int64_t shard[2];
      for (int k = 0; k < 2; k++) {
        TEST_OK(FSDPContextGetUnit(ctx[k], u, &unit[k]));
        TEST_OK(FlatParamGetGradShard(unit[k], (void **)&g[k], &shard[k]));
      }
      TEST_ASSERT(shard[0] == shard[1] && !memcmp(g[0], g[1], (size_t)shard[0] * sizeof *g[0]),
                  "%s: unit %d's gradient (%lld rows) differs from %s's%s", file_spec, u, (long long)rows, spec,
                  checkpointing ? " without checkpointing" : "");
    }
  }
  free(gx);
  free(gt);
  for (int k = 0; k < 2; k++) {
    TEST_OK(FSDPModelDestroy(&model[k]));
    TEST_OK(FSDPContextDestroy(&ctx[k]));
  }
}

static const char unet_file[] = "# unet:grid=8x8,in=2,out=3,channels=4,levels=2,norm=groupnorm:2, a layer per line\n"
                                "input channels=2 grid=8x8\n"
                                "unit down.0\n"
                                "conv name=down.0.conv1 out=4\n"
                                "groupnorm name=down.0.norm1 groups=2\n"
                                "act name=down.0.act1 fn=relu\n"
                                "conv name=down.0.conv2 out=4\n"
                                "groupnorm name=down.0.norm2 groups=2\n"
                                "act name=down.0.act2 fn=relu\n"
                                "unit down.1\n"
                                "maxpool name=down.1.pool   # kernel 2, stride 2\n"
                                "conv name=down.1.conv1 out=8\n"
                                "groupnorm name=down.1.norm1 groups=2\n"
                                "act name=down.1.act1 fn=relu\n"
                                "conv name=down.1.conv2 out=8\n"
                                "groupnorm name=down.1.norm2 groups=2\n"
                                "act name=down.1.act2 fn=relu\n"
                                "unit up.0\n"
                                "convtranspose name=up.0.up out=4 kernel=2 stride=2\n"
                                "concat name=up.0.cat from=down.0.act2\n"
                                "conv name=up.0.conv1 out=4\n"
                                "groupnorm name=up.0.norm1 groups=2\n"
                                "act name=up.0.act1 fn=relu\n"
                                "conv name=up.0.conv2 out=4\n"
                                "groupnorm name=up.0.norm2 groups=2\n"
                                "act name=up.0.act2 fn=relu\n"
                                "\n"
                                "unit root\n"
                                "conv name=head out=3 kernel=1\n";

#if FSDP_HAVE_FFTW
static const char fno_file[] = "input channels=1 grid=8x6\n"
                               "unit lift\n"
                               "conv name=lift out=3 kernel=1\n"
                               "unit blocks.0\n"
                               "spectral name=blocks.0.spectral modes=2\n"
                               "conv name=blocks.0.w out=3 kernel=1 input=lift   # the bypass reads the block's input\n"
                               "add name=blocks.0.add from=blocks.0.spectral\n"
                               "act name=blocks.0.act fn=gelu\n"
                               "unit blocks.1\n"
                               "spectral name=blocks.1.spectral modes=2\n"
                               "conv name=blocks.1.w out=3 kernel=1 input=blocks.0.act\n"
                               "add name=blocks.1.add from=blocks.1.spectral\n"
                               "unit root\n"
                               "conv name=head out=2 kernel=1\n";
#endif

/* A graph no spec makes: a residual from the model's input, pooling, then flat linear layers. */
static const char graph_file[] = "input channels=2 grid=6x5\n"
                                 "conv name=a out=2 padding=circular\n"
                                 "act fn=tanh\n"
                                 "add name=res from=input\n"
                                 "avgpool kernel=2 stride=1\n"
                                 "unit head\n"
                                 "linear name=fc out=5\n"
                                 "layernorm name=norm\n"
                                 "act fn=tanh\n"
                                 "linear name=out out=3\n";

static void expect_file_error(const char *text, FSDPErrorCode code, const char *message)
{
  char spec[320];
  FSDPContext ctx;
  FSDPModel model;
  write_model_file("bad.txt", text, spec, sizeof spec);
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  TEST_CODE(code, FSDPModelCreate(ctx, spec, &model));
  TEST_MESSAGE_HAS(message);
  TEST_ASSERT(model == NULL, "%s: a model came back", text);
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_model_files(void)
{
  char spec[320], path[300];
  int rank;
  const char *tmp = getenv("TMPDIR");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    snprintf(file_dir, sizeof file_dir, "%s/fsdp-test-modelfile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    TEST_ASSERT(mkdtemp(file_dir), "cannot make a directory %s", file_dir);
  }
  MPI_Bcast(file_dir, sizeof file_dir, MPI_CHAR, 0, MPI_COMM_WORLD);

  size_t bytes[2];
  write_model_file("unet.txt", unet_file, spec, sizeof spec);
  check_same_model("unet:grid=8x8,in=2,out=3,channels=4,levels=2,norm=groupnorm:2", spec, false, bytes);
#if FSDP_HAVE_FFTW
  write_model_file("fno.txt", fno_file, spec, sizeof spec);
  check_same_model("fno:grid=8x6,in=1,out=2,width=3,modes=2,layers=2", spec, false, bytes);
#endif
  write_model_file("graph.txt", graph_file, spec, sizeof spec);
  check_gradients(spec, FSDP_HYBRID_SHARD);
  check_same_model(spec, spec, true, bytes);

  expect_file_error("input channels=1 grid=8x8\nconv out=2\nconv out=2 kernal=3\n", FSDP_ERR_ARG,
                    "line 3: conv: unknown key 'kernal' (keys: name input out kernel stride dilation groups pad "
                    "padding)");
  expect_file_error("input channels=1 grid=8x8\nconv name=enc out=2\nmaxpool\nconcat from=enc1\n", FSDP_ERR_ARG,
                    "line 4: concat: from=enc1: no layer of that name before this line");
  expect_file_error("input channels=1 grid=8x8\nconv name=enc out=2\nmaxpool\nconcat from=enc\n", FSDP_ERR_ARG,
                    "line 4: concat: from=enc gives 2 channels on 8x8, on another grid than its input's 2 channels on "
                    "4x4");
  expect_file_error("input channels=1 grid=8x8\nconv name=enc out=2\nadd from=input\n", FSDP_ERR_ARG,
                    "line 3: add: from=input gives 1 channels on 8x8, its input 2 channels on 8x8");
  expect_file_error("# no input yet\nconv out=2\n", FSDP_ERR_ARG,
                    "line 2: conv comes before the input line (input channels=C grid=G, or input features=N)");
  expect_file_error("input channels=1 grid=8x8\npool kernel=2\n", FSDP_ERR_ARG,
                    "line 2: unknown layer kind 'pool' (kinds: input, unit, conv,");
  expect_file_error("input channels=1 grid=4x4\nconv out=1 kernel=7 pad=0\n", FSDP_ERR_ARG, "model file '");
  TEST_MESSAGE_HAS("bad.txt', line 2: layer conv0: the kernel spans 7 points along grid axis 0");
  expect_file_error("input features=8\nconv out=2\n", FSDP_ERR_ARG,
                    "line 2: conv needs channels on a grid, and 'input' gives 8 features");
  expect_file_error("input channels=1 grid=8x8\nact fn=softplus\n", FSDP_ERR_ARG,
                    "line 2: act: fn=softplus is not relu, tanh or gelu");
  expect_file_error("input channels=1 grid=8x8\nconv name=a out=2\nconv name=a out=2\n", FSDP_ERR_ARG,
                    "line 3: conv: the name a is an earlier layer's");
  expect_file_error("input channels=1 grid=8x8\nconv out=two\n", FSDP_ERR_ARG,
                    "line 2: conv: out=two is not a positive integer");
  expect_file_error("input channels=1 grid=8x8\n", FSDP_ERR_ARG, "has no layers");
  expect_file_error("input channels=1 grid=8x8\nconv name=a out=2\nconv name=b out=2\nconv out=2 input=a\n",
                    FSDP_ERR_ARG, "the output of layer b is never read (the next layer reads a)");
  expect_file_error("input channels=1 grid=8x8\nunit a\nconv out=2\nunit b\nconv out=2\nunit a\nconv out=2\n",
                    FSDP_ERR_ARG, "line 6: unit a again: the layers of a unit must be consecutive");
  expect_file_error("input channels=1 grid=8x8\nconv name=conv1 out=2\nconv out=2\n", FSDP_ERR_ARG,
                    "line 3: conv: the name conv1 is an earlier layer's");
  expect_file_error("input channels=1 grid=8x8 grid=4\nconv out=2\n", FSDP_ERR_ARG,
                    "line 1: input: key 'grid' is given twice");
  expect_file_error("input channels=3 grid=32768x32768\nconv out=2\n", FSDP_ERR_ARG,
                    "line 1: input: the input gives 3221225472 values per sample, above 2^31 - 1");
  expect_file_error("input channels=1 grid=32768x32768\nconvtranspose out=1\n", FSDP_ERR_ARG,
                    "line 2: convtranspose: convtranspose0 gives 4294967296 values per sample, above 2^31 - 1");
  snprintf(path, sizeof path, "file:%s/missing.txt", file_dir);
  {
    FSDPContext ctx;
    FSDPModel model;
    TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
    TEST_CODE(FSDP_ERR_IO, FSDPModelCreate(ctx, path, &model));
    TEST_MESSAGE_HAS("missing.txt: cannot open the model file: No such file or directory");
    TEST_OK(FSDPContextDestroy(&ctx));
  }

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    const char *names[] = {"unet.txt", "fno.txt", "graph.txt", "bad.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
      snprintf(path, sizeof path, "%s/%s", file_dir, names[i]);
      (void)unlink(path);
    }
    TEST_ASSERT(rmdir(file_dir) == 0, "cannot remove %s", file_dir);
  }
}

/* ------------------------------------------------------------------ activation checkpointing */

static void check_checkpointing(const char *spec, size_t saves)
{
  size_t bytes[2];
  check_same_model(spec, spec, true, bytes);
  TEST_ASSERT(bytes[1] < bytes[0], "%s: checkpointing takes %zu bytes, %zu without", spec, bytes[1], bytes[0]);
  TEST_ASSERT(!saves || bytes[0] - bytes[1] == saves, "%s: checkpointing saves %zu bytes, expected %zu", spec,
              bytes[0] - bytes[1], saves);
}

/* Outputs, gradients bit for bit and the bytes each step takes, with and without checkpointing. */
static void test_checkpointing(void)
{
  /* Each block drops its conv's and GroupNorm's outputs (4 x 30 floats each per row) and the GroupNorm's statistics
     (2 x 2); one block's come back in backward: 2 blocks' saved. */
  check_checkpointing("cnn:grid=6x5,in=2,out=2,depth=3,channels=4,norm=groupnorm:2,padding=circular,act=tanh",
                      ROWS * 2 * (4 * 30 + 4 * 30 + 4) * sizeof(float));
  check_checkpointing("cnn:grid=6x5,in=3,out=2,depth=3,channels=3,residual=1,act=tanh", 0);
  check_checkpointing("unet:grid=8x4,in=2,out=2,channels=2,levels=2,norm=groupnorm:2", 0);
#if FSDP_HAVE_FFTW
  check_checkpointing("fno:grid=6x7,in=1,out=2,width=2,modes=3,layers=2,act=tanh", 0);
#endif
  check_checkpointing("mlp:in=5,hidden=8,depth=3,out=2,norm=layernorm", 0);
  /* Units that split a block: a run of dropped layers stays within one unit. */
  wrap_size = 40;
  check_checkpointing("cnn:grid=6x5,in=2,out=2,depth=3,channels=4,norm=groupnorm:2,act=tanh", 0);
  wrap_size = 0;
}

/* ------------------------------------------------------------------ errors */

static void expect_spec_error(const char *spec, const char *message)
{
  FSDPContext ctx;
  FSDPModel model;
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  TEST_CODE(FSDP_ERR_ARG, FSDPModelCreate(ctx, spec, &model));
  TEST_MESSAGE_HAS(message);
  TEST_ASSERT(model == NULL, "%s: a model came back", spec);
  TEST_OK(FSDPContextDestroy(&ctx));
}

static void test_errors(void)
{
  expect_spec_error("cnn:grid=8x8,in=1,out=1,padding=mirror",
                    "model spec 'cnn:grid=8x8,in=1,out=1,padding=mirror': padding=mirror is not zeros, circular or "
                    "reflect");
  expect_spec_error("cnn:grid=8x8,in=3,out=1,depth=1,channels=4,groups=2",
                    "groups=2 does not divide both in=3 and channels=4");
  expect_spec_error("cnn:grid=4x6,in=1,out=1,kernel=7,pad=0",
                    "layer head: the kernel spans 7 points along grid axis 0 (kernel=7, dilation=1), more than its 4 "
                    "points padded by 0 on each side");
  expect_spec_error("cnn:grid=16x2,in=1,out=1,kernel=7,padding=circular",
                    "layer head: padding=circular by 3 points along grid axis 1 of 2 points: it must be at most the "
                    "axis");
  expect_spec_error("cnn:grid=16x3,in=1,out=1,kernel=7,padding=reflect",
                    "layer head: padding=reflect by 3 points along grid axis 1 of 3 points: it must be shorter than "
                    "the axis");
  expect_spec_error("cnn:grid=8x8,in=1,out=1,depth=2,channels=2,dilation=3,kernel=5,pad=0",
                    "layer blocks.0.conv: the kernel spans 13 points along grid axis 0 (kernel=5, dilation=3)");
  expect_spec_error("cnn:grid=8xx8,in=1,out=1", "grid=8xx8 is not N, NxM or NxMxK");
  expect_spec_error("cnn:grid=2x2x2x2,in=1,out=1", "grid=2x2x2x2 has more than 3 dimensions");
  expect_spec_error("cnn:grid=0x4,in=1,out=1", "grid=0 is not a positive integer");
  expect_spec_error("cnn:grid=8,in=1,depth=2", "lacks out= channels= (grid, in and out are required");
  expect_spec_error("cnn:grid=8,in=1,out=1,hidden=3", "unknown key 'hidden' (keys: grid, in, out, depth");
  expect_spec_error("cnn:grid=8,in=1,out=1,act=softmax", "act=softmax is not relu, tanh or gelu");
  expect_spec_error("cnn:grid=8,in=1,out=1,depth=1,channels=4,norm=groupnorm:3",
                    "norm=groupnorm:3 does not divide channels=4");
  expect_spec_error("cnn:grid=8,in=1,out=1,norm=batchnorm", "norm=batchnorm is not none or groupnorm:G (G groups)");
  expect_spec_error("cnn:grid=8,in=1,out=1,norm=groupnorm:",
                    "norm=groupnorm:: the groups G of groupnorm:G must be a positive integer");
  expect_spec_error("cnn:grid=8,in=1,out=1,residual=yes", "residual=yes is not 0 or 1");
  expect_spec_error("unet:grid=12x8,in=1,out=1,channels=4,levels=4",
                    "grid axis 0 has 12 points, which levels=4 halves 3 times: it must be a multiple of 8");
  expect_spec_error("unet:grid=8x8,in=1,out=1,channels=4,levels=2,kernel=4",
                    "kernel=4 is even: a U-Net's convolutions keep the grid's size, which needs an odd kernel");
  expect_spec_error("unet:grid=8x8,in=1,out=1,levels=2", "lacks channels= (grid, in, out, channels and levels");
  expect_spec_error("unet:grid=8x8,in=1,out=1,channels=4,levels=2,stride=2",
                    "unknown key 'stride' (keys: grid, in, out, channels, levels, kernel, padding, norm, act, pool)");
  expect_spec_error("unet:grid=8x8,in=1,out=1,channels=4,levels=9", "levels=9 is above 8");
  expect_spec_error("unet:grid=8x8,in=1,out=1,channels=4,levels=2,pool=min", "pool=min is not max or avg");
  expect_spec_error("fno:grid=8x8,in=1,out=1,width=4,layers=2", "lacks modes= (grid, in, out, width, modes and layers");
  expect_spec_error("fno:grid=8x8,in=1,out=1,width=4,modes=4,layers=2,kernel=3",
                    "unknown key 'kernel' (keys: grid, in, out, width, modes, layers, act)");
  expect_spec_error("fno:grid=6x16,in=1,out=1,width=4,modes=4,layers=2",
                    "modes=4 is more than grid axis 0's 6 points have (at most 3: size / 2 positive and as many "
                    "negative frequencies)");
  expect_spec_error("fno:grid=16x6,in=1,out=1,width=4,modes=5,layers=2",
                    "modes=5 is more than grid axis 1's 6 points have (at most 4: its real FFT's size / 2 + 1)");
#if !FSDP_HAVE_FFTW
  {
    FSDPContext ctx;
    FSDPModel model;
    TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
    TEST_CODE(FSDP_ERR_UNSUPPORTED, FSDPModelCreate(ctx, "fno:grid=8,in=1,out=1,width=2,modes=2,layers=1", &model));
    TEST_MESSAGE_HAS("an fno: model's spectral convolutions need FFTW, and this libfsdp was built without it "
                     "(configure --with-fftw; Debian: libfftw3-dev)");
    TEST_OK(FSDPContextDestroy(&ctx));
  }
#endif
}

int main(int argc, char **argv)
{
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  test_shapes();
  test_direct();
  test_simd_paths();
  test_winograd_option();
  test_gradients();
  test_errors();
  test_model_files();
  test_checkpointing();
  TEST_OK(FSDPFinalize());
  return 0;
}
