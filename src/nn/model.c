/* FSDPModel: an MLP from a spec string (doc/nn.md), its parameters in an
   FSDPContext's units by a wrapping policy, and forward and backward passes
   that unshard each unit just before its first layer runs and reshard (or
   reduce) it right after its last. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nnimpl.h"

typedef enum { LAYER_FC, LAYER_NORM, LAYER_ACT } LayerKind;

/* Rows of a 16-bit weight widened to fp32 at a time (mixed precision). */
#define WIDE_ROWS 64

typedef struct {
  LayerKind kind;
  char name[48];  /* module name: "blocks.3.fc", "head", ... */
  int64_t in, out;
  int unit;       /* index in model->units; -1 for an activation */
  FSDPParamId weight, bias;
  float *y;       /* output [n, out], kept for backward */
  float *mean, *rstd;
} Layer;

struct FSDPModel_s {
  FSDPContext ctx;
  char *spec;
  int64_t in, hidden, depth, out;
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
  int64_t width;          /* widest layer */
  int64_t n, capacity;    /* rows of the last forward, rows the buffers hold */
  const float *x;
  float *scratch[2];      /* gradients flowing backward, [capacity, width] each */
  FSDPDataType view_dtype; /* of the parameter views: 16-bit under a mixed-precision policy */
  float *wide;            /* 16-bit views only: WIDE_ROWS rows of a weight widened to fp32, then a
                             bias or a LayerNorm's weight and bias */
  int64_t wide_rows;      /* where the second part starts: WIDE_ROWS times the widest input */
  bool have_forward;
};

#define CHECK_MODEL(m) FSDPCheck(m, MPI_COMM_SELF, FSDP_ERR_ARG, "%s: model must not be NULL", __func__)
#define CHECK_MODEL_SETUP(m)                                                                                     \
  do {                                                                                                           \
    CHECK_MODEL(m);                                                                                              \
    FSDPCheck((m)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: model '%s' is not set up: call FSDPModelSetUp",    \
              __func__, (m)->spec);                                                                              \
  } while (0)

/* ------------------------------------------------------------------ the spec */

static const char *const spec_keys = "in, hidden, depth, out, act, norm";

static FSDPErrorCode parse_positive(const char *spec, const char *key, const char *value, int64_t *v)
{
  char *end;
  long long x;
  errno = 0;
  x = strtoll(value, &end, 10);
  FSDPCheck(*value && !*end && errno == 0 && x > 0 && x <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': %s=%s is not a positive integer below 2^31", spec, key, value);
  *v = x;
  return FSDP_SUCCESS;
}

static FSDPErrorCode parse_spec(FSDPModel m, const char *spec)
{
  char buf[512], *save = NULL, *item;
  const char *body;

  FSDPCheck(strlen(spec) < sizeof buf, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%.40s...' is too long", spec);
  FSDPCheck(strncmp(spec, "mlp:", 4) == 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': unknown model type (the one known is 'mlp:in=I,hidden=H,depth=D,out=O,act=relu|tanh|"
            "gelu,norm=none|layernorm')",
            spec);
  body = spec + 4;
  strcpy(buf, body);
  m->act = FSDP_ACT_RELU;
  for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    const char *key = item, *value;
    FSDPCheck(eq, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': '%s' is not key=value", spec, item);
    *eq = '\0';
    value = eq + 1;
    if (!strcmp(key, "in")) FSDPCall(parse_positive(spec, key, value, &m->in));
    else if (!strcmp(key, "hidden")) FSDPCall(parse_positive(spec, key, value, &m->hidden));
    else if (!strcmp(key, "depth")) FSDPCall(parse_positive(spec, key, value, &m->depth));
    else if (!strcmp(key, "out")) FSDPCall(parse_positive(spec, key, value, &m->out));
    else if (!strcmp(key, "act")) {
      if (!strcmp(value, "relu")) m->act = FSDP_ACT_RELU;
      else if (!strcmp(value, "tanh")) m->act = FSDP_ACT_TANH;
      else if (!strcmp(value, "gelu")) m->act = FSDP_ACT_GELU;
      else FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': act=%s is not relu, tanh or gelu", spec, value);
    } else if (!strcmp(key, "norm")) {
      if (!strcmp(value, "none")) m->layernorm = false;
      else if (!strcmp(value, "layernorm")) m->layernorm = true;
      else FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': norm=%s is not none or layernorm", spec, value);
    } else FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': unknown key '%s' (keys: %s)", spec, key, spec_keys);
  }
  FSDPCheck(m->in && m->hidden && m->depth && m->out, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s' lacks %s%s%s%s(in, hidden, depth and out are required)", spec, m->in ? "" : "in= ",
            m->hidden ? "" : "hidden= ", m->depth ? "" : "depth= ", m->out ? "" : "out= ");
  return FSDP_SUCCESS;
}

static FSDPErrorCode add_layer(FSDPModel m, LayerKind kind, const char *name, int64_t in, int64_t out)
{
  Layer *l;
  FSDPCall(FSDPGrowArray_Private(&m->layers, sizeof *m->layers, m->nlayers + 1, &m->layer_capacity, FSDP_MEM_OTHER));
  l = &m->layers[m->nlayers++];
  memset(l, 0, sizeof *l);
  l->kind = kind;
  snprintf(l->name, sizeof l->name, "%s", name);
  l->in = in;
  l->out = out;
  l->unit = -1;
  if (out > m->width) m->width = out;
  if (in > m->width) m->width = in;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelCreate(FSDPContext ctx, const char *spec, FSDPModel *model)
{
  FSDPModel m;
  FSDPErrorCode ierr;
  char name[48];

  FSDPCheck(model, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelCreate: model must not be NULL");
  *model = NULL;
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelCreate: ctx must not be NULL");
  FSDPCheck(spec, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelCreate: spec must not be NULL");
  FSDPCall(FSDPCalloc(1, sizeof *m, FSDP_MEM_OTHER, &m));
  m->ctx = ctx;
  ierr = FSDPStrdup(spec, &m->spec);
  if (!ierr) ierr = parse_spec(m, spec);
  for (int64_t i = 0; !ierr && i < m->depth; i++) {
    int64_t in = i == 0 ? m->in : m->hidden;
    snprintf(name, sizeof name, "blocks.%lld.fc", (long long)i);
    ierr = add_layer(m, LAYER_FC, name, in, m->hidden);
    if (!ierr && m->layernorm) {
      snprintf(name, sizeof name, "blocks.%lld.norm", (long long)i);
      ierr = add_layer(m, LAYER_NORM, name, m->hidden, m->hidden);
    }
    snprintf(name, sizeof name, "blocks.%lld.act", (long long)i);
    if (!ierr) ierr = add_layer(m, LAYER_ACT, name, m->hidden, m->hidden);
  }
  if (!ierr) ierr = add_layer(m, LAYER_FC, "head", m->hidden, m->out);
  if (ierr) {
    FSDPCall(FSDPModelDestroy(&m));
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  *model = m;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelSetWrapPolicy(FSDPModel model, FSDPWrapPolicy policy, int64_t min_numel)
{
  CHECK_MODEL(model);
  FSDPCheck(!model->setup, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPModelSetWrapPolicy: model '%s' is set up: its units are fixed", model->spec);
  FSDPCheck((int)policy >= 0 && policy <= FSDP_WRAP_SIZE, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPModelSetWrapPolicy: policy %d is not block, model or size", (int)policy);
  FSDPCheck(policy != FSDP_WRAP_SIZE || min_numel > 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPModelSetWrapPolicy: size wrapping needs a positive number of elements per unit, not %lld",
            (long long)min_numel);
  model->wrap = policy;
  model->min_numel = min_numel;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelSetSeed(FSDPModel model, uint64_t seed)
{
  CHECK_MODEL(model);
  FSDPCheck(!model->setup, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPModelSetSeed: model '%s' is set up: its parameters are initialized", model->spec);
  model->seed = seed;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelSetFromOptions(FSDPModel model)
{
  char wrap[64];
  bool set;
  int64_t seed;

  CHECK_MODEL(model);
  FSDPCall(FSDPOptionsGetString("-fsdp_wrap", "which parameters form one unit: block, model or size:N", "block", wrap,
                                sizeof wrap, &set));
  if (set) {
    if (!strcmp(wrap, "block")) FSDPCall(FSDPModelSetWrapPolicy(model, FSDP_WRAP_BLOCK, 0));
    else if (!strcmp(wrap, "model")) FSDPCall(FSDPModelSetWrapPolicy(model, FSDP_WRAP_MODEL, 0));
    else {
      char *end;
      long long n = -1;
      if (!strncmp(wrap, "size:", 5)) {
        errno = 0;
        n = strtoll(wrap + 5, &end, 10);
        if (!wrap[5] || *end || errno) n = -1;
      }
      FSDPCheck(n > 0, MPI_COMM_SELF, FSDP_ERR_OPTION,
                "-fsdp_wrap %s: expected block, model, or size:N with N a positive number of elements", wrap);
      FSDPCall(FSDPModelSetWrapPolicy(model, FSDP_WRAP_SIZE, n));
    }
  }
  FSDPCall(FSDPOptionsGetInt("-fsdp_seed", "seed of the default parameter initialization", (int64_t)model->seed, 0,
                             INT64_MAX, &seed, &set));
  if (set) FSDPCall(FSDPModelSetSeed(model, (uint64_t)seed));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ set up */

static int64_t layer_numel(const Layer *l) { return l->kind == LAYER_FC ? l->out * l->in + l->out : 2 * l->out; }

static FSDPErrorCode new_unit(FSDPModel m, const char *name)
{
  FSDPCall(FSDPGrowArray_Private(&m->units, sizeof *m->units, m->nunits + 1, &m->unit_capacity, FSDP_MEM_OTHER));
  FSDPCall(FSDPContextAddUnit(m->ctx, name, &m->units[m->nunits]));
  m->nunits++;
  return FSDP_SUCCESS;
}

/* The units of the wrapping policy, in execution order; each layer with
   parameters joins one.  Units are runs of consecutive layers. */
static FSDPErrorCode build_units(FSDPModel m)
{
  int64_t in_unit = 0;
  bool open = false;
  char name[64];

  for (int i = 0; i < m->nlayers; i++) {
    Layer *l = &m->layers[i];
    bool head = !strcmp(l->name, "head");
    if (l->kind == LAYER_ACT) continue;
    switch (m->wrap) {
    case FSDP_WRAP_MODEL:
      if (!open) FSDPCall(new_unit(m, "root"));
      open = true;
      break;
    case FSDP_WRAP_BLOCK:
      if (head) FSDPCall(new_unit(m, "root"));
      else if (l->kind == LAYER_FC) { /* a block starts with its fc */
        const char *dot = strchr(l->name + 7, '.');
        snprintf(name, sizeof name, "%.*s", (int)(dot - l->name), l->name);
        FSDPCall(new_unit(m, name));
      }
      break;
    case FSDP_WRAP_SIZE:
      if (!open) {
        /* Whatever cannot reach min_numel any more is the root unit. */
        int64_t rest = 0;
        for (int j = i; j < m->nlayers; j++)
          if (m->layers[j].kind != LAYER_ACT) rest += layer_numel(&m->layers[j]);
        if (rest < m->min_numel) snprintf(name, sizeof name, "root");
        else snprintf(name, sizeof name, "unit%d", m->nunits);
        FSDPCall(new_unit(m, name));
        open = true;
        in_unit = 0;
      }
      break;
    }
    l->unit = m->nunits - 1;
    FSDPCall(FlatParamAddParam(m->units[l->unit], (snprintf(name, sizeof name, "%s.weight", l->name), name),
                               l->kind == LAYER_FC ? 2 : 1, (int64_t[]){l->out, l->in}, &l->weight));
    FSDPCall(FlatParamAddParam(m->units[l->unit], (snprintf(name, sizeof name, "%s.bias", l->name), name), 1,
                               (int64_t[]){l->out}, &l->bias));
    in_unit += layer_numel(l);
    if (m->wrap == FSDP_WRAP_SIZE && in_unit >= m->min_numel) open = false;
  }
  return FSDP_SUCCESS;
}

/* PyTorch's defaults: Linear weight and bias uniform in +-1/sqrt(fan_in)
   (kaiming_uniform with a = sqrt(5) is exactly that bound), LayerNorm ones
   and zeros.  The random stream is the parameter's name. */
static FSDPErrorCode init_shard(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values, void *user)
{
  FSDPModel m = user;
  const char *name;
  float *v = values;

  for (int i = 0; i < m->nlayers; i++) {
    Layer *l = &m->layers[i];
    if (l->unit < 0 || m->units[l->unit] != unit || (id != l->weight && id != l->bias)) continue;
    FSDPCall(FlatParamGetParamInfo(unit, id, &name, NULL, NULL, NULL));
    if (l->kind == LAYER_NORM) {
      for (int64_t e = begin; e < end; e++) v[e - begin] = id == l->weight ? 1.0f : 0.0f;
    } else {
      double bound = 1.0 / sqrt((double)l->in);
      FSDPCall(FSDPRandomUniform(m->seed, name, begin, end, -bound, bound, v));
    }
    return FSDP_SUCCESS;
  }
  return FSDP_SUCCESS; /* a unit the model does not own stays zero */
}

FSDPErrorCode FSDPModelSetUp(FSDPModel model)
{
  CHECK_MODEL(model);
  FSDPCheck(!model->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "FSDPModelSetUp: model '%s' is already set up",
            model->spec);
  FSDPCall(build_units(model));
  FSDPCall(FSDPContextSetShardInit(model->ctx, init_shard, model));
  FSDPCall(FSDPContextSetUp(model->ctx));
  {
    /* SetUp agreed on the device: every rank refuses together. */
    FSDPDeviceType device;
    FSDPCall(FSDPContextGetDevice(model->ctx, &device));
    FSDPCheck(device == FSDP_DEVICE_HOST, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
              "FSDPModelSetUp: model '%s': the layer library runs on the host only so far, but the context is set "
              "for -fsdp_device cuda: see doc/cuda.md for what the CUDA backend covers",
              model->spec);
  }
  model->view_dtype = FSDP_FLOAT32;
  if (model->nunits > 0) FSDPCall(FlatParamGetViewDataType(model->units[0], &model->view_dtype));
  if (model->view_dtype != FSDP_FLOAT32) {
    /* The kernels compute in fp32: a low-precision weight is widened just
       before use, WIDE_ROWS rows at a time, so that the scratch stays small
       next to the unsharded buffers mixed precision halves. */
    model->wide_rows = WIDE_ROWS * model->width;
    FSDPCall(FSDPMalloc((size_t)(model->wide_rows + 2 * model->width) * sizeof(float), FSDP_MEM_OTHER, &model->wide));
  }
  model->setup = true;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelGetSizes(FSDPModel model, int64_t *in, int64_t *out, int64_t *numel)
{
  CHECK_MODEL(model);
  if (in) *in = model->in;
  if (out) *out = model->out;
  if (numel) {
    *numel = 0;
    for (int i = 0; i < model->nlayers; i++)
      if (model->layers[i].kind != LAYER_ACT) *numel += layer_numel(&model->layers[i]);
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ forward and backward */

static FSDPErrorCode free_buffers(FSDPModel m)
{
  for (int i = 0; i < m->nlayers; i++) {
    FSDPCall(FSDPFree(&m->layers[i].y));
    FSDPCall(FSDPFree(&m->layers[i].mean));
    FSDPCall(FSDPFree(&m->layers[i].rstd));
  }
  FSDPCall(FSDPFree(&m->scratch[0]));
  FSDPCall(FSDPFree(&m->scratch[1]));
  m->capacity = 0;
  return FSDP_SUCCESS;
}

/* Activations for n rows; reallocated only when a batch is larger than any before. */
static FSDPErrorCode reserve(FSDPModel m, int64_t n)
{
  if (n <= m->capacity) return FSDP_SUCCESS;
  FSDPCall(free_buffers(m));
  for (int i = 0; i < m->nlayers; i++) {
    Layer *l = &m->layers[i];
    FSDPCall(FSDPMalloc((size_t)(n * l->out) * sizeof(float), FSDP_MEM_OTHER, &l->y));
    if (l->kind == LAYER_NORM) {
      FSDPCall(FSDPMalloc((size_t)n * sizeof(float), FSDP_MEM_OTHER, &l->mean));
      FSDPCall(FSDPMalloc((size_t)n * sizeof(float), FSDP_MEM_OTHER, &l->rstd));
    }
  }
  for (int k = 0; k < 2; k++) FSDPCall(FSDPMalloc((size_t)(n * m->width) * sizeof(float), FSDP_MEM_OTHER, &m->scratch[k]));
  m->capacity = n;
  return FSDP_SUCCESS;
}

/* A vector parameter (a bias, a LayerNorm's weight or bias) as fp32: its
   view, or the view widened into the scratch (a weight first, a bias after). */
static FSDPErrorCode param(FSDPModel m, const Layer *l, FSDPParamId id, float **v)
{
  void *view;
  FSDPCall(FlatParamGetParam(m->units[l->unit], id, &view));
  if (!m->wide) {
    *v = view;
    return FSDP_SUCCESS;
  }
  *v = m->wide + m->wide_rows + (id == l->bias ? l->out : 0);
  FSDPCall(FSDPDataTypeConvert(FSDP_FLOAT32, *v, m->view_dtype, view, l->out));
  return FSDP_SUCCESS;
}

/* Rows [row, row + rows) of a 16-bit weight [out, in], widened into the scratch. */
static FSDPErrorCode widen_rows(FSDPModel m, const Layer *l, const void *w16, int64_t row, int64_t rows)
{
  FSDPCall(FSDPDataTypeConvert(FSDP_FLOAT32, m->wide, m->view_dtype, (const uint16_t *)w16 + row * l->in, rows * l->in));
  return FSDP_SUCCESS;
}

/* FSDPLinearForward with a 16-bit weight: y[:, block] = x W[block, :]^T, block by block. */
static FSDPErrorCode linear_forward_low(FSDPModel m, const Layer *l, int64_t n, const float *x, float *y)
{
  void *w16;
  float *b;
  FSDPCall(FlatParamGetParam(m->units[l->unit], l->weight, &w16));
  for (int64_t o = 0; o < l->out; o += WIDE_ROWS) {
    int64_t r = l->out - o < WIDE_ROWS ? l->out - o : WIDE_ROWS;
    FSDPCall(widen_rows(m, l, w16, o, r));
    FSDPGemm_Private(false, true, n, r, l->in, 1.0f, x, l->in, m->wide, l->in, 0.0f, y + o, l->out);
  }
  FSDPCall(param(m, l, l->bias, &b));
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
  FSDPCall(FlatParamGetParam(m->units[l->unit], l->weight, &w16));
  for (int64_t o = 0; o < l->out; o += WIDE_ROWS) {
    int64_t r = l->out - o < WIDE_ROWS ? l->out - o : WIDE_ROWS;
    FSDPCall(widen_rows(m, l, w16, o, r));
    FSDPGemm_Private(false, false, n, l->in, r, 1.0f, dy + o, l->out, m->wide, l->in, o ? 1.0f : 0.0f, dx, l->in);
  }
  return FSDP_SUCCESS;
}

/* The gradient view of a trainable parameter; NULL for a frozen one. */
static FSDPErrorCode grad(FSDPModel m, const Layer *l, FSDPParamId id, float **g)
{
  bool trainable;
  FSDPCall(FlatParamGetTrainable(m->units[l->unit], id, &trainable));
  *g = NULL;
  if (trainable) FSDPCall(FlatParamGetGrad(m->units[l->unit], id, (void **)g));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelForward(FSDPModel model, int64_t n, const float *x, float **y)
{
  FlatParam current = NULL;
  const float *h;

  CHECK_MODEL_SETUP(model);
  FSDPCheck(n > 0 && n <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelForward: batch of %lld rows", (long long)n);
  FSDPCheck(x && y, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelForward: x and y must not be NULL");
  FSDPCall(reserve(model, n));
  model->have_forward = false;
  FSDPCall(FSDPContextBeginForward(model->ctx));
  h = x;
  for (int i = 0; i < model->nlayers; i++) {
    Layer *l = &model->layers[i];
    float *w, *b;
    if (l->unit >= 0 && model->units[l->unit] != current) {
      if (current) FSDPCall(FlatParamReshard(current));
      current = model->units[l->unit];
      FSDPCall(FlatParamUnshard(current));
    }
    switch (l->kind) {
    case LAYER_FC:
      if (model->wide) {
        FSDPCall(linear_forward_low(model, l, n, h, l->y));
        break;
      }
      FSDPCall(param(model, l, l->weight, &w));
      FSDPCall(param(model, l, l->bias, &b));
      FSDPCall(FSDPLinearForward(n, l->in, l->out, h, w, b, l->y));
      break;
    case LAYER_NORM:
      FSDPCall(param(model, l, l->weight, &w));
      FSDPCall(param(model, l, l->bias, &b));
      FSDPCall(FSDPLayerNormForward(n, l->out, h, w, b, l->y, l->mean, l->rstd));
      break;
    case LAYER_ACT:
      FSDPCall(FSDPActivationForward(model->act, n * l->out, h, l->y));
      break;
    }
    h = l->y;
  }
  if (current) FSDPCall(FlatParamReshard(current));
  model->n = n;
  model->x = x;
  model->have_forward = true;
  *y = model->layers[model->nlayers - 1].y;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelBackward(FSDPModel model, const float *dy)
{
  FlatParam current = NULL;
  const float *g = dy;
  int64_t n;
  int k = 0;

  CHECK_MODEL_SETUP(model);
  FSDPCheck(model->have_forward, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPModelBackward: model '%s' has no forward pass to differentiate: call FSDPModelForward first",
            model->spec);
  FSDPCheck(dy, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelBackward: dy must not be NULL");
  n = model->n;
  model->have_forward = false; /* the activations are consumed */
  FSDPCall(FSDPContextBeginBackward(model->ctx));
  for (int i = model->nlayers - 1; i >= 0; i--) {
    Layer *l = &model->layers[i];
    const float *input = i > 0 ? model->layers[i - 1].y : model->x;
    float *dx = i > 0 ? model->scratch[k] : NULL, *w, *dw, *db;
    if (l->unit >= 0 && model->units[l->unit] != current) {
      if (current) FSDPCall(FlatParamReduceGrad(current));
      current = model->units[l->unit];
      FSDPCall(FlatParamUnshard(current));
    }
    switch (l->kind) {
    case LAYER_FC:
      FSDPCall(grad(model, l, l->weight, &dw));
      FSDPCall(grad(model, l, l->bias, &db));
      if (model->wide) {
        FSDPCall(linear_backward_low(model, l, n, input, g, dx, dw, db));
        break;
      }
      FSDPCall(param(model, l, l->weight, &w));
      FSDPCall(FSDPLinearBackward(n, l->in, l->out, input, w, g, dx, dw, db));
      break;
    case LAYER_NORM:
      FSDPCall(param(model, l, l->weight, &w));
      FSDPCall(grad(model, l, l->weight, &dw));
      FSDPCall(grad(model, l, l->bias, &db));
      FSDPCall(FSDPLayerNormBackward(n, l->out, input, w, l->mean, l->rstd, g, dx, dw, db));
      break;
    case LAYER_ACT:
      if (dx) FSDPCall(FSDPActivationBackward(model->act, n * l->out, input, g, dx));
      break;
    }
    g = dx;
    k = 1 - k;
  }
  if (current) FSDPCall(FlatParamReduceGrad(current));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ view, destroy */

static FSDPErrorCode model_view(FSDPViewer viewer, void *ctx)
{
  FSDPModel m = ctx;
  static const char *const wraps[] = {"block", "model", "size"};
  int64_t numel;

  FSDPCall(FSDPModelGetSizes(m, NULL, NULL, &numel));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "FSDPModel %s\n", m->spec));
  FSDPCall(FSDPViewerASCIIPushTab(viewer));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "parameters: %lld, activation: %s, layernorm: %s, seed %llu\n",
                                 (long long)numel, FSDPActivationName(m->act), m->layernorm ? "yes" : "no",
                                 (unsigned long long)m->seed));
  if (m->wrap == FSDP_WRAP_SIZE)
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "wrapping: size:%lld, %d units\n", (long long)m->min_numel, m->nunits));
  else FSDPCall(FSDPViewerASCIIPrintf(viewer, "wrapping: %s, %d units\n", wraps[m->wrap], m->nunits));
  for (int u = 0; u < m->nunits && m->setup; u++) {
    const char *name;
    int64_t unumel;
    FSDPCall(FlatParamGetName(m->units[u], &name));
    FSDPCall(FlatParamGetSizes(m->units[u], &unumel, NULL, NULL));
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "unit %-10s %10lld elements:", name, (long long)unumel));
    for (int i = 0; i < m->nlayers; i++)
      if (m->layers[i].unit == u) FSDPCall(FSDPViewerASCIIPrintf(viewer, " %s", m->layers[i].name));
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "\n"));
  }
  FSDPCall(FSDPViewerASCIIPopTab(viewer));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelView(FSDPModel model, FSDPViewer viewer)
{
  MPI_Comm comm;
  CHECK_MODEL(model);
  FSDPCall(FSDPContextGetComm(model->ctx, &comm));
  FSDPCall(FSDPViewerApply_Private(viewer, comm, model_view, model));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelDestroy(FSDPModel *model)
{
  FSDPModel m;
  FSDPCheck(model, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelDestroy: model must not be NULL");
  m = *model;
  if (!m) return FSDP_SUCCESS;
  FSDPCall(free_buffers(m));
  FSDPCall(FSDPFree(&m->wide));
  FSDPCall(FSDPFree(&m->layers));
  FSDPCall(FSDPFree(&m->units));
  FSDPCall(FSDPFree(&m->spec));
  FSDPCall(FSDPFree(model));
  return FSDP_SUCCESS;
}
