/* The linear layer: y[n, out] = x[n, in] W[out, in]^T + b[out] (PyTorch's
   nn.Linear), its kernels (float32, row-major, batch first; the bias
   gradient summed in double, so that it barely depends on the batch split
   across ranks), the GEMM, and the layer in a model: on the host in fp32,
   with 16-bit weights widened WIDE_ROWS rows at a time, or on a GPU by cuBLAS. */
#include <math.h>
#include <string.h>

#include "nnimpl.h"
#include "simd.h"

/* y[i, :] += bias, row by row. */
FSDP_INLINE void add_bias_body(int64_t n, int64_t out, const float *restrict bias, float *restrict y)
{
  for (int64_t i = 0; i < n; i++) {
    float *yi = y + i * out;
    FSDP_SIMD_LOOP
    for (int64_t j = 0; j < out; j++) yi[j] += bias[j];
  }
}
FSDP_SIMD_KERNEL(add_bias, (int64_t n, int64_t out, const float *restrict bias, float *restrict y), (n, out, bias, y))

/* dbias[j] += sum_i dy[i, j] in double, COLS columns at a time and row after
   row: each column adds its rows in order, and rows are read contiguously. */
#define COLS 256
FSDP_INLINE void bias_grad_body(int64_t n, int64_t out, const float *restrict dy, float *restrict dbias)
{
  for (int64_t j0 = 0; j0 < out; j0 += COLS) {
    int64_t m = out - j0 < COLS ? out - j0 : COLS;
    double s[COLS] = {0};
    for (int64_t i = 0; i < n; i++) {
      const float *d = dy + i * out + j0;
      FSDP_SIMD_LOOP
      for (int64_t j = 0; j < m; j++) s[j] += d[j];
    }
    for (int64_t j = 0; j < m; j++) dbias[j0 + j] += (float)s[j];
  }
}
FSDP_SIMD_KERNEL(bias_grad, (int64_t n, int64_t out, const float *restrict dy, float *restrict dbias),
                 (n, out, dy, dbias))

#ifdef FSDP_HAVE_BLAS
#include <cblas.h>
#endif

/* The "GEMM" event times every host GEMM while logging is on (-fsdp_log_view),
   so that benchmarks can compare it with the step.  Looked up by name each
   time (FSDPFinalize forgets events), and only while logging. */
static FSDPLogEvent gemm_event(void)
{
  bool active = false;
  FSDPLogEvent ev;
  if (FSDPLogGetActive(&active) || !active || FSDPLogEventRegister("GEMM", &ev)) return -1;
  return ev;
}

/* C[m, n] = alpha op(A) op(B) + beta C, row-major, op = transpose when t*. */
void FSDPGemm_Private(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
  FSDPLogEvent ev = gemm_event();
  if (m == 0 || n == 0) return;
  if (ev >= 0) (void)FSDPLogEventBegin(ev);
  if (k == 0) { /* BLAS wants leading dimensions of at least 1: an empty product needs no call */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
    if (ev >= 0) (void)FSDPLogEventEnd(ev, 0);
    return;
  }
#ifdef FSDP_HAVE_BLAS
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
              alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
#else
  /* Without a BLAS: correct and plain, accumulated in double. */
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t p = 0; p < k; p++)
        s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = (float)(alpha * s + (beta == 0 ? 0.0 : (double)beta * c[i * ldc + j]));
    }
#endif
  if (ev >= 0) (void)FSDPLogEventEnd(ev, 2 * m * n * k); /* "bytes": the flops */
}

/* MPI-free kernels still refuse sizes BLAS cannot take. */
#define CHECK_BLAS_DIM(name, v)                                                                                        \
  CHECK_DIMS((v) >= 0 && (v) <= INT32_MAX, "%s: %s is %lld, not in [0, 2^31)", __func__, name, (long long)(v))

FSDPErrorCode FSDPLinearForward(int64_t n, int64_t in, int64_t out, const float *x, const float *weight,
                                const float *bias, float *y)
{
  CHECK_BLAS_DIM("n", n);
  CHECK_BLAS_DIM("in", in);
  CHECK_BLAS_DIM("out", out);
  CHECK_DIMS((x || !n) && (weight || !out) && (y || !n), "FSDPLinearForward: x, weight and y must not be NULL");
  FSDPGemm_Private(false, true, n, out, in, 1.0f, x, in, weight, in, 0.0f, y, out);
  if (bias) add_bias(n, out, bias, y);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLinearBackward(int64_t n, int64_t in, int64_t out, const float *x, const float *weight,
                                 const float *dy, float *dx, float *dweight, float *dbias)
{
  CHECK_BLAS_DIM("n", n);
  CHECK_BLAS_DIM("in", in);
  CHECK_BLAS_DIM("out", out);
  CHECK_DIMS(dy || !n, "FSDPLinearBackward: dy must not be NULL");
  CHECK_DIMS(!dweight || x || !n, "FSDPLinearBackward: x is needed for dweight");
  CHECK_DIMS(!dx || weight || !out, "FSDPLinearBackward: weight is needed for dx");
  if (dweight && n > 0) FSDPGemm_Private(true, false, out, in, n, 1.0f, dy, out, x, in, 1.0f, dweight, in);
  if (dbias) bias_grad(n, out, dy, dbias);
  if (dx) {
    if (out == 0) memset(dx, 0, (size_t)(n * in) * sizeof *dx);
    else FSDPGemm_Private(false, false, n, in, out, 1.0f, dy, out, weight, in, 0.0f, dx, in);
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ in a model */

enum { WEIGHT = 0, BIAS = 1 };
static const char *const param_names[] = {"weight", "bias"};

static void linear_param_shape(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM])
{
  *ndim = p == WEIGHT ? 2 : 1;
  shape[0] = l->out;
  shape[1] = l->in;
}

/* PyTorch's default: weight and bias uniform in +-1/sqrt(fan_in)
   (kaiming_uniform with a = sqrt(5) is exactly that bound). */
static FSDPErrorCode linear_init(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin, int64_t end,
                                 float *values)
{
  double bound = 1.0 / sqrt((double)l->in);
  (void)p;
  FSDPCall(FSDPRandomUniform(seed, name, begin, end, -bound, bound, values));
  return FSDP_SUCCESS;
}

/* Rows [row, row + rows) of a 16-bit weight [out, in], widened into the scratch. */
static FSDPErrorCode widen_rows(FSDPModel m, const Layer *l, const void *w16, int64_t row, int64_t rows)
{
  FSDPCall(
      FSDPDataTypeConvert(FSDP_FLOAT32, m->wide, m->view_dtype, (const uint16_t *)w16 + row * l->in, rows * l->in));
  return FSDP_SUCCESS;
}

/* FSDPLinearForward with a 16-bit weight: y[:, block] = x W[block, :]^T, block by block. */
static FSDPErrorCode linear_forward_low(FSDPModel m, const Layer *l, int64_t n, const float *x, float *y)
{
  void *w16;
  float *b;
  FSDPCall(FSDPModelParamView_Private(m, l, WEIGHT, &w16));
  for (int64_t o = 0; o < l->out; o += WIDE_ROWS) {
    int64_t r = l->out - o < WIDE_ROWS ? l->out - o : WIDE_ROWS;
    FSDPCall(widen_rows(m, l, w16, o, r));
    FSDPGemm_Private(false, true, n, r, l->in, 1.0f, x, l->in, m->wide, l->in, 0.0f, y + o, l->out);
  }
  FSDPCall(FSDPModelParam_Private(m, l, BIAS, &b));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < l->out; j++) y[i * l->out + j] += b[j];
  return FSDP_SUCCESS;
}

/* FSDPLinearBackward with a 16-bit weight: the weight and bias gradients
   need no weight; dx = sum over blocks of dy[:, block] W[block, :]. */
static FSDPErrorCode linear_backward_low(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                         float *dx, float *dw, float *db)
{
  void *w16;
  FSDPCall(FSDPLinearBackward(n, l->in, l->out, x, NULL, dy, NULL, dw, db));
  if (!dx) return FSDP_SUCCESS;
  FSDPCall(FSDPModelParamView_Private(m, l, WEIGHT, &w16));
  for (int64_t o = 0; o < l->out; o += WIDE_ROWS) {
    int64_t r = l->out - o < WIDE_ROWS ? l->out - o : WIDE_ROWS;
    FSDPCall(widen_rows(m, l, w16, o, r));
    FSDPGemm_Private(false, false, n, l->in, r, 1.0f, dy + o, l->out, m->wide, l->in, o ? 1.0f : 0.0f, dx, l->in);
  }
  return FSDP_SUCCESS;
}

/* y = x W^T + b by cuBLAS: fp32 (TF32 when allowed), or, with 16-bit views,
   x cast to the views' type and multiplied with fp32 accumulation. */
static FSDPErrorCode linear_forward_gpu(FSDPModel m, const Layer *l, int64_t n, const float *x, float *y)
{
  void *w;
  const void *xa = x;
  float *b;
  FSDPCall(FSDPModelParamView_Private(m, l, WEIGHT, &w));
  if (m->view_dtype != FSDP_FLOAT32) {
    FSDPCall(DeviceConvert_Private(m->dev, m->view_dtype, m->low[0], FSDP_FLOAT32, x, n * l->in, 1.0));
    xa = m->low[0];
  }
  FSDPCall(DeviceGemm_Private(m->dev, m->view_dtype, m->tf32, false, true, n, l->out, l->in, 1.0f, xa, l->in, w, l->in,
                              0.0f, y, l->out));
  FSDPCall(FSDPModelParam_Private(m, l, BIAS, &b));
  FSDPCall(DeviceAddBias_Private(m->dev, n, l->out, b, y));
  return FSDP_SUCCESS;
}

/* dW += dy^T x, db += column sums of dy, dx = dy W; the bias gradient sums the fp32 dy. */
static FSDPErrorCode linear_backward_gpu(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy,
                                         float *dx, float *dw, float *db)
{
  void *w;
  const void *xa = x, *dya = dy;
  FSDPCall(FSDPModelParamView_Private(m, l, WEIGHT, &w));
  if (m->view_dtype != FSDP_FLOAT32 && (dw || dx)) {
    FSDPCall(DeviceConvert_Private(m->dev, m->view_dtype, m->low[1], FSDP_FLOAT32, dy, n * l->out, 1.0));
    dya = m->low[1];
    if (dw) {
      FSDPCall(DeviceConvert_Private(m->dev, m->view_dtype, m->low[0], FSDP_FLOAT32, x, n * l->in, 1.0));
      xa = m->low[0];
    }
  }
  if (dw)
    FSDPCall(DeviceGemm_Private(m->dev, m->view_dtype, m->tf32, true, false, l->out, l->in, n, 1.0f, dya, l->out, xa,
                                l->in, 1.0f, dw, l->in));
  if (db) FSDPCall(DeviceBiasGrad_Private(m->dev, n, l->out, dy, db));
  if (dx)
    FSDPCall(DeviceGemm_Private(m->dev, m->view_dtype, m->tf32, false, false, n, l->in, l->out, 1.0f, dya, l->out, w,
                                l->in, 0.0f, dx, l->in));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelGemm_Private(FSDPModel m, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                                    const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                    int64_t ldc)
{
  if (m->dev)
    FSDPCall(DeviceGemm_Private(m->dev, FSDP_FLOAT32, m->tf32, ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc));
  else FSDPGemm_Private(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelLinearForward_Private(FSDPModel m, int64_t n, int64_t in, int64_t out, const float *x,
                                             const float *w, const float *b, float *y)
{
  if (!m->dev) return FSDPLinearForward(n, in, out, x, w, b, y);
  FSDPCall(FSDPModelGemm_Private(m, false, true, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out));
  if (b) FSDPCall(DeviceAddBias_Private(m->dev, n, out, b, y));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelLinearBackward_Private(FSDPModel m, int64_t n, int64_t in, int64_t out, const float *x,
                                              const float *w, const float *dy, float *dx, float *dw, float *db)
{
  if (!m->dev) return FSDPLinearBackward(n, in, out, x, w, dy, dx, dw, db);
  if (dw) FSDPCall(FSDPModelGemm_Private(m, true, false, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw, in));
  if (db) FSDPCall(DeviceBiasGrad_Private(m->dev, n, out, dy, db));
  if (dx) FSDPCall(FSDPModelGemm_Private(m, false, false, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in));
  return FSDP_SUCCESS;
}

static FSDPErrorCode linear_forward(FSDPModel m, const Layer *l, int64_t n, const float *x)
{
  float *w, *b;
  if (m->dev) {
    FSDPCall(linear_forward_gpu(m, l, n, x, l->y));
    return FSDP_SUCCESS;
  }
  if (m->wide) {
    FSDPCall(linear_forward_low(m, l, n, x, l->y));
    return FSDP_SUCCESS;
  }
  FSDPCall(FSDPModelParam_Private(m, l, WEIGHT, &w));
  FSDPCall(FSDPModelParam_Private(m, l, BIAS, &b));
  FSDPCall(FSDPLinearForward(n, l->in, l->out, x, w, b, l->y));
  return FSDP_SUCCESS;
}

static FSDPErrorCode linear_backward(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy, float *dx)
{
  float *w, *dw, *db;
  FSDPCall(FSDPModelGrad_Private(m, l, WEIGHT, &dw));
  FSDPCall(FSDPModelGrad_Private(m, l, BIAS, &db));
  if (m->dev) {
    FSDPCall(linear_backward_gpu(m, l, n, x, dy, dx, dw, db));
    return FSDP_SUCCESS;
  }
  if (m->wide) {
    FSDPCall(linear_backward_low(m, l, n, x, dy, dx, dw, db));
    return FSDP_SUCCESS;
  }
  FSDPCall(FSDPModelParam_Private(m, l, WEIGHT, &w));
  FSDPCall(FSDPLinearBackward(n, l->in, l->out, x, w, dy, dx, dw, db));
  return FSDP_SUCCESS;
}

const LayerOps LayerOps_linear_Private = {
    .type = "linear",
    .nparams = 2,
    .param_names = param_names,
    .param_shape = linear_param_shape,
    .init = linear_init,
    .forward = linear_forward,
    .backward = linear_backward,
};
