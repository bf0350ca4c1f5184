/* train.h: what the files of fsdp-train share: the command line's values,
   the data set and the run.  One concern a file: train-args.c (the command
   line), train-preflight.c (checks before the first step), train-data.c (data
   loaders and batches), train-report.c (banner, progress lines, summary),
   train-generate.c (-generate), fsdp-train.c (set-up and the training loop). */
#ifndef FSDP_TRAIN_H
#define FSDP_TRAIN_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fsdp_nn.h"

/* An error raised where a value, not a return, is wanted (FSDPCheck returns). */
#define TRAIN_ERR(code, ...) FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, code, __VA_ARGS__)

/* The program's options (train-args.c lists them with their help). */
typedef struct {
  char model[512], data[1024], init[1024], loss_log[1024], optimizer[16], lr_schedule[16], prompt[1024];
  char checkpoint[1024], resume[1024], export_path[1024], no_decay[512];
  int64_t steps, batch, warmup_steps, grad_accum, seed, log_every, checkpoint_every, generate;
  double lr, weight_decay, momentum, beta1, beta2, eps, clip_grad_norm, temperature;
  bool nesterov;
  /* Where the outputs are written: the paths above, or, where the last
     component of one is a symbolic link, the file it leads to (pre-flight
     fills these; messages quote the paths as given). */
  char checkpoint_file[PATH_MAX], export_file[PATH_MAX], loss_log_file[PATH_MAX];
} Args;

typedef struct {
  int64_t n, in, out; /* rows, input width, output width (classes for labels) */
  float *x, *y;       /* [n, in], [n, out] for regression */
  int64_t *labels;    /* [n] for classification */
  uint16_t *tokens;   /* or a token stream [n] for a GPT: windows of in + 1 tokens */
  bool text;          /* from text:, a byte per token (what -prompt and -generate then read and print) */
  uint64_t seed;      /* where a token window starts */
  uint64_t hash;      /* of every value loaded: what a checkpoint records of its data */
  char description[128];
} Dataset;

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
  int log_errno;                  /* the errno of rank 0's first failed write to it, or 0 */
  bool guard_loss;                /* a non-finite loss stops the run before its update */
  FSDPLogEvent comm_events[3];
  double t_start, t_last, loss, comm_last;
  int64_t bytes_last;
  int64_t first, cursor, done; /* the first step, its batch, and the steps this run took */
  int64_t last_logged;         /* the step of the last progress line */
  double other_before;         /* host bytes of FSDP_MEM_OTHER before the first step, */
  double other_peak_before;    /* and the most it held until then (loading the data) */
} Run;

/* train-args.c */
FSDPErrorCode parse_args(int argc, char **argv, Args *a, bool *help);
void print_help(const Args *d);
bool arg_set(const char *name);
FSDPErrorCode agree_on_args(const Args *a);

/* train-preflight.c */
FSDPErrorCode check_args(const Args *a, int size);
FSDPErrorCode preflight(FSDPContext ctx, Args *a);
FSDPErrorCode check_generate(const Args *a, FSDPModel model, const Dataset *d);
FSDPErrorCode check_resume(const Args *a, const FSDPTrainingState *ts, const Dataset *d);

/* train-data.c */
FSDPErrorCode load_data(const char *spec, FSDPModel model, uint64_t seed, Dataset *d);
FSDPErrorCode check_data_finite(const Dataset *d, const char *spec);
void take_batch(const Dataset *d, int64_t b, int64_t B, int rank, int size, float *x, float *y, int64_t *labels);
FSDPErrorCode dataset_free(Dataset *d);
double dataset_bytes(const Dataset *d);
void batch_bytes(const Dataset *d, int64_t per, int64_t in, int64_t out, size_t *x, size_t *labels, size_t *targets);

/* train-report.c */
FSDPErrorCode comm_totals(const FSDPLogEvent events[3], double *time, int64_t *bytes);
FSDPErrorCode print_banner(const Run *r, const Args *a);
FSDPErrorCode print_progress(Run *r, const Args *a, int64_t s);
FSDPErrorCode print_summary(const Run *r, int loaded, int nstates, double seconds, int64_t steps, int64_t samples,
                            double comm_time, int64_t comm_bytes);

/* train-generate.c */
FSDPErrorCode prompt_tokens(const char *prompt, bool text, int64_t vocab, float *tokens, int64_t *n);
FSDPErrorCode generate(Run *r, const Args *a);

#endif
