/* The layer library's kernels: float32, row-major, batch first.  Sums that
   decide a result (LayerNorm statistics, losses, bias gradients) are taken in
   double, so that results barely depend on the batch split across ranks. */
#include <math.h>
#include <string.h>

#include "nnimpl.h"

#ifdef FSDP_HAVE_BLAS
#include <cblas.h>
#endif

static const char *const act_names[] = {"relu", "tanh", "gelu", "identity"};

const char *FSDPActivationName(FSDPActivation act)
{
  if ((int)act < 0 || act > FSDP_ACT_IDENTITY) return "unknown activation";
  return act_names[act];
}

/* C[m, n] = alpha op(A) op(B) + beta C, row-major, op = transpose when t*. */
void FSDPGemm_Private(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
  if (m == 0 || n == 0) return;
  if (k == 0) { /* BLAS wants leading dimensions of at least 1: an empty product needs no call */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0.0f : beta * c[i * ldc + j];
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
}

#define CHECK_DIMS(cond, ...) FSDPCheck(cond, MPI_COMM_SELF, FSDP_ERR_ARG, __VA_ARGS__)
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
  if (bias)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < out; j++) y[i * out + j] += bias[j];
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
  if (dbias)
    for (int64_t j = 0; j < out; j++) {
      double s = 0;
      for (int64_t i = 0; i < n; i++) s += dy[i * out + j];
      dbias[j] += (float)s;
    }
  if (dx) {
    if (out == 0) memset(dx, 0, (size_t)(n * in) * sizeof *dx);
    else FSDPGemm_Private(false, false, n, in, out, 1.0f, dy, out, weight, in, 0.0f, dx, in);
  }
  return FSDP_SUCCESS;
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

FSDPErrorCode FSDPLayerNormForward(int64_t n, int64_t h, const float *x, const float *weight, const float *bias,
                                   float *y, float *mean, float *rstd)
{
  CHECK_DIMS(n >= 0 && h > 0, "FSDPLayerNormForward: n is %lld and h %lld: h must be positive", (long long)n,
             (long long)h);
  CHECK_DIMS(!n || (x && y && mean && rstd), "FSDPLayerNormForward: x, y, mean and rstd must not be NULL");
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * h;
    double mu = 0, var = 0, r;
    for (int64_t j = 0; j < h; j++) mu += xi[j];
    mu /= (double)h;
    for (int64_t j = 0; j < h; j++) var += (xi[j] - mu) * (xi[j] - mu); /* two passes: no cancellation */
    var /= (double)h;
    r = 1.0 / sqrt(var + FSDP_LAYERNORM_EPS);
    for (int64_t j = 0; j < h; j++) {
      double v = (xi[j] - mu) * r;
      if (weight) v *= weight[j];
      if (bias) v += bias[j];
      y[i * h + j] = (float)v;
    }
    mean[i] = (float)mu;
    rstd[i] = (float)r;
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLayerNormBackward(int64_t n, int64_t h, const float *x, const float *weight, const float *mean,
                                    const float *rstd, const float *dy, float *dx, float *dweight, float *dbias)
{
  CHECK_DIMS(n >= 0 && h > 0, "FSDPLayerNormBackward: n is %lld and h %lld: h must be positive", (long long)n,
             (long long)h);
  CHECK_DIMS(!n || (x && mean && rstd && dy), "FSDPLayerNormBackward: x, mean, rstd and dy must not be NULL");
  for (int64_t i = 0; i < n; i++) {
    const float *xi = x + i * h, *dyi = dy + i * h;
    double r = rstd[i], mu = mean[i], sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < h; j++) {
      double xhat = (xi[j] - mu) * r, g = dyi[j] * (weight ? weight[j] : 1.0f);
      sum_g += g;
      sum_gx += g * xhat;
    }
    sum_g /= (double)h;
    sum_gx /= (double)h;
    if (dx)
      for (int64_t j = 0; j < h; j++) {
        double xhat = (xi[j] - mu) * r, g = dyi[j] * (weight ? weight[j] : 1.0f);
        dx[i * h + j] = (float)(r * (g - sum_g - xhat * sum_gx));
      }
  }
  /* Parameter gradients column by column, each a sum over the batch in double. */
  for (int64_t j = 0; j < h && (dweight || dbias); j++) {
    double sw = 0, sb = 0;
    for (int64_t i = 0; i < n; i++) {
      sw += dy[i * h + j] * ((x[i * h + j] - (double)mean[i]) * rstd[i]);
      sb += dy[i * h + j];
    }
    if (dweight) dweight[j] += (float)sw;
    if (dbias) dbias[j] += (float)sb;
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPMSELoss(int64_t n, int64_t m, const float *y, const float *target, double *loss, float *dy)
{
  CHECK_DIMS(n > 0 && m > 0, "FSDPMSELoss: n is %lld and m %lld: both must be positive", (long long)n, (long long)m);
  CHECK_DIMS(y && target && loss, "FSDPMSELoss: y, target and loss must not be NULL");
  FSDPMSELoss_Private(n, m, y, target, 1.0, loss, dy);
  return FSDP_SUCCESS;
}

void FSDPMSELoss_Private(int64_t n, int64_t m, const float *y, const float *target, double scale, double *loss,
                         float *dy)
{
  double s = 0, count = (double)n * (double)m;
  for (int64_t i = 0; i < n * m; i++) {
    double d = (double)y[i] - target[i];
    s += d * d;
    if (dy) dy[i] = (float)(2.0 * d / count * scale);
  }
  *loss = s / count;
}

FSDPErrorCode FSDPCrossEntropyLoss(int64_t n, int64_t classes, const float *logits, const int64_t *labels, double *loss,
                                   float *dlogits)
{
  CHECK_DIMS(n > 0 && classes > 0, "FSDPCrossEntropyLoss: n is %lld and classes %lld: both must be positive",
             (long long)n, (long long)classes);
  CHECK_DIMS(logits && labels && loss, "FSDPCrossEntropyLoss: logits, labels and loss must not be NULL");
  FSDPCall(FSDPCheckLabels_Private("FSDPCrossEntropyLoss", n, classes, labels));
  FSDPCrossEntropyLoss_Private(n, classes, logits, labels, 1.0, loss, dlogits);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPCheckLabels_Private(const char *caller, int64_t n, int64_t classes, const int64_t *labels)
{
  for (int64_t i = 0; i < n; i++)
    CHECK_DIMS(labels[i] >= 0 && labels[i] < classes, "%s: label %lld of row %lld is not in [0, %lld)", caller,
               (long long)labels[i], (long long)i, (long long)classes);
  return FSDP_SUCCESS;
}

void FSDPCrossEntropyLoss_Private(int64_t n, int64_t classes, const float *logits, const int64_t *labels, double scale,
                                  double *loss, float *dlogits)
{
  double total = 0;
  for (int64_t i = 0; i < n; i++) {
    const float *z = logits + i * classes;
    double zmax = z[0], sum = 0, lse;
    for (int64_t c = 1; c < classes; c++) zmax = z[c] > zmax ? z[c] : zmax;
    for (int64_t c = 0; c < classes; c++) sum += exp(z[c] - zmax); /* every term <= 1: no overflow */
    lse = zmax + log(sum);
    total += lse - z[labels[i]];
    if (dlogits)
      for (int64_t c = 0; c < classes; c++)
        dlogits[i * classes + c] = (float)((exp(z[c] - lse) - (c == labels[i] ? 1.0 : 0.0)) / (double)n * scale);
  }
  *loss = total / (double)n;
}
