/* fsdp-train's command line: its options, their parsing and help, and the
   check that every rank was given the same ones. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

typedef enum { ARG_STRING, ARG_INT, ARG_REAL, ARG_FLAG } ArgType;

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
        "model spec, mlp:in=I,hidden=H,depth=D,out=O[,act=relu|tanh|gelu][,norm=none|layernorm], "
        "cnn:grid=HxW,in=C,out=O[,depth=D,channels=K,kernel=3,stride=1,dilation=1,groups=1,pad=P,"
        "padding=zeros|circular|reflect,norm=none|groupnorm:G,act=...,residual=0|1], "
        "unet:grid=HxW,in=C,out=O,channels=K,levels=L[,kernel=3,padding=...,norm=...,act=...,pool=max|avg], "
        "fno:grid=HxW,in=C,out=O,width=K,modes=M,layers=L[,act=gelu], file:NAME (a model file, a layer per line) or "
        "gpt:vocab=V,ctx=T,dim=C,heads=H,layers=L[,tied=0|1]"),
    ARG("-data", ARG_STRING, data,
        "HDF5 file with /x [N,in] (a grid model: [N,C,grid...]) and /y [N,out] (float) or [N] (integer labels); or "
        "synthetic[:n=N,seed=S]; for a "
        "gpt: text:FILE (a byte per token) or tokens:FILE (uint16 tokens, llm.c's .bin, or HDF5 /tokens)"),
    ARG("-steps", ARG_INT, steps, "optimizer steps"),
    ARG("-batch", ARG_INT, batch, "global batch size B (rows per micro-batch, all ranks together; B % W == 0)"),
    ARG("-optimizer", ARG_STRING, optimizer, "sgd or adamw"),
    ARG("-lr", ARG_REAL, lr, "learning rate (peak rate of the cosine schedule)"),
    ARG("-weight_decay", ARG_REAL, weight_decay,
        "weight decay (default: adamw 0.01, sgd 0), of every parameter but -no_decay's"),
    ARG("-no_decay", ARG_STRING, no_decay,
        "parameters without weight decay: comma-separated shell globs on their names ('*.bias,*ln_*') or ndim<2 "
        "(nanoGPT's and GPT-2's rule: biases and LayerNorm weights)"),
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

bool arg_set(const char *name) { return find_arg(name)->set; }

/* The program's own options; -fsdp_* and -help belong to the library. */
FSDPErrorCode parse_args(int argc, char **argv, Args *a, bool *help)
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

void print_help(const Args *d)
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
FSDPErrorCode agree_on_args(const Args *a)
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
