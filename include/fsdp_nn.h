/* fsdp_nn.h: libfsdp's layer library, for fsdp-train, the examples, and C or
   Fortran codes that want a sharded MLP without writing one.

   Kernels work on float32, row-major, batch first, on the host (OpenBLAS
   GEMMs); a model on a CUDA context runs the same layers on its GPU
   (cuBLAS GEMMs and CUDA kernels, doc/cuda.md).  Backward kernels ADD into weight and bias gradients, as autograd
   accumulates, and overwrite input gradients.  A model built from a spec
   string registers its parameters in an FSDPContext, one unit per block by
   default, and runs forward and backward with just-in-time all-gathers and
   reduce-scatters.  Under a mixed-precision policy (FSDPContextSetMixedPrecision)
   a model widens each layer's 16-bit parameters to fp32 just before its
   kernels run.  doc/nn.md describes the layers, the spec and the
   initialization exactly. */
#ifndef FSDP_NN_H
#define FSDP_NN_H

#include "fsdp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ random numbers */

/* Counter-based: element i of `stream` under `seed` is a function of
   (seed, stream, i) alone, so any range can be generated on its own, on any
   rank, in any order.  Fills values[0 .. end-begin) with elements
   [begin, end), uniform in [low, high). */
FSDP_EXTERN FSDPErrorCode FSDPRandomUniform(uint64_t seed, const char *stream, int64_t begin, int64_t end, double low,
                                            double high, float *values);

/* ------------------------------------------------------------------ kernels */

typedef enum { FSDP_ACT_RELU = 0, FSDP_ACT_TANH, FSDP_ACT_GELU, FSDP_ACT_IDENTITY } FSDPActivation;
FSDP_EXTERN const char *FSDPActivationName(FSDPActivation act);

/* y[n, out] = x[n, in] weight[out, in]^T + bias[out] (bias may be NULL). */
FSDP_EXTERN FSDPErrorCode FSDPLinearForward(int64_t n, int64_t in, int64_t out, const float *x, const float *weight,
                                            const float *bias, float *y);
/* dweight += dy^T x, dbias += column sums of dy, dx = dy weight.  Any of dx,
   dweight, dbias may be NULL (not wanted). */
FSDP_EXTERN FSDPErrorCode FSDPLinearBackward(int64_t n, int64_t in, int64_t out, const float *x, const float *weight,
                                             const float *dy, float *dx, float *dweight, float *dbias);

/* Elementwise over n values; GELU is the exact, erf-based one.  dx may alias dy. */
FSDP_EXTERN FSDPErrorCode FSDPActivationForward(FSDPActivation act, int64_t n, const float *x, float *y);
FSDP_EXTERN FSDPErrorCode FSDPActivationBackward(FSDPActivation act, int64_t n, const float *x, const float *dy,
                                                 float *dx);

/* Over the last dimension h of x[n, h], eps 1e-5, with affine weight and bias
   (each may be NULL: ones, zeros).  mean[n] and rstd[n] are saved for backward. */
FSDP_EXTERN FSDPErrorCode FSDPLayerNormForward(int64_t n, int64_t h, const float *x, const float *weight,
                                               const float *bias, float *y, float *mean, float *rstd);
FSDP_EXTERN FSDPErrorCode FSDPLayerNormBackward(int64_t n, int64_t h, const float *x, const float *weight,
                                                const float *mean, const float *rstd, const float *dy, float *dx,
                                                float *dweight, float *dbias);

/* Losses: the mean, and (dy not NULL) its gradient with respect to y.
   MSE averages over all n*m elements; cross-entropy over the n rows, with
   labels in [0, classes) and a stable log-sum-exp. */
FSDP_EXTERN FSDPErrorCode FSDPMSELoss(int64_t n, int64_t m, const float *y, const float *target, double *loss,
                                      float *dy);
FSDP_EXTERN FSDPErrorCode FSDPCrossEntropyLoss(int64_t n, int64_t classes, const float *logits, const int64_t *labels,
                                               double *loss, float *dlogits);

/* ------------------------------------------------------------------ models */

typedef struct FSDPModel_s *FSDPModel;

/* Which parameters form one FlatParam: one unit per block with the head in
   the root unit (the default), one unit for everything, or greedy units of
   at least min_numel elements in model order, the rest in the root unit. */
typedef enum { FSDP_WRAP_BLOCK = 0, FSDP_WRAP_MODEL, FSDP_WRAP_SIZE } FSDPWrapPolicy;

/* spec: "mlp:in=I,hidden=H,depth=D,out=O[,act=relu|tanh|gelu][,norm=none|layernorm]",
   "cnn:grid=N[xM[xK]],in=C,out=O[,depth=D,channels=K,kernel=3,stride=1,dilation=1,
   groups=1,pad=P,padding=zeros|circular|reflect,act=relu|tanh|gelu]": D
   convolutions of K channels with an activation each, then one to O
   channels, channels-first rows (PyTorch's Conv1d/2d/3d; doc/nn.md),
   or "gpt:vocab=V,ctx=T,dim=C,heads=H,layers=L[,tied=0|1]": a GPT-style
   decoder (token and position embeddings, L pre-LayerNorm transformer blocks
   with causal self-attention and a GELU MLP, a final LayerNorm, a head, its
   weight optionally the token embedding's), host and fp32 only.  A GPT's
   row is a sequence: x[n, T] holds token ids (as floats), its output is
   logits [n, T, V], and its cross-entropy labels are int64 [n, T].
   Parsed now; an unknown key or a bad value is FSDP_ERR_ARG.  The model adds
   its units to ctx at FSDPModelSetUp; destroy it before the context. */
FSDP_EXTERN FSDPErrorCode FSDPModelCreate(FSDPContext ctx, const char *spec, FSDPModel *model);
FSDP_EXTERN FSDPErrorCode FSDPModelSetWrapPolicy(FSDPModel model, FSDPWrapPolicy policy, int64_t min_numel);
/* Seed of the default initialization (default 0). */
FSDP_EXTERN FSDPErrorCode FSDPModelSetSeed(FSDPModel model, uint64_t seed);
/* -fsdp_wrap block|model|size:N, -fsdp_seed S, -fsdp_tf32, -fsdp_activation_checkpointing. */
FSDP_EXTERN FSDPErrorCode FSDPModelSetFromOptions(FSDPModel model);
/* Collective: adds the units and parameters to the context, installs the
   default initialization (PyTorch's, from FSDPRandomUniform: a parameter's
   values depend on the seed and its name only, not on W, F or the wrapping)
   and sets the context up. */
FSDP_EXTERN FSDPErrorCode FSDPModelSetUp(FSDPModel model);
FSDP_EXTERN FSDPErrorCode FSDPModelGetSizes(FSDPModel model, int64_t *in, int64_t *out, int64_t *numel);
/* The shape of one sample's input (output false) or output (true), in C
   order, at most 4 dimensions: an MLP's [in] and [out]; a GPT's [T] and
   [T, V]; a CNN's [channels, grid...] (a field of 2 channels on a 32x32
   grid is [2, 32, 32], x[n][2][32][32] in C, x(32, 32, 2, n) in Fortran). */
FSDP_EXTERN FSDPErrorCode FSDPModelGetSampleShape(FSDPModel model, bool output, int *ndim, int64_t shape[4]);
/* A GPT's context length T and vocabulary V (x is [n, T] token ids, the
   output [n, T * V]); 0 and 0 for an MLP. */
FSDP_EXTERN FSDPErrorCode FSDPModelGetTokens(FSDPModel model, int64_t *ctx, int64_t *vocab);
/* Activation checkpointing (-fsdp_activation_checkpointing): forward keeps
   only each transformer block's input, and backward runs the block's
   forward again, with the parameters backward gathers anyway, before its
   backward.  Bit-identical results; the saved state of one block instead of
   every block's, for one more forward pass of the blocks.  Other models (on
   the host): forward drops the outputs inside each block (a layer read only
   by the next one, of its block and unit), and backward runs them again. */
FSDP_EXTERN FSDPErrorCode FSDPModelSetActivationCheckpointing(FSDPModel model, bool on);
FSDP_EXTERN FSDPErrorCode FSDPModelGetActivationCheckpointing(FSDPModel model, bool *on);
/* Bytes of the model's activation, saved-state and scratch buffers for a
   batch of n rows, with or without activation checkpointing (which layers
   other than a GPT's are recomputed is known after FSDPModelSetUp). */
FSDP_EXTERN FSDPErrorCode FSDPModelGetActivationBytes(FSDPModel model, int64_t n, bool checkpointing, size_t *bytes);
/* The context the model's units belong to. */
FSDP_EXTERN FSDPErrorCode FSDPModelGetContext(FSDPModel model, FSDPContext *ctx);
/* On a CUDA context (-fsdp_device cuda), fp32 GEMMs may use TF32 tensor
   cores (default true; -fsdp_tf32 false: full fp32).  16-bit parameter views
   (mixed precision) always multiply in 16 bits with fp32 accumulation. */
FSDP_EXTERN FSDPErrorCode FSDPModelSetTF32(FSDPModel model, bool allow);
/* Collective: runs the model on x[n, in]; *y points to the model's output
   [n, out], valid until the next forward.  x must stay unchanged until
   FSDPModelBackward, which uses it.  On a CUDA context *y is device memory,
   and x may be host memory (copied to the GPU) or device memory. */
FSDP_EXTERN FSDPErrorCode FSDPModelForward(FSDPModel model, int64_t n, const float *x, float **y);

typedef enum { FSDP_LOSS_MSE = 0, FSDP_LOSS_CROSS_ENTROPY } FSDPLossType;
/* Not collective: the loss of the last forward's output on this rank's rows,
   as FSDPMSELoss (target: float [n, out]) or FSDPCrossEntropyLoss (target:
   int64_t labels [n] in [0, out)) compute it.  *dy points to the model's
   buffer [n, out] holding the loss's gradient times scale (1/K for K
   accumulated micro-batches, times a loss scale), for FSDPModelBackward;
   valid until the next forward.  On a CUDA context the loss is computed on
   the GPU, target may be in host or device memory, and *dy is device memory. */
FSDP_EXTERN FSDPErrorCode FSDPModelLoss(FSDPModel model, FSDPLossType type, const void *target, double scale,
                                        double *loss, float **dy);
/* Collective: backward of the last forward from dy[n, out], reducing each
   unit's gradient as soon as it is complete.  Frozen parameters get none.
   On a CUDA context dy may be in host or device memory. */
FSDP_EXTERN FSDPErrorCode FSDPModelBackward(FSDPModel model, const float *dy);
FSDP_EXTERN FSDPErrorCode FSDPModelView(FSDPModel model, FSDPViewer viewer);
FSDP_EXTERN FSDPErrorCode FSDPModelDestroy(FSDPModel *model);

#ifdef __cplusplus
}
#endif

#endif /* FSDP_NN_H */
