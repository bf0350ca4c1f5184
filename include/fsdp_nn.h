/** @file fsdp_nn.h
    libfsdp's layer library, for fsdp-train, the examples, and C or
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

/** Fills values with the elements [begin, end) of the random stream named `stream` under `seed`, uniform in
    [low, high).
    Counter-based: element i of `stream` under `seed` is a function of
    (seed, stream, i) alone, so any range can be generated on its own, on any
    rank, in any order.  values[i - begin] holds element i; a value that would
    round up to high is nudged below it.  doc/nn.md gives the generator.
    @collective Not collective: each rank may call it alone.
    @param[in] seed     the seed
    @param[in] stream   the stream's name (FSDPModel uses the parameter's name)
    @param[in] begin    the first element, >= 0
    @param[in] end      one past the last element, >= begin
    @param[in] low      the lower bound
    @param[in] high     the upper bound, >= low
    @param[out] values  end - begin floats; may be NULL when begin == end
    @retval FSDP_ERR_ARG  stream is NULL, begin < 0 or end < begin, values is NULL for a non-empty range,
                          or low > high
    @see FSDPModelSetSeed, FSDPModelSetUp */
FSDP_EXTERN FSDPErrorCode FSDPRandomUniform(uint64_t seed, const char *stream, int64_t begin, int64_t end, double low,
                                            double high, float *values);

/* ------------------------------------------------------------------ kernels */

/** An elementwise activation function, for FSDPActivationForward and FSDPActivationBackward.
    A model spec's act= takes relu, tanh or gelu.
    @see FSDPActivationName, FSDPActivationForward */
typedef enum {
  FSDP_ACT_RELU = 0, /**< max(x, 0); its gradient at 0 is 0, as in PyTorch */
  FSDP_ACT_TANH,     /**< tanh(x) */
  FSDP_ACT_GELU,     /**< x Phi(x): the exact, erf-based GELU (PyTorch's default) */
  FSDP_ACT_IDENTITY  /**< x itself */
} FSDPActivation;
/** The name of an activation: "relu", "tanh", "gelu" or "identity".
    The string is static: do not free it.
    @collective Not collective: each rank may call it alone.
    @param[in] act  the activation
    @errors None: returns "unknown activation" for a value out of range.
    @see FSDPActivation */
FSDP_EXTERN const char *FSDPActivationName(FSDPActivation act);

/** The linear layer's forward pass on the host: y[n, out] = x[n, in] weight[out, in]^T + bias[out] (bias may
    be NULL).
    PyTorch's nn.Linear, in float32, row-major; the GEMM is OpenBLAS's in builds with it.  n, in and out
    may be 0.
    @collective Not collective: each rank may call it alone.
    @param[in] n       rows (the batch), in [0, 2^31)
    @param[in] in      input features, in [0, 2^31)
    @param[in] out     output features, in [0, 2^31)
    @param[in] x       the input [n, in]
    @param[in] weight  the weight [out, in]
    @param[in] bias    the bias [out]; NULL: none
    @param[out] y      the output [n, out], overwritten
    @retval FSDP_ERR_ARG  n, in or out is not in [0, 2^31), or x or y is NULL with n > 0, or weight is NULL
                          with out > 0
    @see FSDPLinearBackward, FSDPActivationForward, FSDPModelForward */
FSDP_EXTERN FSDPErrorCode FSDPLinearForward(int64_t n, int64_t in, int64_t out, const float *x, const float *weight,
                                            const float *bias, float *y);
/** The linear layer's backward pass on the host: dweight += dy^T x, dbias += column sums of dy, dx = dy weight.
    Any of dx, dweight, dbias may be NULL (not wanted).  The bias gradient is summed in double.
    @collective Not collective: each rank may call it alone.
    @param[in] n         rows (the batch), in [0, 2^31)
    @param[in] in        input features, in [0, 2^31)
    @param[in] out       output features, in [0, 2^31)
    @param[in] x         the forward's input [n, in]; needed for dweight only
    @param[in] weight    the weight [out, in]; needed for dx only
    @param[in] dy        the output's gradient [n, out]
    @param[out] dx       the input's gradient [n, in], overwritten; NULL if not wanted
    @param[in,out] dweight  the weight's gradient [out, in], added into; NULL if not wanted
    @param[in,out] dbias    the bias's gradient [out], added into; NULL if not wanted
    @retval FSDP_ERR_ARG  n, in or out is not in [0, 2^31); dy is NULL with n > 0; x is NULL with dweight wanted
                          and n > 0; or weight is NULL with dx wanted and out > 0
    @see FSDPLinearForward, FSDPActivationBackward, FSDPModelBackward */
FSDP_EXTERN FSDPErrorCode FSDPLinearBackward(int64_t n, int64_t in, int64_t out, const float *x, const float *weight,
                                             const float *dy, float *dx, float *dweight, float *dbias);

/** y = act(x), elementwise over n values on the host.
    GELU is the exact, erf-based one.  y may be x (in place).
    @collective Not collective: each rank may call it alone.
    @param[in] act  the activation
    @param[in] n    the number of values, >= 0
    @param[in] x    the input [n]
    @param[out] y   the output [n]
    @retval FSDP_ERR_ARG  act is not an FSDPActivation, n < 0, or x or y is NULL with n > 0
    @see FSDPActivationBackward, FSDPActivation */
FSDP_EXTERN FSDPErrorCode FSDPActivationForward(FSDPActivation act, int64_t n, const float *x, float *y);
/** dx = dy act'(x), elementwise over n values on the host.
    GELU is the exact, erf-based one; ReLU's gradient at 0 is 0.  dx may alias dy (or x).
    @collective Not collective: each rank may call it alone.
    @param[in] act  the activation
    @param[in] n    the number of values, >= 0
    @param[in] x    the forward's input [n]
    @param[in] dy   the output's gradient [n]
    @param[out] dx  the input's gradient [n], overwritten
    @retval FSDP_ERR_ARG  act is not an FSDPActivation, n < 0, or x, dy or dx is NULL with n > 0
    @see FSDPActivationForward, FSDPActivation */
FSDP_EXTERN FSDPErrorCode FSDPActivationBackward(FSDPActivation act, int64_t n, const float *x, const float *dy,
                                                 float *dx);

/** LayerNorm on the host over the last dimension h of x[n, h], eps 1e-5, with affine weight and bias.
    PyTorch's nn.LayerNorm (biased variance; statistics in double).  weight and bias may each be NULL: ones,
    zeros.  mean[n] and rstd[n] (1/std) are saved for backward.  y may be x.
    @collective Not collective: each rank may call it alone.
    @param[in] n       rows, >= 0
    @param[in] h       features per row, > 0
    @param[in] x       the input [n, h]
    @param[in] weight  the scale [h]; NULL: ones
    @param[in] bias    the shift [h]; NULL: zeros
    @param[out] y      the output [n, h]
    @param[out] mean   each row's mean [n], for FSDPLayerNormBackward
    @param[out] rstd   each row's 1/std [n], for FSDPLayerNormBackward
    @retval FSDP_ERR_ARG  n < 0 or h <= 0, or x, y, mean or rstd is NULL with n > 0
    @see FSDPLayerNormBackward */
FSDP_EXTERN FSDPErrorCode FSDPLayerNormForward(int64_t n, int64_t h, const float *x, const float *weight,
                                               const float *bias, float *y, float *mean, float *rstd);
/** The backward of FSDPLayerNormForward on the host, from its saved mean and rstd: dx is overwritten, and
    dweight and dbias are added into.
    dx, dweight and dbias may each be NULL (not wanted); dx must not be x or dy.  The parameter gradients are
    summed in double.
    @collective Not collective: each rank may call it alone.
    @param[in] n         rows, >= 0
    @param[in] h         features per row, > 0
    @param[in] x         the forward's input [n, h]
    @param[in] weight    the forward's scale [h]; NULL: ones
    @param[in] mean      the forward's row means [n]
    @param[in] rstd      the forward's row 1/std [n]
    @param[in] dy        the output's gradient [n, h]
    @param[out] dx       the input's gradient [n, h], overwritten; NULL if not wanted
    @param[in,out] dweight  the scale's gradient [h], added into; NULL if not wanted
    @param[in,out] dbias    the shift's gradient [h], added into; NULL if not wanted
    @retval FSDP_ERR_ARG  n < 0 or h <= 0; x, mean, rstd or dy is NULL with n > 0; or dx is x or dy
    @see FSDPLayerNormForward */
FSDP_EXTERN FSDPErrorCode FSDPLayerNormBackward(int64_t n, int64_t h, const float *x, const float *weight,
                                                const float *mean, const float *rstd, const float *dy, float *dx,
                                                float *dweight, float *dbias);

/** The mean squared error of y against target, averaged over all n * m elements, and (dy not NULL) its gradient
    with respect to y.
    Summed in double; dy = 2 (y - target) / (n m).
    @collective Not collective: each rank may call it alone.
    @param[in] n       rows, > 0
    @param[in] m       values per row, > 0
    @param[in] y       the predictions [n, m]
    @param[in] target  the targets [n, m]
    @param[out] loss   the mean
    @param[out] dy     the mean's gradient [n, m]; NULL if not wanted
    @retval FSDP_ERR_ARG  n or m is not positive, or y, target or loss is NULL
    @see FSDPCrossEntropyLoss, FSDPModelLoss */
FSDP_EXTERN FSDPErrorCode FSDPMSELoss(int64_t n, int64_t m, const float *y, const float *target, double *loss,
                                      float *dy);
/** The softmax cross-entropy of logits against labels, averaged over the n rows, and (dlogits not NULL) its
    gradient with respect to the logits.
    Labels are in [0, classes); a stable log-sum-exp, summed in double.
    @collective Not collective: each rank may call it alone.
    @param[in] n         rows, > 0
    @param[in] classes   classes per row, > 0
    @param[in] logits    the logits [n, classes]
    @param[in] labels    each row's class [n], in [0, classes)
    @param[out] loss     the mean
    @param[out] dlogits  the mean's gradient [n, classes]; NULL if not wanted
    @retval FSDP_ERR_ARG  n or classes is not positive, logits, labels or loss is NULL, or a label is not in
                          [0, classes)
    @see FSDPMSELoss, FSDPModelLoss */
FSDP_EXTERN FSDPErrorCode FSDPCrossEntropyLoss(int64_t n, int64_t classes, const float *logits, const int64_t *labels,
                                               double *loss, float *dlogits);

/* ------------------------------------------------------------------ models */

/** A model built from a spec string: its layers, its parameters in an FSDPContext's units, and the buffers of
    its forward and backward passes.
    FSDPModelCreate makes it (not collective); FSDPModelSetUp adds its units to the context and sets the
    context up (collective on the context's communicator); FSDPModelDestroy frees it (not collective), before
    the context is destroyed.
    @see FSDPModelCreate, FSDPModelSetUp, FSDPModelForward, FSDPModelDestroy */
typedef struct FSDPModel_s *FSDPModel;

/** Which parameters form one FlatParam: one unit per block with the head in
    the root unit (the default), one unit for everything, or greedy units of
    at least min_numel elements in model order, the rest in the root unit.
    @see FSDPModelSetWrapPolicy, FSDPModelSetFromOptions */
typedef enum {
  FSDP_WRAP_BLOCK = 0, /**< one unit per block, the head in the root unit (the default; -fsdp_wrap block) */
  FSDP_WRAP_MODEL,     /**< one unit, root, for everything (-fsdp_wrap model) */
  FSDP_WRAP_SIZE       /**< greedy units of at least min_numel elements in model order, the rest in the root
                            unit (-fsdp_wrap size:N) */
} FSDPWrapPolicy;

/** Creates a model from a spec string, for the context ctx.
    spec: "mlp:in=I,hidden=H,depth=D,out=O[,act=relu|tanh|gelu][,norm=none|layernorm]",
    "cnn:grid=N[xM[xK]],in=C,out=O[,depth=D,channels=K,kernel=3,stride=1,dilation=1,
    groups=1,pad=P,padding=zeros|circular|reflect,norm=none|groupnorm:G,act=relu|tanh|gelu,residual=0|1]": D
    convolutions of K channels with an activation each, then one to O
    channels, channels-first rows (PyTorch's Conv1d/2d/3d; doc/nn.md),
    or "gpt:vocab=V,ctx=T,dim=C,heads=H,layers=L[,tied=0|1]": a GPT-style
    decoder (token and position embeddings, L pre-LayerNorm transformer blocks
    with causal self-attention and a GELU MLP, a final LayerNorm, a head, its
    weight optionally the token embedding's).  A GPT's
    row is a sequence: x[n, T] holds token ids (as floats), its output is
    logits [n, T, V], and its cross-entropy labels are int64 [n, T].
    doc/nn.md also describes "unet:..." (a U-Net), "fno:..." (a Fourier neural operator) and "file:NAME" (a
    model file).  The grid models (cnn, unet, fno) and model files run on the host only; a GPT on a CUDA
    context takes fp32 parameters only (FSDPModelSetUp refuses the rest).
    Parsed now; an unknown key or a bad value is FSDP_ERR_ARG.  The model adds
    its units to ctx at FSDPModelSetUp; destroy it before the context.
    @collective Not collective: each rank parses spec on its own (a file: spec reads the file on every rank);
    every rank of ctx must give the same spec (FSDPModelSetUp compares the units and parameters it makes).
    @param[in] ctx     the context the model's units will join, not set up (FSDPModelSetUp sets it up)
    @param[in] spec    the model, as above
    @param[out] model  the new model; NULL on error
    @retval FSDP_ERR_ARG          model, ctx or spec is NULL, or spec is malformed: an unknown model type or key,
                                  a key given twice, an empty item, a missing, bad or inconsistent value
    @retval FSDP_ERR_IO           a file: spec's model file cannot be opened or read
    @retval FSDP_ERR_UNSUPPORTED  an fno: spec in a libfsdp built without FFTW
    @retval FSDP_ERR_MEM          out of memory
    @see FSDPModelSetUp, FSDPModelSetFromOptions, FSDPModelDestroy, FSDPContextCreate */
FSDP_EXTERN FSDPErrorCode FSDPModelCreate(FSDPContext ctx, const char *spec, FSDPModel *model);
/** Sets which parameters form one unit, before FSDPModelSetUp.
    The default is FSDP_WRAP_BLOCK.  Every rank must choose the same policy: FSDPModelSetUp checks that all
    ranks registered the same units.
    @collective Not collective: each rank may call it alone.
    @param[in,out] model  the model, not set up
    @param[in] policy     the wrap policy
    @param[in] min_numel  FSDP_WRAP_SIZE: the least elements per unit, > 0; the other policies ignore it
    @retval FSDP_ERR_ARG    model is NULL, policy is not an FSDPWrapPolicy, or policy is FSDP_WRAP_SIZE and
                            min_numel <= 0
    @retval FSDP_ERR_STATE  the model is set up
    @see FSDPWrapPolicy, FSDPModelSetFromOptions, FSDPModelSetUp */
FSDP_EXTERN FSDPErrorCode FSDPModelSetWrapPolicy(FSDPModel model, FSDPWrapPolicy policy, int64_t min_numel);
/** Sets the seed of the default initialization (default 0), before FSDPModelSetUp.
    Every rank must use the same seed: FSDPModelSetUp compares them.
    @collective Not collective: each rank may call it alone.
    @param[in,out] model  the model, not set up
    @param[in] seed       the seed
    @retval FSDP_ERR_ARG    model is NULL
    @retval FSDP_ERR_STATE  the model is set up (its parameters are initialized)
    @see FSDPRandomUniform, FSDPModelSetFromOptions, FSDPModelSetUp */
FSDP_EXTERN FSDPErrorCode FSDPModelSetSeed(FSDPModel model, uint64_t seed);
/** Sets the model's settings from the runtime options.
    -fsdp_wrap block|model|size:N, -fsdp_seed S, -fsdp_tf32, -fsdp_activation_checkpointing,
    -fsdp_conv_winograd (3 x 3 convolutions may use Winograd's tiles), -fsdp_attention auto|blocked|full (a
    GPT's attention on the host, decided at FSDPModelSetUp) and -fsdp_blas_threads (OpenBLAS threads per rank, applied
    at FSDPModelSetUp).  Call it before FSDPModelSetUp: -fsdp_wrap and -fsdp_seed, when given, are refused
    after it.
    @collective Not collective: each rank reads its own options.
    @param[in,out] model  the model
    @retval FSDP_ERR_ARG     model is NULL
    @retval FSDP_ERR_OPTION  an option's value is malformed or out of range (-fsdp_wrap not block, model or
                             size:N with N > 0; a negative -fsdp_seed; -fsdp_blas_threads not in [0, 1024];
                             -fsdp_attention not auto, blocked or full)
    @retval FSDP_ERR_STATE   -fsdp_wrap or -fsdp_seed is given and the model is set up
    @options -fsdp_wrap, -fsdp_seed, -fsdp_tf32, -fsdp_conv_winograd, -fsdp_attention, -fsdp_blas_threads,
    -fsdp_activation_checkpointing (doc/options.md).
    @see FSDPModelSetWrapPolicy, FSDPModelSetSeed, FSDPModelSetTF32, FSDPModelSetActivationCheckpointing */
FSDP_EXTERN FSDPErrorCode FSDPModelSetFromOptions(FSDPModel model);
/** Adds the units and parameters to the context, installs the
    default initialization and sets the context up.
    The default initialization is PyTorch's, from FSDPRandomUniform: a parameter's
    values depend on the seed and its name only, not on W, F or the wrapping.  Configure the context and the
    model first; the context must not be set up.  Every rank must have the same spec, wrap policy and seed
    (the seed, units and parameters are compared here).  With -fsdp_view the model is printed after its context.
    @collective Collective on the context's communicator: every rank of the model's context calls it.
    @param[in,out] model  the model, created and not set up
    @retval FSDP_ERR_ARG          model is NULL; the seed, or the units and parameters (spec, wrap policy),
                                  differ across ranks; or the context already holds a unit of the same name
    @retval FSDP_ERR_STATE        the model is set up already, or its context is set up or failed FSDPContextSetUp
    @retval FSDP_ERR_UNSUPPORTED  on a CUDA context, a grid model or a model file (host only), or a GPT under a
                                  16-bit mixed-precision policy; or a configuration FSDPContextSetUp refuses
    @retval FSDP_ERR_MEM          an allocation failed, or the memory plan exceeds the memory limit
    @retval FSDP_ERR_MPI          an MPI call failed
    @retval FSDP_ERR_HWLOC        topology discovery failed
    @retval FSDP_ERR_CUDA         on a CUDA context: no usable GPU, or a CUDA call failed
    @retval FSDP_ERR_NCCL         on a CUDA context: setting NCCL up failed
    @see FSDPModelCreate, FSDPContextSetUp, FSDPModelSetSeed, FSDPModelSetWrapPolicy */
FSDP_EXTERN FSDPErrorCode FSDPModelSetUp(FSDPModel model);
/** Gets the widths of the model's input and output rows and its number of parameters.
    in and out are the features per sample (a GPT's: T and T * V; a grid model's: channels times grid
    points); numel counts every parameter element once (a tied head's weight is the embedding's).
    Valid from FSDPModelCreate on.
    @collective Not collective: each rank may call it alone.
    @param[in] model   the model
    @param[out] in     the input's features per sample; NULL if not wanted
    @param[out] out    the output's features per sample; NULL if not wanted
    @param[out] numel  the parameter elements; NULL if not wanted
    @retval FSDP_ERR_ARG  model is NULL
    @see FSDPModelGetSampleShape, FSDPModelGetTokens */
FSDP_EXTERN FSDPErrorCode FSDPModelGetSizes(FSDPModel model, int64_t *in, int64_t *out, int64_t *numel);
/** Gets the shape of one sample's input (output false) or output (true), in C
    order, at most 4 dimensions.
    An MLP's (and a model file's) [in] and [out]; a GPT's [T] and
    [T, V]; a CNN's [channels, grid...] (a field of 2 channels on a 32x32
    grid is [2, 32, 32], x[n][2][32][32] in C, x(32, 32, 2, n) in Fortran).
    @collective Not collective: each rank may call it alone.
    @param[in] model   the model
    @param[in] output  false: the input's shape; true: the output's
    @param[out] ndim   the number of dimensions, 1 to 4
    @param[out] shape  the sizes, ndim of the 4
    @retval FSDP_ERR_ARG  model, ndim or shape is NULL
    @see FSDPModelGetSizes, FSDPModelGetTokens */
FSDP_EXTERN FSDPErrorCode FSDPModelGetSampleShape(FSDPModel model, bool output, int *ndim, int64_t shape[4]);
/** Gets a GPT's context length T and vocabulary V (x is [n, T] token ids, the
    output [n, T * V]); 0 and 0 for the other models.
    @collective Not collective: each rank may call it alone.
    @param[in] model   the model
    @param[out] ctx    the context length T; NULL if not wanted
    @param[out] vocab  the vocabulary V; NULL if not wanted
    @retval FSDP_ERR_ARG  model is NULL
    @see FSDPModelGetSizes, FSDPModelGetSampleShape */
FSDP_EXTERN FSDPErrorCode FSDPModelGetTokens(FSDPModel model, int64_t *ctx, int64_t *vocab);
/** Turns activation checkpointing (-fsdp_activation_checkpointing) on or off.
    Forward keeps
    only each transformer block's input, and backward runs the block's
    forward again, with the parameters backward gathers anyway, before its
    backward.  Bit-identical results; the saved state of one block instead of
    every block's, for one more forward pass of the blocks.  Other models (on
    the host): forward drops the outputs inside each block (a layer read only
    by the next one, of its block and unit), and backward runs them again.
    A change frees the model's buffers and drops the last forward: run FSDPModelForward again before
    FSDPModelLoss or FSDPModelBackward.  Ranks may differ: it changes no collective.
    @collective Not collective: each rank may call it alone.
    @param[in,out] model  the model
    @param[in] on         true: on; false: off (the default)
    @retval FSDP_ERR_ARG  model is NULL
    @see FSDPModelGetActivationCheckpointing, FSDPModelGetActivationBytes, FSDPModelSetFromOptions */
FSDP_EXTERN FSDPErrorCode FSDPModelSetActivationCheckpointing(FSDPModel model, bool on);
/** Gets whether activation checkpointing is on.
    @collective Not collective: each rank may call it alone.
    @param[in] model  the model
    @param[out] on    whether it is on
    @retval FSDP_ERR_ARG  model or on is NULL
    @see FSDPModelSetActivationCheckpointing */
FSDP_EXTERN FSDPErrorCode FSDPModelGetActivationCheckpointing(FSDPModel model, bool *on);
/** Gets the bytes of the model's activation, saved-state and scratch buffers for a
    batch of n rows, with or without activation checkpointing.
    Which layers other than a GPT's are recomputed, and on a CUDA context the GPU's own buffers, are known
    after FSDPModelSetUp.  Nothing is allocated.
    @collective Not collective: each rank may call it alone.
    @param[in] model          the model
    @param[in] n              rows, >= 0
    @param[in] checkpointing  with (true) or without (false) activation checkpointing
    @param[out] bytes         the bytes
    @retval FSDP_ERR_ARG  model or bytes is NULL, or n < 0
    @see FSDPModelSetActivationCheckpointing, FSDPModelView */
FSDP_EXTERN FSDPErrorCode FSDPModelGetActivationBytes(FSDPModel model, int64_t n, bool checkpointing, size_t *bytes);
/** Gets the context the model's units belong to.
    @collective Not collective: each rank may call it alone.
    @param[in] model  the model
    @param[out] ctx   the context given to FSDPModelCreate; the model does not own it
    @retval FSDP_ERR_ARG  model or ctx is NULL
    @see FSDPModelCreate */
FSDP_EXTERN FSDPErrorCode FSDPModelGetContext(FSDPModel model, FSDPContext *ctx);
/** Sets whether, on a CUDA context (-fsdp_device cuda), fp32 GEMMs may use TF32 tensor
    cores (default true; -fsdp_tf32 false: full fp32).
    16-bit parameter views (mixed precision) always multiply in 16 bits with fp32 accumulation.  It may be
    changed at any time; on the host it changes nothing.
    @collective Not collective: each rank may call it alone.
    @param[in,out] model  the model
    @param[in] allow      whether TF32 is allowed
    @retval FSDP_ERR_ARG  model is NULL
    @see FSDPModelSetFromOptions, FSDPContextSetDevice */
FSDP_EXTERN FSDPErrorCode FSDPModelSetTF32(FSDPModel model, bool allow);
/** Runs the model forward on this rank's rows x[n, in] and points y at the model's output [n, out].
    The output is valid until the next forward.  x must stay unchanged until
    FSDPModelBackward, which uses it.  On a CUDA context the output is device memory,
    and x may be host memory (copied to the GPU) or device memory.  Each unit is unsharded just before its
    first layer and resharded after its last.  A GPT's token ids are checked first (in host memory), agreed
    across ranks: a bad id on one rank is an error on all.  A collective that has not completed after
    -fsdp_collective_timeout seconds aborts the job with FSDP_ERR_TIMEOUT.
    @collective Collective on the context's communicator: every rank calls it, with its own rows (n may
    differ); each unit's parameters are all-gathered in its shard group (with a sharding factor of 1 there is
    no all-gather, and only a GPT's input check synchronizes the ranks).
    @param[in,out] model  the model, set up
    @param[in] n          this rank's rows, in [1, 2^31)
    @param[in] x          the input [n, in] (a GPT's: token ids as floats)
    @param[out] y         set to the model's output buffer [n, out]
    @retval FSDP_ERR_ARG    model, x or y is NULL, n is not in [1, 2^31), or a GPT's token id is not an
                            integer in [0, V) (on any rank)
    @retval FSDP_ERR_STATE  the model is not set up, or a unit is not sharded (unsharded or reducing)
    @retval FSDP_ERR_MEM    the buffers for n rows cannot be allocated (the model stays usable)
    @retval FSDP_ERR_MPI    an MPI call failed
    @retval FSDP_ERR_CUDA   on a CUDA context: a CUDA or cuBLAS call failed, or the GPU holds an earlier error
    @retval FSDP_ERR_NCCL   on a CUDA context: an NCCL collective failed
    @see FSDPModelLoss, FSDPModelBackward, FSDPContextFinishBackward */
FSDP_EXTERN FSDPErrorCode FSDPModelForward(FSDPModel model, int64_t n, const float *x, float **y);

/** The loss FSDPModelLoss computes.
    @see FSDPModelLoss, FSDPMSELoss, FSDPCrossEntropyLoss */
typedef enum {
  FSDP_LOSS_MSE = 0,      /**< mean squared error against float targets [n, out] (FSDPMSELoss) */
  FSDP_LOSS_CROSS_ENTROPY /**< softmax cross-entropy against int64_t labels in [0, out)
                               (FSDPCrossEntropyLoss) */
} FSDPLossType;
/** Computes the loss of the last forward's output on this rank's rows, and its gradient for FSDPModelBackward.
    As FSDPMSELoss (target: float [n, out]) or FSDPCrossEntropyLoss (target:
    int64_t labels [n] in [0, out); a GPT's: [n, T] in [0, V)) compute it.  dy is set to the model's
    buffer [n, out] holding the loss's gradient times scale (1/K for K
    accumulated micro-batches, times a loss scale), for FSDPModelBackward;
    valid until the next forward.  On a CUDA context the loss is computed on
    the GPU, target may be in host or device memory, and the gradient is device memory.
    @collective Not collective: each rank computes the loss of its own rows.
    @param[in,out] model  the model, after FSDPModelForward
    @param[in] type       FSDP_LOSS_MSE or FSDP_LOSS_CROSS_ENTROPY
    @param[in] target     the targets or labels, as above
    @param[in] scale      the factor on the gradient, finite
    @param[out] loss      the mean loss of this rank's rows (not scaled)
    @param[out] dy        set to the model's gradient buffer [n, out]
    @retval FSDP_ERR_ARG    model, target, loss or dy is NULL, type is not an FSDPLossType, scale is not
                            finite, or a label is not in [0, out)
    @retval FSDP_ERR_STATE  the model is not set up, or has no forward since its last backward
    @retval FSDP_ERR_CUDA   on a CUDA context: a CUDA call failed
    @see FSDPModelForward, FSDPModelBackward, FSDPLossType */
FSDP_EXTERN FSDPErrorCode FSDPModelLoss(FSDPModel model, FSDPLossType type, const void *target, double scale,
                                        double *loss, float **dy);
/** Runs backward of the last forward from dy[n, out], reducing each
    unit's gradient as soon as it is complete.
    Gradients are added into the units' gradients; frozen parameters get none.  The last reduction stays in
    flight until FSDPContextFinishBackward.  The forward's activations are consumed: each forward allows one
    backward.  On a CUDA context dy may be in host or device memory.  A collective that has not completed
    after -fsdp_collective_timeout seconds aborts the job with FSDP_ERR_TIMEOUT.
    @collective Collective on the context's communicator: each unit's gradient is reduce-scattered in its
    shard group and all-reduced across the replicas, and units not kept since forward are all-gathered again;
    with gradient sync off (FSDPContextSetGradSync) only those all-gathers remain.
    @param[in,out] model  the model, after FSDPModelForward
    @param[in] dy         the gradient of the loss with respect to the output [n, out] (FSDPModelLoss's)
    @retval FSDP_ERR_ARG    model or dy is NULL
    @retval FSDP_ERR_STATE  the model is not set up or has no forward to differentiate, or a unit is not in a
                            state backward can use (e.g. gradients averaged across replicas accumulated on with
                            replicate gradient sync off: FSDPContextZeroGrad first)
    @retval FSDP_ERR_MEM    a buffer cannot be allocated
    @retval FSDP_ERR_MPI    an MPI call failed
    @retval FSDP_ERR_CUDA   on a CUDA context: a CUDA or cuBLAS call failed, or the GPU holds an earlier error
    @retval FSDP_ERR_NCCL   on a CUDA context: an NCCL collective failed
    @see FSDPModelForward, FSDPModelLoss, FSDPContextFinishBackward, FSDPContextSetGradSync */
FSDP_EXTERN FSDPErrorCode FSDPModelBackward(FSDPModel model, const float *dy);
/** Prints the model: its spec, sizes, activation memory, where its layers run, its wrapping and its units.
    @collective Collective on the context's communicator: every rank of the model's context calls it; rank 0 of the
    viewer's communicator writes.
    @param[in] model   the model
    @param[in] viewer  an ASCII viewer, or NULL: stdout on the context's communicator
    @retval FSDP_ERR_ARG  model is NULL
    @retval FSDP_ERR_MPI  an MPI call failed (a NULL viewer)
    @retval FSDP_ERR_IO   writing failed
    @see FSDPViewerASCIIOpen, FSDPContextView, FSDPModelGetActivationBytes */
FSDP_EXTERN FSDPErrorCode FSDPModelView(FSDPModel model, FSDPViewer viewer);
/** Destroys the model and sets *model to NULL.
    Destroy it before its context; its units stay in the context.
    @collective Not collective: each rank may call it alone.
    @param[in,out] model  the model; *model may be NULL (nothing to do)
    @retval FSDP_ERR_ARG  model is NULL
    @see FSDPModelCreate, FSDPContextDestroy */
FSDP_EXTERN FSDPErrorCode FSDPModelDestroy(FSDPModel *model);

/* ------------------------------------------------------------------ FSDPPlan: the layout chosen before the job */

/** A planner: for a model, a job's shape (nodes, ranks per node), a global batch and a memory budget per rank, it
    predicts each candidate layout's memory per rank by category (with the code that builds the memory plan), the
    bytes its collectives move per step, and its step time from the machine's rates (given, or measured by
    FSDPPlanProbe); then it chooses the fastest layout that fits (doc/fsdp-plan.md).  Create it with
    FSDPPlanCreate, set it, FSDPPlanSetUp, read the candidates and the choice, FSDPPlanDestroy.
    @see FSDPPlanCreate, FSDPPlanSetUp, FSDPPlanGetChoice */
typedef struct FSDPPlan_s *FSDPPlan;

/** One layout FSDPPlan considered, and what it predicts for each rank.
    Memory is per rank and at its peak (rank 0, whose shards hold no padding): FSDP_MEM_PARAMS, FSDP_MEM_GRADS,
    FSDP_MEM_UNSHARDED and FSDP_MEM_COMM_STAGING are the memory plan's (what FSDPContextGetMemoryPlan and
    -fsdp_view report for these settings), FSDP_MEM_OPTIM_STATE the optimizer's state, and FSDP_MEM_OTHER the
    model's activations for one micro-batch (FSDPModelGetActivationBytes) and what FSDPModelSetUp allocates for the
    model itself (a tied GPT's embedding gradient; under 16-bit parameters, the host's widening scratch).
    @see FSDPPlanGetCandidate */
typedef struct {
  FSDPShardingStrategy strategy;         /**< the sharding strategy */
  int factor;                            /**< F: the ranks each unit is sharded over */
  int replicas;                          /**< W / F */
  FSDPWrapPolicy wrap;                   /**< FSDP_WRAP_BLOCK or FSDP_WRAP_MODEL */
  int nunits;                            /**< units under that wrapping */
  int64_t batch;                         /**< rows of one micro-batch, all ranks together (fsdp-train's -batch) */
  int grad_accum;                        /**< micro-batches per step */
  bool activation_checkpointing;         /**< activations recomputed in backward */
  size_t bytes[FSDP_MEM_NUM_CATEGORIES]; /**< per rank, by category (above) */
  size_t total;                          /**< the sum of bytes[] */
  double shard_bytes;                    /**< bytes a rank sends per step in its shard group (all-gathers,
                                               reduce-scatters) */
  double replicate_bytes;                /**< bytes a rank sends per step to its replicas (all-reduce) */
  double inter_node_bytes;               /**< of those, the bytes that cross between nodes, on average over a
                                              node's ranks, as the collectives' algorithms send them (MPICH's
                                              defaults under MPICH on the host, else rings; doc/fsdp-plan.md) */
  double compute_seconds;                /**< predicted compute of a step; < 0 when no rates are known */
  double comm_seconds;                   /**< predicted communication of a step; < 0 when no rates are known */
  double seconds;                        /**< predicted step time: their sum; < 0 when no rates are known */
  bool fits;                             /**< total is within the memory budget */
} FSDPPlanCandidate;

/** Creates a planner for jobs like the one on comm.
    Its defaults: the job's shape is comm's (its nodes, and its ranks on the busiest node) or, where the
    environment has them, the Slurm allocation's (SLURM_JOB_NUM_NODES, SLURM_NTASKS_PER_NODE); the memory budget
    per rank is this node's physical memory shared by the ranks per node (on GPUs, -fsdp_device, a GPU's memory
    where a topology gives it, else none: FSDPPlanSetTopology); the optimizer is AdamW; no model, no batch and no
    rates (set them, or FSDPPlanProbe).
    @collective Collective on comm: its ranks find their nodes (MPI_Comm_split_type).
    @param[in] comm   the communicator FSDPPlanProbe measures and FSDPPlanView prints on; it is not duplicated
                      (the probe works on a duplicate of its own), so it must outlive the planner
    @param[out] plan  the new planner; NULL on error
    @retval FSDP_ERR_ARG  plan is NULL or comm is MPI_COMM_NULL
    @retval FSDP_ERR_MEM  out of memory
    @retval FSDP_ERR_MPI  an MPI call failed
    @see FSDPPlanSetModel, FSDPPlanSetUp, FSDPPlanDestroy */
FSDP_EXTERN FSDPErrorCode FSDPPlanCreate(MPI_Comm comm, FSDPPlan *plan);
/** Sets the model to plan for: a spec as FSDPModelCreate takes.
    The -fsdp_* options that change the memory plan (-fsdp_param_dtype, -fsdp_reduce_dtype,
    -fsdp_limit_all_gathers, -fsdp_shm_reduce, -fsdp_shm_views, -fsdp_attention) are read at FSDPPlanSetUp, as a
    job would read them.
    @collective Not collective: each rank may call it alone.
    @param[in,out] plan  the planner
    @param[in] spec      the model (FSDPModelCreate); it is parsed here
    @retval FSDP_ERR_ARG          plan or spec is NULL, or spec is malformed
    @retval FSDP_ERR_IO           a file: spec's model file cannot be read
    @retval FSDP_ERR_UNSUPPORTED  an fno: spec in a libfsdp built without FFTW
    @retval FSDP_ERR_MEM          out of memory
    @see FSDPModelCreate, FSDPPlanSetUp */
FSDP_EXTERN FSDPErrorCode FSDPPlanSetModel(FSDPPlan plan, const char *spec);
/** Sets the job's shape: nodes and ranks per node (W = nodes x ranks_per_node).
    After FSDPPlanSetTopology, ranks_per_node as many as the planner has now keeps the topology's (a rank per
    core, or per GPU on GPUs, as FSDPPlanSetUp decides), so that only the node count changes; any other number is
    the job's own.
    @collective Not collective: each rank may call it alone.
    @param[in,out] plan        the planner
    @param[in] nodes           nodes, > 0
    @param[in] ranks_per_node  ranks on each node, > 0
    @retval FSDP_ERR_ARG  plan is NULL, or nodes or ranks_per_node is not positive
    @see FSDPPlanCreate */
FSDP_EXTERN FSDPErrorCode FSDPPlanSetJob(FSDPPlan plan, int nodes, int ranks_per_node);
/** Plans for nodes described by an hwloc topology (lstopo's XML of a compute node, written on it with
    `lstopo node.xml`, or a synthetic description): a rank per core, and, while the memory budget is the default
    (auto), the topology's memory shared by those ranks.  The node count stays as it was (FSDPPlanSetJob sets it;
    with other ranks per node too, the topology's memory still sets the budget).  Planning for GPUs
    (-fsdp_device cuda, read by FSDPPlanSetUp): a rank per GPU of the topology, and a GPU's memory as the auto
    budget (shared by the ranks on it where a node has more ranks than GPUs), where the topology gives it: an
    XML file that lstopo wrote where hwloc has its CUDA backend (CUDAGlobalMemorySize); else no auto budget.
    @collective Not collective: each rank may call it alone.
    @param[in,out] plan  the planner
    @param[in] source    an hwloc XML file, or a synthetic description like "pack:2 numa:2(memory=64GB) core:16 pu:2"
    @retval FSDP_ERR_ARG          plan or source is NULL or empty, source is neither a regular file nor a synthetic
                                  description, or the topology has no cores
    @retval FSDP_ERR_IO           the file cannot be read
    @retval FSDP_ERR_HWLOC        hwloc cannot read the file as an XML topology
    @retval FSDP_ERR_UNSUPPORTED  a libfsdp built without hwloc
    @see FSDPPlanSetJob, FSDPPlanSetMemoryBudget, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode FSDPPlanSetTopology(FSDPPlan plan, const char *source);
/** Sets the global batch of one optimizer step: rows of all ranks and micro-batches together.
    Candidates split it into grad_accum micro-batches (1, 2, 4 and 8, where they divide it evenly over W ranks).
    @collective Not collective: each rank may call it alone.
    @param[in,out] plan  the planner
    @param[in] batch     rows per step, > 0
    @retval FSDP_ERR_ARG  plan is NULL or batch is not positive
    @see FSDPPlanSetUp */
FSDP_EXTERN FSDPErrorCode FSDPPlanSetBatch(FSDPPlan plan, int64_t batch);
/** Sets the memory budget of each rank; 0: none.
    @collective Not collective: each rank may call it alone.
    @param[in,out] plan  the planner
    @param[in] bytes     the most a rank may hold
    @retval FSDP_ERR_ARG  plan is NULL
    @see FSDPPlanCreate, FSDPContextSetMemoryLimit */
FSDP_EXTERN FSDPErrorCode FSDPPlanSetMemoryBudget(FSDPPlan plan, size_t bytes);
/** Sets the optimizer whose state the ranks keep (default AdamW: two moments per parameter).
    @collective Not collective: each rank may call it alone.
    @param[in,out] plan  the planner
    @param[in] type      the optimizer
    @param[in] momentum  SGD's momentum (0: no state)
    @retval FSDP_ERR_ARG  plan is NULL, type is not an FSDPOptimizerType, or momentum is negative
    @see FSDPOptimizerCreate */
FSDP_EXTERN FSDPErrorCode FSDPPlanSetOptimizer(FSDPPlan plan, FSDPOptimizerType type, double momentum);
/** Sets the machine's rates; 0 leaves a rate as it was.  Where FSDPPlanProbe timed the collectives on a job of
    the planned shape, those times set the candidates' communication, not intra, inter and latency.
    @collective Not collective: each rank may call it alone.
    @param[in,out] plan   the planner
    @param[in] flops      floating-point operations per second of one rank (fp32 GEMMs)
    @param[in] intra      bytes per second a rank sends to another of its node
    @param[in] inter      bytes per second a rank sends to another node
    @param[in] latency    seconds of one small message
    @retval FSDP_ERR_ARG  plan is NULL, or a rate is negative or not finite
    @see FSDPPlanProbe, FSDPPlanGetRates */
FSDP_EXTERN FSDPErrorCode FSDPPlanSetRates(FSDPPlan plan, double flops, double intra, double inter, double latency);
/** Gets the machine's rates (0: unknown).
    @collective Not collective: each rank may call it alone.
    @param[in] plan      the planner
    @param[out] flops    floating-point operations per second of one rank; may be NULL
    @param[out] intra    bytes per second within a node; may be NULL
    @param[out] inter    bytes per second between nodes; may be NULL
    @param[out] latency  seconds of one small message; may be NULL
    @retval FSDP_ERR_ARG  plan is NULL
    @see FSDPPlanSetRates, FSDPPlanProbe */
FSDP_EXTERN FSDPErrorCode FSDPPlanGetRates(FSDPPlan plan, double *flops, double *intra, double *inter, double *latency);
/** Sets the planner from the runtime options: -fsdp_plan_model SPEC, -fsdp_plan_topology XML (first),
    -fsdp_plan_nodes N, -fsdp_plan_ranks_per_node R, -fsdp_plan_batch B, -fsdp_plan_memory auto|none|bytes (12G),
    -fsdp_plan_optimizer adamw|sgd, -fsdp_plan_momentum X, and the rates -fsdp_plan_flops, -fsdp_plan_intra_bw,
    -fsdp_plan_inter_bw (bytes per second) and -fsdp_plan_latency (seconds).  fsdp-plan's -model, -nodes, ...
    are these.  -fsdp_plan_ranks_per_node given is the job's own, even as many as the topology's cores.
    @collective Not collective: each rank reads its own options.
    @param[in,out] plan  the planner
    @retval FSDP_ERR_ARG     plan is NULL, or -fsdp_plan_model is malformed
    @retval FSDP_ERR_OPTION  an option's value is malformed or out of range
    @retval FSDP_ERR_IO      -fsdp_plan_model's model file or -fsdp_plan_topology's file cannot be read
    @retval FSDP_ERR_HWLOC   hwloc cannot read -fsdp_plan_topology's file
    @retval FSDP_ERR_UNSUPPORTED  -fsdp_plan_topology in a libfsdp built without hwloc
    @options -fsdp_plan_model, -fsdp_plan_topology, -fsdp_plan_nodes, -fsdp_plan_ranks_per_node, -fsdp_plan_batch,
    -fsdp_plan_memory,
    -fsdp_plan_optimizer, -fsdp_plan_momentum, -fsdp_plan_flops, -fsdp_plan_intra_bw, -fsdp_plan_inter_bw,
    -fsdp_plan_latency (doc/fsdp-plan.md).
    @see FSDPPlanSetModel, FSDPPlanSetJob, FSDPPlanSetRates */
FSDP_EXTERN FSDPErrorCode FSDPPlanSetFromOptions(FSDPPlan plan);
/** Measures the machine's rates on the planner's communicator, in about a second: every rank runs fp32
    GEMMs at once (the slowest rank's rate counts), rank 0 and a rank of its node exchange messages (intra-node
    bandwidth and latency), and rank 0 and the first rank of another node do (inter-node bandwidth).  A rate
    the job cannot measure (one rank per node, one node) stays as it was.  With a model set, every rank also
    times the model itself at once, unsharded on MPI_COMM_SELF with the program's -fsdp_* options: forward,
    loss and backward of a rank's rows of a step and of an eighth of them (a pass estimated at the GEMMs' rate
    to take 50 ms at most), and an optimizer step, each the median of 3 that every rank starts together (ranks
    sharing cores compete as a step's do); the candidates' compute then scales these times instead of counting
    flops.  A model whose parameters, gradients and optimizer state pass 1 GiB or half the budget on any rank is
    not timed.  On a GPU (-fsdp_device cuda) each rank times it on its node-local rank's GPU (modulo those
    visible) if the state fits in half the budget (1 GiB without one), with no more rows than the activations
    that fit in what is left; there the GEMM rate is not measured (the host's is not a GPU's), and where a rank
    sees no GPU the model is not timed.
    Where every node has as many ranks, it last times the
    collectives themselves, every group at once as in a step: for each shard group size F a candidate can take, the
    all-gather and reduce-scatter within groups of F consecutive ranks in node order and the all-reduce across their
    replicas, at three sizes, as many at a time as a step has in flight (two all-gathers, one reduction), waiting as
    the job's collectives would (-fsdp_wait); not on a GPU (-fsdp_device cuda: NCCL's are not these), nor on more
    than 16383 ranks.  Within a node the job's fp32 reduce-scatters and all-gathers into views go through shared
    memory (-fsdp_shm_reduce, -fsdp_shm_views), which these MPI times stand for.  For a job of the shape probed
    (FSDPPlanSetJob may change it), a candidate's communication is then those times summed over its collectives,
    interpolated by size, instead of its bytes at the rates.
    @collective Collective on the planner's communicator.
    @param[in,out] plan  the planner
    @retval FSDP_ERR_ARG  plan is NULL
    @retval FSDP_ERR_MEM  out of memory
    @retval FSDP_ERR_MPI  an MPI call failed
    @retval FSDP_ERR_OPTION  a -fsdp_* option the model's timing reads is malformed
    @see FSDPPlanSetRates, FSDPPlanGetRates */
FSDP_EXTERN FSDPErrorCode FSDPPlanProbe(FSDPPlan plan);
/** Predicts every candidate: the strategies full, grad_op, none, hybrid and hybrid_zero2 (F from 2 to the ranks
    per node that divide them, below W), block and model wrapping, 1, 2, 4 or 8 micro-batches, and activation
    checkpointing off and on.  The candidates are then ranked: those that fit first, fastest first when
    the rates give every candidate a time, else fewest bytes moved first; then the rest, smallest first; ties keep
    the order above.  It reads -fsdp_device first: on GPUs a topology's node runs a rank per GPU, and the auto
    memory budget is a GPU's (FSDPPlanSetTopology).
    @collective Not collective: each rank may call it alone (it builds the model's units on MPI_COMM_SELF).
    @param[in,out] plan  the planner, with a model and a batch
    @retval FSDP_ERR_ARG          plan is NULL; no model or no batch was set, or the batch does not divide
                                  evenly over W ranks
    @retval FSDP_ERR_OPTION       an -fsdp_* option the memory plan reads is malformed
    @retval FSDP_ERR_UNSUPPORTED  a configuration the model refuses
    @retval FSDP_ERR_MEM          out of memory
    @see FSDPPlanGetCandidate, FSDPPlanGetChoice */
FSDP_EXTERN FSDPErrorCode FSDPPlanSetUp(FSDPPlan plan);
/** Gets the number of candidates, after FSDPPlanSetUp.
    @collective Not collective: each rank may call it alone.
    @param[in] plan  the planner, set up
    @param[out] n    the number of candidates
    @retval FSDP_ERR_ARG    plan or n is NULL
    @retval FSDP_ERR_STATE  the planner is not set up
    @see FSDPPlanGetCandidate */
FSDP_EXTERN FSDPErrorCode FSDPPlanGetNumCandidates(FSDPPlan plan, int *n);
/** Gets candidate i, in rank order (0: the best).
    @collective Not collective: each rank may call it alone.
    @param[in] plan        the planner, set up
    @param[in] i           0 <= i < FSDPPlanGetNumCandidates
    @param[out] candidate  its layout and predictions
    @retval FSDP_ERR_ARG    plan or candidate is NULL, or i is out of range
    @retval FSDP_ERR_STATE  the planner is not set up
    @see FSDPPlanCandidate, FSDPPlanGetChoice */
FSDP_EXTERN FSDPErrorCode FSDPPlanGetCandidate(FSDPPlan plan, int i, FSDPPlanCandidate *candidate);
/** Gets the chosen candidate and its options line: "-fsdp_sharding_strategy S [-fsdp_sharding_factor F]
    -fsdp_wrap W -fsdp_activation_checkpointing B -batch B -grad_accum K", to paste into a batch script or an
    -options_file (-batch and -grad_accum are fsdp-train's).
    When nothing fits the budget, the error names the smallest memory per rank any candidate reaches, its layout
    and the category that dominates it.
    @collective Not collective: each rank may call it alone.
    @param[in] plan      the planner, set up
    @param[out] index    the chosen candidate (0); may be NULL
    @param[out] options  its options line; may be NULL
    @param[in] len       the size of options
    @retval FSDP_ERR_ARG    plan is NULL, or options is not NULL and len is 0
    @retval FSDP_ERR_STATE  the planner is not set up
    @retval FSDP_ERR_MEM    no candidate fits the memory budget
    @see FSDPPlanGetCandidate, FSDPPlanView */
FSDP_EXTERN FSDPErrorCode FSDPPlanGetChoice(FSDPPlan plan, int *index, char *options, size_t len);
/** Prints the planner: the job, the rates, every candidate (memory by category, bytes moved, predicted times,
    whether it fits) and the choice, or the refusal.
    @collective Collective on the viewer's communicator.
    @param[in] plan    the planner, set up
    @param[in] viewer  an ASCII viewer, or NULL: stdout on the planner's communicator
    @retval FSDP_ERR_ARG    plan is NULL
    @retval FSDP_ERR_STATE  the planner is not set up
    @retval FSDP_ERR_MPI    an MPI call failed
    @retval FSDP_ERR_IO     writing failed
    @see FSDPPlanGetChoice, FSDPViewerASCIIOpen */
FSDP_EXTERN FSDPErrorCode FSDPPlanView(FSDPPlan plan, FSDPViewer viewer);
/** Destroys the planner and sets *plan to NULL.
    @collective Not collective: each rank may call it alone.
    @param[in,out] plan  the planner; *plan may be NULL (nothing to do)
    @retval FSDP_ERR_ARG  plan is NULL
    @see FSDPPlanCreate */
FSDP_EXTERN FSDPErrorCode FSDPPlanDestroy(FSDPPlan *plan);

#ifdef __cplusplus
}
#endif

#endif /* FSDP_NN_H */
