/* benchmlp.h: what the benchmarks that train fsdp-train's MLP share: their
   options, a fixed batch per rank, the training step, and the median. */
#ifndef FSDP_BENCHMLP_H
#define FSDP_BENCHMLP_H

#include <stdio.h>
#include <stdlib.h>

#include "fsdp.h"
#include "fsdp_nn.h"

typedef struct {
  int64_t hidden, depth, batch, steps, rounds;
  int in, out;
  char spec[256];
  float *x, *t; /* inputs, targets: [batch, in], [batch, out] */
} BenchMLP;

/* -fsdp_bench_hidden, _depth, _batch, _steps, _rounds (at most max_rounds); the spec and this rank's batch. */
static inline void bench_mlp_setup(BenchMLP *b, int64_t max_rounds)
{
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  b->in = 64;
  b->out = 16;
  FSDPCallAbort(MPI_COMM_WORLD,
                FSDPOptionsGetInt("-fsdp_bench_hidden", "MLP width", 512, 8, 1 << 16, &b->hidden, NULL));
  FSDPCallAbort(MPI_COMM_WORLD,
                FSDPOptionsGetInt("-fsdp_bench_depth", "MLP blocks (one unit each)", 6, 1, 1024, &b->depth, NULL));
  FSDPCallAbort(MPI_COMM_WORLD,
                FSDPOptionsGetInt("-fsdp_bench_batch", "rows per rank per step", 64, 1, 1 << 20, &b->batch, NULL));
  FSDPCallAbort(MPI_COMM_WORLD,
                FSDPOptionsGetInt("-fsdp_bench_steps", "steps per round", 5, 1, 1 << 20, &b->steps, NULL));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_rounds", "rounds (each setting once per round)", 7, 1,
                                                  max_rounds, &b->rounds, NULL));
  snprintf(b->spec, sizeof b->spec, "mlp:in=%d,hidden=%lld,depth=%lld,out=%d,act=gelu,norm=layernorm", b->in,
           (long long)b->hidden, (long long)b->depth, b->out);
  b->x = malloc(sizeof(float) * (size_t)(b->batch * b->in));
  b->t = malloc(sizeof(float) * (size_t)(b->batch * b->out));
  if (!b->x || !b->t) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int64_t i = 0; i < b->batch * b->in; i++) b->x[i] = (float)((i * 7919 + rank * 13) % 1000) / 1000.0f - 0.5f;
  for (int64_t i = 0; i < b->batch * b->out; i++) b->t[i] = (float)((i * 104729 + rank) % 1000) / 1000.0f - 0.5f;
}

/* The benchmarks' optimizer on ctx: AdamW at lr 1e-4, with the gradient scaler when asked. */
static inline FSDPErrorCode bench_adamw(FSDPContext ctx, bool grad_scaler, FSDPOptimizer *opt)
{
  FSDPCall(FSDPOptimizerCreate(ctx, opt));
  FSDPCall(FSDPOptimizerSetType(*opt, FSDP_OPTIMIZER_ADAMW));
  FSDPCall(FSDPOptimizerSetLearningRate(*opt, 1e-4));
  FSDPCall(FSDPOptimizerSetGradScaler(*opt, grad_scaler));
  FSDPCall(FSDPOptimizerSetUp(*opt));
  return FSDP_SUCCESS;
}

/* What a setting made, destroyed in reverse order. */
static inline FSDPErrorCode bench_destroy(FSDPOptimizer *opt, FSDPModel *model, FSDPContext *ctx)
{
  FSDPCall(FSDPOptimizerDestroy(opt));
  FSDPCall(FSDPModelDestroy(model));
  FSDPCall(FSDPContextDestroy(ctx));
  return FSDP_SUCCESS;
}

static inline void bench_mlp_free(BenchMLP *b)
{
  free(b->x);
  free(b->t);
}

/* `steps` training steps; the loss gradient is scaled when the optimizer's
   gradient scaler is on.  On a GPU the loss's read-back ends each forward. */
static inline FSDPErrorCode bench_mlp_steps(const BenchMLP *b, FSDPContext ctx, FSDPModel model, FSDPOptimizer opt,
                                            int64_t steps)
{
  for (int64_t s = 0; s < steps; s++) {
    float *y, *dy;
    double loss, scale;
    FSDPCall(FSDPOptimizerGetGradScale(opt, &scale, NULL));
    FSDPCall(FSDPContextZeroGrad(ctx));
    FSDPCall(FSDPModelForward(model, b->batch, b->x, &y));
    FSDPCall(FSDPModelLoss(model, FSDP_LOSS_MSE, b->t, scale, &loss, &dy));
    FSDPCall(FSDPModelBackward(model, dy));
    FSDPCall(FSDPOptimizerStep(opt));
  }
  return FSDP_SUCCESS;
}

static inline int bench_compare_doubles(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
