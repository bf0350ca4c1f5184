/* FSDPModel: an MLP from a spec string (doc/nn.md), its parameters in an
   FSDPContext's units by a wrapping policy, and forward and backward passes
   that unshard each unit just before its first layer runs and reshard (or
   reduce) it right after its last.  On a CUDA context the layers run on the
   context's GPU (src/device) and every buffer here is device memory. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nnimpl.h"

#ifdef FSDP_HAVE_OPENBLAS_THREADS
void openblas_set_num_threads(int threads); /* OpenBLAS's own, not in every cblas.h */
int openblas_get_num_threads(void);
#endif

/* The registry (nnimpl.h): LayerKind to its operations. */
#define FSDP_LAYER_ENTRY(kind) [LAYER_##kind] = &LayerOps_##kind##_Private,
const LayerOps *const LayerKinds_Private[LAYER_NUM_KINDS] = {FSDP_LAYER_KINDS(FSDP_LAYER_ENTRY)};
#undef FSDP_LAYER_ENTRY

#define CHECK_MODEL(m) FSDPCheck(m, MPI_COMM_SELF, FSDP_ERR_ARG, "%s: model must not be NULL", __func__)
#define CHECK_MODEL_SETUP(m)                                                                                           \
  do {                                                                                                                 \
    CHECK_MODEL(m);                                                                                                    \
    FSDPCheck((m)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: model '%s' is not set up: call FSDPModelSetUp",          \
              __func__, (m)->spec);                                                                                    \
    FSDPCall(DeviceEnter_Private((m)->dev));                                                                           \
  } while (0)

/* ------------------------------------------------------------------ the spec */

static const char *const spec_keys = "in, hidden, depth, out, act, norm";
static const char *const gpt_keys = "vocab, ctx, dim, heads, layers, tied";
static const char *const padding_names[] = {"zeros", "circular", "reflect"}; /* ConvPadding */
static const char *const cnn_keys =
    "grid, in, out, depth, channels, kernel, stride, dilation, groups, pad, padding, norm, act, residual";
static const char *const unet_keys = "grid, in, out, channels, levels, kernel, padding, norm, act, pool";
static const char *const fno_keys = "grid, in, out, width, modes, layers, act";
/* A U-Net's levels at most: its widest convolution has channels * 2^(levels - 1). */
#define UNET_MAX_LEVELS 8

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

static FSDPErrorCode parse_activation(FSDPModel m, const char *spec, const char *value)
{
  if (!strcmp(value, "relu")) m->act = FSDP_ACT_RELU;
  else if (!strcmp(value, "tanh")) m->act = FSDP_ACT_TANH;
  else if (!strcmp(value, "gelu")) m->act = FSDP_ACT_GELU;
  else FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': act=%s is not relu, tanh or gelu", spec, value);
  return FSDP_SUCCESS;
}

/* One key=value of an mlp: spec. */
static FSDPErrorCode mlp_key(FSDPModel m, const char *spec, const char *key, const char *value)
{
  if (!strcmp(key, "in")) FSDPCall(parse_positive(spec, key, value, &m->in));
  else if (!strcmp(key, "hidden")) FSDPCall(parse_positive(spec, key, value, &m->hidden));
  else if (!strcmp(key, "depth")) FSDPCall(parse_positive(spec, key, value, &m->depth));
  else if (!strcmp(key, "out")) FSDPCall(parse_positive(spec, key, value, &m->out));
  else if (!strcmp(key, "act")) FSDPCall(parse_activation(m, spec, value));
  else if (!strcmp(key, "norm")) {
    if (!strcmp(value, "none")) m->layernorm = false;
    else if (!strcmp(value, "layernorm")) m->layernorm = true;
    else
      FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': norm=%s is not none or layernorm", spec, value);
  } else
    FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': unknown key '%s' (keys: %s)", spec, key, spec_keys);
  return FSDP_SUCCESS;
}

/* One key=value of a gpt: spec. */
static FSDPErrorCode gpt_key(FSDPModel m, const char *spec, const char *key, const char *value)
{
  if (!strcmp(key, "vocab")) FSDPCall(parse_positive(spec, key, value, &m->vocab));
  else if (!strcmp(key, "ctx")) FSDPCall(parse_positive(spec, key, value, &m->seq));
  else if (!strcmp(key, "dim")) FSDPCall(parse_positive(spec, key, value, &m->dim));
  else if (!strcmp(key, "heads")) FSDPCall(parse_positive(spec, key, value, &m->heads));
  else if (!strcmp(key, "layers")) FSDPCall(parse_positive(spec, key, value, &m->depth));
  else if (!strcmp(key, "tied")) {
    FSDPCheck(!strcmp(value, "0") || !strcmp(value, "1"), MPI_COMM_SELF, FSDP_ERR_ARG,
              "model spec '%s': tied=%s is not 0 or 1", spec, value);
    m->tied = value[0] == '1';
  } else
    FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': unknown key '%s' (keys: %s)", spec, key, gpt_keys);
  return FSDP_SUCCESS;
}

/* grid=N, NxM or NxMxK: a cnn's spatial sizes, in the last of the three slots. */
static FSDPErrorCode parse_grid(FSDPModel m, const char *spec, const char *value)
{
  char buf[64], *part, *save = NULL;
  int64_t sizes[3];
  int nd = 0;
  FSDPCheck(strlen(value) < sizeof buf && *value && value[strlen(value) - 1] != 'x', MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': grid=%s is not N, NxM or NxMxK", spec, value);
  strcpy(buf, value);
  for (part = strtok_r(buf, "x", &save); part; part = strtok_r(NULL, "x", &save)) {
    FSDPCheck(nd < 3, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': grid=%s has more than 3 dimensions", spec, value);
    FSDPCall(parse_positive(spec, "grid", part, &sizes[nd]));
    nd++;
  }
  FSDPCheck(!strstr(value, "xx") && value[0] != 'x', MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': grid=%s is not N, NxM or NxMxK", spec, value);
  m->grid.nd = nd;
  for (int d = 0; d < 3; d++) m->grid.size[d] = d < 3 - nd ? 1 : sizes[d - (3 - nd)];
  return FSDP_SUCCESS;
}

/* One key=value of a cnn: spec; kernel, stride and dilation apply to every
   spatial dimension. */
static FSDPErrorCode cnn_key(FSDPModel m, const char *spec, const char *key, const char *value)
{
  ConvGeom *g = &m->grid;
  if (!strcmp(key, "grid")) FSDPCall(parse_grid(m, spec, value));
  else if (!strcmp(key, "in")) FSDPCall(parse_positive(spec, key, value, &g->cin));
  else if (!strcmp(key, "out")) FSDPCall(parse_positive(spec, key, value, &m->out));
  else if (!strcmp(key, "channels")) FSDPCall(parse_positive(spec, key, value, &m->hidden));
  else if (!strcmp(key, "depth")) {
    if (strcmp(value, "0")) FSDPCall(parse_positive(spec, key, value, &m->depth)); /* 0: the head alone */
  } else if (!strcmp(key, "kernel")) FSDPCall(parse_positive(spec, key, value, &g->kernel[2]));
  else if (!strcmp(key, "stride")) FSDPCall(parse_positive(spec, key, value, &g->stride[2]));
  else if (!strcmp(key, "dilation")) FSDPCall(parse_positive(spec, key, value, &g->dilation[2]));
  else if (!strcmp(key, "groups")) FSDPCall(parse_positive(spec, key, value, &g->groups));
  else if (!strcmp(key, "pad")) {
    if (strcmp(value, "0")) FSDPCall(parse_positive(spec, key, value, &g->pad[2]));
    else g->pad[2] = 0;
  } else if (!strcmp(key, "padding")) {
    if (!strcmp(value, "zeros")) g->padding = CONV_PAD_ZEROS;
    else if (!strcmp(value, "circular")) g->padding = CONV_PAD_CIRCULAR;
    else if (!strcmp(value, "reflect")) g->padding = CONV_PAD_REFLECT;
    else
      FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': padding=%s is not zeros, circular or reflect",
                spec, value);
  } else if (!strcmp(key, "norm")) {
    if (!strncmp(value, "groupnorm:", 10)) {
      char *end;
      long long groups;
      errno = 0;
      groups = strtoll(value + 10, &end, 10);
      FSDPCheck(value[10] && !*end && errno == 0 && groups > 0 && groups <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_ARG,
                "model spec '%s': norm=%s: the groups G of groupnorm:G must be a positive integer", spec, value);
      m->norm_groups = groups;
    } else
      FSDPCheck(!strcmp(value, "none"), MPI_COMM_SELF, FSDP_ERR_ARG,
                "model spec '%s': norm=%s is not none or groupnorm:G (G groups)", spec, value);
  } else if (!strcmp(key, "act")) FSDPCall(parse_activation(m, spec, value));
  else if (!strcmp(key, "residual")) {
    FSDPCheck(!strcmp(value, "0") || !strcmp(value, "1"), MPI_COMM_SELF, FSDP_ERR_ARG,
              "model spec '%s': residual=%s is not 0 or 1", spec, value);
    m->residual = value[0] == '1';
  } else
    FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': unknown key '%s' (keys: %s)", spec, key, cnn_keys);
  return FSDP_SUCCESS;
}

/* One key=value of a unet: spec: levels, or one of the cnn: keys it shares. */
static FSDPErrorCode unet_key(FSDPModel m, const char *spec, const char *key, const char *value)
{
  static const char *const shared[] = {"grid", "in", "out", "channels", "kernel", "padding", "norm", "act"};
  if (!strcmp(key, "levels")) {
    FSDPCall(parse_positive(spec, key, value, &m->depth));
    FSDPCheck(m->depth <= UNET_MAX_LEVELS, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': levels=%s is above %d", spec,
              value, UNET_MAX_LEVELS);
    return FSDP_SUCCESS;
  }
  if (!strcmp(key, "pool")) {
    FSDPCheck(!strcmp(value, "max") || !strcmp(value, "avg"), MPI_COMM_SELF, FSDP_ERR_ARG,
              "model spec '%s': pool=%s is not max or avg", spec, value);
    m->avgpool = value[0] == 'a';
    return FSDP_SUCCESS;
  }
  for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
    if (!strcmp(key, shared[i])) return cnn_key(m, spec, key, value);
  FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': unknown key '%s' (keys: %s)", spec, key, unet_keys);
  return FSDP_SUCCESS;
}

/* One key=value of an fno: spec. */
static FSDPErrorCode fno_key(FSDPModel m, const char *spec, const char *key, const char *value)
{
  if (!strcmp(key, "width")) FSDPCall(parse_positive(spec, key, value, &m->hidden));
  else if (!strcmp(key, "modes")) FSDPCall(parse_positive(spec, key, value, &m->modes));
  else if (!strcmp(key, "layers")) FSDPCall(parse_positive(spec, key, value, &m->depth));
  else if (!strcmp(key, "grid") || !strcmp(key, "in") || !strcmp(key, "out") || !strcmp(key, "act"))
    FSDPCall(cnn_key(m, spec, key, value));
  else
    FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': unknown key '%s' (keys: %s)", spec, key, fno_keys);
  return FSDP_SUCCESS;
}

/* What a cnn: spec needs, and the groups' divisibility. */
static FSDPErrorCode check_cnn(FSDPModel m, const char *spec)
{
  ConvGeom *g = &m->grid;
  FSDPCheck(
      g->nd && g->cin && m->out && (m->hidden || !m->depth), MPI_COMM_SELF, FSDP_ERR_ARG,
      "model spec '%s' lacks %s%s%s%s(grid, in and out are required, and channels with depth > 0)", spec,
      g->nd ? "" : "grid= ", g->cin ? "" : "in= ", m->out ? "" : "out= ", m->hidden || !m->depth ? "" : "channels= ");
  FSDPCheck(!m->depth || (g->cin % g->groups == 0 && m->hidden % g->groups == 0), MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': groups=%lld does not divide both in=%lld and channels=%lld (each group convolves "
            "in / groups channels into channels / groups)",
            spec, (long long)g->groups, (long long)g->cin, (long long)m->hidden);
  FSDPCheck(!m->depth || !m->norm_groups || m->hidden % m->norm_groups == 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': norm=groupnorm:%lld does not divide channels=%lld", spec, (long long)m->norm_groups,
            (long long)m->hidden);
  for (int d = 0; d < 2; d++) { /* kernel, stride and dilation: the same along every spatial dimension */
    bool spatial = d >= 3 - g->nd;
    g->kernel[d] = spatial ? g->kernel[2] : 1;
    g->stride[d] = spatial ? g->stride[2] : 1;
    g->dilation[d] = spatial ? g->dilation[2] : 1;
    g->pad[d] = spatial ? g->pad[2] : -1;
  }
  return FSDP_SUCCESS;
}

/* A unet: spec's: the cnn's checks, an odd kernel (the skips join fields of
   one size), and a grid that halves levels - 1 times. */
static FSDPErrorCode check_unet(FSDPModel m, const char *spec)
{
  ConvGeom *g = &m->grid;
  FSDPCheck(m->depth && m->hidden, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s' lacks %s%s(grid, in, out, channels and levels are required)", spec,
            m->depth ? "" : "levels= ", m->hidden ? "" : "channels= ");
  FSDPCall(check_cnn(m, spec));
  FSDPCheck(g->kernel[2] % 2 == 1, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': kernel=%lld is even: a U-Net's convolutions keep the grid's size, which needs an odd "
            "kernel",
            spec, (long long)g->kernel[2]);
  FSDPCheck(m->hidden << (m->depth - 1) <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': channels=%lld doubled %lld times is too large", spec, (long long)m->hidden,
            (long long)m->depth - 1);
  for (int d = 3 - g->nd; d < 3; d++)
    FSDPCheck(g->size[d] % (1 << (m->depth - 1)) == 0, MPI_COMM_SELF, FSDP_ERR_ARG,
              "model spec '%s': grid axis %d has %lld points, which levels=%lld halves %lld times: it must be a "
              "multiple of %d",
              spec, d - (3 - g->nd), (long long)g->size[d], (long long)m->depth, (long long)m->depth - 1,
              1 << (m->depth - 1));
  return FSDP_SUCCESS;
}

/* An fno: spec's: all six sizes, and modes the grid has (the last axis's
   real FFT has size / 2 + 1 of them, the others' kept modes are m positive
   and m negative frequencies). */
static FSDPErrorCode check_fno(FSDPModel m, const char *spec)
{
  ConvGeom *g = &m->grid;
  FSDPCheck(g->nd && g->cin && m->out && m->hidden && m->modes && m->depth, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s' lacks %s%s%s%s%s%s(grid, in, out, width, modes and layers are required)", spec,
            g->nd ? "" : "grid= ", g->cin ? "" : "in= ", m->out ? "" : "out= ", m->hidden ? "" : "width= ",
            m->modes ? "" : "modes= ", m->depth ? "" : "layers= ");
  for (int d = 3 - g->nd; d < 3; d++) {
    int64_t most = d == 2 ? g->size[d] / 2 + 1 : g->size[d] / 2;
    FSDPCheck(m->modes <= most, MPI_COMM_SELF, FSDP_ERR_ARG,
              "model spec '%s': modes=%lld is more than grid axis %d's %lld points have (at most %lld%s)", spec,
              (long long)m->modes, d - (3 - g->nd), (long long)g->size[d], (long long)most,
              d == 2 ? ": its real FFT's size / 2 + 1" : ": size / 2 positive and as many negative frequencies");
  }
#ifndef FSDP_HAVE_FFTW
  FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "model spec '%s': an fno: model's spectral convolutions need FFTW, and this libfsdp was built without it "
            "(configure --with-fftw; Debian: libfftw3-dev)",
            spec);
#endif
  for (int d = 0; d < 3; d++) { /* its convolutions are 1x1 */
    g->kernel[d] = g->stride[d] = g->dilation[d] = 1;
    g->pad[d] = 0;
  }
  return FSDP_SUCCESS;
}

/* The sizes a gpt: spec needs, and what they must satisfy. */
static FSDPErrorCode check_gpt(FSDPModel m, const char *spec)
{
  FSDPCheck(m->vocab && m->seq && m->dim && m->heads && m->depth, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s' lacks %s%s%s%s%s(vocab, ctx, dim, heads and layers are required)", spec,
            m->vocab ? "" : "vocab= ", m->seq ? "" : "ctx= ", m->dim ? "" : "dim= ", m->heads ? "" : "heads= ",
            m->depth ? "" : "layers= ");
  FSDPCheck(m->dim % m->heads == 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': heads=%lld does not divide dim=%lld (each head takes dim / heads features)", spec,
            (long long)m->heads, (long long)m->dim);
  FSDPCheck(m->vocab <= (1 << 24), MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': vocab=%lld is above 2^24: token ids travel as floats, exact only up to 2^24", spec,
            (long long)m->vocab);
  /* The widest row (logits) must stay addressable by the kernels' int32 sizes. */
  FSDPCheck(m->seq * m->vocab <= INT32_MAX && m->seq * 4 * m->dim <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': ctx * vocab = %lld is too large", spec, (long long)(m->seq * m->vocab));
  m->in = m->seq;
  m->out = m->seq * m->vocab;
  return FSDP_SUCCESS;
}

static FSDPErrorCode parse_spec(FSDPModel m, const char *spec)
{
  char buf[512], *item, *next;
  const char *seen[16][2]; /* the keys so far and their values */
  int nseen = 0, n;

  FSDPCheck(strlen(spec) < sizeof buf, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%.40s...' is too long", spec);
  m->gpt = strncmp(spec, "gpt:", 4) == 0;
  m->unet = strncmp(spec, "unet:", 5) == 0;
  m->fno = strncmp(spec, "fno:", 4) == 0;
  m->cnn = m->unet || m->fno || strncmp(spec, "cnn:", 4) == 0;
  FSDPCheck(m->gpt || m->cnn || strncmp(spec, "mlp:", 4) == 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s': unknown model type (the ones known are 'mlp:in=I,hidden=H,depth=D,out=O,act=relu|tanh|"
            "gelu,norm=none|layernorm', 'gpt:vocab=V,ctx=T,dim=C,heads=H,layers=L,tied=0|1' and "
            "'cnn:grid=HxW,in=C,out=O,depth=D,channels=K,kernel=3,stride=1,dilation=1,groups=1,pad=P,"
            "padding=zeros|circular|reflect,norm=none|groupnorm:G,act=relu|tanh|gelu' and "
            "'unet:grid=HxW,in=C,out=O,channels=K,levels=L,kernel=3,padding=zeros|circular|reflect,"
            "norm=none|groupnorm:G,act=relu|tanh|gelu' and 'fno:grid=HxW,in=C,out=O,width=K,modes=M,layers=L,"
            "act=relu|tanh|gelu')",
            spec);
  /* pad -1: "same", dilation * (kernel - 1) / 2 on each side */
  m->grid =
      (ConvGeom){.groups = 1, .kernel = {1, 1, 3}, .stride = {1, 1, 1}, .dilation = {1, 1, 1}, .pad = {-1, -1, -1}};
  strcpy(buf, strchr(spec, ':') + 1);
  m->act = m->gpt || m->fno ? FSDP_ACT_GELU : FSDP_ACT_RELU;
  /* Item by item, empty ones included: 'in=16,,hidden=32' or a trailing comma is a slip, not a spec. */
  for (item = buf, n = 1; *buf && item; item = next, n++) {
    char *eq, *comma = strchr(item, ',');
    const char *key = item, *value;
    next = comma ? comma + 1 : NULL;
    if (comma) *comma = '\0';
    FSDPCheck(*item || comma, MPI_COMM_SELF, FSDP_ERR_ARG,
              "model spec '%s': item %d is empty (a trailing comma): remove the comma", spec, n);
    FSDPCheck(*item, MPI_COMM_SELF, FSDP_ERR_ARG,
              "model spec '%s': item %d is empty (the ',' at character %d): remove the extra comma", spec, n,
              (int)(comma - buf) + 5);
    eq = strchr(item, '=');
    FSDPCheck(eq, MPI_COMM_SELF, FSDP_ERR_ARG, "model spec '%s': '%s' is not key=value", spec, item);
    *eq = '\0';
    value = eq + 1;
    /* Last-one-wins would hide a typo'd edit of a long spec. */
    for (int j = 0; j < nseen; j++)
      FSDPCheck(strcmp(seen[j][0], key), MPI_COMM_SELF, FSDP_ERR_ARG,
                "model spec '%s': key '%s' is given twice (%s and %s)", spec, key, seen[j][1], value);
    if (nseen < (int)(sizeof seen / sizeof seen[0])) {
      seen[nseen][0] = key;
      seen[nseen++][1] = value;
    }
    if (m->gpt) FSDPCall(gpt_key(m, spec, key, value));
    else if (m->unet) FSDPCall(unet_key(m, spec, key, value));
    else if (m->fno) FSDPCall(fno_key(m, spec, key, value));
    else if (m->cnn) FSDPCall(cnn_key(m, spec, key, value));
    else FSDPCall(mlp_key(m, spec, key, value));
  }
  if (m->gpt) return check_gpt(m, spec);
  if (m->unet) return check_unet(m, spec);
  if (m->fno) return check_fno(m, spec);
  if (m->cnn) return check_cnn(m, spec);
  FSDPCheck(m->in && m->hidden && m->depth && m->out, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model spec '%s' lacks %s%s%s%s(in, hidden, depth and out are required)", spec,
            m->in ? "" : "in= ", m->hidden ? "" : "hidden= ", m->depth ? "" : "depth= ", m->out ? "" : "out= ");
  return FSDP_SUCCESS;
}

/* A layer of `block` (its unit under block wrapping); GPT layers see rows as m->seq positions. */
static FSDPErrorCode add_layer(FSDPModel m, LayerKind kind, const char *name, const char *block, int64_t in,
                               int64_t out)
{
  Layer *l;
  FSDPCall(FSDPGrowArray_Private(&m->layers, sizeof *m->layers, m->nlayers + 1, &m->layer_capacity, FSDP_MEM_OTHER));
  l = &m->layers[m->nlayers++];
  memset(l, 0, sizeof *l);
  l->ops = LayerKinds_Private[kind];
  l->act = m->act;
  snprintf(l->name, sizeof l->name, "%s", name);
  snprintf(l->block, sizeof l->block, "%s", block);
  l->in = in;
  l->out = out;
  l->seq = m->gpt ? m->seq : 1;
  l->dim = m->dim;
  l->heads = m->heads;
  l->vocab = m->vocab;
  l->nblocks = m->depth;
  l->nparams = l->ops->nparams;
  l->tie = -1;
  l->unit = -1;
  l->from = -1;
  l->input = m->nlayers - 2; /* the layer before; -1: the model's input */
  if (out > m->width) m->width = out;
  if (in > m->width) m->width = in;
  if (m->nlayers > 1 && in > m->grad_width) m->grad_width = in;
  return FSDP_SUCCESS;
}

static FSDPErrorCode build_mlp(FSDPModel m)
{
  char name[48], block[32];
  for (int64_t i = 0; i < m->depth; i++) {
    int64_t in = i == 0 ? m->in : m->hidden;
    snprintf(block, sizeof block, "blocks.%lld", (long long)i);
    snprintf(name, sizeof name, "%s.fc", block);
    FSDPCall(add_layer(m, LAYER_linear, name, block, in, m->hidden));
    if (m->layernorm) {
      snprintf(name, sizeof name, "%s.norm", block);
      FSDPCall(add_layer(m, LAYER_layernorm, name, block, m->hidden, m->hidden));
    }
    snprintf(name, sizeof name, "%s.act", block);
    FSDPCall(add_layer(m, LAYER_activation, name, block, m->hidden, m->hidden));
  }
  FSDPCall(add_layer(m, LAYER_linear, "head", "root", m->hidden, m->out));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelAddLayer_Private(FSDPModel m, LayerKind kind, const char *name, const char *block, int64_t in,
                                        int64_t out)
{
  return add_layer(m, kind, name, block, in, out);
}

void FSDPModelReadFrom_Private(FSDPModel m, int i, int from)
{
  m->layers[i].input = from;
  if (from >= 0) m->layers[from].tapped = true;
}

void FSDPModelJoin_Private(FSDPModel m, int i, int from)
{
  m->layers[i].from = from;
  if (from >= 0) m->layers[from].tapped = true;
}

FSDPErrorCode FSDPModelAddConv_Private(FSDPModel m, const char *name, const char *block, const int64_t pad[3],
                                       ConvGeom *g)
{
  int64_t in = g->cin, out = g->cout;
  for (int d = 0; d < 3; d++) {
    int64_t span = g->dilation[d] * (g->kernel[d] - 1) + 1, axis = d - (3 - g->nd);
    g->pad[d] = pad[d] >= 0 ? pad[d] : g->dilation[d] * (g->kernel[d] - 1) / 2;
    FSDPCheck(span <= g->size[d] + 2 * g->pad[d], MPI_COMM_SELF, FSDP_ERR_ARG,
              "%s: layer %s: the kernel spans %lld points along grid axis %lld (kernel=%lld, "
              "dilation=%lld), more than its %lld points padded by %lld on each side",
              m->where, name, (long long)span, (long long)axis, (long long)g->kernel[d], (long long)g->dilation[d],
              (long long)g->size[d], (long long)g->pad[d]);
    FSDPCheck(g->padding == CONV_PAD_ZEROS || g->pad[d] < g->size[d] ||
                  (g->padding == CONV_PAD_CIRCULAR && g->pad[d] == g->size[d]),
              MPI_COMM_SELF, FSDP_ERR_ARG,
              "%s: layer %s: padding=%s by %lld points along grid axis %lld of %lld points: it must be "
              "%s the axis",
              m->where, name, padding_names[g->padding], (long long)g->pad[d], (long long)axis, (long long)g->size[d],
              g->padding == CONV_PAD_CIRCULAR ? "at most" : "shorter than");
    g->osize[d] = (g->size[d] + 2 * g->pad[d] - span) / g->stride[d] + 1;
    in *= g->size[d];
    out *= g->osize[d];
  }
  FSDPCheck(in <= INT32_MAX && out <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_ARG,
            "%s: layer %s: %lld inputs and %lld outputs per sample, above 2^31", m->where, name, (long long)in,
            (long long)out);
  FSDPCall(add_layer(m, LAYER_conv, name, block, in, out));
  m->layers[m->nlayers - 1].conv = *g;
  return FSDP_SUCCESS;
}

/* A convolution with the spec's pad, or "same" padding. */
static FSDPErrorCode add_conv(FSDPModel m, const char *name, const char *block, ConvGeom *g)
{
  return FSDPModelAddConv_Private(m, name, block, m->grid.pad, g);
}

/* <block>.conv<suffix> from g's input to cout channels, the spec's
   GroupNorm <block>.norm<suffix>, and <block>.act<suffix>; g moves on to
   the output's grid. */
static FSDPErrorCode add_conv_block(FSDPModel m, const char *block, const char *suffix, ConvGeom *g, int64_t cout)
{
  char name[48];
  int64_t out;
  snprintf(name, sizeof name, "%s.conv%s", block, suffix);
  g->cout = cout;
  FSDPCall(add_conv(m, name, block, g));
  memcpy(g->size, g->osize, sizeof g->size);
  g->cin = cout;
  out = m->layers[m->nlayers - 1].out;
  if (m->norm_groups) {
    snprintf(name, sizeof name, "%s.norm%s", block, suffix);
    FSDPCall(add_layer(m, LAYER_groupnorm, name, block, out, out));
    m->layers[m->nlayers - 1].conv = (ConvGeom){
        .nd = g->nd, .cin = cout, .cout = cout, .groups = m->norm_groups, .size = {g->size[0], g->size[1], g->size[2]}};
  }
  snprintf(name, sizeof name, "%s.act%s", block, suffix);
  FSDPCall(add_layer(m, LAYER_activation, name, block, out, out));
  return FSDP_SUCCESS;
}

/* The model's head: a convolution of g's kernel to the out channels in one group (unit "root"). */
static FSDPErrorCode add_head(FSDPModel m, ConvGeom *g)
{
  g->cout = m->out;
  g->groups = 1;
  FSDPCall(add_conv(m, "head", "root", g));
  m->out = m->layers[m->nlayers - 1].out;
  m->ogrid = m->layers[m->nlayers - 1].conv;
  return FSDP_SUCCESS;
}

/* depth blocks of a convolution and an activation (unit "blocks.<i>"), then
   the head; the kernel, stride, dilation and padding are every
   convolution's.  residual=1: a block whose output has its input's shape
   adds its input, x + act(norm(conv(x))). */
static FSDPErrorCode build_cnn(FSDPModel m)
{
  char block[32], name[48];
  ConvGeom g = m->grid;
  m->in = g.cin * g.size[0] * g.size[1] * g.size[2];
  for (int64_t i = 0; i < m->depth; i++) {
    ConvGeom before = g;
    int from = m->nlayers - 1;
    int64_t in = from >= 0 ? m->layers[from].out : m->in;
    snprintf(block, sizeof block, "blocks.%lld", (long long)i);
    FSDPCall(add_conv_block(m, block, "", &g, m->hidden));
    if (m->residual && g.cin == before.cin && !memcmp(g.size, before.size, sizeof g.size)) {
      snprintf(name, sizeof name, "%s.add", block);
      FSDPCall(add_layer(m, LAYER_add, name, block, in, in));
      FSDPModelJoin_Private(m, m->nlayers - 1, from);
    }
  }
  return add_head(m, &g);
}

/* A layer without parameters on g's grid, halving it (max pooling, 2 per
   axis) or doubling it (a transposed convolution, kernel 2, stride 2, from
   g's channels to cout): PyTorch's nn.MaxPool(2) and nn.ConvTranspose(c,
   cout, 2, stride=2).  g moves on to the output. */
static FSDPErrorCode add_resample(FSDPModel m, LayerKind kind, const char *name, const char *block, ConvGeom *g,
                                  int64_t cout)
{
  bool up = kind == LAYER_convtranspose;
  ConvGeom r = {.nd = g->nd, .groups = 1, .padding = CONV_PAD_ZEROS};
  int64_t in = g->cin, out = cout;
  for (int d = 0; d < 3; d++) {
    bool spatial = d >= 3 - g->nd;
    r.kernel[d] = r.stride[d] = spatial ? 2 : 1;
    r.dilation[d] = 1;
    r.pad[d] = 0;
    /* A transposed convolution's geometry is its adjoint's: from the larger grid to the smaller. */
    r.size[d] = up && spatial ? 2 * g->size[d] : g->size[d];
    r.osize[d] = up || !spatial ? g->size[d] : g->size[d] / 2;
    in *= g->size[d];
    out *= up ? r.size[d] : r.osize[d];
    g->size[d] = up ? r.size[d] : r.osize[d];
  }
  r.cin = up ? cout : g->cin;
  r.cout = up ? g->cin : cout;
  FSDPCall(add_layer(m, kind, name, block, in, out));
  m->layers[m->nlayers - 1].conv = r;
  g->cin = cout;
  return FSDP_SUCCESS;
}

/* y = [x, output of layer from]: channels-first rows, so the skip's channels follow. */
static FSDPErrorCode add_concat(FSDPModel m, const char *name, const char *block, int from)
{
  int64_t in = m->layers[m->nlayers - 1].out;
  FSDPCall(add_layer(m, LAYER_concat, name, block, in, in + m->layers[from].out));
  FSDPModelJoin_Private(m, m->nlayers - 1, from);
  return FSDP_SUCCESS;
}

/* The U-Net of Ronneberger et al. with "same" convolutions: level i of the
   encoder (unit "down.<i>") max-pools the grid by 2 (not level 0) and runs
   two convolution blocks to channels * 2^i; level i of the decoder (unit
   "up.<i>", from levels - 2 down to 0) doubles the grid with a transposed
   convolution to channels * 2^i, concatenates the encoder's level-i output,
   and runs two convolution blocks; then a 1x1 head. */
static FSDPErrorCode build_unet(FSDPModel m)
{
  char name[48], block[32];
  ConvGeom g = m->grid;
  int skip[UNET_MAX_LEVELS];
  m->in = g.cin * g.size[0] * g.size[1] * g.size[2];
  for (int i = 0; i < m->depth; i++) {
    snprintf(block, sizeof block, "down.%d", i);
    if (i > 0) {
      snprintf(name, sizeof name, "%s.pool", block);
      FSDPCall(add_resample(m, m->avgpool ? LAYER_avgpool : LAYER_maxpool, name, block, &g, g.cin));
    }
    FSDPCall(add_conv_block(m, block, "1", &g, m->hidden << i));
    FSDPCall(add_conv_block(m, block, "2", &g, m->hidden << i));
    skip[i] = m->nlayers - 1;
  }
  for (int i = (int)m->depth - 2; i >= 0; i--) {
    snprintf(block, sizeof block, "up.%d", i);
    snprintf(name, sizeof name, "%s.up", block);
    FSDPCall(add_resample(m, LAYER_convtranspose, name, block, &g, m->hidden << i));
    snprintf(name, sizeof name, "%s.cat", block);
    FSDPCall(add_concat(m, name, block, skip[i]));
    g.cin = 2 * (m->hidden << i);
    FSDPCall(add_conv_block(m, block, "1", &g, m->hidden << i));
    FSDPCall(add_conv_block(m, block, "2", &g, m->hidden << i));
  }
  for (int d = 0; d < 3; d++) g.kernel[d] = 1;
  return add_head(m, &g);
}

/* The Fourier neural operator of Li et al. (2020): a 1x1 convolution lifts
   the input to width channels (unit "lift"); each of the layers blocks
   (unit "blocks.<i>") is act(spectral(h) + w(h)), a spectral convolution
   keeping modes frequencies per axis plus a 1x1 convolution of the same
   input, without the activation in the last block; a 1x1 head projects to
   out channels (unit "root"). */
static FSDPErrorCode build_fno(FSDPModel m)
{
  char name[48], block[32];
  ConvGeom g = m->grid;
  m->in = g.cin * ConvInPoints(&g);
  g.cout = m->hidden;
  FSDPCall(add_conv(m, "lift", "lift", &g));
  g.cin = m->hidden;
  for (int64_t i = 0; i < m->depth; i++) {
    int input = m->nlayers - 1, spectral;
    int64_t size = m->layers[input].out;
    snprintf(block, sizeof block, "blocks.%lld", (long long)i);
    snprintf(name, sizeof name, "%s.spectral", block);
    FSDPCall(add_layer(m, LAYER_spectral, name, block, size, size));
    spectral = m->nlayers - 1;
    m->layers[spectral].conv = g;
    for (int d = 0; d < 3; d++) m->layers[spectral].conv.kernel[d] = d < 3 - g.nd ? 1 : m->modes;
    snprintf(name, sizeof name, "%s.w", block);
    FSDPCall(add_conv(m, name, block, &g));
    FSDPModelReadFrom_Private(m, m->nlayers - 1, input);
    snprintf(name, sizeof name, "%s.add", block);
    FSDPCall(add_layer(m, LAYER_add, name, block, size, size));
    FSDPModelJoin_Private(m, m->nlayers - 1, spectral);
    if (i + 1 < m->depth) {
      snprintf(name, sizeof name, "%s.act", block);
      FSDPCall(add_layer(m, LAYER_activation, name, block, size, size));
    }
  }
  return add_head(m, &g);
}

/* Embedding (unit "embed"), the blocks (one unit each), the final LayerNorm
   and the head (unit "head").  Tied, the head has no weight of its own: it
   uses the embedding's wte, in the embedding's unit. */
static FSDPErrorCode build_gpt(FSDPModel m)
{
  char name[48];
  int64_t tc = m->seq * m->dim;
  FSDPCall(add_layer(m, LAYER_embedding, "", "embed", m->seq, tc));
  for (int64_t i = 0; i < m->depth; i++) {
    snprintf(name, sizeof name, "blocks.%lld", (long long)i);
    FSDPCall(add_layer(m, LAYER_transformer, name, name, tc, tc));
  }
  FSDPCall(add_layer(m, LAYER_layernorm, "ln_f", "head", tc, tc));
  FSDPCall(add_layer(m, LAYER_lmhead, "lm_head", "head", tc, m->seq * m->vocab));
  if (m->tied) {
    Layer *head = &m->layers[m->nlayers - 1];
    head->tie = 0;
    head->nparams = 0;
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelCreate(FSDPContext ctx, const char *spec, FSDPModel *model)
{
  FSDPModel m;
  FSDPErrorCode ierr;

  FSDPCheck(model, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelCreate: model must not be NULL");
  *model = NULL;
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelCreate: ctx must not be NULL");
  FSDPCheck(spec, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelCreate: spec must not be NULL");
  FSDPCall(FSDPCalloc(1, sizeof *m, FSDP_MEM_OTHER, &m));
  m->ctx = ctx;
  m->tf32 = true;
  m->winograd = true;
  ierr = FSDPStrdup(spec, &m->spec);
  snprintf(m->where, sizeof m->where, "model spec '%s'", spec);
  m->file = strncmp(spec, "file:", 5) == 0;
  if (!ierr && m->file) ierr = FSDPModelBuildFile_Private(m, spec + 5);
  else if (!ierr) ierr = parse_spec(m, spec);
  if (!ierr && !m->file)
    ierr = m->gpt    ? build_gpt(m)
           : m->fno  ? build_fno(m)
           : m->unet ? build_unet(m)
           : m->cnn  ? build_cnn(m)
                     : build_mlp(m);
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

FSDPErrorCode FSDPModelSetTF32(FSDPModel model, bool allow)
{
  CHECK_MODEL(model);
  model->tf32 = allow;
  return FSDP_SUCCESS;
}

/* -fsdp_attention's values, in AttentionChoice's order. */
static const char *const attention_names[] = {"auto", "blocked", "full", NULL};

FSDPErrorCode FSDPModelSetFromOptions(FSDPModel model)
{
  char wrap[64];
  bool set, tf32;
  int64_t seed, threads;

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
  FSDPCall(
      FSDPOptionsGetBool("-fsdp_tf32", "on a GPU, fp32 GEMMs may use TF32 tensor cores", model->tf32, &tf32, &set));
  if (set) FSDPCall(FSDPModelSetTF32(model, tf32));
  FSDPCall(FSDPOptionsGetBool("-fsdp_conv_winograd",
                              "3 x 3 convolutions with stride 1 between 8 channels or more per group may use "
                              "Winograd's F(2x2,3x3) (false: the direct sum)",
                              model->winograd, &model->winograd, &set));
  FSDPCall(FSDPOptionsGetEnum("-fsdp_attention",
                              "a transformer's attention on the host: blocked (the online softmax over blocks of "
                              "keys, keeping heads x ctx per sequence), full (the heads x ctx x ctx probabilities), "
                              "or auto (blocked where ctx is more than one block of keys)",
                              attention_names, model->attention, &model->attention, NULL));
  FSDPCall(FSDPOptionsGetInt("-fsdp_blas_threads",
                             "OpenBLAS threads per rank (0: the CPUs of the node per rank there, unless "
                             "OPENBLAS_NUM_THREADS or OMP_NUM_THREADS says)",
                             model->blas_threads, 0, 1024, &threads, &set));
  if (set) model->blas_threads = (int)threads;
  FSDPCall(FSDPOptionsGetBool("-fsdp_activation_checkpointing",
                              "keep only each block's input and output in forward and recompute the rest in "
                              "backward",
                              model->checkpointing, &tf32, &set));
  if (set) FSDPCall(FSDPModelSetActivationCheckpointing(model, tf32));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ set up */

/* The mixed-precision scratch (model->wide). */
static size_t wide_bytes(FSDPModel m)
{
  return (size_t)(m->wide_rows + LAYER_MAX_PARAMS * m->wide_slot) * sizeof(float);
}

/* Elements of a layer's parameters. */
static int64_t layer_numel(const Layer *l)
{
  int64_t numel = 0;
  for (int p = 0; p < l->nparams; p++) {
    int ndim;
    int64_t shape[LAYER_MAX_NDIM], e = 1;
    l->ops->param_shape(l, p, &ndim, shape);
    for (int d = 0; d < ndim; d++) e *= shape[d];
    numel += e;
  }
  return numel;
}

static FSDPErrorCode new_unit(FSDPModel m, const char *name)
{
  FSDPCall(FSDPGrowArray_Private(&m->units, sizeof *m->units, m->nunits + 1, &m->unit_capacity, FSDP_MEM_OTHER));
  FSDPCall(FSDPContextAddUnit(m->ctx, name, &m->units[m->nunits]));
  m->nunits++;
  return FSDP_SUCCESS;
}

/* The units of the wrapping policy, in execution order; each layer with
   parameters joins one.  Units are runs of consecutive layers; a tied head
   then joins its embedding's unit, which it uses again at the end. */
static FSDPErrorCode build_units(FSDPModel m)
{
  int64_t in_unit = 0;
  bool open = false;
  char name[96], block[64] = "";

  for (int i = 0; i < m->nlayers; i++) {
    Layer *l = &m->layers[i];
    if (l->nparams == 0) continue;
    switch (m->wrap) {
    case FSDP_WRAP_MODEL:
      if (!open) FSDPCall(new_unit(m, "root"));
      open = true;
      break;
    case FSDP_WRAP_BLOCK: /* the layers of a block ("blocks.<i>") share its unit */
      if (m->nunits == 0 || strcmp(l->block, block)) {
        FSDPCall(new_unit(m, l->block));
        snprintf(block, sizeof block, "%s", l->block);
      }
      break;
    case FSDP_WRAP_SIZE:
      if (!open) {
        /* Whatever cannot reach min_numel any more is the root unit. */
        int64_t rest = 0;
        for (int j = i; j < m->nlayers; j++) rest += layer_numel(&m->layers[j]);
        if (rest < m->min_numel) snprintf(name, sizeof name, "root");
        else snprintf(name, sizeof name, "unit%d", m->nunits);
        FSDPCall(new_unit(m, name));
        open = true;
        in_unit = 0;
      }
      break;
    }
    l->unit = m->nunits - 1;
    for (int p = 0; p < l->nparams; p++) {
      int ndim;
      int64_t shape[LAYER_MAX_NDIM];
      l->ops->param_shape(l, p, &ndim, shape);
      snprintf(name, sizeof name, "%s%s%s", l->name, l->name[0] ? "." : "", l->ops->param_names[p]);
      FSDPCall(FlatParamAddParam(m->units[l->unit], name, ndim, shape, &l->param[p]));
    }
    in_unit += layer_numel(l);
    if (m->wrap == FSDP_WRAP_SIZE && in_unit >= m->min_numel) open = false;
  }
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].tie >= 0) {
      const Layer *e = &m->layers[m->layers[i].tie];
      m->layers[i].unit = e->unit;
      m->layers[i].param[0] = e->param[EMBEDDING_WTE];
    }
  return FSDP_SUCCESS;
}

/* Each layer kind's initialization (PyTorch's defaults), on the elements of
   this shard.  The random stream is the parameter's name. */
static FSDPErrorCode init_shard(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values, void *user)
{
  FSDPModel m = user;
  const char *name;

  for (int i = 0; i < m->nlayers; i++) {
    Layer *l = &m->layers[i];
    if (l->unit < 0 || m->units[l->unit] != unit) continue;
    for (int p = 0; p < l->nparams; p++) {
      if (id != l->param[p]) continue;
      FSDPCall(FlatParamGetParamInfo(unit, id, &name, NULL, NULL, NULL));
      FSDPCall(l->ops->init(l, p, m->seed, name, begin, end, values));
      return FSDP_SUCCESS;
    }
  }
  return FSDP_SUCCESS; /* a unit the model does not own stays zero */
}

/* Whether the environment sets OpenBLAS's threads: OpenBLAS reads these
   three, and takes a positive number only (empty, 0 or text: one per CPU). */
static bool blas_threads_in_environment(void)
{
  const char *names[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"};
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(names[i]);
    if (v && atoi(v) > 0) return true;
  }
  return false;
}

/* OpenBLAS starts a thread per CPU in every process: ranks sharing a node
   would each start one per CPU of the node, and their GEMMs would fight for
   the cores (a GPT at W = 2 on 2 cores ran 7x slower).  Unless the user set
   a number, each rank takes its share of its node's CPUs. */
int FSDPFitBlasThreads_Private(int asked, int share, const char **why)
{
#ifdef FSDP_HAVE_OPENBLAS_THREADS
  int threads;
  if (asked > 0) {
    threads = asked;
    *why = "-fsdp_blas_threads";
  } else if (blas_threads_in_environment()) {
    *why = "the environment's";
    return openblas_get_num_threads();
  } else {
    threads = share > 1 ? share : 1;
    *why = "the CPUs per rank on this node";
  }
  {
    fenv_t fpenv; /* OpenBLAS may start threads: with the caller's traps masked, and no flag left */
    FSDPFPEnter_Private(&fpenv);
    openblas_set_num_threads(threads);
    FSDPFPLeave_Private(&fpenv);
  }
  return threads;
#else
  (void)asked;
  (void)share;
  *why = "not OpenBLAS: its own";
  return 1;
#endif
}

static void fit_blas_threads(FSDPModel m)
{
  int share = m->blas_share > 0 ? m->blas_share : m->ctx->node_ranks > 0 ? m->ctx->node_cpus / m->ctx->node_ranks : 1;
  m->blas_threads = FSDPFitBlasThreads_Private(m->blas_threads, share, &m->blas_why);
}

/* Outside a GPT, checkpointing works on runs of layers: a layer is
   droppable when only the next layer reads its output, and that layer is
   of its block and its unit (or of none), so that backward, arriving at
   the run's last layer, can run the run forward again from its first
   layer's input with one unit's parameters (conv, norm, act of a CNN's
   block; a GPT's transformer layers recompute their own saved state). */
static void mark_droppable(FSDPModel m)
{
  int run_unit = -1;
  for (int i = 0; i < m->nlayers; i++) {
    Layer *l = &m->layers[i];
    const Layer *next = i + 1 < m->nlayers ? &m->layers[i + 1] : NULL;
    bool start = i == 0 || !m->layers[i - 1].droppable;
    if (start) run_unit = l->unit;
    l->droppable = !m->gpt && next && !l->ops->recompute && !l->tapped && next->input == i && l->block[0] &&
                   !strcmp(l->block, next->block) && (next->unit < 0 || run_unit < 0 || next->unit == run_unit);
    if (l->droppable && run_unit < 0) run_unit = next->unit;
  }
}

/* The layers' own state (LayerOps.setup: an FNO's FFT plans). */
static FSDPErrorCode setup_layers(FSDPModel m)
{
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].ops->setup) FSDPCall(m->layers[i].ops->setup(&m->layers[i]));
  return FSDP_SUCCESS;
}

/* The memory-light attention is the host's (its GPU kernels are not written).  auto keeps the probabilities
   where the keys fit one block: they are then no larger than the block's scratch, and recomputing them costs a
   GEMM (up to 9% of a step at ctx 64, doc/nn.md). */
static void choose_attention(FSDPModel model, bool on_device)
{
  for (int i = 0; i < model->nlayers; i++) {
    Layer *l = &model->layers[i];
    bool blocked =
        model->attention == ATTENTION_BLOCKED || (model->attention == ATTENTION_AUTO && l->seq > FSDP_ATTENTION_BLOCK);
    if (l->ops == &LayerOps_transformer_Private) l->attn_block = !on_device && blocked ? FSDP_ATTENTION_BLOCK : 0;
  }
}

/* The host kernels compute in fp32: a low-precision weight is widened just
   before use, WIDE_ROWS rows at a time, so that the scratch stays small next
   to the unsharded buffers mixed precision halves.  cuBLAS multiplies 16-bit
   weights as they are: only vectors are widened. */
static void size_widening(FSDPModel model, bool on_device)
{
  model->wide_rows = on_device ? 0 : WIDE_ROWS * model->width;
  model->wide_slot = model->width;
  if (model->gpt || model->cnn || model->file) { /* layers that widen all their parameters at once
                                                    (FSDPModelLayerParams_Private) */
    model->wide_rows = 0;
    for (int i = 0; i < model->nlayers; i++)
      if (layer_numel(&model->layers[i]) > model->wide_rows) model->wide_rows = layer_numel(&model->layers[i]);
    if (model->gpt) model->wide_slot = model->dim; /* ln_f's weight and bias */
  }
}

size_t FSDPModelScratchBytes_Private(FSDPModel model, bool on_device, FSDPDataType view_dtype)
{
  size_t bytes = 0;
  if (model->gpt && model->tied) bytes += (size_t)(model->vocab * model->dim) * sizeof(float);
  if (view_dtype != FSDP_FLOAT32) {
    size_widening(model, on_device);
    bytes += wide_bytes(model);
  }
  return bytes;
}

FSDPErrorCode FSDPModelLayOut_Private(FSDPModel model, bool on_device)
{
  CHECK_MODEL(model);
  FSDPCheck(!model->setup && model->nunits == 0, MPI_COMM_SELF, FSDP_ERR_STATE,
            "model '%s' is already set up or laid out", model->spec);
  FSDPCall(build_units(model));
  mark_droppable(model);
  FSDPCall(setup_layers(model));
  choose_attention(model, on_device);
  return FSDP_SUCCESS;
}

double FSDPModelForwardFlops_Private(FSDPModel model)
{
  double flops = 0;
  for (int i = 0; i < model->nlayers; i++) {
    const Layer *l = &model->layers[i];
    double uses = 1; /* how often a row applies each weight */
    if (l->seq > 0) uses = (double)l->seq;
    else if (!strcmp(l->ops->type, "conv") || !strcmp(l->ops->type, "convtranspose"))
      uses = (double)ConvOutPoints(&l->conv);
    if (l->nparams > 0 && strcmp(l->ops->type, "embedding")) flops += 2.0 * (double)layer_numel(l) * uses;
    if (l->tie >= 0) flops += 2.0 * (double)l->vocab * (double)l->dim * uses; /* the embedding's weight, again */
    /* Attention's two products, q k^T and p v: 2 t^2 C multiply-adds per row, as nanoGPT counts them. */
    if (l->ops == &LayerOps_transformer_Private) flops += 4.0 * (double)l->seq * (double)l->seq * (double)l->dim;
  }
  return flops;
}

FSDPErrorCode FSDPModelSetUp(FSDPModel model)
{
  CHECK_MODEL(model);
  FSDPCollective(model->ctx->comm);
  FSDPCheck(!model->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "FSDPModelSetUp: model '%s' is already set up", model->spec);
  {
    /* Ranks with other seeds would initialize their shards from different streams. */
    FSDPSetting seed;
    FSDPCall(FSDPSettingSet_Private(&seed, "-fsdp_seed", "%llu", (unsigned long long)model->seed));
    FSDPCall(FSDPSettingsAgree_Private(model->ctx->comm, "FSDPModelSetUp", 1, &seed));
  }
  FSDPCall(build_units(model));
  mark_droppable(model);
  /* Agreed: a rank whose layer cannot set up must not leave the others in SetUp's collectives. */
  FSDPCall(FSDPErrorAgree_Private(model->ctx->comm, setup_layers(model)));
  FSDPCall(FSDPContextSetShardInit(model->ctx, init_shard, model));
  FSDPCall(FSDPContextSetUp(model->ctx));
  model->dev = model->ctx->dev;
  choose_attention(model, model->dev != NULL);
  model->view_dtype = FSDP_FLOAT32;
  if (model->nunits > 0) FSDPCall(FlatParamGetViewDataType(model->units[0], &model->view_dtype));
  if (model->gpt) { /* every rank sees the same context: each says so */
    FSDPCheck(!model->dev || model->view_dtype == FSDP_FLOAT32, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
              "FSDPModelSetUp: model '%s': the transformer layers on the GPU take fp32 parameters, not %s "
              "(-fsdp_param_dtype fp32, or -fsdp_device host)",
              model->spec, FSDPDataTypeName(model->view_dtype));
    if (model->tied) { /* agreed: every rank goes on to collectives */
      size_t bytes = (size_t)(model->vocab * model->dim) * sizeof(float);
      FSDPCall(FSDPErrorAgree_Private(model->ctx->comm,
                                      DeviceAlloc_Private(model->dev, bytes, FSDP_MEM_OTHER, &model->tied_grad)));
    }
  }
  /* Every rank sees the same context: each says so. */
  FSDPCheck(!(model->cnn || model->file) || !model->dev, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "FSDPModelSetUp: model '%s': the %s run on the host only; there are no CUDA kernels for them (use "
            "-fsdp_device host)",
            model->spec, model->file ? "layers of model files" : "convolution layers");
  if (model->view_dtype != FSDP_FLOAT32) {
    size_widening(model, model->dev != NULL);
    FSDPCall(DeviceAlloc_Private(model->dev, wide_bytes(model), FSDP_MEM_OTHER, &model->wide));
  }
  if (!model->dev) fit_blas_threads(model);
  model->setup = true;
  if (model->ctx->view_at_setup) FSDPCall(FSDPModelView(model, NULL)); /* -fsdp_view: the model after its context */
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelGetSizes(FSDPModel model, int64_t *in, int64_t *out, int64_t *numel)
{
  CHECK_MODEL(model);
  if (in) *in = model->in;
  if (out) *out = model->out;
  if (numel) {
    *numel = 0;
    for (int i = 0; i < model->nlayers; i++) *numel += layer_numel(&model->layers[i]);
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ forward and backward */

/* The model's buffers for n rows, one by one: where each is, how many
   elements of which size.  Host and device memory alike (DeviceAlloc_Private
   is malloc on the host); the GPU-only ones have 0 elements on the host. */
typedef struct {
  void *ptr;
  int64_t elems;
  size_t size;
} Buffer;

/* Per layer its output, its saved state and a tapped layer's skip gradient; then the model's. */
static int num_buffers(FSDPModel m) { return 3 * m->nlayers + 10; }

/* Whether activation checkpointing drops l's saved state after forward: it then shares m->shared_saved. */
static bool recomputed(const FSDPModel m, const Layer *l) { return m->checkpointing && l->ops->recompute; }

/* Whether activation checkpointing drops l's output and saved state after
   forward: backward runs l's run of dropped layers forward again, into
   m->run_pool.  Host only: a GPU's 16-bit copies of activations are
   not recomputed. */
static bool dropped(const FSDPModel m, const Layer *l) { return m->checkpointing && !m->dev && l->droppable; }

static int64_t saved_per_row(const Layer *l) { return l->ops->saved ? l->ops->saved(l) : 0; }

/* Floats per row of the largest run of dropped layers: their outputs and saved state. */
static int64_t largest_run(FSDPModel m)
{
  int64_t run = 0, largest = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const Layer *l = &m->layers[i];
    run = dropped(m, l) ? run + l->out + saved_per_row(l) : 0;
    largest = run > largest ? run : largest;
  }
  return largest;
}

/* The first layer of the run of dropped layers that layer i ends (i itself if it ends none). */
static int run_start(FSDPModel m, int i)
{
  int first = i;
  if (dropped(m, &m->layers[i])) return i; /* inside a run: its end recomputed it */
  while (first > 0 && dropped(m, &m->layers[first - 1])) first--;
  return first;
}

/* The dropped layers' outputs and saved state, each run from the start of the pool. */
static void point_into_pool(FSDPModel m, int64_t n, bool clear)
{
  int64_t offset = 0;
  for (int i = 0; i < m->nlayers; i++) {
    Layer *l = &m->layers[i];
    if (!dropped(m, l)) {
      offset = 0;
      continue;
    }
    l->y = clear ? NULL : m->run_pool + offset;
    offset += n * l->out;
    l->saved = clear || !saved_per_row(l) ? NULL : m->run_pool + offset;
    offset += n * saved_per_row(l);
  }
}

/* The largest need of scratch for n rows, and the largest per-row saved state of a recomputed layer. */
static void largest_needs(FSDPModel m, int64_t n, int64_t *work, int64_t *shared)
{
  *work = *shared = 0;
  for (int i = 0; i < m->nlayers; i++) {
    const Layer *l = &m->layers[i];
    int64_t w = (l->ops->work ? n * l->ops->work(l) : 0) + (l->ops->work_fixed ? l->ops->work_fixed(l) : 0);
    int64_t sv = recomputed(m, l) ? saved_per_row(l) : 0;
    *work = w > *work ? w : *work;
    *shared = sv > *shared ? sv : *shared;
  }
}

static Buffer buffer_at(FSDPModel m, int64_t n, int k)
{
  bool gpu = m->dev != NULL, low = gpu && m->view_dtype != FSDP_FLOAT32;
  int64_t work, shared;
  if (k < 3 * m->nlayers) { /* each layer's output, and what it saves for backward (a LayerNorm's statistics) */
    Layer *l = &m->layers[k / 3];
    if (k % 3 == 0) return (Buffer){&l->y, dropped(m, l) ? 0 : n * l->out, sizeof(float)};
    if (k % 3 == 2) return (Buffer){&l->dskip, l->tapped ? n * l->out : 0, sizeof(float)};
    return (Buffer){&l->saved, recomputed(m, l) || dropped(m, l) ? 0 : n * saved_per_row(l), sizeof(float)};
  }
  largest_needs(m, n, &work, &shared);
  switch (k - 3 * m->nlayers) {
  case 0: return (Buffer){&m->scratch[0], n * m->grad_width, sizeof(float)};
  case 1: return (Buffer){&m->scratch[1], n * m->grad_width, sizeof(float)};
  case 2: return (Buffer){&m->dy, n * m->out, sizeof(float)};
  case 3: return (Buffer){&m->input, gpu ? n * m->in : 0, sizeof(float)};
  /* labels are 8 bytes, regression targets out floats: room for either */
  case 4: return (Buffer){&m->target, gpu ? n * (m->out > 2 ? m->out : 2) : 0, sizeof(float)};
  case 5: return (Buffer){&m->low[0], low ? n * m->width : 0, 2};
  case 6: return (Buffer){&m->low[1], low ? n * m->width : 0, 2};
  case 7: return (Buffer){&m->work, work, sizeof(float)};
  case 8: return (Buffer){&m->run_pool, n * largest_run(m), sizeof(float)};
  default: return (Buffer){&m->shared_saved, n * shared, sizeof(float)};
  }
}

/* Bytes of the buffers for n rows: activations, saved state and scratch. */
static size_t buffer_bytes(FSDPModel m, int64_t n)
{
  size_t bytes = 0;
  for (int k = 0; k < num_buffers(m); k++) {
    Buffer b = buffer_at(m, n, k);
    bytes += (size_t)b.elems * b.size;
  }
  return bytes;
}

static FSDPErrorCode free_buffers(FSDPModel m)
{
  FSDPErrorCode ierr = FSDP_SUCCESS;
  for (int i = 0; i < m->nlayers; i++) /* not theirs to free */
    if (recomputed(m, &m->layers[i])) m->layers[i].saved = NULL;
  point_into_pool(m, 0, true);
  for (int k = 0; k < num_buffers(m); k++) {
    Buffer b = buffer_at(m, m->capacity, k);
    FSDPErrorCode e = DeviceFree_Private(m->dev, b.ptr, (size_t)b.elems * b.size, FSDP_MEM_OTHER);
    ierr = ierr ? ierr : e;
  }
  m->capacity = 0;
  return ierr;
}

/* Activations for n rows; reallocated only when a batch is larger than any before. */
static FSDPErrorCode reserve(FSDPModel m, int64_t n)
{
  FSDPErrorCode ierr = FSDP_SUCCESS;
  if (n <= m->capacity) return FSDP_SUCCESS;
  FSDPCall(free_buffers(m));
  m->capacity = n; /* free_buffers frees what was allocated (the rest is NULL) and says 0 */
  for (int k = 0; k < num_buffers(m) && !ierr; k++) {
    Buffer b = buffer_at(m, n, k);
    if (b.elems) ierr = DeviceAlloc_Private(m->dev, (size_t)b.elems * b.size, FSDP_MEM_OTHER, b.ptr);
  }
  if (ierr) { /* a batch too large for the memory: the model stays usable, with no buffers */
    FSDPCall(free_buffers(m));
    return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  }
  for (int i = 0; i < m->nlayers; i++)
    if (recomputed(m, &m->layers[i])) m->layers[i].saved = m->shared_saved;
  point_into_pool(m, n, false);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelSetActivationCheckpointing(FSDPModel model, bool on)
{
  CHECK_MODEL(model);
  if (on == model->checkpointing) return FSDP_SUCCESS;
  FSDPCall(free_buffers(model)); /* the saved state changes shape: the next forward allocates it anew */
  model->checkpointing = on;
  model->have_forward = false;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelGetActivationCheckpointing(FSDPModel model, bool *on)
{
  CHECK_MODEL(model);
  FSDPCheck(on, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelGetActivationCheckpointing: on must not be NULL");
  *on = model->checkpointing;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelGetActivationBytes(FSDPModel model, int64_t n, bool checkpointing, size_t *bytes)
{
  bool was;
  CHECK_MODEL(model);
  FSDPCheck(n >= 0 && bytes, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPModelGetActivationBytes: n is %lld (must be >= 0) or bytes is NULL", (long long)n);
  was = model->checkpointing;
  model->checkpointing = checkpointing; /* what buffer_at sizes; nothing is allocated */
  *bytes = buffer_bytes(model, n);
  model->checkpointing = was;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelGetSampleShape(FSDPModel model, bool output, int *ndim, int64_t shape[4])
{
  CHECK_MODEL(model);
  FSDPCheck(ndim && shape, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelGetSampleShape: ndim and shape must not be NULL");
  if (model->cnn) {
    const ConvGeom *g = output ? &model->ogrid : &model->grid;
    const int64_t *size = output ? g->osize : g->size;
    *ndim = 1 + g->nd;
    shape[0] = output ? g->cout : g->cin;
    for (int d = 0; d < g->nd; d++) shape[1 + d] = size[3 - g->nd + d];
  } else if (model->gpt) {
    *ndim = output ? 2 : 1;
    shape[0] = model->seq;
    shape[1] = model->vocab;
  } else {
    *ndim = 1;
    shape[0] = output ? model->out : model->in;
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelGetTokens(FSDPModel model, int64_t *ctx, int64_t *vocab)
{
  CHECK_MODEL(model);
  if (ctx) *ctx = model->gpt ? model->seq : 0;
  if (vocab) *vocab = model->gpt ? model->vocab : 0;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelParamView_Private(FSDPModel m, const Layer *l, int p, void **view)
{
  FSDPCall(FlatParamGetParam(m->units[l->unit], l->param[p], view));
  return FSDP_SUCCESS;
}

/* A vector parameter (a bias, a LayerNorm's weight or bias) as fp32: its
   view, or the view widened into the scratch (a weight first, then slot p). */
FSDPErrorCode FSDPModelParam_Private(FSDPModel m, const Layer *l, int p, float **v)
{
  void *view;
  FSDPCall(FlatParamGetParam(m->units[l->unit], l->param[p], &view));
  if (!m->wide) {
    *v = view;
    return FSDP_SUCCESS;
  }
  *v = m->wide + m->wide_rows + p * m->wide_slot;
  FSDPCall(DeviceConvert_Private(m->dev, FSDP_FLOAT32, *v, m->view_dtype, view, l->out / l->seq, 1.0));
  return FSDP_SUCCESS;
}

/* The gradient view of a trainable parameter; NULL for a frozen one. */
FSDPErrorCode FSDPModelGrad_Private(FSDPModel m, const Layer *l, int p, float **g)
{
  bool trainable;
  FSDPCall(FlatParamGetTrainable(m->units[l->unit], l->param[p], &trainable));
  *g = NULL;
  if (trainable) FSDPCall(FlatParamGetGrad(m->units[l->unit], l->param[p], (void **)g));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelLayerParams_Private(FSDPModel m, const Layer *l, float **w)
{
  int64_t offset = 0;
  for (int p = 0; p < l->nparams; p++) {
    void *view;
    int ndim;
    int64_t shape[LAYER_MAX_NDIM], numel = 1;
    FSDPCall(FlatParamGetParam(m->units[l->unit], l->param[p], &view));
    w[p] = view;
    if (!m->wide) continue;
    l->ops->param_shape(l, p, &ndim, shape);
    for (int d = 0; d < ndim; d++) numel *= shape[d];
    w[p] = m->wide + offset;
    FSDPCall(FSDPDataTypeConvert(FSDP_FLOAT32, w[p], m->view_dtype, view, numel));
    offset += numel;
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelTiedWeight_Private(FSDPModel m, const Layer *l, float **w, float **g)
{
  const Layer *e = &m->layers[l->tie];
  float *ew[LAYER_MAX_PARAMS];
  FSDPCall(FSDPModelLayerParams_Private(m, e, ew));
  *w = ew[EMBEDDING_WTE];
  if (g) {
    bool trainable;
    FSDPCall(FlatParamGetTrainable(m->units[e->unit], e->param[EMBEDDING_WTE], &trainable));
    *g = trainable ? m->tied_grad : NULL;
  }
  return FSDP_SUCCESS;
}

/* Where the GPU reads an input: p itself, or p's first `bytes` copied up into `copy`. */
static FSDPErrorCode on_gpu(FSDPModel m, const void *p, size_t bytes, void *copy, const void **where)
{
  *where = p;
  if (!m->dev || p == copy || DeviceHolds_Private(m->dev, p)) return FSDP_SUCCESS;
  FSDPCall(DeviceFromHost_Private(m->dev, copy, p, bytes));
  *where = copy;
  return FSDP_SUCCESS;
}

/* -fsdp_log_trace: a unit's pass, from its parameters' arrival to its end. */
static void trace_unit(const char *pass, FlatParam unit, double since)
{
  char name[64];
  const char *uname = NULL;
  if (!FSDPTraceOn_Private() || FlatParamGetName(unit, &uname)) return;
  snprintf(name, sizeof name, "%s %s", pass, uname);
  FSDPTraceSpan_Private(name, 0, since, FSDPTime_Private(), 0);
}

FSDPErrorCode FSDPModelForward(FSDPModel model, int64_t n, const float *x, float **y)
{
  double t_unit = 0;
  FlatParam current = NULL;
  const float *h;
  const void *xin;

  CHECK_MODEL_SETUP(model);
  FSDPCheck(n > 0 && n <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelForward: batch of %lld rows", (long long)n);
  FSDPCheck(x && y, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelForward: x and y must not be NULL");
  FSDPCollective(model->ctx->comm);
  FSDPCall(reserve(model, n));
  model->have_forward = false;
  /* Agreed, as the pass is collective: a rank with a bad input must not leave the others in an all-gather. */
  /* (An input already in GPU memory is not read back to be checked: a GPT's
     embedding kernel gives NaN for a bad token id there.  Every rank still
     takes part in the agreement, whichever memory its input is in.) */
  if (model->layers[0].ops->check_input) {
    bool on_device = model->dev && DeviceHolds_Private(model->dev, x);
    FSDPCall(FSDPErrorAgree_Private(
        model->ctx->comm, on_device ? FSDP_SUCCESS : model->layers[0].ops->check_input(&model->layers[0], n, x)));
  }
  FSDPCall(on_gpu(model, x, (size_t)(n * model->in) * sizeof *x, model->input, &xin));
  x = xin;
  FSDPCall(FSDPContextBeginForward(model->ctx));
  model->x = x; /* what an add or concat from the input reads */
  for (int i = 0; i < model->nlayers; i++) {
    Layer *l = &model->layers[i];
    h = l->input >= 0 ? model->layers[l->input].y : x;
    if (l->unit >= 0 && model->units[l->unit] != current) {
      if (current) {
        trace_unit("forward", current, t_unit);
        FSDPCall(FlatParamReshard(current));
      }
      current = model->units[l->unit];
      FSDPCall(FlatParamUnshard(current));
      t_unit = FSDPTime_Private();
    }
    FSDPCall(l->ops->forward(model, l, n, h));
  }
  if (current) {
    trace_unit("forward", current, t_unit);
    FSDPCall(FlatParamReshard(current));
  }
  model->n = n;
  model->have_forward = true;
  *y = model->layers[model->nlayers - 1].y;
  return FSDP_SUCCESS;
}

/* Backward leaves `unit` for layer i: it reduces the unit's gradient, or,
   when a layer before i uses the unit too (the embedding a tied head
   shares), reshards it until that layer comes. */
static FSDPErrorCode leave_unit(FSDPModel m, FlatParam unit, int i)
{
  for (int j = 0; j <= i; j++)
    if (m->layers[j].unit >= 0 && m->units[m->layers[j].unit] == unit) {
      FSDPCall(FlatParamReshard(unit));
      return FSDP_SUCCESS;
    }
  FSDPCall(FlatParamReduceGrad(unit));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelBackward(FSDPModel model, const float *dy)
{
  double t_unit = 0;
  FlatParam current = NULL;
  const float *g;
  const void *dyin;
  int64_t n;
  int k = 0, first, unit;

  CHECK_MODEL_SETUP(model);
  FSDPCheck(model->have_forward, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPModelBackward: model '%s' has no forward pass to differentiate: call FSDPModelForward first",
            model->spec);
  FSDPCheck(dy, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelBackward: dy must not be NULL");
  FSDPCollective(model->ctx->comm);
  n = model->n;
  FSDPCall(on_gpu(model, dy, (size_t)(n * model->out) * sizeof *dy, model->dy, &dyin));
  g = dyin;
  model->have_forward = false;             /* the activations are consumed */
  for (int i = 0; i < model->nlayers; i++) /* host only: the graph layers have no GPU kernels */
    if (model->layers[i].tapped) memset(model->layers[i].dskip, 0, (size_t)(n * model->layers[i].out) * sizeof(float));
  FSDPCall(FSDPContextBeginBackward(model->ctx));
  for (int i = model->nlayers - 1; i >= 0; i--) {
    Layer *l = &model->layers[i];
    const float *input = l->input >= 0 ? model->layers[l->input].y : model->x;
    float *dx = l->input >= 0 ? model->scratch[k] : NULL;
    if (i + 1 < model->nlayers && model->layers[i + 1].input != i) g = l->dskip; /* the next layer reads another */
    else if (l->tapped) { /* its output went on along a skip too: that branch's gradient joins (g is a scratch) */
      float *gl = (float *)g;
      for (int64_t j = 0; j < n * l->out; j++) gl[j] += l->dskip[j];
    }
    /* The last layer of a run of dropped ones: the run comes back first, with its unit's parameters. */
    first = run_start(model, i);
    unit = l->unit;
    for (int j = first; j < i && unit < 0; j++) unit = model->layers[j].unit;
    if (unit >= 0 && model->units[unit] != current) {
      if (current) {
        trace_unit("backward", current, t_unit);
        FSDPCall(leave_unit(model, current, i));
      }
      current = model->units[unit];
      FSDPCall(FlatParamUnshard(current));
      t_unit = FSDPTime_Private();
    }
    for (int j = first; j < i; j++) {
      const Layer *r = &model->layers[j];
      FSDPCall(r->ops->forward(model, r, n, r->input >= 0 ? model->layers[r->input].y : model->x));
    }
    /* Activation checkpointing: the layer's saved state comes back from its input. */
    if (recomputed(model, l)) FSDPCall(l->ops->recompute(model, l, n, input));
    FSDPCall(l->ops->backward(model, l, n, input, g, dx));
    if (dx && l->input != i - 1) { /* x is an earlier layer's output: its gradient waits in that layer's dskip */
      float *ds = model->layers[l->input].dskip;
      for (int64_t j = 0; j < n * l->in; j++) ds[j] += dx[j];
    }
    g = dx;
    k = 1 - k;
  }
  if (current) {
    trace_unit("backward", current, t_unit);
    FSDPCall(FlatParamReduceGrad(current));
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelLoss(FSDPModel model, FSDPLossType type, const void *target, double scale, double *loss,
                            float **dy)
{
  bool ce = type == FSDP_LOSS_CROSS_ENTROPY;
  int64_t n, out;
  const float *y;

  CHECK_MODEL_SETUP(model);
  FSDPCheck(type == FSDP_LOSS_MSE || ce, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPModelLoss: loss type %d is not FSDP_LOSS_MSE or FSDP_LOSS_CROSS_ENTROPY", (int)type);
  FSDPCheck(target && loss && dy, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelLoss: target, loss and dy must not be NULL");
  FSDPCheck(isfinite(scale), MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelLoss: scale %g is not finite", scale);
  FSDPCheck(model->have_forward, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPModelLoss: model '%s' has no output to compare: call FSDPModelForward first", model->spec);
  /* A GPT's rows hold seq positions of vocab logits, and its labels are per position. */
  n = model->n * model->layers[model->nlayers - 1].seq;
  out = model->out / model->layers[model->nlayers - 1].seq;
  y = model->layers[model->nlayers - 1].y;
  if (!model->dev) {
    if (ce) {
      FSDPCall(FSDPCheckLabels_Private("FSDPModelLoss", n, out, target));
      FSDPCrossEntropyLoss_Private(n, out, y, target, scale, loss, model->dy);
    } else FSDPMSELoss_Private(n, out, y, target, scale, loss, model->dy);
  } else {
    double sum;
    int64_t bad, label;
    /* Host labels are checked here; device labels by the kernel, which names a bad row. */
    if (ce && !DeviceHolds_Private(model->dev, target))
      FSDPCall(FSDPCheckLabels_Private("FSDPModelLoss", n, out, target));
    FSDPCall(on_gpu(model, target, (size_t)n * (ce ? sizeof(int64_t) : (size_t)out * sizeof(float)), model->target,
                    &target));
    FSDPCall(DeviceLoss_Private(model->dev, ce, n, out, y, target, scale, &sum, &bad, model->dy));
    if (bad >= 0) {
      FSDPCall(DeviceToHost_Private(model->dev, &label, (const int64_t *)target + bad, sizeof label));
      FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelLoss: label %lld of row %lld is not in [0, %lld)",
                (long long)label, (long long)bad, (long long)out);
    }
    *loss = sum / (ce ? (double)n : (double)n * (double)out);
  }
  *dy = model->dy;
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
  if (m->gpt) {
    FSDPCall(FSDPViewerASCIIPrintf(viewer,
                                   "parameters: %lld; GPT: %lld blocks, %lld heads of %lld, context %lld, vocabulary "
                                   "%lld, %s head; seed %llu\n",
                                   (long long)numel, (long long)m->depth, (long long)m->heads,
                                   (long long)(m->dim / m->heads), (long long)m->seq, (long long)m->vocab,
                                   m->tied ? "tied" : "untied", (unsigned long long)m->seed));
  } else if (m->file) {
    FSDPCall(FSDPViewerASCIIPrintf(viewer,
                                   "parameters: %lld; %d layers from the model file; %lld inputs, %lld outputs "
                                   "per sample; seed %llu\n",
                                   (long long)numel, m->nlayers, (long long)m->in, (long long)m->out,
                                   (unsigned long long)m->seed));
  } else if (m->cnn) {
    const ConvGeom *g = &m->grid;
    char norm[32] = "none";
    if (m->norm_groups) snprintf(norm, sizeof norm, "of %lld groups", (long long)m->norm_groups);
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "parameters: %lld; %s: %d-D grid", (long long)numel,
                                   m->unet  ? "U-Net"
                                   : m->fno ? "FNO"
                                            : "CNN",
                                   g->nd));
    for (int d = 3 - g->nd; d < 3; d++)
      FSDPCall(FSDPViewerASCIIPrintf(viewer, "%s%lld", d > 3 - g->nd ? "x" : " ", (long long)g->size[d]));
    if (m->fno)
      FSDPCall(FSDPViewerASCIIPrintf(viewer,
                                     ", %lld Fourier layers of width %lld keeping %lld modes per axis, activation %s; "
                                     "seed %llu\n",
                                     (long long)m->depth, (long long)m->hidden, (long long)m->modes,
                                     FSDPActivationName(m->act), (unsigned long long)m->seed));
    else if (m->unet)
      FSDPCall(FSDPViewerASCIIPrintf(
          viewer,
          ", %lld levels of %lld to %lld channels (kernel %lld), padding %s, GroupNorm %s, "
          "activation %s; seed %llu\n",
          (long long)m->depth, (long long)m->hidden, (long long)(m->hidden << (m->depth - 1)), (long long)g->kernel[2],
          padding_names[g->padding], norm, FSDPActivationName(m->act), (unsigned long long)m->seed));
    else
      FSDPCall(FSDPViewerASCIIPrintf(viewer,
                                     ", %lld hidden layers of %lld channels (kernel %lld, stride %lld, dilation %lld, "
                                     "%lld groups), padding %s, GroupNorm %s, activation %s; seed %llu\n",
                                     (long long)m->depth, (long long)m->hidden, (long long)g->kernel[2],
                                     (long long)g->stride[2], (long long)g->dilation[2], (long long)g->groups,
                                     padding_names[g->padding], norm, FSDPActivationName(m->act),
                                     (unsigned long long)m->seed));
  } else
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "parameters: %lld, activation: %s, layernorm: %s, seed %llu\n",
                                   (long long)numel, FSDPActivationName(m->act), m->layernorm ? "yes" : "no",
                                   (unsigned long long)m->seed));
  if (m->gpt || (m->setup && !m->dev)) {
    /* What forward keeps per row, with and without recomputing the blocks, and the scratch that does not grow
       with the batch (a convolution's im2col of one sample); doc/nn.md gives the formulas. */
    size_t full[2], ckpt[2], fixed;
    char b1[32], b2[32], b3[32];
    FSDPCall(FSDPModelGetActivationBytes(m, 1, false, &full[0]));
    FSDPCall(FSDPModelGetActivationBytes(m, 2, false, &full[1]));
    FSDPCall(FSDPModelGetActivationBytes(m, 1, true, &ckpt[0]));
    FSDPCall(FSDPModelGetActivationBytes(m, 2, true, &ckpt[1]));
    fixed = 2 * full[0] - full[1];
    FSDPFormatBytes(b1, sizeof b1, (double)(full[1] - full[0]));
    FSDPFormatBytes(b2, sizeof b2, (double)(ckpt[1] - ckpt[0]));
    FSDPFormatBytes(b3, sizeof b3, (double)fixed);
    FSDPCall(FSDPViewerASCIIPrintf(viewer,
                                   "activation checkpointing: %s; activations per %s %s without, %s with "
                                   "(%.2fx less)%s%s%s\n",
                                   m->checkpointing ? "on" : "off", m->gpt ? "sequence" : "sample", b1, b2,
                                   (double)(full[1] - full[0]) / (double)(ckpt[1] - ckpt[0]), fixed ? ", plus " : "",
                                   fixed ? b3 : "", fixed ? " of scratch whatever the batch" : ""));
  }
  for (int i = 0; i < m->nlayers && m->setup; i++) { /* the first block says it for all */
    const Layer *l = &m->layers[i];
    if (l->ops != &LayerOps_transformer_Private) continue;
    const char *why = m->dev                           ? "the blocked attention is the host's"
                      : m->attention != ATTENTION_AUTO ? "-fsdp_attention"
                      : l->attn_block                  ? "auto: ctx is more than one block of keys"
                                                       : "auto: ctx fits one block of keys";
    if (l->attn_block)
      FSDPCall(FSDPViewerASCIIPrintf(viewer,
                                     "attention: blocked, %lld keys at a time (%s); keeps heads x ctx = %lld floats "
                                     "per sequence and block, where full keeps heads x ctx x ctx = %lld\n",
                                     (long long)l->attn_block, why, (long long)(l->heads * l->seq),
                                     (long long)(l->heads * l->seq * l->seq)));
    else
      FSDPCall(FSDPViewerASCIIPrintf(viewer,
                                     "attention: full (%s); keeps heads x ctx x ctx = %lld floats per sequence and "
                                     "block\n",
                                     why, (long long)(l->heads * l->seq * l->seq)));
    break;
  }
  if (m->setup && m->dev)
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "layers on %s, GEMMs by cuBLAS in %s\n", DeviceDescribe_Private(m->dev),
                                   m->view_dtype == FSDP_BFLOAT16  ? "bf16 with fp32 accumulation"
                                   : m->view_dtype == FSDP_FLOAT16 ? "fp16 with fp32 accumulation"
                                   : m->tf32                       ? "TF32"
                                                                   : "fp32"));
  if (m->setup && !m->dev)
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "host GEMMs: %d BLAS thread%s per rank (%s)\n", m->blas_threads,
                                   m->blas_threads == 1 ? "" : "s", m->blas_why));
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
      if (m->layers[i].unit == u)
        FSDPCall(
            FSDPViewerASCIIPrintf(viewer, " %s", m->layers[i].name[0] ? m->layers[i].name : m->layers[i].ops->type));
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
  FSDPCall(FSDPViewerApply_Private(__func__, viewer, comm, model_view, model));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelDestroy(FSDPModel *model)
{
  FSDPModel m;
  FSDPCheck(model, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelDestroy: model must not be NULL");
  m = *model;
  if (!m) return FSDP_SUCCESS;
  (void)DeviceEnter_Private(m->dev); /* its buffers are freed on its GPU, error or not */
  FSDPCall(free_buffers(m));
  if (m->wide) FSDPCall(DeviceFree_Private(m->dev, &m->wide, wide_bytes(m), FSDP_MEM_OTHER));
  FSDPCall(DeviceFree_Private(m->dev, &m->tied_grad, (size_t)(m->vocab * m->dim) * sizeof(float), FSDP_MEM_OTHER));
  for (int i = 0; i < m->nlayers; i++)
    if (m->layers[i].ops->destroy) m->layers[i].ops->destroy(&m->layers[i]);
  FSDPCall(FSDPFree(&m->layers));
  FSDPCall(FSDPFree(&m->units));
  FSDPCall(FSDPFree(&m->spec));
  FSDPCall(FSDPFree(model));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelGetContext(FSDPModel model, FSDPContext *ctx)
{
  CHECK_MODEL(model);
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPModelGetContext: ctx must not be NULL");
  *ctx = model->ctx;
  return FSDP_SUCCESS;
}
