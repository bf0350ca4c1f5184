/* fsdp-train: train an MLP with libfsdp on an HDF5 data set (or a synthetic
   one), the way a batch job does: progress lines, a loss log, and a summary
   of time, throughput and memory against the FSDP formula.
     mpiexec -n 4 fsdp-train -model mlp:in=16,hidden=256,depth=4,out=4 \
       -data synthetic -steps 200 -batch 64 -fsdp_sharding_strategy hybrid
   doc/fsdp-train.md describes every option. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsdp_nn.h"

#if FSDP_WITH_HDF5
#include <hdf5.h>
#endif

/* An error raised where a value, not a return, is wanted (FSDPCheck returns). */
#define TRAIN_ERR(code, ...) FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, code, __VA_ARGS__)

/* ------------------------------------------------------------------ command line */

typedef enum { ARG_STRING, ARG_INT, ARG_REAL, ARG_FLAG } ArgType;

typedef struct {
  char model[512], data[1024], init[1024], loss_log[1024], optimizer[16], lr_schedule[16], prompt[1024];
  char checkpoint[1024], resume[1024], export_path[1024];
  int64_t steps, batch, warmup_steps, grad_accum, seed, log_every, checkpoint_every, generate;
  double lr, weight_decay, momentum, beta1, beta2, eps, clip_grad_norm, temperature;
  bool nesterov;
} Args;

typedef struct {
  const char *name;
  ArgType type;
  size_t offset, size;
  const char *help;
  bool set;
} ArgSpec;

#define ARG(name, type, field, help)                                                                                   \
  {                                                                                                                    \
    name, type, offsetof(Args, field), sizeof(((Args *)0)->field), help, false                                         \
  }

static ArgSpec arg_specs[] = {
    ARG("-model", ARG_STRING, model,
        "model spec, mlp:in=I,hidden=H,depth=D,out=O[,act=relu|tanh|gelu][,norm=none|layernorm] or "
        "gpt:vocab=V,ctx=T,dim=C,heads=H,layers=L[,tied=0|1]"),
    ARG("-data", ARG_STRING, data,
        "HDF5 file with /x [N,in] and /y [N,out] (float) or [N] (integer labels); or synthetic[:n=N,seed=S]; for a "
        "gpt: text:FILE (a byte per token) or tokens:FILE (uint16 tokens, llm.c's .bin, or HDF5 /tokens)"),
    ARG("-steps", ARG_INT, steps, "optimizer steps"),
    ARG("-batch", ARG_INT, batch, "global batch size B (rows per micro-batch, all ranks together; B % W == 0)"),
    ARG("-optimizer", ARG_STRING, optimizer, "sgd or adamw"),
    ARG("-lr", ARG_REAL, lr, "learning rate (peak rate of the cosine schedule)"),
    ARG("-weight_decay", ARG_REAL, weight_decay, "weight decay (default: adamw 0.01, sgd 0)"),
    ARG("-momentum", ARG_REAL, momentum, "sgd momentum"),
    ARG("-nesterov", ARG_FLAG, nesterov, "sgd nesterov momentum"),
    ARG("-beta1", ARG_REAL, beta1, "adamw beta1"),
    ARG("-beta2", ARG_REAL, beta2, "adamw beta2"),
    ARG("-eps", ARG_REAL, eps, "adamw eps"),
    ARG("-lr_schedule", ARG_STRING, lr_schedule,
        "constant or cosine (linear warmup, cosine decay to 0 at the last step)"),
    ARG("-warmup_steps", ARG_INT, warmup_steps, "warmup steps of the cosine schedule"),
    ARG("-clip_grad_norm", ARG_REAL, clip_grad_norm, "clip the global gradient norm to this (0: off)"),
    ARG("-grad_accum", ARG_INT, grad_accum, "micro-batches per step, their gradients averaged"),
    ARG("-seed", ARG_INT, seed, "seed of the parameter initialization"),
    ARG("-init", ARG_STRING, init, "HDF5 file with the initial parameters as /params/<name>"),
    ARG("-loss_log", ARG_STRING, loss_log,
        "CSV file: step,loss for every step (with -resume, rows after the checkpoint's step are replaced)"),
    ARG("-checkpoint", ARG_STRING, checkpoint,
        "HDF5 checkpoint written at the end, every -checkpoint_every steps, and on SIGUSR1 or SIGTERM"),
    ARG("-checkpoint_every", ARG_INT, checkpoint_every,
        "steps between checkpoints (0: only at the end and on a signal)"),
    ARG("-resume", ARG_STRING, resume,
        "checkpoint to continue from: parameters, optimizer state, step and data position"),
    ARG("-export", ARG_STRING, export_path,
        "HDF5 file of the final parameters alone (/params/<name>, what -init reads)"),
    ARG("-log_every", ARG_INT, log_every, "a progress line every k steps (0: quiet)"),
    ARG("-generate", ARG_INT, generate,
        "gpt: after training (or -steps 0 with -resume or -init), print this many tokens sampled from the model"),
    ARG("-prompt", ARG_STRING, prompt,
        "gpt: what -generate continues: text with -data text:, token ids separated by spaces with -data tokens:"),
    ARG("-temperature", ARG_REAL, temperature,
        "gpt: -generate samples from softmax(logits / temperature) with -seed; 0: the most likely token"),
};
#define NARGS ((int)(sizeof arg_specs / sizeof arg_specs[0]))

static bool is_key(const char *s)
{
  char *end;
  if (s[0] != '-') return false;
  (void)strtod(s, &end);
  return *end != '\0';
}

static ArgSpec *find_arg(const char *name)
{
  for (int i = 0; i < NARGS; i++)
    if (!strcmp(arg_specs[i].name, name)) return &arg_specs[i];
  return NULL;
}

static bool arg_set(const char *name) { return find_arg(name)->set; }

/* The program's own options; -fsdp_* and -help belong to the library. */
static FSDPErrorCode parse_args(int argc, char **argv, Args *a, bool *help)
{
  *help = false;
  for (int i = 1; i < argc; i++) {
    const char *t = argv[i], *value;
    ArgSpec *s;
    char *end, *field;
    if (!strcmp(t, "-help") || !strncmp(t, "-fsdp_", 6)) {
      if (!strcmp(t, "-help")) *help = true;
      if (!strchr(t, '=') && i + 1 < argc && !is_key(argv[i + 1])) i++;
      continue;
    }
    s = find_arg(t);
    FSDPCheck(s, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: unknown option '%s' (fsdp-train -help lists them)", t);
    field = (char *)a + s->offset;
    s->set = true;
    if (s->type == ARG_FLAG) {
      bool v = true;
      if (i + 1 < argc && (!strcmp(argv[i + 1], "true") || !strcmp(argv[i + 1], "false")))
        v = !strcmp(argv[++i], "true");
      *(bool *)field = v;
      continue;
    }
    FSDPCheck(i + 1 < argc, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: option %s needs a value", t);
    value = argv[++i];
    errno = 0;
    switch (s->type) {
    case ARG_STRING:
      FSDPCheck(strlen(value) < s->size, MPI_COMM_SELF, FSDP_ERR_OPTION,
                "fsdp-train: %s: the value is longer than %zu characters", t, s->size - 1);
      strcpy(field, value);
      break;
    case ARG_INT:
      *(int64_t *)field = strtoll(value, &end, 10);
      FSDPCheck(*value && !*end && !errno, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: %s %s is not an integer", t,
                value);
      break;
    case ARG_REAL:
      *(double *)field = strtod(value, &end);
      FSDPCheck(*value && !*end && !errno, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: %s %s is not a number", t,
                value);
      break;
    case ARG_FLAG: break;
    }
  }
  return FSDP_SUCCESS;
}

static void print_help(const Args *d)
{
  printf("fsdp-train options (defaults in brackets):\n");
  for (int i = 0; i < NARGS; i++) {
    const ArgSpec *s = &arg_specs[i];
    const char *field = (const char *)d + s->offset;
    printf("  %s <", s->name);
    switch (s->type) {
    case ARG_STRING: printf("%s", *field ? field : "none"); break;
    case ARG_INT: printf("%lld", (long long)*(const int64_t *)field); break;
    case ARG_REAL: printf("%g", *(const double *)field); break;
    case ARG_FLAG: printf("%s", *(const bool *)field ? "true" : "false"); break;
    }
    printf(">: %s\n", s->help);
  }
  fflush(stdout);
}

/* ------------------------------------------------------------------ the same job on every rank */

/* An option's value as text, for comparing ranks and for messages. */
static void arg_text(const ArgSpec *s, const Args *a, char *buf, size_t len)
{
  const char *field = (const char *)a + s->offset;
  int n = 0;
  switch (s->type) {
  case ARG_STRING: n = snprintf(buf, len, "'%s'", field); break;
  case ARG_INT: n = snprintf(buf, len, "%lld", (long long)*(const int64_t *)field); break;
  case ARG_REAL: n = snprintf(buf, len, "%.17g", *(const double *)field); break;
  case ARG_FLAG: n = snprintf(buf, len, "%s", *(const bool *)field ? "true" : "false"); break;
  }
  if (!s->set && n >= 0 && (size_t)n < len) snprintf(buf + n, len - (size_t)n, " (the default)");
}

static uint64_t fnv1a(const char *text)
{
  uint64_t h = 14695981039346656037ULL;
  for (; *text; text++) h = (h ^ (unsigned char)*text) * 1099511628211ULL;
  return h;
}

/* Every fsdp-train option must be the same on every rank: an MPMD launch
   (mpiexec -n 1 A : -n 1 B) can give ranks different ones, and the job would
   then train inconsistently or hang in a collective one rank never calls.
   The ranks compare hashes of the values and name the first that differs,
   as the library does for its -fsdp_* options. */
static FSDPErrorCode agree_on_args(const Args *a)
{
  enum { WIDTH = 128 };
  uint64_t lo[NARGS], hi[NARGS];
  char text[1100], mine[WIDTH], *all;
  int size, other = -1;
  FSDPErrorCode ierr;

  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 0; i < NARGS; i++) {
    arg_text(&arg_specs[i], a, text, sizeof text);
    lo[i] = hi[i] = fnv1a(text);
  }
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, lo, NARGS, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, hi, NARGS, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
  for (int i = 0; i < NARGS; i++) {
    if (lo[i] == hi[i]) continue;
    arg_text(&arg_specs[i], a, mine, sizeof mine);
    FSDPCall(FSDPMalloc((size_t)size * WIDTH, FSDP_MEM_OTHER, &all));
    ierr = MPI_Allgather(mine, WIDTH, MPI_CHAR, all, WIDTH, MPI_CHAR, MPI_COMM_WORLD) == MPI_SUCCESS ? FSDP_SUCCESS
                                                                                                     : FSDP_ERR_MPI;
    for (int r = 1; !ierr && r < size && other < 0; r++)
      if (strcmp(all + (size_t)r * WIDTH, all)) other = r;
    if (!ierr)
      ierr = TRAIN_ERR(FSDP_ERR_OPTION,
                       "fsdp-train: option %s differs across ranks: rank 0 has %s, rank %d has %s (every rank must be "
                       "given the same fsdp-train options)",
                       arg_specs[i].name, all, other < 0 ? 1 : other,
                       other < 0 ? "another value (they differ after 100 characters)" : all + (size_t)other * WIDTH);
    FSDPCall(FSDPFree(&all));
    return ierr;
  }
  return FSDP_SUCCESS;
}

/* Whether `path` can be written without changing anything now: an existing
   file is opened for writing (not truncated), a new one is created and
   removed.  Otherwise `why` says what is wrong. */
static bool can_write(const char *path, char *why, size_t len)
{
  struct stat st;
  int fd;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return snprintf(why, len, "is a directory"), false;
    fd = open(path, O_WRONLY | O_NONBLOCK);
    if (fd < 0) return snprintf(why, len, "cannot write it: %s", strerror(errno)), false;
    close(fd);
    return true;
  }
  if (errno != ENOENT) return snprintf(why, len, "cannot reach it: %s", strerror(errno)), false;
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return snprintf(why, len, "cannot create it: %s", strerror(errno)), false;
  close(fd);
  unlink(path);
  return true;
}

static bool same_file(const char *a, const char *b)
{
  struct stat sa, sb;
  if (!strcmp(a, b)) return true;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Rank 0's verdict on every output the job will write; "" when all can be. */
static void check_outputs(const Args *a, int keep, char *msg, size_t len)
{
  const char *outs[3][2] = {{"-checkpoint", a->checkpoint}, {"-export", a->export_path}, {"-loss_log", a->loss_log}};
  /* The data file itself, without a text: or tokens: in front of it. */
  const char *data = !strncmp(a->data, "text:", 5)     ? a->data + 5
                     : !strncmp(a->data, "tokens:", 7) ? a->data + 7
                                                       : a->data;
  const char *ins[3][2] = {{"-data", data}, {"-init", a->init}, {"-resume", a->resume}};
  char why[200], path[1100];

  for (int i = 0; i < 3; i++) {
    if (!outs[i][1][0]) continue;
    for (int j = i + 1; j < 3; j++)
      if (outs[j][1][0] && same_file(outs[i][1], outs[j][1])) {
        snprintf(msg, len, "fsdp-train: %s and %s are the same file '%s': each output needs its own", outs[i][0],
                 outs[j][0], outs[i][1]);
        return;
      }
    /* A checkpoint may replace the one it resumed from; nothing may replace the data. */
    for (int j = 0; j < 3; j++)
      if (ins[j][1][0] && (i > 0 || j == 0) && same_file(outs[i][1], ins[j][1])) {
        snprintf(msg, len, "fsdp-train: %s '%s' would overwrite the %s file", outs[i][0], outs[i][1], ins[j][0]);
        return;
      }
    if (!can_write(outs[i][1], why, sizeof why)) {
      snprintf(msg, len, "fsdp-train: %s '%s': %s", outs[i][0], outs[i][1], why);
      return;
    }
  }
  if (a->checkpoint[0]) { /* the temporary a save writes, and the older checkpoints it shifts */
    struct stat st;
    snprintf(path, sizeof path, "%s.partial", a->checkpoint);
    if (!can_write(path, why, sizeof why)) {
      snprintf(msg, len, "fsdp-train: -checkpoint '%s': its temporary '%s' %s", a->checkpoint, path, why);
      return;
    }
    for (int k = 1; k < keep; k++) {
      snprintf(path, sizeof path, "%s.%d", a->checkpoint, k);
      if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(
            msg, len,
            "fsdp-train: -checkpoint '%s': '%s', where -fsdp_checkpoint_keep %d keeps an older one, is a directory",
            a->checkpoint, path, keep);
        return;
      }
    }
  }
  if (a->loss_log[0] && a->resume[0]) { /* resuming rewrites the log through a temporary */
    snprintf(path, sizeof path, "%s.resume", a->loss_log);
    if (!can_write(path, why, sizeof why))
      snprintf(msg, len, "fsdp-train: -loss_log '%s': its temporary '%s' %s", a->loss_log, path, why);
  }
}

/* Pre-flight: every output is found writable before the first step, not
   after the last; the error names the path and the reason, on every rank. */
static FSDPErrorCode preflight(FSDPContext ctx, const Args *a)
{
  char msg[2400] = "";
  int rank, keep;
  FSDPCall(FSDPContextGetCheckpointKeep(ctx, &keep));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) check_outputs(a, keep, msg, sizeof msg);
  FSDPCallMPI(MPI_Bcast(msg, sizeof msg, MPI_CHAR, 0, MPI_COMM_WORLD));
  FSDPCheck(!msg[0], MPI_COMM_WORLD, FSDP_ERR_IO, "%s", msg);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ data */

typedef struct {
  int64_t n, in, out; /* rows, input width, output width (classes for labels) */
  float *x, *y;       /* [n, in], [n, out] for regression */
  int64_t *labels;    /* [n] for classification */
  uint16_t *tokens;   /* or a token stream [n] for a GPT: windows of in + 1 tokens */
  bool text;          /* from text:, a byte per token (what -prompt and -generate then read and print) */
  uint64_t seed;      /* where a token window starts */
  char description[128];
} Dataset;

static FSDPErrorCode dataset_free(Dataset *d)
{
  FSDPCall(FSDPFree(&d->x));
  FSDPCall(FSDPFree(&d->y));
  FSDPCall(FSDPFree(&d->labels));
  FSDPCall(FSDPFree(&d->tokens));
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ token data (a GPT's) */

/* llm.c's token files start with 256 int32: this magic, a version, the count. */
#define LLMC_MAGIC 20240520
#define LLMC_HEADER 1024

/* The whole of a file, or an error naming it. */
static FSDPErrorCode read_file(const char *spec, const char *path, unsigned char **bytes, int64_t *size)
{
  FILE *f = fopen(path, "rb");
  long len = -1;
  size_t got = 0;
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
static FSDPErrorCode h5_dims(hid_t file, const char *path, const char *name, int *ndim, hsize_t dims[2],
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
  if (*ndim >= 1 && *ndim <= 2) H5Sget_simple_extent_dims(space, dims, NULL);
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
  hsize_t dims[2] = {0, 0};
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
    if (!text && size >= LLMC_HEADER) {
      int32_t header[3];
      memcpy(header, bytes, sizeof header);
      if (header[0] == LLMC_MAGIC) skip = LLMC_HEADER;
    }
    if (!text && (size - skip) % 2)
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

/* synthetic[:n=N,seed=S]: x uniform in [-1, 1]^in, and each output
   y_k = sin(a_k . x) + 0.5 (b_k . x)^2 - 0.25 with random unit-scale a_k, b_k:
   smooth, nonlinear, learnable by an MLP. */
static FSDPErrorCode synthetic(const char *spec, int64_t in, int64_t out, Dataset *d)
{
  int64_t n = 4096, seed = 1;
  const char *p = spec + strlen("synthetic");
  float *a, *b;

  while (*p) {
    char key[16];
    long long v;
    int used = 0;
    p++;
    FSDPCheck(sscanf(p, "%15[a-z]=%lld%n", key, &v, &used) == 2 && used > 0 && (p[used] == ',' || !p[used]) &&
                  ((!strcmp(key, "n") && v > 0) || (!strcmp(key, "seed") && v >= 0)),
              MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -data %s: expected synthetic[:n=N,seed=S] with N > 0", spec);
    if (!strcmp(key, "n")) n = v;
    else seed = v;
    p += used;
  }
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
static FSDPErrorCode load_h5(const char *path, int64_t in, int64_t out, Dataset *d)
{
  hid_t file;
  int ndx, ndy;
  hsize_t dx[2] = {0, 0}, dy[2] = {0, 0};
  H5T_class_t cx, cy;
  FSDPErrorCode ierr;

  file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  FSDPCheck(file >= 0, MPI_COMM_SELF, FSDP_ERR_IO, "fsdp-train: cannot open data file '%s' as HDF5 (%s)", path,
            access(path, R_OK) ? strerror(errno) : "not an HDF5 file");
  ierr = h5_dims(file, path, "x", &ndx, dx, &cx);
  if (!ierr) ierr = h5_dims(file, path, "y", &ndy, dy, &cy);
  if (!ierr && !(ndx == 2 && cx == H5T_FLOAT && (int64_t)dx[1] == in && dx[0] > 0)) {
    char shape[64];
    if (ndx == 1) snprintf(shape, sizeof shape, "[%llu]", (unsigned long long)dx[0]);
    else if (ndx == 2)
      snprintf(shape, sizeof shape, "[%llu, %llu]", (unsigned long long)dx[0], (unsigned long long)dx[1]);
    else snprintf(shape, sizeof shape, "%d-dimensional", ndx);
    ierr = TRAIN_ERR(FSDP_ERR_ARG,
                     "fsdp-train: data file '%s': /x must be float [N, %lld] for a model with in=%lld, "
                     "not %s %s",
                     path, (long long)in, (long long)in, cx == H5T_FLOAT ? "float" : "non-float", shape);
  }
  if (!ierr && !((ndy == 2 && cy == H5T_FLOAT && dy[0] == dx[0] && (int64_t)dy[1] == out) ||
                 (ndy == 1 && cy == H5T_INTEGER && dy[0] == dx[0])))
    ierr = TRAIN_ERR(FSDP_ERR_ARG,
                     "fsdp-train: data file '%s': /y must be float [%llu, %lld] (regression) or integer "
                     "[%llu] (class labels) for /x [%llu, %lld] and a model with out=%lld, not %s [%llu%s]",
                     path, (unsigned long long)dx[0], (long long)out, (unsigned long long)dx[0],
                     (unsigned long long)dx[0], (long long)in, (long long)out,
                     cy == H5T_FLOAT     ? "float"
                     : cy == H5T_INTEGER ? "integer"
                                         : "other",
                     (unsigned long long)dy[0], ndy == 2 ? ", ..." : "");
  if (!ierr) {
    d->n = (int64_t)dx[0];
    d->in = in;
    d->out = out;
    ierr = FSDPMalloc((size_t)(d->n * in) * sizeof(float), FSDP_MEM_OTHER, &d->x);
    if (!ierr) ierr = h5_read(file, path, "x", H5T_NATIVE_FLOAT, d->x);
    if (!ierr && ndy == 2) {
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

static FSDPErrorCode load_data(const char *spec, FSDPModel model, uint64_t seed, Dataset *d)
{
  int64_t in, out, ctx, vocab;
  bool tokens = !strncmp(spec, "text:", 5) || !strncmp(spec, "tokens:", 7);
  memset(d, 0, sizeof *d);
  FSDPCall(FSDPModelGetSizes(model, &in, &out, NULL));
  FSDPCall(FSDPModelGetTokens(model, &ctx, &vocab));
  FSDPCheck(!tokens || ctx, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -data %s: token data needs a gpt: model, not %s", spec, "an mlp: model");
  FSDPCheck(tokens || !ctx, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -data %s: a gpt: model trains on token data (-data text:FILE or tokens:FILE)", spec);
  if (tokens) return load_tokens(spec, ctx, vocab, seed, d);
  if (!strcmp(spec, "synthetic") || !strncmp(spec, "synthetic:", 10)) return synthetic(spec, in, out, d);
#if FSDP_WITH_HDF5
  {
    H5E_auto2_t func;
    void *data;
    FSDPErrorCode ierr;
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our message says what went wrong, once */
    ierr = load_h5(spec, in, out, d);
    H5Eset_auto2(H5E_DEFAULT, func, data);
    return ierr;
  }
#else
  return TRAIN_ERR(FSDP_ERR_UNSUPPORTED,
                   "fsdp-train: -data %s: this libfsdp was built without HDF5; use -data synthetic", spec);
#endif
}

/* The first value of x or y that is NaN or infinite, named by dataset, row and column. */
static FSDPErrorCode check_data_finite(const Dataset *d, const char *spec)
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
static void take_batch(const Dataset *d, int64_t b, int64_t B, int rank, int size, float *x, float *y, int64_t *labels)
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

/* ------------------------------------------------------------------ progress */

/* Time in, and bytes moved by, the all-gathers, reduce-scatters and all-reduces so far. */
static FSDPErrorCode comm_totals(const FSDPLogEvent events[3], double *time, int64_t *bytes)
{
  *time = 0;
  *bytes = 0;
  for (int i = 0; i < 3; i++) {
    FSDPLogEventInfo info;
    FSDPCall(FSDPLogEventGetInfo(events[i], &info));
    *time += info.time;
    *bytes += info.bytes;
  }
  return FSDP_SUCCESS;
}

/* The memory that holds the context's buffers: the GPU's on a CUDA context. */
static FSDPErrorCode memory_stats(FSDPContext ctx, FSDPMemoryStats *st, bool *gpu)
{
  FSDPDeviceType device;
  FSDPCall(FSDPContextGetDevice(ctx, &device));
  *gpu = device == FSDP_DEVICE_CUDA;
  return *gpu ? FSDPGetDeviceMemoryStats(st) : FSDPGetMemoryStats(st);
}

static double max_over_ranks(double v)
{
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}

/* Peak bytes per category, the largest over ranks, next to what the FSDP
   formula says a rank needs. */
static FSDPErrorCode print_summary(FSDPContext ctx, FSDPOptimizer opt, int rank, int factor, int loaded, int nstates,
                                   double seconds, int64_t steps, int64_t samples, double last_loss, double comm_time,
                                   int64_t comm_bytes)
{
  FSDPShardingStrategy strategy;
  FSDPMemoryStats st;
  double peak[FSDP_MEM_NUM_CATEGORIES + 1];
  int64_t numel, shard, maxunit, state;
  char b1[32], b2[32];
  const char *formula[FSDP_MEM_NUM_CATEGORIES];
  double expect[FSDP_MEM_NUM_CATEGORIES];
  char lmax[64];
  FSDPMemoryPlan plan;
  FSDPCommStats cs;
  FSDPDataType pdt;
  bool low, gpu, views;

  FSDPCall(memory_stats(ctx, &st, &gpu));
  for (int c = 0; c < FSDP_MEM_NUM_CATEGORIES; c++) peak[c] = (double)st.peak[c];
  peak[FSDP_MEM_NUM_CATEGORIES] = (double)st.total_peak;
  MPI_Allreduce(MPI_IN_PLACE, peak, FSDP_MEM_NUM_CATEGORIES + 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  FSDPCall(FSDPContextGetSizes(ctx, &numel, &shard, &maxunit));
  FSDPCall(FSDPOptimizerGetStateSize(opt, &state));
  MPI_Allreduce(MPI_IN_PLACE, &state, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  FSDPCall(FSDPContextGetCommStats(ctx, &cs));
  if (rank) return FSDP_SUCCESS;
  formula[FSDP_MEM_PARAMS] = "sum(psi_i)/F";
  expect[FSDP_MEM_PARAMS] = 4.0 * (double)shard;
  formula[FSDP_MEM_GRADS] = "sum(psi_i)/F";
  expect[FSDP_MEM_GRADS] = 4.0 * (double)shard;
  formula[FSDP_MEM_OPTIM_STATE] = "k * trainable/F";
  expect[FSDP_MEM_OPTIM_STATE] = 4.0 * (double)state;
  /* L units' parameters (the limiter's L) and two units' gradients (the one
     computing, the one reducing); grad_op keeps every unit's parameters from
     forward to backward; with F = 1 the parameters are the shard itself. */
  FSDPCall(FSDPContextGetShardingStrategy(ctx, &strategy));
  FSDPCall(FSDPContextGetMemoryPlan(ctx, &plan));
  /* Mixed precision: parameters in 2 bytes (the paper's K_low), gradients in 4. */
  FSDPCall(FSDPContextGetMixedPrecision(ctx, &pdt, NULL));
  low = pdt != FSDP_FLOAT32;
  FSDPCall(FSDPContextGetShmViews(ctx, &views));
  if (views) { /* each rank's share of the node's views, and the gradient buffers */
    formula[FSDP_MEM_UNSHARDED] = "sum(psi_i)/F + 2 max(psi_i), views";
    expect[FSDP_MEM_UNSHARDED] = 4.0 * (double)shard + 8.0 * (double)maxunit;
  } else if (factor > 1 && (strategy == FSDP_SHARD_GRAD_OP || strategy == FSDP_HYBRID_SHARD_ZERO2)) {
    formula[FSDP_MEM_UNSHARDED] = low ? "sum(psi_i)/2 + 2 max(psi_i)" : "sum(psi_i) + 2 max(psi_i)";
    expect[FSDP_MEM_UNSHARDED] = (low ? 2.0 : 4.0) * (double)shard * factor + 8.0 * (double)maxunit;
  } else {
    snprintf(lmax, sizeof lmax, "(L%s + 2) max(psi_i), L = %d%s%s", low ? "/2" : "", plan.unsharded_buffers,
             low ? ", " : "", low ? FSDPDataTypeName(pdt) : "");
    formula[FSDP_MEM_UNSHARDED] = plan.unsharded_buffers ? lmax : "2 max(psi_i)";
    expect[FSDP_MEM_UNSHARDED] = ((low ? 2.0 : 4.0) * plan.unsharded_buffers + 8.0) * (double)maxunit;
  }
  formula[FSDP_MEM_COMM_STAGING] = "max(psi_i)/F";
  expect[FSDP_MEM_COMM_STAGING] = 4.0 * (double)maxunit / factor; /* padded units divide by F */
  if (loaded) { /* and, while loading, one unit's shard and (-resume) its k state tensors */
    formula[FSDP_MEM_COMM_STAGING] = loaded == 2 ? "(2 + k) max(psi_i)/F, -resume" : "2 max(psi_i)/F, -init";
    expect[FSDP_MEM_COMM_STAGING] *= loaded == 2 ? 2.0 + (double)nstates : 2.0;
  }
  formula[FSDP_MEM_OTHER] = "(activations, data)";
  expect[FSDP_MEM_OTHER] = -1;
  printf("fsdp-train: %lld steps in %.3f s: %.2f ms/step, %.1f samples/s, final loss %.6g\n", (long long)steps, seconds,
         steps ? 1e3 * seconds / (double)steps : 0.0, seconds > 0 ? (double)samples / seconds : 0.0, last_loss);
  printf("fsdp-train: communication %.3f s on rank 0, %.3f GB/s\n", comm_time,
         comm_time > 0 ? (double)comm_bytes / comm_time / 1e9 : 0.0);
  if (cs.comm_time > 0)
    printf("fsdp-train: rank 0 waited %.3f s of %.3f s in collectives: overlap %.1f%%, %lld prefetches\n",
           cs.exposed_time, cs.comm_time, 100.0 * (1.0 - cs.exposed_time / cs.comm_time), (long long)cs.prefetches);
  if (cs.shm_collectives) {
    printf("fsdp-train: rank 0 ran %lld of %lld collectives in node shared memory",
           (long long)(cs.shm_collectives - cs.shm_fallbacks), (long long)cs.collectives);
    if (cs.shm_fallbacks)
      printf(", and %lld through MPI instead (a gradient buffer beyond the plan)", (long long)cs.shm_fallbacks);
    printf("\n");
  }
  printf("fsdp-train: peak %smemory per rank (largest over ranks)   FSDP formula\n", gpu ? "GPU " : "");
  for (int c = 0; c < FSDP_MEM_NUM_CATEGORIES; c++) {
    FSDPFormatBytes(b1, sizeof b1, peak[c]);
    if (expect[c] >= 0) FSDPFormatBytes(b2, sizeof b2, expect[c]);
    else b2[0] = '\0';
    printf("  %-22s %12s   %12s %s\n", FSDPMemCategoryName((FSDPMemCategory)c), b1, b2, formula[c]);
  }
  FSDPFormatBytes(b1, sizeof b1, peak[FSDP_MEM_NUM_CATEGORIES]);
  printf("  %-22s %12s\n", "total", b1);
  fflush(stdout);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ checkpoints and signals */

/* SIGUSR1 and SIGTERM (sbatch --signal, pre-emption) ask for a checkpoint
   at the next step boundary; the handler only records which one came. */
static volatile sig_atomic_t signal_caught;

/* libfsdp is told too: a collective that a dead or stuck peer never joins
   then aborts the job after -fsdp_signal_grace seconds, not at the watchdog. */
static void on_signal(int signo)
{
  signal_caught = signo;
  FSDPNotifySignal(signo);
}

/* Installed first thing in main, before MPI starts: a signal during start-up
   is recorded too, and the job stops cleanly before its first step. */
static int catch_signals(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART; /* a write under way when the signal comes goes on */
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) == 0 && sigaction(SIGTERM, &sa, NULL) == 0) return 0;
  fprintf(stderr, "fsdp-train: cannot install the SIGUSR1 and SIGTERM handlers: %s\n", strerror(errno));
  return 1;
}

/* Test hook: FSDP_TEST_STARTUP_PAUSE=seconds stops every rank in start-up,
   after MPI is up, and rank 0 first creates the file that
   FSDP_TEST_STARTUP_MARKER names, so a test can signal the job there. */
static void pause_for_test(void)
{
  const char *env = getenv("FSDP_TEST_STARTUP_PAUSE"), *marker = getenv("FSDP_TEST_STARTUP_MARKER");
  int rank;
  if (!env || atoi(env) <= 0) return;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0 && marker) {
    FILE *fp = fopen(marker, "w");
    if (fp) fclose(fp);
  }
  sleep((unsigned)atoi(env)); /* a signal ends it early */
}

/* The signal any rank caught (0: none): a signal may reach only some ranks.
   Waited for as the context waits (it sleeps on an oversubscribed node). */
static FSDPErrorCode agree_on_signal(FSDPContext ctx, int *signo)
{
  MPI_Request req;
  *signo = signal_caught;
  FSDPCallMPI(MPI_Iallreduce(MPI_IN_PLACE, signo, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
  FSDPCall(FSDPContextWait(ctx, &req));
  return FSDP_SUCCESS;
}

/* A checkpoint after `step` steps, at the position the last step recorded. */
static FSDPErrorCode save_checkpoint(FSDPContext ctx, FSDPOptimizer opt, const Args *a, int64_t step, int rank,
                                     FILE *log)
{
  double t0;
  if (log) fflush(log); /* the loss log holds every step the checkpoint has */
  t0 = MPI_Wtime();
  FSDPCall(FSDPContextSave(ctx, opt, a->checkpoint));
  if (rank == 0 && a->log_every > 0) {
    printf("fsdp-train: step %lld: checkpoint %s written in %.3f s\n", (long long)step, a->checkpoint,
           MPI_Wtime() - t0);
    fflush(stdout);
  }
  return FSDP_SUCCESS;
}

/* Rank 0's loss log while the job runs: main closes it when training fails,
   so every finished step's row reaches the file before the job is aborted. */
static FILE *loss_log_file;

/* With -resume: rank 0 keeps the loss log's header and its rows up to the
   checkpoint's step, so that the log reads as if the job never stopped. */
static FILE *reopen_loss_log(const char *path, int64_t step)
{
  FILE *in = fopen(path, "r"), *out;
  char line[256], tmp[1100];
  if (!in) {
    out = fopen(path, "w");
    if (out) fprintf(out, "step,loss\n");
    return out;
  }
  snprintf(tmp, sizeof tmp, "%s.resume", path);
  out = fopen(tmp, "w");
  if (!out) {
    fclose(in);
    return NULL;
  }
  fprintf(out, "step,loss\n");
  while (fgets(line, sizeof line, in)) {
    char *end;
    long long s = strtoll(line, &end, 10);
    if (end != line && *end == ',' && s <= step) fputs(line, out);
  }
  fclose(in);
  if (fclose(out) || rename(tmp, path)) return NULL;
  return fopen(path, "a");
}

/* ------------------------------------------------------------------ training */

/* "  scale S  skipped N" for a progress line with the gradient scaler on, "" without. */
static const char *scale_text(FSDPOptimizer opt, char *buf, size_t size)
{
  double scale;
  int64_t skipped;
  bool on;
  if (FSDPOptimizerGetGradScaler(opt, &on) || !on || FSDPOptimizerGetGradScale(opt, &scale, &skipped)) return "";
  snprintf(buf, size, "  scale %g  skipped %lld", scale, (long long)skipped);
  return buf;
}

static FSDPErrorCode configure_optimizer(FSDPContext ctx, FSDPOptimizer opt, const Args *a)
{
  FSDPDataType pdt, rdt;
  if (!strcmp(a->optimizer, "sgd")) FSDPCall(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_SGD));
  else if (!strcmp(a->optimizer, "adamw")) FSDPCall(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_ADAMW));
  else return TRAIN_ERR(FSDP_ERR_OPTION, "fsdp-train: -optimizer %s is not sgd or adamw", a->optimizer);
  FSDPCall(FSDPOptimizerSetLearningRate(opt, a->lr));
  if (arg_set("-weight_decay")) FSDPCall(FSDPOptimizerSetWeightDecay(opt, a->weight_decay));
  if (arg_set("-momentum") || arg_set("-nesterov")) FSDPCall(FSDPOptimizerSetMomentum(opt, a->momentum, a->nesterov));
  FSDPCall(FSDPOptimizerSetBetas(opt, a->beta1, a->beta2));
  FSDPCall(FSDPOptimizerSetEps(opt, a->eps));
  if (!strcmp(a->lr_schedule, "constant")) FSDPCall(FSDPOptimizerSetSchedule(opt, FSDP_LR_CONSTANT, 0, 0));
  else if (!strcmp(a->lr_schedule, "cosine")) {
    FSDPCheck(a->warmup_steps >= 0 && a->warmup_steps < a->steps, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -warmup_steps %lld must be in [0, -steps %lld) for the cosine schedule",
              (long long)a->warmup_steps, (long long)a->steps);
    FSDPCall(FSDPOptimizerSetSchedule(opt, FSDP_LR_COSINE, a->warmup_steps, a->steps));
  } else return TRAIN_ERR(FSDP_ERR_OPTION, "fsdp-train: -lr_schedule %s is not constant or cosine", a->lr_schedule);
  FSDPCall(FSDPOptimizerSetClipGradNorm(opt, a->clip_grad_norm));
  /* fp16's range needs loss scaling; -fsdp_grad_scaler false still turns it off. */
  FSDPCall(FSDPContextGetMixedPrecision(ctx, &pdt, &rdt));
  if (pdt == FSDP_FLOAT16 || rdt == FSDP_FLOAT16) FSDPCall(FSDPOptimizerSetGradScaler(opt, true));
  FSDPCall(FSDPOptimizerSetFromOptions(opt));
  return FSDP_SUCCESS;
}

/* What a training run holds, from set-up to the summary. */
typedef struct {
  int rank, size, factor, nreplicas;
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  Dataset data;
  int64_t in, out, numel, per, K; /* model sizes; rows per rank and micro-batches per step */
  float *x, *yt;                  /* this rank's rows of a micro-batch, and their targets */
  int64_t *labels;                /* or their labels */
  FILE *log;                      /* rank 0's loss log, or NULL */
  bool guard_loss;                /* a non-finite loss stops the run before its update */
  FSDPLogEvent comm_events[3];
  double t_start, t_last, loss, comm_last;
  int64_t bytes_last;
  int64_t first, cursor, done; /* the first step, its batch, and the steps this run took */
  int64_t last_logged;         /* the step of the last progress line */
} Run;

/* What the command line asks that no library call checks. */
static FSDPErrorCode check_args(const Args *a, int size)
{
  FSDPCheck(a->steps >= 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -steps %lld is negative", (long long)a->steps);
  FSDPCheck(a->batch > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -batch %lld must be positive",
            (long long)a->batch);
  FSDPCheck(a->batch % size == 0, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -batch %lld is not divisible by the %d ranks: each rank takes B/W rows of every batch",
            (long long)a->batch, size);
  FSDPCheck(a->grad_accum > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -grad_accum %lld must be positive",
            (long long)a->grad_accum);
  FSDPCheck(a->log_every >= 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -log_every %lld is negative",
            (long long)a->log_every);
  FSDPCheck(a->generate >= 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -generate %lld is negative",
            (long long)a->generate);
  FSDPCheck(a->temperature >= 0 && isfinite(a->temperature), MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -temperature %g must be a finite number >= 0", a->temperature);
  FSDPCheck(!a->generate || a->prompt[0], MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -generate %lld needs a -prompt of at least one character", (long long)a->generate);
  FSDPCheck(a->checkpoint_every >= 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -checkpoint_every %lld is negative",
            (long long)a->checkpoint_every);
  FSDPCheck(!a->checkpoint_every || a->checkpoint[0], MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -checkpoint_every %lld needs -checkpoint PATH", (long long)a->checkpoint_every);
  FSDPCheck(!a->init[0] || !a->resume[0], MPI_COMM_SELF, FSDP_ERR_OPTION,
            "fsdp-train: -init %s and -resume %s both set the parameters: give one", a->init, a->resume);
#if !FSDP_WITH_HDF5
  /* Say so now, not at the first checkpoint hours into the job. */
  {
    const char *what = a->checkpoint[0]    ? "-checkpoint"
                       : a->resume[0]      ? "-resume"
                       : a->export_path[0] ? "-export"
                                           : NULL;
    const char *file = a->checkpoint[0] ? a->checkpoint : a->resume[0] ? a->resume : a->export_path;
    FSDPCheck(
        !what, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
        "fsdp-train: %s %s: this libfsdp was built without HDF5 (configure --with-hdf5), so it has no checkpoints",
        what, file);
  }
#endif
  return FSDP_SUCCESS;
}

/* The context, the model and its data, the optimizer; -init or -resume. */
static FSDPErrorCode set_up(Run *r, const Args *a)
{
  bool check_finite, scaler;
  FSDPCall(FSDPContextCreate(MPI_COMM_WORLD, &r->ctx));
  FSDPCall(FSDPContextSetFromOptions(r->ctx));
  FSDPCall(FSDPContextGetCheckFinite(r->ctx, &check_finite));
  FSDPCall(preflight(r->ctx, a));
  FSDPCall(FSDPModelCreate(r->ctx, a->model, &r->model));
  FSDPCall(FSDPModelSetSeed(r->model, (uint64_t)a->seed));
  FSDPCall(FSDPModelSetFromOptions(r->model));
  FSDPCall(FSDPModelGetSizes(r->model, &r->in, &r->out, &r->numel));
  FSDPCall(load_data(a->data, r->model, (uint64_t)a->seed, &r->data));
  if (check_finite) FSDPCall(check_data_finite(&r->data, a->data));
  FSDPCall(FSDPModelSetUp(r->model));
  if (a->init[0]) FSDPCall(FSDPContextLoad(r->ctx, NULL, a->init));
  FSDPCall(FSDPOptimizerCreate(r->ctx, &r->opt));
  FSDPCall(configure_optimizer(r->ctx, r->opt, a));
  FSDPCall(FSDPOptimizerSetUp(r->opt));
  if (a->resume[0]) {
    FSDPTrainingState ts;
    FSDPCall(FSDPContextLoad(r->ctx, r->opt, a->resume));
    FSDPCall(FSDPContextGetTrainingState(r->ctx, &ts));
    /* The load refused a negative step or cursor as damage. */
    FSDPCheck(ts.step <= a->steps, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -resume %s is at step %lld, beyond -steps %lld", a->resume, (long long)ts.step,
              (long long)a->steps);
    r->first = ts.step;
    r->cursor = ts.data_cursor;
  }
  /* fp16's overflows are the gradient scaler's: it skips those steps. */
  FSDPCall(FSDPOptimizerGetGradScaler(r->opt, &scaler));
  r->guard_loss = check_finite && !scaler;
  return FSDP_SUCCESS;
}

/* Rank 0's lines about the job before its first step. */
static FSDPErrorCode print_banner(const Run *r, const Args *a)
{
  FSDPShardingStrategy strategy;
  FSDPDataType pdt, rdt;
  bool scaler;
  int nunits;
  if (r->rank != 0 || a->log_every <= 0) return FSDP_SUCCESS;
  FSDPCall(FSDPContextGetShardingStrategy(r->ctx, &strategy));
  FSDPCall(FSDPContextGetNumUnits(r->ctx, &nunits));
  printf("fsdp-train: %s, %lld parameters in %d units\n", a->model, (long long)r->numel, nunits);
  FSDPCall(FSDPContextGetMixedPrecision(r->ctx, &pdt, &rdt));
  FSDPCall(FSDPOptimizerGetGradScaler(r->opt, &scaler));
  printf("fsdp-train: %d ranks, %s sharding, F = %d, %d replicas; %s\n", r->size, FSDPShardingStrategyName(strategy),
         r->factor, r->nreplicas, r->data.description);
  if (pdt != FSDP_FLOAT32 || rdt != FSDP_FLOAT32)
    printf("fsdp-train: mixed precision: parameters %s, reductions %s, fp32 master shards%s\n", FSDPDataTypeName(pdt),
           FSDPDataTypeName(rdt), scaler ? ", gradient scaler on" : "");
  printf("fsdp-train: %lld steps of %lld rows (%lld per rank) x %lld micro-batches, %s lr %g (%s)\n",
         (long long)a->steps, (long long)a->batch, (long long)r->per, (long long)r->K, a->optimizer, a->lr,
         a->lr_schedule);
  if (a->resume[0])
    printf("fsdp-train: resuming from %s at step %lld, batch %lld\n", a->resume, (long long)r->first,
           (long long)r->cursor);
  fflush(stdout);
  return FSDP_SUCCESS;
}

/* Collective: rank 0 opens the loss log; every rank learns whether it could. */
static FSDPErrorCode open_loss_log(Run *r, const Args *a)
{
  FSDPErrorCode ierr = FSDP_SUCCESS;
  int ok;
  if (!a->loss_log[0]) return FSDP_SUCCESS;
  if (r->rank == 0) {
    /* Only now, with the checkpoint loaded and verified, is the old log rewritten. */
    r->log = loss_log_file = a->resume[0] ? reopen_loss_log(a->loss_log, r->first) : fopen(a->loss_log, "w");
    if (!r->log)
      ierr = TRAIN_ERR(FSDP_ERR_IO, "fsdp-train: cannot write -loss_log '%s': %s", a->loss_log, strerror(errno));
    else if (!a->resume[0]) fprintf(r->log, "step,loss\n");
  }
  ok = !ierr;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  FSDPCall(ierr);
  FSDPCheck(ok, MPI_COMM_SELF, FSDP_ERR_IO, "fsdp-train: rank 0 cannot write -loss_log '%s'", a->loss_log);
  return FSDP_SUCCESS;
}

/* Step s + 1: K micro-batches forward and backward, the global loss when
   something uses it, the guard, the optimizer step, the log's row. */
static FSDPErrorCode train_step(Run *r, const Args *a, int64_t s, bool progress)
{
  double local = 0, step_loss, scale;
  float *dy, *pred;
  FSDPCall(FSDPOptimizerGetGradScale(r->opt, &scale, NULL));
  FSDPCall(FSDPContextZeroGrad(r->ctx));
  for (int64_t k = 0; k < r->K; k++) {
    double l;
    take_batch(&r->data, r->cursor + k, a->batch, r->rank, r->size, r->x, r->yt, r->labels);
    /* Like no_sync(): only the last micro-batch communicates gradients. */
    FSDPCall(FSDPContextSetGradSync(r->ctx, k == r->K - 1));
    FSDPCall(FSDPModelForward(r->model, r->per, r->x, &pred));
    /* The loss of the step is the mean over micro-batches, scaled for fp16.
       On a GPU the batch is copied up and the loss computed there. */
    if (r->labels) FSDPCall(FSDPModelLoss(r->model, FSDP_LOSS_CROSS_ENTROPY, r->labels, scale / (double)r->K, &l, &dy));
    else FSDPCall(FSDPModelLoss(r->model, FSDP_LOSS_MSE, r->yt, scale / (double)r->K, &l, &dy));
    FSDPCall(FSDPModelBackward(r->model, dy));
    local += l;
  }
  /* The global loss costs an all-reduce: for a step something prints, or the guard.
     Every rank's rows count the same: the global mean is the mean of the ranks' means.
     (Only rank 0 holds the log file; every rank knows whether there is one.) */
  if (a->loss_log[0] || progress || r->guard_loss) {
    MPI_Request req;
    FSDPCallMPI(MPI_Iallreduce(&local, &step_loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
    FSDPCall(FSDPContextWait(r->ctx, &req));
    r->loss = step_loss / (double)r->size / (double)r->K;
  }
  /* Before the step, so that no parameter and no checkpoint takes the value in. */
  FSDPCheck(!r->guard_loss || isfinite(r->loss), MPI_COMM_WORLD, FSDP_ERR_NOT_FINITE,
            "fsdp-train: step %lld: the loss is %g: training stopped before this step's update "
            "(-fsdp_check_finite false trains on)",
            (long long)(s + 1), r->loss);
  FSDPCall(FSDPOptimizerStep(r->opt));
  r->cursor += r->K;
  r->done++;
  {
    /* Where a checkpoint or an export of this point resumes: the step, the next batch, the seed. */
    FSDPTrainingState ts = {s + 1, r->cursor, {(uint64_t)a->seed, 0, 0, 0}};
    FSDPCall(FSDPContextSetTrainingState(r->ctx, &ts));
  }
  if (r->log) { /* flushed: `tail -f`, and a batch system's monitoring, see each step as it ends */
    fprintf(r->log, "%lld,%.9g\n", (long long)(s + 1), r->loss);
    fflush(r->log);
  }
  return FSDP_SUCCESS;
}

/* Collective: the progress line after step s + 1 (rank 0 prints it). */
static FSDPErrorCode print_progress(Run *r, const Args *a, int64_t s)
{
  FSDPMemoryStats st;
  double now = MPI_Wtime(), dt = now - r->t_last, peak, comm_time;
  int64_t nsteps = s + 1 - r->last_logged, comm_bytes; /* since the last line, or the start of this run */
  char b1[32];
  bool gpu;
  FSDPCall(comm_totals(r->comm_events, &comm_time, &comm_bytes));
  FSDPCall(memory_stats(r->ctx, &st, &gpu));
  peak = max_over_ranks((double)st.total_peak);
  FSDPFormatBytes(b1, sizeof b1, peak);
  if (r->rank == 0) {
    char sc[64];
    printf("step %6lld/%lld  loss %.6e  %9.1f samples/s  %8.2f ms/step  peak %s%s/rank  comm %.3f GB/s%s\n",
           (long long)(s + 1), (long long)a->steps, r->loss, (double)(nsteps * a->batch * r->K) / dt,
           1e3 * dt / (double)nsteps, b1, gpu ? " GPU" : "",
           comm_time > r->comm_last ? (double)(comm_bytes - r->bytes_last) / (comm_time - r->comm_last) / 1e9 : 0.0,
           scale_text(r->opt, sc, sizeof sc));
    fflush(stdout);
  }
  r->comm_last = comm_time;
  r->bytes_last = comm_bytes;
  r->t_last = MPI_Wtime();
  r->last_logged = s + 1;
  return FSDP_SUCCESS;
}

/* The steps, until -steps or a signal; then the final checkpoint and export. */
static FSDPErrorCode run_steps(Run *r, const Args *a)
{
  bool stopped = false; /* by a signal */
  int startup_signal;
  /* A signal during start-up (the handlers are installed before MPI is): stop before the first step. */
  FSDPCall(agree_on_signal(r->ctx, &startup_signal));
  if (startup_signal) {
    if (r->rank == 0) {
      printf("fsdp-train: %s during start-up, before step %lld: exiting; nothing to save\n",
             startup_signal == SIGTERM ? "SIGTERM" : "SIGUSR1", (long long)r->first + 1);
      fflush(stdout);
    }
    stopped = true;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  r->t_start = r->t_last = MPI_Wtime();
  r->last_logged = r->first;
  for (int64_t s = r->first; s < a->steps && !stopped; s++) {
    bool progress = a->log_every > 0 && ((s + 1) % a->log_every == 0 || s + 1 == a->steps);
    int signo;
    FSDPCall(train_step(r, a, s, progress));
    if (progress) FSDPCall(print_progress(r, a, s));
    FSDPCall(agree_on_signal(r->ctx, &signo));
    if (signo) {
      if (a->checkpoint[0]) FSDPCall(save_checkpoint(r->ctx, r->opt, a, s + 1, r->rank, r->log));
      if (r->rank == 0) {
        printf("fsdp-train: %s after step %lld: %s; exiting\n", signo == SIGTERM ? "SIGTERM" : "SIGUSR1",
               (long long)(s + 1), a->checkpoint[0] ? "checkpoint written" : "no -checkpoint given, nothing saved");
        fflush(stdout);
      }
      stopped = true;
      break;
    }
    if (a->checkpoint_every && (s + 1) % a->checkpoint_every == 0 && s + 1 < a->steps)
      FSDPCall(save_checkpoint(r->ctx, r->opt, a, s + 1, r->rank, r->log));
  }
  if (!stopped) { /* finished: the final checkpoint, the final parameters */
    if (a->checkpoint[0]) FSDPCall(save_checkpoint(r->ctx, r->opt, a, a->steps, r->rank, r->log));
    if (a->export_path[0]) FSDPCall(FSDPContextSave(r->ctx, NULL, a->export_path));
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ generation (a GPT's) */

/* The next token after window[0 .. len) (len <= ctx): the model's logits at
   position len - 1 (causal: the padding after it changes nothing), the most
   likely token or a sample at `temperature` from uniform u. */
static FSDPErrorCode next_token(Run *r, const float *window, int64_t len, double temperature, float u, int64_t *token)
{
  int64_t ctx, vocab;
  float *logits, *z;
  FSDPCall(FSDPModelGetTokens(r->model, &ctx, &vocab));
  memcpy(r->x, window, (size_t)len * sizeof *r->x);
  for (int64_t t = len; t < ctx; t++) r->x[t] = 0.0f;
  FSDPCall(FSDPModelForward(r->model, 1, r->x, &logits));
  z = logits + (len - 1) * vocab;
  *token = 0;
  for (int64_t v = 1; v < vocab; v++)
    if (z[v] > z[*token]) *token = v;
  if (temperature > 0) { /* inverse CDF of softmax(z / T), from the largest term down: no overflow */
    double sum = 0, acc = 0, zmax = z[*token];
    for (int64_t v = 0; v < vocab; v++) sum += exp((z[v] - zmax) / temperature);
    for (int64_t v = 0; v < vocab; v++) {
      acc += exp((z[v] - zmax) / temperature) / sum;
      if (u < acc || v == vocab - 1) {
        *token = v;
        break;
      }
    }
  }
  return FSDP_SUCCESS;
}

/* -prompt as tokens: its bytes for a model trained on text:, else token ids
   separated by spaces; an error names what is not a token. */
static FSDPErrorCode prompt_tokens(const char *prompt, bool text, int64_t vocab, float *tokens, int64_t *n)
{
  *n = 0;
  for (const char *c = prompt; text && *c; c++) {
    FSDPCheck((unsigned char)*c < vocab, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -prompt: character %lld (byte %d) is not a token of the model's vocab=%lld",
              (long long)(c - prompt), (unsigned char)*c, (long long)vocab);
    tokens[(*n)++] = (unsigned char)*c;
  }
  if (text) return FSDP_SUCCESS;
  for (const char *c = prompt; *c;) {
    char *end;
    long long id;
    while (*c == ' ') c++;
    if (!*c) break;
    errno = 0;
    id = strtoll(c, &end, 10);
    FSDPCheck(end != c && (*end == ' ' || !*end) && !errno && id >= 0 && id < vocab, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "fsdp-train: -prompt '%s': with -data tokens: it is token ids separated by spaces, each in [0, %lld); "
              "'%.20s' is not one",
              prompt, (long long)vocab, c);
    tokens[(*n)++] = (float)id;
    c = end;
  }
  return FSDP_SUCCESS;
}

/* Collective: -generate tokens after -prompt; rank 0 prints them.  Every rank
   computes the same logits; rank 0's choice is the one all take.  The window
   holds the last ctx tokens (a prompt's first ones fall out as well). */
static FSDPErrorCode generate(Run *r, const Args *a)
{
  int64_t ctx, vocab, len = 0, plen = (int64_t)strlen(a->prompt);
  float *window, u = 0;
  FSDPCall(FSDPModelGetTokens(r->model, &ctx, &vocab));
  FSDPCheck(ctx > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -generate %lld needs a gpt: model, not %s",
            (long long)a->generate, a->model);
  FSDPCall(FSDPMalloc((size_t)(plen > ctx ? plen : ctx) * sizeof *window, FSDP_MEM_OTHER, &window));
  FSDPCall(prompt_tokens(a->prompt, r->data.text, vocab, window, &len));
  FSDPCheck(len > 0, MPI_COMM_SELF, FSDP_ERR_OPTION, "fsdp-train: -prompt '%s' holds no token", a->prompt);
  if (len > ctx) { /* the model sees its last ctx tokens */
    memmove(window, window + len - ctx, (size_t)ctx * sizeof *window);
    len = ctx;
  }
  if (r->rank == 0) {
    if (a->temperature > 0)
      printf("fsdp-train: %lld tokens sampled at temperature %g (seed %lld) after the prompt:\n",
             (long long)a->generate, a->temperature, (long long)a->seed);
    else printf("fsdp-train: %lld tokens, the most likely each time, after the prompt:\n", (long long)a->generate);
    fputs(a->prompt, stdout);
  }
  for (int64_t n = 0; n < a->generate; n++) {
    int64_t token;
    if (a->temperature > 0) FSDPCall(FSDPRandomUniform((uint64_t)a->seed, "generate", n, n + 1, 0.0, 1.0, &u));
    FSDPCall(next_token(r, window, len, a->temperature, u, &token));
    FSDPCallMPI(MPI_Bcast(&token, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
    if (len == ctx) memmove(window, window + 1, (size_t)(ctx - 1) * sizeof *window);
    else len++;
    window[len - 1] = (float)token;
    if (r->rank == 0) { /* bytes as text, escaped where they would not print; other tokens as numbers */
      if (!r->data.text) printf(" %lld", (long long)token);
      else if ((token >= 32 && token < 127) || token == '\n' || token == '\t') putchar((int)token);
      else printf("\\x%02x", (unsigned)token);
    }
  }
  if (r->rank == 0) {
    printf("\n");
    fflush(stdout);
  }
  FSDPCall(FSDPFree(&window));
  return FSDP_SUCCESS;
}

/* A failed run aborts the job (main): it frees nothing, since destroying a
   context is collective and the other ranks may be elsewhere.  A run that
   finished frees everything here. */
static FSDPErrorCode train(const Args *a)
{
  Run r = {.loss = NAN, .K = a->grad_accum};
  int64_t comm_bytes;
  double comm_time;

  MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r.size);
  FSDPCall(check_args(a, r.size));
  r.per = a->batch / r.size;
  FSDPCall(set_up(&r, a));
  {
    ShardGroup group;
    FSDPCall(FSDPContextGetShardGroup(r.ctx, &group));
    FSDPCall(ShardGroupGetShardComm(group, NULL, NULL, &r.factor));
    FSDPCall(ShardGroupGetReplicateComm(group, NULL, NULL, &r.nreplicas));
  }
  FSDPCall(print_banner(&r, a));
  FSDPCall(open_loss_log(&r, a));
  FSDPCall(FSDPMalloc((size_t)(r.per * r.in) * sizeof(float), FSDP_MEM_OTHER, &r.x));
  if (r.data.tokens) FSDPCall(FSDPMalloc((size_t)(r.per * r.in) * sizeof(int64_t), FSDP_MEM_OTHER, &r.labels));
  else if (r.data.labels) FSDPCall(FSDPMalloc((size_t)r.per * sizeof(int64_t), FSDP_MEM_OTHER, &r.labels));
  else FSDPCall(FSDPMalloc((size_t)(r.per * r.out) * sizeof(float), FSDP_MEM_OTHER, &r.yt));
  /* The context's own events, by name; timed only when a progress line will use them. */
  if (a->log_every > 0) FSDPCall(FSDPLogSetActive(true));
  FSDPCall(FSDPLogEventRegister("AllGather", &r.comm_events[0]));
  FSDPCall(FSDPLogEventRegister("ReduceScatter", &r.comm_events[1]));
  FSDPCall(FSDPLogEventRegister("AllReduce", &r.comm_events[2]));
  FSDPCall(comm_totals(r.comm_events, &r.comm_last, &r.bytes_last));

  FSDPCall(run_steps(&r, a));

  FSDPCall(comm_totals(r.comm_events, &comm_time, &comm_bytes));
  if (a->log_every > 0)
    FSDPCall(print_summary(r.ctx, r.opt, r.rank, r.factor,
                           a->resume[0] ? 2
                           : a->init[0] ? 1
                                        : 0,
                           !strcmp(a->optimizer, "adamw") ? 2
                           : a->momentum > 0              ? 1
                                                          : 0,
                           MPI_Wtime() - r.t_start, r.done, r.done * a->batch * r.K, r.loss, comm_time, comm_bytes));
  if (a->generate) FSDPCall(generate(&r, a));
  loss_log_file = NULL;
  if (r.log && fclose(r.log)) return TRAIN_ERR(FSDP_ERR_IO, "fsdp-train: writing -loss_log '%s' failed", a->loss_log);
  FSDPCall(FSDPFree(&r.x));
  FSDPCall(FSDPFree(&r.yt));
  FSDPCall(FSDPFree(&r.labels));
  FSDPCall(dataset_free(&r.data));
  FSDPCall(FSDPOptimizerDestroy(&r.opt));
  FSDPCall(FSDPModelDestroy(&r.model));
  FSDPCall(FSDPContextDestroy(&r.ctx));
  return FSDP_SUCCESS;
}

/* With -help: the program's options, then the library's as each object reads them. */
static FSDPErrorCode help(const Args *defaults)
{
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) print_help(defaults);
  FSDPCall(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  FSDPCall(FSDPContextSetFromOptions(ctx));
  FSDPCall(FSDPModelCreate(ctx, defaults->model, &model));
  FSDPCall(FSDPModelSetFromOptions(model));
  FSDPCall(FSDPOptimizerCreate(ctx, &opt));
  FSDPCall(FSDPOptimizerSetFromOptions(opt));
  FSDPCall(FSDPOptimizerDestroy(&opt));
  FSDPCall(FSDPModelDestroy(&model));
  FSDPCall(FSDPContextDestroy(&ctx));
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  Args a = {.model = "mlp:in=16,hidden=128,depth=4,out=4,act=gelu,norm=layernorm",
            .data = "synthetic",
            .optimizer = "adamw",
            .lr_schedule = "constant",
            .steps = 100,
            .batch = 64,
            .grad_accum = 1,
            .log_every = 10,
            .prompt = "\n",
            .temperature = 1.0,
            .lr = 1e-3,
            .weight_decay = 0.01,
            .beta1 = 0.9,
            .beta2 = 0.999,
            .eps = 1e-8};
  Args defaults = a;
  bool want_help;
  FSDPErrorCode ierr;

  if (catch_signals()) return 1;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  pause_for_test();
  ierr = parse_args(argc, argv, &a, &want_help);
  /* A rank whose command line is wrong aborts the job below; the others wait here for it. */
  if (!ierr) ierr = agree_on_args(&a);
  if (!ierr) ierr = want_help ? help(&defaults) : train(&a);
  /* Every rank that failed has printed why; take the job down, whatever the others are doing. */
  if (ierr) {
    if (loss_log_file) fclose(loss_log_file);
    FSDPErrorAbort(MPI_COMM_WORLD, ierr);
  }
  /* FSDPFinalize finalizes MPI even when it fails (an -fsdp_log_trace file it
     could not write, which every rank reported): no MPI_Abort after it. */
  return FSDPFinalize() ? 1 : 0;
}
