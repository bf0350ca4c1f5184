/* nnimpl.h: what the layer library's files share: the model and its layers,
   the table of operations every layer kind fills in (one file per kind:
   linear.c, layernorm.c, activation.c, conv.c, convtranspose.c, pool.c,
   groupnorm.c, merge.c, and the GPT's embedding.c, transformer.c, lmhead.c;
   doc/nn.md, "Adding a layer"), the GEMM and the losses. */
#ifndef FSDP_NNIMPL_H
#define FSDP_NNIMPL_H

#include "../core/coreimpl.h" /* the context's Device */
#include "fsdp_nn.h"

#include "elementwise.h" /* the constants, shared with the GPU's kernels */

/* C[m, n] = alpha op(A) op(B) + beta C, row-major: OpenBLAS when built with it. */
void FSDPGemm_Private(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* The losses without their checks; dy is the mean's gradient times scale. */
void FSDPMSELoss_Private(int64_t n, int64_t m, const float *y, const float *target, double scale, double *loss,
                         float *dy);
void FSDPCrossEntropyLoss_Private(int64_t n, int64_t classes, const float *logits, const int64_t *labels, double scale,
                                  double *loss, float *dlogits);
/* Every label in [0, classes), or an error naming the first that is not. */
FSDPErrorCode FSDPCheckLabels_Private(const char *caller, int64_t n, int64_t classes, const int64_t *labels);

/* The kernels' argument checks: MPI-free, an FSDP_ERR_ARG naming the value. */
#define CHECK_DIMS(cond, ...) FSDPCheck(cond, MPI_COMM_SELF, FSDP_ERR_ARG, __VA_ARGS__)

/* ------------------------------------------------------------------ layers */

/* Parameters of one layer at most (a transformer block's twelve). */
#define LAYER_MAX_PARAMS 12
/* Dimensions of a parameter at most (a 3-D spectral convolution's complex weight). */
#define LAYER_MAX_NDIM 6
/* Rows of a 16-bit weight widened to fp32 at a time (mixed precision). */
#define WIDE_ROWS 64

typedef struct LayerOps LayerOps;

typedef enum { CONV_PAD_ZEROS = 0, CONV_PAD_CIRCULAR, CONV_PAD_REFLECT } ConvPadding;

/* A convolution's geometry (PyTorch's nn.Conv1d/2d/3d): nd spatial
   dimensions, stored as the last nd of three (the others are 1, with a
   kernel of 1 and no padding), channels first: a row is [cin, size...]
   in and [cout, osize...] out. */
typedef struct {
  int nd;
  int64_t cin, cout, groups;
  int64_t size[3], osize[3], kernel[3], stride[3], dilation[3], pad[3];
  ConvPadding padding;
} ConvGeom;

static inline int64_t ConvTaps(const ConvGeom *g) { return g->kernel[0] * g->kernel[1] * g->kernel[2]; }
static inline int64_t ConvInPoints(const ConvGeom *g) { return g->size[0] * g->size[1] * g->size[2]; }
static inline int64_t ConvOutPoints(const ConvGeom *g) { return g->osize[0] * g->osize[1] * g->osize[2]; }

/* One sample of geometry g: col[cin * taps, out points] from x[cin, size...]
   (dx NULL), or its adjoint dx[cin, size...] += col (x NULL): a
   convolution's input to its GEMM, and a transposed convolution's output. */
void FSDPIm2Col_Private(const ConvGeom *g, const float *x, float *col, float *dx);
/* db[c] += the sum of dy[n, channels, points] over samples and points: a convolution's bias gradient. */
void FSDPConvBiasGrad_Private(int64_t n, int64_t channels, int64_t points, const float *dy, float *db);

/* One layer of a model: y[n, out] = f(x[n, in]) with its kind's parameters.
   A GPT's layers see a row as a sequence of `seq` positions of `dim`
   features each (in and out are then multiples of seq). */
typedef struct {
  const LayerOps *ops;
  char name[48];  /* module name: "blocks.3.fc", "head", ...; "" for a GPT's embedding and head */
  char block[48]; /* the unit it joins under block wrapping */
  int64_t in, out;
  FSDPActivation act;                  /* activation layers: which function */
  int64_t seq, dim, heads, vocab;      /* GPT layers: positions per row, width, attention heads, tokens */
  int64_t nblocks;                     /* GPT layers: transformer blocks in the model */
  int64_t attn_block;                  /* transformer layers: keys per block of the memory-light attention
                                          (transformer.c); 0: the whole t x t probabilities (a GPU,
                                          -fsdp_attention full, or auto with ctx of one block) */
  ConvGeom conv;                       /* convolution layers; GroupNorm: cin channels, groups, size;
                                          pooling: cin = cout channels, kernel, stride; a transposed
                                          convolution: the convolution it is the adjoint of (in: its
                                          cout channels on its osize, out: cin on size); a spectral
                                          convolution: channels, size, and the modes kept in kernel */
  int input;                           /* the layer whose output is x: the one before, or another (an
                                          FNO block's bypass reads the block's input); -1: the model's */
  int from;                            /* add, concat: the layer whose output is the second input; -1: the model's */
  bool tapped;                         /* a layer other than the next reads this layer's output */
  bool droppable;                      /* checkpointing may drop y and saved after forward: only the next layer,
                                          of its block and unit, reads y (FSDPModelSetUp decides) */
  int nparams;                         /* its own: ops->nparams, or fewer (a tied head) */
  int tie;                             /* a tied head: the embedding layer whose wte it uses; else -1 */
  int unit;                            /* index in model->units; -1 for a layer without parameters */
  FSDPParamId param[LAYER_MAX_PARAMS]; /* in ops->param_names' order */
  float *y;                            /* output [n, out], kept for backward */
  float *saved;                        /* ops->saved(l) floats per row, kept for backward */
  float *dskip;                        /* tapped: the gradient of y that those other readers pass back, [n, out] */
  void *state;                         /* the kind's own (spectral.c: its FFT plans), freed by ops->destroy */
} Layer;

/* What a layer kind does; model.c calls nothing else of a layer.  Forward
   and backward run on the host or, when m->dev is set, on the context's GPU
   (every pointer is then device memory), and under a mixed-precision policy
   they widen 16-bit parameter views as they need (m->wide). */
struct LayerOps {
  const char *type;               /* "linear", ... */
  int nparams;                    /* at most LAYER_MAX_PARAMS; 0: no unit */
  const char *const *param_names; /* [nparams]: registered as "<layer name>.<param name>", in this order */
  /* Shape of parameter p: ndim 1 to LAYER_MAX_NDIM. */
  void (*param_shape)(const Layer *l, int p, int *ndim, int64_t shape[LAYER_MAX_NDIM]);
  /* Elements [begin, end) of parameter p, whose name (the random stream) is `name`. */
  FSDPErrorCode (*init)(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin, int64_t end,
                        float *values);
  /* Floats per row that forward keeps in l->saved for backward (NULL: none),
     and that forward or backward needs as scratch in m->work (NULL: none). */
  int64_t (*saved)(const Layer *l);
  int64_t (*work)(const Layer *l);
  /* Floats of scratch in m->work, forward and backward, whatever the batch (NULL: none). */
  int64_t (*work_fixed)(const Layer *l);
  /* Activation checkpointing drops l->saved after forward, and backward
     calls this first to refill it from the layer's input (forward without
     computing l->y, which backward does not read); NULL: not checkpointable. */
  FSDPErrorCode (*recompute)(FSDPModel m, const Layer *l, int64_t n, const float *x);
  /* The first layer's check of the model's input x[n, in] (NULL: none),
     before any unit is unsharded. */
  FSDPErrorCode (*check_input)(const Layer *l, int64_t n, const float *x);
  /* l->y[n, out] from x[n, in], and l->saved. */
  FSDPErrorCode (*forward)(FSDPModel m, const Layer *l, int64_t n, const float *x);
  /* Adds the parameters' gradients (trainable ones only) from dy[n, out] and
     the forward's x and l->saved; writes dx[n, in] unless dx is NULL (the first layer). */
  FSDPErrorCode (*backward)(FSDPModel m, const Layer *l, int64_t n, const float *x, const float *dy, float *dx);
  /* Makes l->state at FSDPModelSetUp, so that a step allocates nothing but the model's buffers. */
  FSDPErrorCode (*setup)(Layer *l);
  /* Frees l->state (NULL: the kind keeps none). */
  void (*destroy)(Layer *l);
};

/* The registry: an `X(kind)` per layer kind, for `LayerOps_<kind>_Private`
   defined in <kind>.c.  It makes the declarations, the LayerKind enum
   (LAYER_<kind>) and the table LayerKinds_Private[LAYER_NUM_KINDS] (model.c). */
/* (Not clang-formatted: it reflows these calls differently from run to run.) */
/* clang-format off */
#define FSDP_LAYER_KINDS(X) \
  X(linear) X(layernorm) X(activation) \
  X(embedding) X(transformer) X(lmhead) \
  X(conv) X(groupnorm) X(convtranspose) X(maxpool) X(avgpool) \
  X(add) X(concat) X(spectral)
/* clang-format on */

#define FSDP_LAYER_DECLARE(kind) extern const LayerOps LayerOps_##kind##_Private;
FSDP_LAYER_KINDS(FSDP_LAYER_DECLARE)
#undef FSDP_LAYER_DECLARE
#define FSDP_LAYER_ENUM(kind) LAYER_##kind,
typedef enum { FSDP_LAYER_KINDS(FSDP_LAYER_ENUM) LAYER_NUM_KINDS } LayerKind;
#undef FSDP_LAYER_ENUM
extern const LayerOps *const LayerKinds_Private[LAYER_NUM_KINDS];
/* -fsdp_attention: auto is blocked where ctx is more than one block of keys. */
typedef enum { ATTENTION_AUTO, ATTENTION_BLOCKED, ATTENTION_FULL } AttentionChoice;
/* Keys per block of the transformer's memory-light attention (transformer.c). */
#define FSDP_ATTENTION_BLOCK 64

/* ------------------------------------------------------------------ the model */

struct FSDPModel_s {
  FSDPContext ctx;
  char *spec;
  int64_t in, hidden, depth, out;
  bool gpt;                       /* gpt:vocab=V,ctx=T,dim=C,heads=H,layers=L[,tied=1] */
  int64_t vocab, seq, dim, heads; /* (depth holds L) */
  bool tied;                      /* the head's weight is the token embedding's */
  bool cnn;             /* a grid model: cnn:grid=G,in=C,out=O[,depth=D,channels=K,kernel=,...] (depth holds D,
                           hidden K), or unet: */
  bool unet;            /* unet:grid=G,in=C,out=O,channels=K,levels=L[,...] (depth holds L, hidden K) */
  bool fno;             /* fno:grid=G,in=C,out=O,width=K,modes=M,layers=L[,act=] (depth holds L, hidden K) */
  bool file;            /* file:NAME, a model file (modelfile.c) */
  ConvGeom ogrid;       /* a grid model's output: channels cout on osize */
  char where[320];      /* what the builders' errors name: "model spec '...'", "model file '...', line N" */
  int64_t modes;        /* fno: the Fourier modes kept per axis */
  bool residual;        /* cnn: residual=1, a block adds its input where the shapes agree */
  bool avgpool;         /* unet: pool=avg, the encoder's pooling averages (else takes the maximum) */
  ConvGeom grid;        /* a cnn's input grid, channels, and its hidden layers' kernel, stride, ... */
  int64_t norm_groups;  /* a cnn's GroupNorm after each hidden convolution: its groups; 0: none */
  bool checkpointing;   /* activation checkpointing: the transformer blocks, the other models' blocks */
  float *run_pool;      /* checkpointing: the dropped outputs of one run of droppable layers at a time */
  float *work;          /* the layers' scratch: the largest need, ops->work(l) per row and ops->work_fixed(l) */
  float *shared_saved;  /* checkpointing: the one l->saved all checkpointed layers share */
  float *tied_grad;     /* a tied head's weight gradient until the embedding's backward adds it */
  int blas_threads;     /* OpenBLAS threads per rank: asked for (0: fit to the node), then set */
  int blas_share;       /* the node's CPUs per rank where the context cannot know them (FSDPPlanProbe's
                           model on MPI_COMM_SELF); 0: the context's */
  const char *blas_why; /* where the number came from */
  FSDPActivation act;
  bool layernorm;
  FSDPWrapPolicy wrap;
  int64_t min_numel;
  uint64_t seed;
  bool setup;
  Layer *layers;
  int nlayers, layer_capacity;
  FlatParam *units;
  int nunits, unit_capacity;
  int64_t width;       /* widest layer */
  int64_t grad_width;  /* widest input of a layer after the first: the gradients backward passes between layers */
  int64_t wide_slot;   /* floats of each vector parameter's slot in the mixed-precision scratch */
  int64_t n, capacity; /* rows of the last forward, rows the buffers hold */
  const float *x;
  float *scratch[2];       /* gradients flowing backward, [capacity, width] each */
  FSDPDataType view_dtype; /* of the parameter views: 16-bit under a mixed-precision policy */
  float *wide;             /* 16-bit views only: WIDE_ROWS rows of a weight widened to fp32 (host),
                             then LAYER_MAX_PARAMS vector parameters (a bias, a LayerNorm's weight and bias) */
  int64_t wide_rows;       /* where the second part starts: WIDE_ROWS times the widest input; 0 on a GPU */
  bool have_forward;
  Device dev;    /* the context's GPU; NULL: the host */
  bool tf32;     /* fp32 GEMMs on a GPU may use TF32 tensor cores */
  bool winograd; /* 3 x 3 convolutions may take Winograd's tiles (conv.c) */
  int attention; /* -fsdp_attention: an AttentionChoice (an int for FSDPOptionsGetEnum) */
  float *dy;     /* FSDPModelLoss's gradient, or a GPU's copy of a host dy: [capacity, out] */
  float *input;  /* GPU only: a copy of a host x, [capacity, in] */
  void *target;  /* GPU only: a copy of a host target, [capacity, out] floats or [capacity] labels */
  void *low[2];  /* GPU, 16-bit views: an activation and a gradient cast for the GEMMs, [capacity, width] */
};

/* The model's builders (model.c, modelfile.c): a layer of `block` (its unit
   under block wrapping) reading the layer before, and a convolution from
   g's input geometry, kernel, stride, dilation, groups and padding (pad per
   axis, -1: "same", dilation * (kernel - 1) / 2 each side), which sets g's
   pad and output sizes and names the layer and m->where in its errors. */
FSDPErrorCode FSDPModelAddLayer_Private(FSDPModel m, LayerKind kind, const char *name, const char *block, int64_t in,
                                        int64_t out);
FSDPErrorCode FSDPModelAddConv_Private(FSDPModel m, const char *name, const char *block, const int64_t pad[3],
                                       ConvGeom *g);
/* Layer i reads layer `from`'s output (-1: the model's input) instead of the
   one before's (ReadFrom), or as its second input (Join: an add's or
   concat's); either way `from` is tapped. */
void FSDPModelReadFrom_Private(FSDPModel m, int i, int from);
void FSDPModelJoin_Private(FSDPModel m, int i, int from);
/* -model file:NAME (modelfile.c): the layers of a model file. */
FSDPErrorCode FSDPModelBuildFile_Private(FSDPModel m, const char *path);

/* Parameter p of layer l as its unit holds it, unsharded: fp32, or the 16-bit view type. */
FSDPErrorCode FSDPModelParamView_Private(FSDPModel m, const Layer *l, int p, void **view);
/* Parameter p as fp32: its view, or, with 16-bit views, a vector parameter
   widened into the model's scratch (a slot per p; weights widen themselves). */
FSDPErrorCode FSDPModelParam_Private(FSDPModel m, const Layer *l, int p, float **v);
/* The gradient of parameter p, to add into; NULL for a frozen parameter. */
FSDPErrorCode FSDPModelGrad_Private(FSDPModel m, const Layer *l, int p, float **g);
/* All of layer l's parameters as fp32, w[l->nparams]: the views, or, under a
   mixed-precision policy, all of them widened into the model's scratch (a
   GPT's layers, host only; valid until the next call). */
FSDPErrorCode FSDPModelLayerParams_Private(FSDPModel m, const Layer *l, float **w);
/* A tied head's weight and its gradient (the embedding's wte and the model's scratch). */
FSDPErrorCode FSDPModelTiedWeight_Private(FSDPModel m, const Layer *l, float **w, float **g);
/* fp32 arithmetic where the model computes (m->dev: its GPU, with TF32 where
   the model allows it; else the host), for the GPT's layers (linear.c):
   a GEMM as FSDPGemm_Private, and a linear layer's passes on explicit arrays
   as FSDPLinearForward and FSDPLinearBackward (b, db, dw, dx may be NULL). */
FSDPErrorCode FSDPModelGemm_Private(FSDPModel m, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                                    const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                                    int64_t ldc);
FSDPErrorCode FSDPModelLinearForward_Private(FSDPModel m, int64_t n, int64_t in, int64_t out, const float *x,
                                             const float *w, const float *b, float *y);
FSDPErrorCode FSDPModelLinearBackward_Private(FSDPModel m, int64_t n, int64_t in, int64_t out, const float *x,
                                              const float *w, const float *dy, float *dx, float *dw, float *db);

/* For FSDPPlan, a model that is never set up: its units by its wrapping
   policy, its layers' state and its attention, as FSDPModelSetUp makes them
   (on a GPU or not), with nothing allocated for its context. */
FSDPErrorCode FSDPModelLayOut_Private(FSDPModel model, bool on_device);
/* What FSDPModelSetUp allocates for the model itself (FSDP_MEM_OTHER), beside
   the context's plan and the activations: a tied GPT's gradient of the shared
   embedding, and the scratch that widens parameters of view_dtype (not fp32)
   for the host's kernels.  After FSDPModelLayOut_Private. */
size_t FSDPModelScratchBytes_Private(FSDPModel model, bool on_device, FSDPDataType view_dtype);
/* Sets OpenBLAS's threads for this process, as a model's SetUp does: asked
   (> 0, -fsdp_blas_threads), else the environment's, else share (the node's
   CPUs per rank).  Returns the number, and why in *why. */
int FSDPFitBlasThreads_Private(int asked, int share, const char **why);
/* Floating-point operations of one row's forward: two per weight each time
   the row applies it (dense layers, convolutions, a GPT's layers at each
   position), and attention's two products; FFTs, norms, activations and
   pooling are left out. */
double FSDPModelForwardFlops_Private(FSDPModel model);

/* A normalization's weight (p 0: ones) and bias (p 1: zeros), as PyTorch initializes them. */
FSDPErrorCode FSDPInitNormAffine_Private(const Layer *l, int p, uint64_t seed, const char *name, int64_t begin,
                                         int64_t end, float *values);

/* The embedding's parameter a tied head uses as its weight. */
#define EMBEDDING_WTE 0

/* A GPT weight's initialization: uniform, mean 0, standard deviation std. */
FSDPErrorCode FSDPInitStd_Private(uint64_t seed, const char *name, int64_t begin, int64_t end, double std,
                                  float *values);

#endif
