/* layers.cu: the layer library's kernels on a GPU (kernels.h).  Each follows
   the host loop in its kind's file of src/nn (linear.c, layernorm.c,
   activation.c, loss.c, embedding.c, transformer.c): the same formulas, in
   the same types, with the same sums in double; only the order of those sums
   differs.  Two sums differ more: the embedding's wte gradient adds in float
   atomically, in no fixed order, and its wpe gradient sums in double where
   the host adds in float.  The GEMMs are cuBLAS's (cuda.c). */
#include "elementwise.h"
#include "grid.cuh"
#include "kernels.h"

/* The FSDPActivation values (fsdp_nn.h), which this file does not include. */
enum { ACT_RELU = 0, ACT_TANH = 1, ACT_GELU = 2, ACT_IDENTITY = 3 };

/* One block per row, however many rows. */
#define ROW_STRIDE(i, n) for (int64_t i = blockIdx.x; i < (n); i += gridDim.x)

static unsigned row_blocks(int64_t n) { return (unsigned)(n < 65535 * 8 ? n : 65535 * 8); }

__device__ float block_max(float v, float *part)
{
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = THREADS / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w && part[threadIdx.x + w] > part[threadIdx.x]) part[threadIdx.x] = part[threadIdx.x + w];
    __syncthreads();
  }
  v = part[0];
  __syncthreads();
  return v;
}

/* ------------------------------------------------------------------ linear: bias */

__global__ void add_bias_k(int64_t n, int64_t out, const float *bias, float *y)
{
  GRID_STRIDE(e, n * out) y[e] += bias[e % out];
}

/* A thread per column: the rows' sum in double, as on the host. */
__global__ void bias_grad_k(int64_t n, int64_t out, const float *dy, float *dbias)
{
  GRID_STRIDE(j, out)
  {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += dy[i * out + j];
    dbias[j] += (float)s;
  }
}

extern "C" int FSDPKernelAddBias(int64_t n, int64_t out, const float *bias, float *y, void *stream)
{
  if (n * out <= 0) return cudaSuccess;
  add_bias_k<<<blocks_for(n * out), THREADS, 0, (cudaStream_t)stream>>>(n, out, bias, y);
  return cudaGetLastError();
}

extern "C" int FSDPKernelBiasGrad(int64_t n, int64_t out, const float *dy, float *dbias, void *stream)
{
  if (out <= 0) return cudaSuccess;
  bias_grad_k<<<blocks_for(out), THREADS, 0, (cudaStream_t)stream>>>(n, out, dy, dbias);
  return cudaGetLastError();
}

/* ------------------------------------------------------------------ activations */

__global__ void act_forward_k(int act, int64_t n, const float *x, float *y)
{
  GRID_STRIDE(i, n)
  {
    float v = x[i];
    switch (act) {
    case ACT_RELU: y[i] = v > 0 ? v : 0.0f; break;
    case ACT_TANH: y[i] = tanhf(v); break;
    case ACT_GELU: y[i] = (float)(0.5 * v * (1.0 + erf(v * FSDP_SQRT1_2))); break;
    default: y[i] = v; break;
    }
  }
}

__global__ void act_backward_k(int act, int64_t n, const float *x, const float *dy, float *dx)
{
  GRID_STRIDE(i, n)
  {
    float v = x[i];
    switch (act) {
    case ACT_RELU: dx[i] = v > 0 ? dy[i] : 0.0f; break;
    case ACT_TANH: {
      float t = tanhf(v);
      dx[i] = dy[i] * (1.0f - t * t);
      break;
    }
    case ACT_GELU: {
      double w = v, cdf = 0.5 * (1.0 + erf(w * FSDP_SQRT1_2)), pdf = exp(-0.5 * w * w) * FSDP_INV_SQRT_2PI;
      dx[i] = (float)(dy[i] * (cdf + w * pdf));
      break;
    }
    default: dx[i] = dy[i]; break;
    }
  }
}

extern "C" int FSDPKernelActivation(int act, int backward, int64_t n, const float *x, const float *dy, float *out,
                                    void *stream)
{
  cudaStream_t s = (cudaStream_t)stream;
  if (n <= 0) return cudaSuccess;
  if (act < ACT_RELU || act > ACT_IDENTITY) return cudaErrorInvalidValue;
  if (backward) act_backward_k<<<blocks_for(n), THREADS, 0, s>>>(act, n, x, dy, out);
  else act_forward_k<<<blocks_for(n), THREADS, 0, s>>>(act, n, x, out);
  return cudaGetLastError();
}

/* ------------------------------------------------------------------ LayerNorm */

__global__ void layernorm_forward_k(int64_t n, int64_t h, const float *x, const float *weight, const float *bias,
                                    float *y, float *mean, float *rstd)
{
  __shared__ double part[THREADS];
  ROW_STRIDE(i, n)
  {
    const float *xi = x + i * h;
    double mu = 0, var = 0, r;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) mu += xi[j];
    mu = block_sum(mu, part) / (double)h;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) var += (xi[j] - mu) * (xi[j] - mu);
    var = block_sum(var, part) / (double)h;
    r = 1.0 / sqrt(var + FSDP_LAYERNORM_EPS);
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      double v = (xi[j] - mu) * r;
      if (weight) v *= weight[j];
      if (bias) v += bias[j];
      y[i * h + j] = (float)v;
    }
    if (threadIdx.x == 0) {
      mean[i] = (float)mu;
      rstd[i] = (float)r;
    }
  }
}

__global__ void layernorm_dx_k(int64_t n, int64_t h, const float *x, const float *weight, const float *mean,
                               const float *rstd, const float *dy, float *dx)
{
  __shared__ double part[THREADS];
  ROW_STRIDE(i, n)
  {
    const float *xi = x + i * h, *dyi = dy + i * h;
    double r = rstd[i], mu = mean[i], sum_g = 0, sum_gx = 0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      double xhat = (xi[j] - mu) * r, g = dyi[j] * (weight ? weight[j] : 1.0f);
      sum_g += g;
      sum_gx += g * xhat;
    }
    sum_g = block_sum(sum_g, part) / (double)h;
    sum_gx = block_sum(sum_gx, part) / (double)h;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
      double xhat = (xi[j] - mu) * r, g = dyi[j] * (weight ? weight[j] : 1.0f);
      dx[i * h + j] = (float)(r * (g - sum_g - xhat * sum_gx));
    }
  }
}

/* A thread per column, summing over the batch in double (as bias_grad_k). */
__global__ void layernorm_dparams_k(int64_t n, int64_t h, const float *x, const float *mean, const float *rstd,
                                    const float *dy, float *dweight, float *dbias)
{
  GRID_STRIDE(j, h)
  {
    double sw = 0, sb = 0;
    for (int64_t i = 0; i < n; i++) {
      sw += dy[i * h + j] * ((x[i * h + j] - (double)mean[i]) * rstd[i]);
      sb += dy[i * h + j];
    }
    if (dweight) dweight[j] += (float)sw;
    if (dbias) dbias[j] += (float)sb;
  }
}

extern "C" int FSDPKernelLayerNormForward(int64_t n, int64_t h, const float *x, const float *weight, const float *bias,
                                          float *y, float *mean, float *rstd, void *stream)
{
  if (n <= 0) return cudaSuccess;
  layernorm_forward_k<<<row_blocks(n), THREADS, 0, (cudaStream_t)stream>>>(n, h, x, weight, bias, y, mean, rstd);
  return cudaGetLastError();
}

extern "C" int FSDPKernelLayerNormBackward(int64_t n, int64_t h, const float *x, const float *weight, const float *mean,
                                           const float *rstd, const float *dy, float *dx, float *dweight, float *dbias,
                                           void *stream)
{
  cudaStream_t s = (cudaStream_t)stream;
  if (n <= 0) return cudaSuccess;
  if (dx) layernorm_dx_k<<<row_blocks(n), THREADS, 0, s>>>(n, h, x, weight, mean, rstd, dy, dx);
  if (dweight || dbias) layernorm_dparams_k<<<blocks_for(h), THREADS, 0, s>>>(n, h, x, mean, rstd, dy, dweight, dbias);
  return cudaGetLastError();
}

/* ------------------------------------------------------------------ a GPT's layers */

/* A token id in device memory, unchecked on the host: -1 unless in [0, vocab). */
static __device__ __forceinline__ int64_t token_at(const float *tokens, int64_t r, int64_t vocab)
{
  float v = tokens[r];
  return v >= 0.0f && v < (float)vocab && v == floorf(v) ? (int64_t)v : -1;
}

/* y[r, c] = wte[token of r] + wpe[position of r] (embedding.c); NaN for a bad token. */
__global__ void embedding_forward_k(int64_t rows, int64_t seq, int64_t c, int64_t vocab, const float *tokens,
                                    const float *wte, const float *wpe, float *y)
{
  GRID_STRIDE(e, rows * c)
  {
    int64_t r = e / c, j = e % c, token = token_at(tokens, r, vocab);
    y[e] = token < 0 ? NAN : wte[token * c + j] + wpe[(r % seq) * c + j];
  }
}

/* dwte[token] += dy: rows that share a token add atomically, in no fixed order. */
__global__ void embedding_dwte_k(int64_t rows, int64_t c, int64_t vocab, const float *tokens, const float *dy,
                                 float *dwte)
{
  GRID_STRIDE(e, rows * c)
  {
    int64_t token = token_at(tokens, e / c, vocab);
    if (token >= 0) atomicAdd(&dwte[token * c + e % c], dy[e]);
  }
}

/* dwpe[t] += the sum over sequences of dy at position t: a thread per
   element, summing in double (as bias_grad_k). */
__global__ void embedding_dwpe_k(int64_t n, int64_t seq, int64_t c, const float *dy, float *dwpe)
{
  GRID_STRIDE(e, seq * c)
  {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += dy[i * seq * c + e];
    dwpe[e] += (float)s;
  }
}

/* Row r of rows [t] scores is row i = r mod t of its sequence's matrix:
   softmax over columns 0..i (the row's maximum first, the sum in double),
   zeros beyond (transformer.c's causal_softmax). */
__global__ void causal_softmax_k(int64_t rows, int64_t t, float *s)
{
  __shared__ double part[THREADS];
  __shared__ float fpart[THREADS];
  ROW_STRIDE(r, rows)
  {
    float *row = s + r * t, mx = -INFINITY;
    int64_t i = r % t;
    double sum = 0;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, row[j]);
    mx = block_max(mx, fpart);
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
      row[j] = expf(row[j] - mx);
      sum += row[j];
    }
    sum = block_sum(sum, part);
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) row[j] = (float)(row[j] / sum);
    for (int64_t j = i + 1 + threadIdx.x; j < t; j += blockDim.x) row[j] = 0.0f;
  }
}

/* dS = P (dP - sum_j P dP) in place of dP, row by row as causal_softmax_k;
   consecutive t x t matrices lie p_stride and dp_stride floats apart. */
__global__ void causal_softmax_backward_k(int64_t rows, int64_t t, const float *p, int64_t p_stride, float *dp,
                                          int64_t dp_stride)
{
  __shared__ double part[THREADS];
  ROW_STRIDE(r, rows)
  {
    const float *pi = p + (r / t) * p_stride + (r % t) * t;
    float *di = dp + (r / t) * dp_stride + (r % t) * t;
    int64_t i = r % t;
    double dot = 0;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) dot += (double)pi[j] * di[j];
    dot = block_sum(dot, part);
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) di[j] = (float)(pi[j] * (di[j] - dot));
    for (int64_t j = i + 1 + threadIdx.x; j < t; j += blockDim.x) di[j] = 0.0f;
  }
}

extern "C" int FSDPKernelEmbeddingForward(int64_t rows, int64_t seq, int64_t c, int64_t vocab, const float *tokens,
                                          const float *wte, const float *wpe, float *y, void *stream)
{
  if (rows * c <= 0) return cudaSuccess;
  embedding_forward_k<<<blocks_for(rows * c), THREADS, 0, (cudaStream_t)stream>>>(rows, seq, c, vocab, tokens, wte, wpe,
                                                                                  y);
  return cudaGetLastError();
}

extern "C" int FSDPKernelEmbeddingBackward(int64_t rows, int64_t seq, int64_t c, int64_t vocab, const float *tokens,
                                           const float *dy, float *dwte, float *dwpe, void *stream)
{
  cudaStream_t s = (cudaStream_t)stream;
  if (rows * c <= 0) return cudaSuccess;
  if (dwte) embedding_dwte_k<<<blocks_for(rows * c), THREADS, 0, s>>>(rows, c, vocab, tokens, dy, dwte);
  if (dwpe) embedding_dwpe_k<<<blocks_for(seq * c), THREADS, 0, s>>>(rows / seq, seq, c, dy, dwpe);
  return cudaGetLastError();
}

extern "C" int FSDPKernelCausalSoftmax(int64_t rows, int64_t t, float *s, void *stream)
{
  if (rows <= 0) return cudaSuccess;
  causal_softmax_k<<<row_blocks(rows), THREADS, 0, (cudaStream_t)stream>>>(rows, t, s);
  return cudaGetLastError();
}

extern "C" int FSDPKernelCausalSoftmaxBackward(int64_t rows, int64_t t, const float *p, int64_t p_stride, float *dp,
                                               int64_t dp_stride, void *stream)
{
  if (rows <= 0) return cudaSuccess;
  causal_softmax_backward_k<<<row_blocks(rows), THREADS, 0, (cudaStream_t)stream>>>(rows, t, p, p_stride, dp,
                                                                                    dp_stride);
  return cudaGetLastError();
}

/* ------------------------------------------------------------------ losses */

__global__ void mse_k(int64_t count, const float *y, const float *target, double scale, double *sum, float *dy)
{
  __shared__ double part[THREADS];
  double s = 0;
  GRID_STRIDE(i, count)
  {
    double d = (double)y[i] - target[i];
    s += d * d;
    if (dy) dy[i] = (float)(2.0 * d / (double)count * scale);
  }
  s = block_sum(s, part);
  if (threadIdx.x == 0) atomicAdd(sum, s);
}

/* One block per row: max, log-sum-exp, the row's loss, its gradient.  A
   label outside [0, classes) skips its row, and *bad_row becomes at least
   row + 1 (so it names the last bad row: any one will do for the error). */
__global__ void cross_entropy_k(int64_t n, int64_t classes, const float *logits, const int64_t *labels, double scale,
                                double *sum, unsigned long long *bad_row, float *dlogits)
{
  __shared__ double part[THREADS];
  __shared__ float fpart[THREADS];
  ROW_STRIDE(i, n)
  {
    const float *z = logits + i * classes;
    int64_t label = labels[i];
    float zmax = -INFINITY;
    double s = 0, lse;
    if (label < 0 || label >= classes) {
      if (threadIdx.x == 0) atomicMax(bad_row, (unsigned long long)i + 1);
      continue; /* the whole block skips the row: label is the same for every thread */
    }
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) zmax = z[c] > zmax ? z[c] : zmax;
    zmax = block_max(zmax, fpart);
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) s += exp((double)z[c] - zmax);
    lse = zmax + log(block_sum(s, part));
    if (threadIdx.x == 0) atomicAdd(sum, lse - z[label]);
    if (dlogits)
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
        dlogits[i * classes + c] = (float)((exp(z[c] - lse) - (c == label ? 1.0 : 0.0)) / (double)n * scale);
  }
}

extern "C" int FSDPKernelMSELoss(int64_t count, const float *y, const float *target, double scale, double *sum,
                                 float *dy, void *stream)
{
  if (count <= 0) return cudaSuccess;
  mse_k<<<blocks_for(count), THREADS, 0, (cudaStream_t)stream>>>(count, y, target, scale, sum, dy);
  return cudaGetLastError();
}

extern "C" int FSDPKernelCrossEntropyLoss(int64_t n, int64_t classes, const float *logits, const int64_t *labels,
                                          double scale, double *sum, unsigned long long *bad_row, float *dlogits,
                                          void *stream)
{
  if (n <= 0) return cudaSuccess;
  cross_entropy_k<<<row_blocks(n), THREADS, 0, (cudaStream_t)stream>>>(n, classes, logits, labels, scale, sum, bad_row,
                                                                       dlogits);
  return cudaGetLastError();
}
