/* fsdp-train's data: token files for a GPT (text:, tokens:), the synthetic
   regression set, HDF5 files of rows, and the batches each rank takes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train.h"

#if FSDP_WITH_HDF5
#include <hdf5.h>
#endif

FSDPErrorCode dataset_free(Dataset *d)
{
  FSDPCall(FSDPFree(&d->x));
  FSDPCall(FSDPFree(&d->y));
  FSDPCall(FSDPFree(&d->labels));
  FSDPCall(FSDPFree(&d->tokens));
  return FSDP_SUCCESS;
}

/* The bytes the set holds, as allocated below: x and y, labels or tokens (at least one). */
double dataset_bytes(const Dataset *d)
{
  double n = (double)d->n;
  if (d->tokens) return 2.0 * (n > 0 ? n : 1);
  return (d->x ? 4.0 * n * (double)d->in : 0) + (d->y ? 4.0 * n * (double)d->out : 0) + (d->labels ? 8.0 * n : 0);
}

/* The bytes of one micro-batch of `per` rows, as fsdp-train allocates them:
   the inputs, and the token labels, class labels or regression targets. */
void batch_bytes(const Dataset *d, int64_t per, int64_t in, int64_t out, size_t *x, size_t *labels, size_t *targets)
{
  *x = (size_t)(per * in) * sizeof(float);
  *labels = d->tokens ? (size_t)(per * in) * sizeof(int64_t) : d->labels ? (size_t)per * sizeof(int64_t) : 0;
  *targets = d->tokens || d->labels ? 0 : (size_t)(per * out) * sizeof(float);
}

/* ------------------------------------------------------------------ token data (a GPT's) */

/* llm.c's token files (its dev/data/data_common.py writes them, llmc/dataloader.h
   reads them) start with a header of 256 int32: [0] the magic, [1] the
   version, [2] the number of tokens that follow.  GPT-2's are magic 20240520,
   version 1, uint16 tokens; LLaMA 3's are magic 20240801, version 7, uint32. */
#define LLMC_MAGIC 20240520
#define LLMC_MAGIC_LLAMA3 20240801
#define LLMC_HEADER 1024

/* A data file must be a regular file: a directory or a FIFO is named, not
   read (one that is not there is the open's to report). */
static FSDPErrorCode regular_file(const char *spec, const char *path)
{
  struct stat st;
  if (stat(path, &st)) return FSDP_SUCCESS;
  FSDPCheck(S_ISREG(st.st_mode), MPI_COMM_SELF, FSDP_ERR_IO, "fsdp-train: -data %s: '%s' is %s, not a regular file",
            spec, path,
            S_ISDIR(st.st_mode)    ? "a directory"
            : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
            : S_ISCHR(st.st_mode)  ? "a character device"
            : S_ISBLK(st.st_mode)  ? "a block device"
            : S_ISSOCK(st.st_mode) ? "a socket"
                                   : "something else");
  return FSDP_SUCCESS;
}

/* The whole of a file, or an error naming it. */
static FSDPErrorCode read_file(const char *spec, const char *path, unsigned char **bytes, int64_t *size)
{
  FILE *f;
  long len = -1;
  size_t got = 0;
  FSDPCall(regular_file(spec, path));
  f = fopen(path, "rb");
  FSDPCheck(f, MPI_COMM_SELF, FSDP_ERR_IO, "fsdp-train: -data %s: cannot open '%s': %s", spec, path, strerror(errno));
  if (!fseek(f, 0, SEEK_END)) len = ftell(f);
  if (len >= 0 && !fseek(f, 0, SEEK_SET) && !FSDPMalloc((size_t)len + 1, FSDP_MEM_OTHER, bytes))
    got = fread(*bytes, 1, (size_t)len, f);
  fclose(f);
  if (len < 0 || got != (size_t)len) FSDPCall(FSDPFree(bytes));
  FSDPCheck(*bytes, MPI_COMM_SELF, FSDP_ERR_IO, "fsdp-train: -data %s: cannot read '%s'", spec, path);
  *size = len;
  return FSDP_SUCCESS;
}

#if FSDP_WITH_HDF5
/* Dimensions of a dataset, or an error naming it. */
/* Dimensions of a data file's dataset that fsdp-train reads at most. */
#define H5_MAX_DIMS 6

static FSDPErrorCode h5_dims(hid_t file, const char *path, const char *name, int *ndim, hsize_t dims[H5_MAX_DIMS],
                             H5T_class_t *cls)
{
  hid_t ds, space, type;
  FSDPCheck(H5Lexists(file, name, H5P_DEFAULT) > 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "fsdp-train: data file '%s' has no dataset /%s", path, name);
  ds = H5Dopen2(file, name, H5P_DEFAULT);
  FSDPCheck(ds >= 0, MPI_COMM_SELF, FSDP_ERR_HDF5, "fsdp-train: data file '%s': cannot open /%s", path, name);
  space = H5Dget_space(ds);
  type = H5Dget_type(ds);
  *ndim = H5Sget_simple_extent_ndims(space);
  if (*ndim >= 1 && *ndim <= H5_MAX_DIMS) H5Sget_simple_extent_dims(space, dims, NULL);
  *cls = H5Tget_class(type);
  H5Tclose(type);
  H5Sclose(space);
  H5Dclose(ds);
  return FSDP_SUCCESS;
}

static FSDPErrorCode h5_read(hid_t file, const char *path, const char *name, hid_t memtype, void *buf)
{
  hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
  herr_t status = ds >= 0 ? H5Dread(ds, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) : -1;
  if (ds >= 0) H5Dclose(ds);
  FSDPCheck(status >= 0, MPI_COMM_SELF, FSDP_ERR_HDF5, "fsdp-train: data file '%s': cannot read /%s", path, name);
  return FSDP_SUCCESS;
}

/* An HDF5 file's /tokens, any integer type, 1-dimensional. */
static FSDPErrorCode h5_tokens(const char *spec, const char *path, Dataset *d)
{
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hsize_t dims[H5_MAX_DIMS] = {0};
  H5T_class_t cls;
  int ndim = 0;
  int64_t *all = NULL;
  FSDPErrorCode ierr;
  FSDPCheck(file >= 0, MPI_COMM_SELF, FSDP_ERR_IO, "fsdp-train: -data %s: cannot open '%s' as HDF5", spec, path);
  ierr = h5_dims(file, path, "tokens", &ndim, dims, &cls);
  if (!ierr && (cls != H5T_INTEGER || ndim != 1))
    ierr = TRAIN_ERR(FSDP_ERR_ARG, "fsdp-train: -data %s: /tokens in '%s' must be a 1-dimensional integer dataset",
                     spec, path);
  if (!ierr) ierr = FSDPMalloc((size_t)(dims[0] ? dims[0] : 1) * sizeof *all, FSDP_MEM_OTHER, &all);
  if (!ierr) ierr = h5_read(file, path, "tokens", H5T_NATIVE_INT64, all);
  if (!ierr) ierr = FSDPMalloc((size_t)(dims[0] ? dims[0] : 1) * sizeof *d->tokens, FSDP_MEM_OTHER, &d->tokens);
  for (hsize_t i = 0; !ierr && i < dims[0]; i++) {
    if (all[i] < 0 || all[i] > UINT16_MAX)
      ierr = TRAIN_ERR(FSDP_ERR_ARG, "fsdp-train: -data %s: /tokens[%llu] = %lld is not a token id in [0, 65536)", spec,
                       (unsigned long long)i, (long long)all[i]);
    else d->tokens[i] = (uint16_t)all[i];
  }
  d->n = (int64_t)dims[0];
  H5Fclose(file);
  FSDPCall(FSDPFree(&all));
  return ierr;
}
#endif

static int32_t le32(const unsigned char *b)
{
  return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

/* An llm.c header, when the file starts with one: its version must be 1
   (uint16 tokens) and its count the tokens the file holds; *skip is then its
   size.  A file without the magic is flat uint16 tokens (*skip 0). */
static FSDPErrorCode llmc_header(const char *spec, const char *path, const unsigned char *bytes, int64_t size,
                                 int64_t *skip)
{
  int32_t magic = size >= 4 ? le32(bytes) : 0, version, count;
  int64_t body = size - LLMC_HEADER;
  *skip = 0;
  FSDPCheck(magic != LLMC_MAGIC_LLAMA3, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "fsdp-train: -data %s: '%s' is llm.c's LLaMA 3 format (header[0], the magic, is %d: uint32 tokens); "
            "fsdp-train reads llm.c's GPT-2 files (magic %d, version 1, uint16 tokens)",
            spec, path, LLMC_MAGIC_LLAMA3, LLMC_MAGIC);
  if (magic != LLMC_MAGIC) return FSDP_SUCCESS;
  FSDPCheck(size >= LLMC_HEADER, MPI_COMM_SELF, FSDP_ERR_ARG,
            "fsdp-train: -data %s: '%s' starts with llm.c's magic %d but holds %lld bytes, fewer than the %d of its "
            "header",
            spec, path, LLMC_MAGIC, (long long)size, LLMC_HEADER);
  version = le32(bytes + 4);
  count = le32(bytes + 8);
  FSDPCheck(version == 1, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "fsdp-train: -data %s: '%s': llm.c header[1], the version, is %d: fsdp-train reads version 1 (uint16 "
            "tokens)",
            spec, path, (int)version);
  FSDPCheck(count >= 0 && body == 2 * (int64_t)count, MPI_COMM_SELF, FSDP_ERR_ARG,
            "fsdp-train: -data %s: '%s': llm.c header[2], the number of tokens, is %d, but %lld bytes follow the "
            "%d-byte header (%lld uint16 tokens%s): the file is truncated or its header is wrong",
            spec, path, (int)count, (long long)body, LLMC_HEADER, (long long)(body / 2),
            body % 2 ? " and an odd byte" : "");
  *skip = LLMC_HEADER;
  return FSDP_SUCCESS;
}

/* text:FILE (a byte per token, vocabulary 256) or tokens:FILE (uint16
   tokens: a flat little-endian file, llm.c's .bin with its header, or an
   HDF5 file's /tokens), checked against the model's context and vocabulary. */
static FSDPErrorCode load_tokens(const char *spec, int64_t ctx, int64_t vocab, uint64_t seed, Dataset *d)
{
  bool text = !strncmp(spec, "text:", 5);
  const char *path = spec + (text ? 5 : 7);
  unsigned char *bytes = NULL;
  int64_t size = 0;
  FSDPErrorCode ierr = FSDP_SUCCESS;

  d->in = ctx;
  d->out = ctx * vocab;
  d->seed = seed;
  d->text = text;
  FSDPCall(regular_file(spec, path));
#if FSDP_WITH_HDF5
  if (!text && H5Fis_hdf5(path) > 0) {
    H5E_auto2_t func;
    void *data;
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    ierr = h5_tokens(spec, path, d);
    H5Eset_auto2(H5E_DEFAULT, func, data);
    FSDPCall(ierr);
  } else
#endif
  {
    int64_t skip = 0;
    FSDPCall(read_file(spec, path, &bytes, &size));
    if (!text && size >= 8 && !memcmp(bytes, "\211HDF\r\n\032\n", 8)) {
      FSDPCall(FSDPFree(&bytes));
      return TRAIN_ERR(FSDP_ERR_UNSUPPORTED,
                       "fsdp-train: -data %s: '%s' is an HDF5 file, and this libfsdp was built without HDF5", spec,
                       path);
    }
    if (!text) ierr = llmc_header(spec, path, bytes, size, &skip);
    if (!ierr && !text && (size - skip) % 2)
      ierr = TRAIN_ERR(FSDP_ERR_ARG,
                       "fsdp-train: -data %s: '%s' has an odd number of bytes (%lld) after its header: "
                       "not uint16 tokens",
                       spec, path, (long long)(size - skip));
    d->n = text ? size : (size - skip) / 2;
    if (!ierr) ierr = FSDPMalloc((size_t)(d->n ? d->n : 1) * sizeof *d->tokens, FSDP_MEM_OTHER, &d->tokens);
    for (int64_t i = 0; !ierr && i < d->n; i++)
      d->tokens[i] = text ? bytes[i] : (uint16_t)(bytes[skip + 2 * i] | bytes[skip + 2 * i + 1] << 8);
    FSDPCall(FSDPFree(&bytes));
    FSDPCall(ierr);
  }
  FSDPCheck(d->n >= ctx + 1, MPI_COMM_SELF, FSDP_ERR_ARG,
            "fsdp-train: -data %s: %lld tokens are fewer than one window of ctx + 1 = %lld (the model's context and "
            "the next token)",
            spec, (long long)d->n, (long long)(ctx + 1));
  for (int64_t i = 0; i < d->n; i++)
    FSDPCheck(d->tokens[i] < vocab, MPI_COMM_SELF, FSDP_ERR_ARG,
              "fsdp-train: -data %s: token %lld at position %lld is not below the model's vocab=%lld", spec,
              (long long)d->tokens[i], (long long)i, (long long)vocab);
  snprintf(d->description, sizeof d->description, "%.80s (%lld tokens)", path, (long long)d->n);
  return FSDP_SUCCESS;
}

/* splitmix64: the start of window g depends on the seed and g alone. */
static uint64_t mix64(uint64_t z)
{
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Window g of the run (global batch b's row j is g = b * B + j): x its ctx
   tokens, labels the ctx tokens after each, from a start drawn by seed and g. */
static void take_window(const Dataset *d, uint64_t g, float *x, int64_t *labels)
{
  uint64_t start = mix64(mix64(d->seed) ^ g) % (uint64_t)(d->n - d->in);
  for (int64_t t = 0; t < d->in; t++) {
    x[t] = (float)d->tokens[start + (uint64_t)t];
    labels[t] = d->tokens[start + (uint64_t)t + 1];
  }
}

/* synthetic[:n=N,seed=S]'s items: each key once, each value a decimal
   integer; an error names the item. */
static FSDPErrorCode synthetic_spec(const char *spec, int64_t *n, int64_t *seed)
{
  const char *p = spec + strlen("synthetic");
  bool have_n = false, have_seed = false;
  if (!*p) return FSDP_SUCCESS;
  p++; /* the ':' */
  for (int item = 1;; item++) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char buf[64], *value, *end;
    bool is_n;
    long long v;
    FSDPCheck(len > 0, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -data %s: item %d is empty (expected synthetic[:n=N,seed=S])", spec, item);
    FSDPCheck(len < sizeof buf, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -data %s: item %d '%.*s' is not n=N or seed=S", spec, item, (int)len, p);
    memcpy(buf, p, len);
    buf[len] = '\0';
    value = strchr(buf, '=');
    FSDPCheck(value, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -data %s: item %d '%s' is not n=N or seed=S (expected synthetic[:n=N,seed=S])", spec, item,
              buf);
    *value++ = '\0';
    is_n = !strcmp(buf, "n");
    FSDPCheck(is_n || !strcmp(buf, "seed"), MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -data %s: item %d: unknown key '%s' (synthetic takes n and seed)", spec, item, buf);
    FSDPCheck(!(is_n ? have_n : have_seed), MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -data %s: %s is given twice",
              spec, buf);
    errno = 0;
    v = strtoll(value, &end, 10);
    FSDPCheck(*value >= '0' && *value <= '9' && !*end && (v > 0 || !is_n), MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -data %s: %s=%s: %s must be %s integer", spec, buf, value, buf,
              is_n ? "a positive" : "a non-negative");
    FSDPCheck(!errno, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -data %s: %s=%s is out of range", spec, buf, value);
    if (is_n) {
      *n = v;
      have_n = true;
    } else {
      *seed = v;
      have_seed = true;
    }
    if (!comma) return FSDP_SUCCESS;
    p = comma + 1;
  }
}

/* synthetic[:n=N,seed=S]: x uniform in [-1, 1]^in, and each output
   y_k = sin(a_k . x) + 0.5 (b_k . x)^2 - 0.25 with random unit-scale a_k, b_k:
   smooth, nonlinear, learnable by an MLP. */
static FSDPErrorCode synthetic(const char *spec, int64_t in, int64_t out, Dataset *d)
{
  int64_t n = 4096, seed = 1;
  float *a, *b;

  FSDPCall(synthetic_spec(spec, &n, &seed));
  FSDPCheck(n <= INT64_MAX / 4 / (in > out ? in : out), MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -data %s: n=%lld rows of %lld values do not fit in memory", spec, (long long)n,
            (long long)(in > out ? in : out));
  d->n = n;
  d->in = in;
  d->out = out;
  snprintf(d->description, sizeof d->description, "synthetic (n=%lld, seed=%lld)", (long long)n, (long long)seed);
  FSDPCall(FSDPMalloc((size_t)(n * in) * sizeof(float), FSDP_MEM_OTHER, &d->x));
  FSDPCall(FSDPMalloc((size_t)(n * out) * sizeof(float), FSDP_MEM_OTHER, &d->y));
  FSDPCall(FSDPMalloc((size_t)(2 * out * in) * sizeof(float), FSDP_MEM_OTHER, &a));
  b = a + out * in;
  FSDPCall(FSDPRandomUniform((uint64_t)seed, "synthetic.x", 0, n * in, -1.0, 1.0, d->x));
  FSDPCall(FSDPRandomUniform((uint64_t)seed, "synthetic.a", 0, out * in, -2.0 / sqrt((double)in),
                             2.0 / sqrt((double)in), a));
  FSDPCall(FSDPRandomUniform((uint64_t)seed, "synthetic.b", 0, out * in, -1.0 / sqrt((double)in),
                             1.0 / sqrt((double)in), b));
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < out; k++) {
      double s = 0, t = 0;
      for (int64_t j = 0; j < in; j++) {
        s += (double)a[k * in + j] * d->x[i * in + j];
        t += (double)b[k * in + j] * d->x[i * in + j];
      }
      d->y[i * out + k] = (float)(sin(s) + 0.5 * t * t - 0.25);
    }
  FSDPCall(FSDPFree(&a));
  return FSDP_SUCCESS;
}

#if FSDP_WITH_HDF5
/* "[a, b, ...]" of a dataset's dimensions (first: "N" when n is 0), or of a sample's shape after "N, ". */
static void shape_text(char *buf, size_t len, int ndim, const hsize_t *dims, int snd, const int64_t *shape)
{
  size_t used = (size_t)snprintf(buf, len, "[");
  for (int d = 0; d < ndim && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, d ? ", %llu" : "%llu", (unsigned long long)dims[d]);
  for (int d = 0; d < snd && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, "%s%lld", d || ndim ? ", " : "N, ", (long long)shape[d]);
  if (used < len) snprintf(buf + used, len - used, "]");
}

/* Whether a dataset [N, ...] holds samples of shape[snd], or flat ones of `flat` values. */
static bool holds_samples(int ndim, const hsize_t *dims, int snd, const int64_t *shape, int64_t flat)
{
  bool same = ndim == 1 + snd;
  for (int d = 0; same && d < snd; d++) same = (int64_t)dims[1 + d] == shape[d];
  return ndim >= 2 && dims[0] > 0 && (same || (ndim == 2 && (int64_t)dims[1] == flat));
}

/* An HDF5 file's /x [N, sample...] and /y [N, output sample...] (or flat
   [N, in], [N, out]), or /y [N] integer class labels. */
static FSDPErrorCode load_h5(const char *path, FSDPModel model, Dataset *d)
{
  hid_t file;
  int ndx = 0, ndy = 0, snx, sny;
  hsize_t dx[H5_MAX_DIMS] = {0}, dy[H5_MAX_DIMS] = {0};
  int64_t in, out, sx[4], sy[4];
  H5T_class_t cx, cy;
  FSDPErrorCode ierr;
  char want[96], got[96], flat[48] = "";

  FSDPCall(FSDPModelGetSizes(model, &in, &out, NULL));
  FSDPCall(FSDPModelGetSampleShape(model, false, &snx, sx));
  FSDPCall(FSDPModelGetSampleShape(model, true, &sny, sy));
  file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  FSDPCheck(file >= 0, MPI_COMM_SELF, FSDP_ERR_IO, "fsdp-train: cannot open data file '%s' as HDF5 (%s)", path,
            access(path, R_OK) ? strerror(errno) : "not an HDF5 file");
  ierr = h5_dims(file, path, "x", &ndx, dx, &cx);
  if (!ierr) ierr = h5_dims(file, path, "y", &ndy, dy, &cy);
  if (!ierr && !(cx == H5T_FLOAT && holds_samples(ndx, dx, snx, sx, in))) {
    shape_text(want, sizeof want, 0, NULL, snx, sx);
    if (snx > 1) snprintf(flat, sizeof flat, " (or [N, %lld])", (long long)in);
    if (ndx <= H5_MAX_DIMS) shape_text(got, sizeof got, ndx, dx, 0, NULL);
    else snprintf(got, sizeof got, "%d-dimensional", ndx);
    ierr =
        TRAIN_ERR(FSDP_ERR_ARG, "fsdp-train: data file '%s': /x must be float %s%s for a model with in=%lld, not %s %s",
                  path, want, flat, (long long)in, cx == H5T_FLOAT ? "float" : "non-float", got);
  }
  if (!ierr && !((cy == H5T_FLOAT && dy[0] == dx[0] && holds_samples(ndy, dy, sny, sy, out)) ||
                 (ndy == 1 && cy == H5T_INTEGER && dy[0] == dx[0]))) {
    hsize_t n = dx[0];
    shape_text(want, sizeof want, 1, &n, sny, sy);
    if (ndy <= H5_MAX_DIMS) shape_text(got, sizeof got, ndy, dy, 0, NULL);
    else snprintf(got, sizeof got, "%d-dimensional", ndy);
    ierr = TRAIN_ERR(FSDP_ERR_ARG,
                     "fsdp-train: data file '%s': /y must be float %s (regression) or integer "
                     "[%llu] (class labels) for /x [%llu, ...] and a model with out=%lld, not %s %s",
                     path, want, (unsigned long long)dx[0], (unsigned long long)dx[0], (long long)out,
                     cy == H5T_FLOAT     ? "float"
                     : cy == H5T_INTEGER ? "integer"
                                         : "other",
                     got);
  }
  if (!ierr) {
    d->n = (int64_t)dx[0];
    d->in = in;
    d->out = out;
    ierr = FSDPMalloc((size_t)(d->n * in) * sizeof(float), FSDP_MEM_OTHER, &d->x);
    if (!ierr) ierr = h5_read(file, path, "x", H5T_NATIVE_FLOAT, d->x);
    if (!ierr && cy == H5T_FLOAT) {
      ierr = FSDPMalloc((size_t)(d->n * out) * sizeof(float), FSDP_MEM_OTHER, &d->y);
      if (!ierr) ierr = h5_read(file, path, "y", H5T_NATIVE_FLOAT, d->y);
    } else if (!ierr) {
      ierr = FSDPMalloc((size_t)d->n * sizeof(int64_t), FSDP_MEM_OTHER, &d->labels);
      if (!ierr) ierr = h5_read(file, path, "y", H5T_NATIVE_INT64, d->labels);
      for (int64_t i = 0; !ierr && i < d->n; i++)
        if (d->labels[i] < 0 || d->labels[i] >= out)
          ierr =
              TRAIN_ERR(FSDP_ERR_ARG, "fsdp-train: data file '%s': label /y[%lld] = %lld is not a class in [0, %lld)",
                        path, (long long)i, (long long)d->labels[i], (long long)out);
    }
  }
  H5Fclose(file);
  snprintf(d->description, sizeof d->description, "%.80s (n=%lld, %s)", path, (long long)d->n,
           d->labels ? "classification" : "regression");
  return ierr;
}
#endif

static FSDPErrorCode load_any(const char *spec, FSDPModel model, uint64_t seed, Dataset *d)
{
  int64_t in, out, ctx, vocab;
  bool tokens = !strncmp(spec, "text:", 5) || !strncmp(spec, "tokens:", 7);
  FSDPCall(FSDPModelGetSizes(model, &in, &out, NULL));
  FSDPCall(FSDPModelGetTokens(model, &ctx, &vocab));
  FSDPCheck(!tokens || ctx, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -data %s: token data needs a gpt: model, not %s", spec, "an mlp: model");
  FSDPCheck(tokens || !ctx, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -data %s: a gpt: model trains on token data (-data text:FILE or tokens:FILE)", spec);
  if (tokens) return load_tokens(spec, ctx, vocab, seed, d);
  if (!strcmp(spec, "synthetic") || !strncmp(spec, "synthetic:", 10)) return synthetic(spec, in, out, d);
#if FSDP_WITH_HDF5
  FSDPCall(regular_file(spec, spec));
  {
    H5E_auto2_t func;
    void *data;
    FSDPErrorCode ierr;
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our message says what went wrong, once */
    ierr = load_h5(spec, model, d);
    H5Eset_auto2(H5E_DEFAULT, func, data);
    return ierr;
  }
#else
  return TRAIN_ERR(FSDP_ERR_UNSUPPORTED,
                   "fsdp-train: -data %s: this libfsdp was built without HDF5; use -data synthetic", spec);
#endif
}

/* A 64-bit hash of bytes, read as little-endian words on every host. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t len)
{
  const unsigned char *b = p;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w = 0;
    for (int k = 7; k >= 0; k--) w = w << 8 | b[i + (size_t)k];
    h = (((h << 5) | (h >> 59)) ^ w) * 0x9e3779b97f4a7c15ULL;
  }
  for (; i < len; i++) h = (((h << 5) | (h >> 59)) ^ b[i]) * 0x9e3779b97f4a7c15ULL;
  return mix64(h ^ len);
}

/* What a checkpoint records of the data it was trained on: the sizes and
   every value, as loaded (so a file's name or its spelling does not matter). */
static uint64_t dataset_hash(const Dataset *d)
{
  int64_t sizes[4] = {d->n, d->in, d->out, d->text};
  uint64_t h = hash_bytes(0, sizes, sizeof sizes);
  if (d->x) h = hash_bytes(h, d->x, (size_t)(d->n * d->in) * sizeof *d->x);
  if (d->y) h = hash_bytes(h, d->y, (size_t)(d->n * d->out) * sizeof *d->y);
  if (d->labels) h = hash_bytes(h, d->labels, (size_t)d->n * sizeof *d->labels);
  if (d->tokens) h = hash_bytes(h, d->tokens, (size_t)d->n * sizeof *d->tokens);
  return h;
}

/* -data SPEC for this model: text:, tokens:, synthetic or an HDF5 file. */
FSDPErrorCode load_data(const char *spec, FSDPModel model, uint64_t seed, Dataset *d)
{
  memset(d, 0, sizeof *d);
  FSDPCall(load_any(spec, model, seed, d));
  d->hash = dataset_hash(d);
  return FSDP_SUCCESS;
}

/* The first value of x or y that is NaN or infinite, named by dataset, row and column. */
FSDPErrorCode check_data_finite(const Dataset *d, const char *spec)
{
  for (int pass = 0; pass < 2; pass++) {
    const float *v = pass ? d->y : d->x;
    int64_t width = pass ? d->out : d->in;
    for (int64_t i = 0; v && i < d->n * width; i++)
      if (!isfinite(v[i]))
        return TRAIN_ERR(FSDP_ERR_NOT_FINITE,
                         "fsdp-train: -data %s: /%s[%lld, %lld] is %g: training data must be finite "
                         "(-fsdp_check_finite false trains on them)",
                         spec, pass ? "y" : "x", (long long)(i / width), (long long)(i % width), (double)v[i]);
  }
  return FSDP_SUCCESS;
}

/* Rows (b*B + j) mod N for this rank's j in [r*B/W, (r+1)*B/W); or token windows b*B + j. */
void take_batch(const Dataset *d, int64_t b, int64_t B, int rank, int size, float *x, float *y, int64_t *labels)
{
  int64_t per = B / size;
  for (int64_t j = 0; j < per && d->tokens; j++)
    take_window(d, (uint64_t)b * (uint64_t)B + (uint64_t)(rank * per + j), x + j * d->in, labels + j * d->in);
  for (int64_t j = 0; j < per && !d->tokens; j++) {
    int64_t row = (int64_t)(((uint64_t)b * (uint64_t)B + (uint64_t)(rank * per + j)) % (uint64_t)d->n);
    memcpy(x + j * d->in, d->x + row * d->in, (size_t)d->in * sizeof *x);
    if (d->labels) labels[j] = d->labels[row];
    else memcpy(y + j * d->out, d->y + row * d->out, (size_t)d->out * sizeof *y);
  }
}
