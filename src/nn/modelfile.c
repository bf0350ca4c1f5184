/* -model file:NAME: a model written as a list of layers, one per line
   (doc/nn.md, "Model files"), for graphs the spec families do not cover:
   each layer reads the one before it or any earlier one (input=NAME), adds
   or concatenates another (from=NAME), and joins the unit of the last
   `unit` line.  Shapes are inferred line by line; every error names the
   file, the line and the key. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nnimpl.h"

/* A layer's output: channels on a grid of nd axes (in the last nd of three
   slots), or flat features (nd 0, channels holds them). */
typedef struct {
  char name[48];
  int nd;
  int64_t channels, size[3];
} Shape;

enum { MAX_ITEMS = 16, LINE_MAX_CHARS = 1024 };

typedef struct {
  const char *key, *value;
} Item;

typedef struct {
  FSDPModel m;
  Shape *shapes; /* [nlayers + 1]: the input's, then each layer's output */
  int nshapes, capacity;
  char unit[48];
  bool unit_used;    /* a layer joined r->unit */
  char (*units)[48]; /* the units left with layers in them: a unit's layers are consecutive */
  int nunits, units_capacity;
  const char *kind;
  Item items[MAX_ITEMS];
  int nitems;
} Reader;

/* The layer kinds a file may use, and each one's keys. */
static const struct {
  const char *kind;
  LayerKind layer;
  const char *keys;
} kinds[] = {
    {"conv", LAYER_conv, "name input out kernel stride dilation groups pad padding"},
    {"convtranspose", LAYER_convtranspose, "name input out kernel stride pad groups"},
    {"maxpool", LAYER_maxpool, "name input kernel stride"},
    {"avgpool", LAYER_avgpool, "name input kernel stride"},
    {"groupnorm", LAYER_groupnorm, "name input groups"},
    {"act", LAYER_activation, "name input fn"},
    {"add", LAYER_add, "name input from"},
    {"concat", LAYER_concat, "name input from"},
    {"spectral", LAYER_spectral, "name input out modes"},
    {"linear", LAYER_linear, "name input out"},
    {"layernorm", LAYER_layernorm, "name input"},
};
static const char *const kind_names =
    "input, unit, conv, convtranspose, maxpool, avgpool, groupnorm, act, add, concat, spectral, linear, layernorm";

#define FILE_CHECK(r, cond, fmt, ...)                                                                                  \
  FSDPCheck(cond, MPI_COMM_SELF, FSDP_ERR_ARG, "%s: " fmt, (r)->m->where, __VA_ARGS__)

static int64_t points(const Shape *s) { return s->size[0] * s->size[1] * s->size[2]; }
static int64_t numel(const Shape *s) { return s->channels * points(s); }

/* "C channels on NxM", or "N features", for messages. */
static const char *describe(const Shape *s, char *buf, size_t len)
{
  int at;
  if (!s->nd) {
    snprintf(buf, len, "%lld features", (long long)s->channels);
    return buf;
  }
  at = snprintf(buf, len, "%lld channels on ", (long long)s->channels);
  for (int d = 3 - s->nd; d < 3 && at > 0 && (size_t)at < len; d++)
    at += snprintf(buf + at, len - (size_t)at, "%s%lld", d > 3 - s->nd ? "x" : "", (long long)s->size[d]);
  return buf;
}

static const char *value_of(const Reader *r, const char *key)
{
  for (int i = 0; i < r->nitems; i++)
    if (!strcmp(r->items[i].key, key)) return r->items[i].value;
  return NULL;
}

/* key=N: a positive integer (a non-negative one with zero_ok), or def when absent (-1: required). */
static FSDPErrorCode int_of(const Reader *r, const char *key, int64_t def, bool zero_ok, int64_t *v)
{
  const char *value = value_of(r, key);
  char *end;
  long long x;
  FILE_CHECK(r, value || def >= 0, "%s needs %s=", r->kind, key);
  if (!value) {
    *v = def;
    return FSDP_SUCCESS;
  }
  errno = 0;
  x = strtoll(value, &end, 10);
  FILE_CHECK(r, *value && !*end && errno == 0 && (x > 0 || (zero_ok && x == 0)) && x <= INT32_MAX,
             "%s: %s=%s is not a %s integer", r->kind, key, value, zero_ok ? "non-negative" : "positive");
  *v = x;
  return FSDP_SUCCESS;
}

/* The shape called `name`: "input" or an earlier layer's. */
static FSDPErrorCode find(const Reader *r, const char *key, const char *name, int *index)
{
  for (int i = r->nshapes - 1; i >= 0; i--)
    if (!strcmp(r->shapes[i].name, name)) {
      *index = i - 1; /* a layer index; -1: the model's input */
      return FSDP_SUCCESS;
    }
  FILE_CHECK(r, false, "%s: %s=%s: no layer of that name before this line", r->kind, key, name);
  return FSDP_SUCCESS;
}

static const Shape *shape_of(const Reader *r, int index) { return &r->shapes[index + 1]; }

/* NxMxK (at most three axes) into the last slots of size. */
static FSDPErrorCode parse_grid(const Reader *r, const char *value, Shape *s)
{
  const char *p = value;
  int64_t sizes[3];
  int nd = 0;
  while (*p) {
    char *end;
    long long x;
    errno = 0;
    x = strtoll(p, &end, 10);
    FILE_CHECK(r,
               nd < 3 && end != p && x > 0 && x <= INT32_MAX && errno == 0 && (*end == 'x' || !*end) &&
                   (*end != 'x' || end[1]),
               "input: grid=%s is not N, NxM or NxMxK of positive integers", value);
    sizes[nd++] = x;
    p = *end ? end + 1 : end;
  }
  FILE_CHECK(r, nd > 0, "input: grid=%s is not N, NxM or NxMxK of positive integers", value);
  s->nd = nd;
  for (int d = 0; d < 3; d++) s->size[d] = d < 3 - nd ? 1 : sizes[d - (3 - nd)];
  return FSDP_SUCCESS;
}

/* At most 2^31 - 1 values per sample (the kernels' sizes), counted without overflow. */
static FSDPErrorCode check_size(const Reader *r, const char *name, const Shape *s)
{
  double n = (double)s->channels * (double)s->size[0] * (double)s->size[1] * (double)s->size[2];
  FILE_CHECK(r, n <= INT32_MAX, "%s: %s gives %.0f values per sample, above 2^31 - 1", r->kind, name, n);
  return FSDP_SUCCESS;
}

static FSDPErrorCode check_keys(const Reader *r, const char *keys);

/* input channels=C grid=G, or input features=N. */
static FSDPErrorCode read_input(Reader *r)
{
  Shape *s = &r->shapes[0];
  const char *grid = value_of(r, "grid"), *features = value_of(r, "features");
  FSDPCall(check_keys(r, "channels grid features"));
  FILE_CHECK(r, features ? r->nitems == 1 : grid && value_of(r, "channels"),
             "input needs channels= and grid=, or features= alone%s", "");
  snprintf(s->name, sizeof s->name, "input");
  s->size[0] = s->size[1] = s->size[2] = 1;
  if (features) return int_of(r, "features", -1, false, &s->channels);
  FSDPCall(int_of(r, "channels", -1, false, &s->channels));
  FSDPCall(parse_grid(r, grid, s));
  return check_size(r, "the input", s);
}

/* The keys of the line, each once and each one the kind has. */
static FSDPErrorCode check_keys(const Reader *r, const char *keys)
{
  for (int i = 0; i < r->nitems; i++) {
    const char *k = r->items[i].key, *at = strstr(keys, k);
    size_t n = strlen(k);
    while (at && !((at == keys || at[-1] == ' ') && (at[n] == ' ' || !at[n]))) at = strstr(at + 1, k);
    FILE_CHECK(r, at, "%s: unknown key '%s' (keys: %s)", r->kind, k, keys);
    for (int j = 0; j < i; j++) FILE_CHECK(r, strcmp(r->items[j].key, k), "%s: key '%s' is given twice", r->kind, k);
  }
  return FSDP_SUCCESS;
}

static FSDPErrorCode need_grid(const Reader *r, const Shape *in)
{
  char b[96];
  FILE_CHECK(r, in->nd > 0, "%s needs channels on a grid, and '%s' gives %s", r->kind, in->name,
             describe(in, b, sizeof b));
  return FSDP_SUCCESS;
}

/* A convolution's geometry on in's grid: kernel, stride and dilation along each of its axes. */
static ConvGeom grid_geometry(const Shape *in, int64_t kernel, int64_t stride, int64_t dilation)
{
  ConvGeom g = {.nd = in->nd, .cin = in->channels, .groups = 1, .padding = CONV_PAD_ZEROS};
  for (int d = 0; d < 3; d++) {
    bool axis = d >= 3 - in->nd;
    g.size[d] = in->size[d];
    g.kernel[d] = axis ? kernel : 1;
    g.stride[d] = axis ? stride : 1;
    g.dilation[d] = axis ? dilation : 1;
  }
  return g;
}

static FSDPErrorCode add_grid_layer(Reader *r, LayerKind kind, const char *name, const Shape *in, const ConvGeom *g,
                                    Shape *out)
{
  out->nd = in->nd;
  FSDPCall(FSDPModelAddLayer_Private(r->m, kind, name, r->unit, numel(in), numel(out)));
  r->m->layers[r->m->nlayers - 1].conv = *g;
  return FSDP_SUCCESS;
}

static FSDPErrorCode read_conv(Reader *r, const char *name, const Shape *in, Shape *out)
{
  int64_t cout, kernel, stride, dilation, groups, pad = -1, same[3] = {-1, -1, -1};
  const char *padding = value_of(r, "padding");
  ConvGeom g;
  FSDPCall(need_grid(r, in));
  FSDPCall(int_of(r, "out", -1, false, &cout));
  FSDPCall(int_of(r, "kernel", 3, false, &kernel));
  FSDPCall(int_of(r, "stride", 1, false, &stride));
  FSDPCall(int_of(r, "dilation", 1, false, &dilation));
  FSDPCall(int_of(r, "groups", 1, false, &groups));
  if (value_of(r, "pad")) FSDPCall(int_of(r, "pad", 0, true, &pad));
  g = grid_geometry(in, kernel, stride, dilation);
  g.cout = cout;
  g.groups = groups;
  FILE_CHECK(r, in->channels % groups == 0 && cout % groups == 0,
             "conv: groups=%lld does not divide both its %lld input channels and out=%lld", (long long)groups,
             (long long)in->channels, (long long)cout);
  if (padding) {
    if (!strcmp(padding, "circular")) g.padding = CONV_PAD_CIRCULAR;
    else if (!strcmp(padding, "reflect")) g.padding = CONV_PAD_REFLECT;
    else FILE_CHECK(r, !strcmp(padding, "zeros"), "conv: padding=%s is not zeros, circular or reflect", padding);
  }
  for (int d = 3 - in->nd; d < 3; d++) same[d] = pad;
  FSDPCall(FSDPModelAddConv_Private(r->m, name, r->unit, same, &g));
  out->channels = cout;
  memcpy(out->size, g.osize, sizeof out->size);
  out->nd = in->nd;
  return FSDP_SUCCESS;
}

/* PyTorch's nn.ConvTranspose: each axis grows to (n - 1) stride - 2 pad + kernel. */
static FSDPErrorCode read_convtranspose(Reader *r, const char *name, const Shape *in, Shape *out)
{
  int64_t cout, kernel, stride, pad, groups;
  ConvGeom g;
  FSDPCall(need_grid(r, in));
  FSDPCall(int_of(r, "out", -1, false, &cout));
  FSDPCall(int_of(r, "kernel", 2, false, &kernel));
  FSDPCall(int_of(r, "stride", 2, false, &stride));
  FSDPCall(int_of(r, "pad", 0, true, &pad));
  FSDPCall(int_of(r, "groups", 1, false, &groups));
  FILE_CHECK(r, in->channels % groups == 0 && cout % groups == 0,
             "convtranspose: groups=%lld does not divide both its %lld input channels and out=%lld", (long long)groups,
             (long long)in->channels, (long long)cout);
  g = grid_geometry(in, kernel, stride, 1);
  g.groups = groups;
  g.cin = cout; /* the geometry of the convolution it is the adjoint of: from the output's grid */
  g.cout = in->channels;
  out->channels = cout;
  for (int d = 0; d < 3; d++) {
    bool axis = d >= 3 - in->nd;
    g.pad[d] = axis ? pad : 0;
    g.osize[d] = in->size[d];
    g.size[d] = out->size[d] = axis ? (in->size[d] - 1) * stride - 2 * pad + kernel : 1;
    FILE_CHECK(r, g.size[d] > 0, "convtranspose: pad=%lld leaves no points of grid axis %d's %lld", (long long)pad,
               d - (3 - in->nd), (long long)in->size[d]);
  }
  return add_grid_layer(r, LAYER_convtranspose, name, in, &g, out);
}

/* Windows of kernel points every stride points, no padding, the remainder dropped. */
static FSDPErrorCode read_pool(Reader *r, LayerKind kind, const char *name, const Shape *in, Shape *out)
{
  int64_t kernel, stride;
  ConvGeom g;
  FSDPCall(need_grid(r, in));
  FSDPCall(int_of(r, "kernel", 2, false, &kernel));
  FSDPCall(int_of(r, "stride", kernel, false, &stride));
  g = grid_geometry(in, kernel, stride, 1);
  g.cout = out->channels = in->channels;
  for (int d = 0; d < 3; d++) {
    FILE_CHECK(r, g.kernel[d] <= in->size[d], "%s: kernel=%lld is longer than grid axis %d's %lld points", r->kind,
               (long long)kernel, d - (3 - in->nd), (long long)in->size[d]);
    g.osize[d] = out->size[d] = (in->size[d] - g.kernel[d]) / g.stride[d] + 1;
  }
  return add_grid_layer(r, kind, name, in, &g, out);
}

static FSDPErrorCode read_groupnorm(Reader *r, const char *name, const Shape *in, Shape *out)
{
  int64_t groups;
  ConvGeom g = {.nd = in->nd ? in->nd : 1, .cin = in->channels, .cout = in->channels};
  FSDPCall(int_of(r, "groups", -1, false, &groups));
  FILE_CHECK(r, in->channels % groups == 0, "groupnorm: groups=%lld does not divide its %lld channels",
             (long long)groups, (long long)in->channels);
  g.groups = groups;
  memcpy(g.size, in->size, sizeof g.size);
  *out = *in;
  return add_grid_layer(r, LAYER_groupnorm, name, in, &g, out);
}

static FSDPErrorCode read_spectral(Reader *r, const char *name, const Shape *in, Shape *out)
{
  int64_t cout, modes;
  ConvGeom g;
  FSDPCall(need_grid(r, in));
  FSDPCall(int_of(r, "out", in->channels, false, &cout));
  FSDPCall(int_of(r, "modes", -1, false, &modes));
#ifndef FSDP_HAVE_FFTW
  FILE_CHECK(r, false,
             "spectral needs FFTW, and this libfsdp was built without it (configure --with-fftw; Debian: "
             "libfftw3-dev)%s",
             "");
#endif
  g = grid_geometry(in, 1, 1, 1);
  g.cout = out->channels = cout;
  for (int d = 3 - in->nd; d < 3; d++) {
    int64_t most = d == 2 ? in->size[d] / 2 + 1 : in->size[d] / 2;
    FILE_CHECK(r, modes <= most, "spectral: modes=%lld is more than grid axis %d's %lld points have (at most %lld)",
               (long long)modes, d - (3 - in->nd), (long long)in->size[d], (long long)most);
    g.kernel[d] = modes;
  }
  memcpy(out->size, in->size, sizeof out->size);
  return add_grid_layer(r, LAYER_spectral, name, in, &g, out);
}

/* add: the same shape; concat: the same grid (or both flat), channels one after the other. */
static FSDPErrorCode read_merge(Reader *r, LayerKind kind, const char *name, const Shape *in, Shape *out)
{
  char b1[96], b2[96];
  const char *from_name = value_of(r, "from");
  const Shape *s;
  int from;
  FILE_CHECK(r, from_name, "%s needs from=", r->kind);
  FSDPCall(find(r, "from", from_name, &from));
  s = shape_of(r, from);
  *out = *in;
  if (kind == LAYER_add)
    FILE_CHECK(r, s->nd == in->nd && s->channels == in->channels && !memcmp(s->size, in->size, sizeof s->size),
               "add: from=%s gives %s, its input %s", from_name, describe(s, b1, sizeof b1),
               describe(in, b2, sizeof b2));
  else {
    FILE_CHECK(r, s->nd == in->nd && !memcmp(s->size, in->size, sizeof s->size),
               "concat: from=%s gives %s, on another grid than its input's %s", from_name, describe(s, b1, sizeof b1),
               describe(in, b2, sizeof b2));
    out->channels += s->channels;
  }
  FSDPCall(FSDPModelAddLayer_Private(r->m, kind, name, r->unit, numel(in), numel(out)));
  FSDPModelJoin_Private(r->m, r->m->nlayers - 1, from);
  return FSDP_SUCCESS;
}

static FSDPErrorCode read_layer(Reader *r, int k)
{
  char name[48];
  const char *given = value_of(r, "name"), *input = value_of(r, "input"), *fn = value_of(r, "fn");
  int source = r->m->nlayers - 1;
  const Shape *in;
  Shape *out;
  FSDPCall(check_keys(r, kinds[k].keys));
  if (given) {
    FILE_CHECK(r, *given && strlen(given) < sizeof name && !strchr(given, '/'),
               "%s: name=%s is not 1 to 47 characters without '/'", r->kind, given);
    snprintf(name, sizeof name, "%s", given);
  } else snprintf(name, sizeof name, "%s%d", r->kind, r->m->nlayers);
  for (int i = 0; i < r->nshapes; i++) /* "input" included */
    FILE_CHECK(r, strcmp(r->shapes[i].name, name), "%s: the name %s is an earlier layer's%s", r->kind, name,
               i == 0 ? " (the model's input)" : "");
  if (input) FSDPCall(find(r, "input", input, &source));
  FSDPCall(FSDPGrowArray_Private(&r->shapes, sizeof *r->shapes, r->nshapes + 1, &r->capacity, FSDP_MEM_OTHER));
  in = shape_of(r, source);
  out = &r->shapes[r->nshapes];
  *out = *in;
  switch (kinds[k].layer) {
  case LAYER_conv: FSDPCall(read_conv(r, name, in, out)); break;
  case LAYER_convtranspose: FSDPCall(read_convtranspose(r, name, in, out)); break;
  case LAYER_maxpool:
  case LAYER_avgpool: FSDPCall(read_pool(r, kinds[k].layer, name, in, out)); break;
  case LAYER_groupnorm: FSDPCall(read_groupnorm(r, name, in, out)); break;
  case LAYER_spectral: FSDPCall(read_spectral(r, name, in, out)); break;
  case LAYER_add:
  case LAYER_concat: FSDPCall(read_merge(r, kinds[k].layer, name, in, out)); break;
  case LAYER_linear: /* on the row as it is, flat */
    FSDPCall(int_of(r, "out", -1, false, &out->channels));
    out->nd = 0;
    out->size[0] = out->size[1] = out->size[2] = 1;
    FSDPCall(FSDPModelAddLayer_Private(r->m, LAYER_linear, name, r->unit, numel(in), out->channels));
    break;
  case LAYER_activation:
    FILE_CHECK(r, fn && (!strcmp(fn, "relu") || !strcmp(fn, "tanh") || !strcmp(fn, "gelu")),
               "act: fn=%s is not relu, tanh or gelu", fn ? fn : "(missing)");
    FSDPCall(FSDPModelAddLayer_Private(r->m, LAYER_activation, name, r->unit, numel(in), numel(in)));
    r->m->layers[r->m->nlayers - 1].act = fn[0] == 'r' ? FSDP_ACT_RELU : fn[0] == 't' ? FSDP_ACT_TANH : FSDP_ACT_GELU;
    break;
  default: FSDPCall(FSDPModelAddLayer_Private(r->m, kinds[k].layer, name, r->unit, numel(in), numel(in))); break;
  }
  FSDPCall(check_size(r, name, out));
  snprintf(out->name, sizeof out->name, "%s", name);
  r->nshapes++;
  r->unit_used = true;
  if (input) FSDPModelReadFrom_Private(r->m, r->m->nlayers - 1, source);
  return FSDP_SUCCESS;
}

/* One line: blank or a comment, or a directive or layer kind and its key=value items. */
static FSDPErrorCode read_line(Reader *r, char *line)
{
  char *save = NULL, *word;
  line[strcspn(line, "#")] = '\0';
  r->kind = strtok_r(line, " \t\r\n", &save);
  if (!r->kind) return FSDP_SUCCESS;
  if (!strcmp(r->kind, "unit")) { /* unit NAME: the unit of the layers that follow */
    char *name = strtok_r(NULL, " \t\r\n", &save);
    FILE_CHECK(r, name && !strchr(name, '=') && !strtok_r(NULL, " \t\r\n", &save) && strlen(name) < sizeof r->unit,
               "unit takes one name of at most 47 characters: unit NAME%s", "");
    if (!strcmp(name, r->unit)) return FSDP_SUCCESS;
    for (int i = 0; i < r->nunits; i++) /* one unit's parameters are one FlatParam, gathered at once */
      FILE_CHECK(r, strcmp(r->units[i], name), "unit %s again: the layers of a unit must be consecutive", name);
    if (r->unit_used) {
      FSDPCall(FSDPGrowArray_Private(&r->units, sizeof *r->units, r->nunits + 1, &r->units_capacity, FSDP_MEM_OTHER));
      snprintf(r->units[r->nunits++], sizeof *r->units, "%s", r->unit);
    }
    snprintf(r->unit, sizeof r->unit, "%s", name);
    r->unit_used = false;
    return FSDP_SUCCESS;
  }
  r->nitems = 0;
  while ((word = strtok_r(NULL, " \t\r\n", &save))) {
    char *eq = strchr(word, '=');
    FILE_CHECK(r, eq && eq != word, "%s: '%s' is not key=value", r->kind, word);
    FILE_CHECK(r, r->nitems < MAX_ITEMS, "%s: more than %d items", r->kind, MAX_ITEMS);
    *eq = '\0';
    r->items[r->nitems++] = (Item){word, eq + 1};
  }
  if (!strcmp(r->kind, "input")) {
    FILE_CHECK(r, r->nshapes == 0, "a second input line%s", "");
    FSDPCall(read_input(r));
    r->nshapes = 1;
    return FSDP_SUCCESS;
  }
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
    if (!strcmp(r->kind, kinds[k].kind)) {
      FILE_CHECK(r, r->nshapes > 0, "%s comes before the input line (input channels=C grid=G, or input features=N)",
                 r->kind);
      return read_layer(r, (int)k);
    }
  FILE_CHECK(r, false, "unknown layer kind '%s' (kinds: %s)", r->kind, kind_names);
  return FSDP_SUCCESS;
}

static FSDPErrorCode read_file(Reader *r, FILE *f, const char *path)
{
  char line[LINE_MAX_CHARS + 1];
  const Shape *in, *out;
  for (int n = 1; fgets(line, sizeof line, f); n++) {
    snprintf(r->m->where, sizeof r->m->where, "model file '%s', line %d", path, n);
    FILE_CHECK(r, strlen(line) < LINE_MAX_CHARS || line[LINE_MAX_CHARS - 1] == '\n', "longer than %d characters",
               LINE_MAX_CHARS - 1);
    FSDPCall(read_line(r, line));
  }
  FSDPCheck(!ferror(f), MPI_COMM_SELF, FSDP_ERR_IO, "-model file:%s: reading the model file failed", path);
  FSDPCheck(r->m->nlayers > 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "model file '%s' has no layers (an input line, then a layer per line: doc/nn.md, \"Model files\")", path);
  snprintf(r->m->where, sizeof r->m->where, "model file '%s'", path);
  /* Every layer's output is read: by the next layer, or by another (tapped). */
  for (int i = 0; i + 1 < r->m->nlayers; i++)
    FSDPCheck(r->m->layers[i + 1].input == i || r->m->layers[i].tapped, MPI_COMM_SELF, FSDP_ERR_ARG,
              "model file '%s': the output of layer %s is never read (the next layer reads %s): remove the layer or "
              "read it",
              path, r->shapes[i + 1].name, r->shapes[r->m->layers[i + 1].input + 1].name);
  /* The model's sizes, and a grid model's sample shapes (fsdp-train's data, FSDPModelGetSampleShape). */
  in = &r->shapes[0];
  out = &r->shapes[r->nshapes - 1];
  r->m->in = numel(in);
  r->m->out = numel(out);
  r->m->cnn = in->nd > 0;
  r->m->grid = (ConvGeom){.nd = in->nd, .cin = in->channels};
  r->m->ogrid = (ConvGeom){.nd = out->nd, .cout = out->channels};
  memcpy(r->m->grid.size, in->size, sizeof in->size);
  memcpy(r->m->ogrid.osize, out->size, sizeof out->size);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPModelBuildFile_Private(FSDPModel m, const char *path)
{
  FSDPErrorCode ierr;
  Reader r = {.m = m, .unit = "root"};
  FILE *f = fopen(path, "r");
  FSDPCheck(f, MPI_COMM_SELF, FSDP_ERR_IO, "-model file:%s: cannot open the model file: %s", path, strerror(errno));
  ierr = FSDPGrowArray_Private(&r.shapes, sizeof *r.shapes, 1, &r.capacity, FSDP_MEM_OTHER);
  if (!ierr) ierr = read_file(&r, f, path);
  fclose(f);
  FSDPCall(FSDPFree(&r.shapes));
  FSDPCall(FSDPFree(&r.units));
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}
