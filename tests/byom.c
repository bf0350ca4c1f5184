/* byom.c: examples/fortran/byom.F90 in C, loop for loop, so that make check
   can compare the Fortran program's shards and gradient shards after its
   steps with C's (tests/fortran.sh).  C's weights are [out, in] row-major,
   the same memory as Fortran's w(in, out). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_nn.h"

enum { NIN = 4, HIDDEN = 8, NOUT = 2, ROWS = 6 };
static const uint64_t SEED = 7;

/* y[s][o] = sum_i w[o][i] x[s][i] + b[o], summed in i's order. */
static void linear(int in, int out, const float *w, const float *b, const float *x, float *y)
{
  for (int s = 0; s < ROWS; s++)
    for (int o = 0; o < out; o++) {
      float acc = 0;
      for (int i = 0; i < in; i++) acc = acc + w[o * in + i] * x[s * in + i];
      y[s * out + o] = acc + b[o];
    }
}

static void linear_backward(int in, int out, const float *w, const float *x, const float *dy, float *gw, float *gb,
                            float *dx)
{
  for (int o = 0; o < out; o++) {
    float acc;
    for (int i = 0; i < in; i++) {
      acc = 0;
      for (int s = 0; s < ROWS; s++) acc = acc + x[s * in + i] * dy[s * out + o];
      gw[o * in + i] = gw[o * in + i] + acc;
    }
    acc = 0;
    for (int s = 0; s < ROWS; s++) acc = acc + dy[s * out + o];
    gb[o] = gb[o] + acc;
  }
  if (dx)
    for (int s = 0; s < ROWS; s++)
      for (int i = 0; i < in; i++) {
        float acc = 0;
        for (int o = 0; o < out; o++) acc = acc + w[o * in + i] * dy[s * out + o];
        dx[s * in + i] = acc;
      }
}

static FSDPErrorCode init_unit(FlatParam unit, void *user)
{
  int n;
  (void)user;
  FSDPCall(FlatParamGetNumParams(unit, &n));
  for (int p = 0; p < n; p++) {
    const char *name;
    int64_t numel;
    float *v;
    FSDPCall(FlatParamGetParamInfo(unit, p, &name, NULL, NULL, &numel));
    FSDPCall(FlatParamGetParam(unit, p, (void **)&v));
    FSDPCall(FSDPRandomUniform(SEED, name, 0, numel, -0.5, 0.5, v));
  }
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  FSDPContext ctx;
  FlatParam unit[2];
  FSDPOptimizer opt;
  FSDPParamId id[4];
  int rank;
  int64_t steps = 3;
  float x[ROWS * NIN], target[ROWS * NOUT], a[ROWS * HIDDEN], y[ROWS * NOUT], dy[ROWS * NOUT], da[ROWS * HIDDEN];
  float *w1, *b1, *w2, *b2, *gw1, *gb1, *gw2, *gb2;
  MPI_Comm comm = MPI_COMM_WORLD;

  FSDPCallAbort(comm, FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(comm, &rank);
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "-steps")) steps = atoll(argv[i + 1]);
  FSDPCallAbort(comm, FSDPRandomUniform(SEED, "byom.x", rank * NIN * ROWS, (rank + 1) * NIN * ROWS, -1, 1, x));
  FSDPCallAbort(comm, FSDPRandomUniform(SEED, "byom.y", rank * NOUT * ROWS, (rank + 1) * NOUT * ROWS, -1, 1, target));

  FSDPCallAbort(comm, FSDPContextCreate(comm, &ctx));
  FSDPCallAbort(comm, FSDPContextSetFromOptions(ctx));
  FSDPCallAbort(comm, FSDPContextAddUnit(ctx, "layer1", &unit[0]));
  FSDPCallAbort(comm, FlatParamAddParam(unit[0], "layer1.weight", 2, (int64_t[]){HIDDEN, NIN}, &id[0]));
  FSDPCallAbort(comm, FlatParamAddParam(unit[0], "layer1.bias", 1, (int64_t[]){HIDDEN}, &id[1]));
  FSDPCallAbort(comm, FSDPContextAddUnit(ctx, "layer2", &unit[1]));
  FSDPCallAbort(comm, FlatParamAddParam(unit[1], "layer2.weight", 2, (int64_t[]){NOUT, HIDDEN}, &id[2]));
  FSDPCallAbort(comm, FlatParamAddParam(unit[1], "layer2.bias", 1, (int64_t[]){NOUT}, &id[3]));
  FSDPCallAbort(comm, FSDPContextSetUnitInit(ctx, init_unit, NULL));
  FSDPCallAbort(comm, FSDPContextSetUp(ctx));
  FSDPCallAbort(comm, FSDPOptimizerCreate(ctx, &opt));
  FSDPCallAbort(comm, FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_ADAMW));
  FSDPCallAbort(comm, FSDPOptimizerSetLearningRate(opt, 1.0e-2));
  FSDPCallAbort(comm, FSDPOptimizerSetFromOptions(opt));
  FSDPCallAbort(comm, FSDPOptimizerSetUp(opt));

  for (int64_t step = 0; step < steps; step++) {
    FSDPCallAbort(comm, FSDPContextZeroGrad(ctx));
    FSDPCallAbort(comm, FSDPContextBeginForward(ctx));
    FSDPCallAbort(comm, FlatParamUnshard(unit[0]));
    FSDPCallAbort(comm, FlatParamGetParam(unit[0], id[0], (void **)&w1));
    FSDPCallAbort(comm, FlatParamGetParam(unit[0], id[1], (void **)&b1));
    linear(NIN, HIDDEN, w1, b1, x, a);
    for (int i = 0; i < ROWS * HIDDEN; i++) a[i] = tanhf(a[i]);
    FSDPCallAbort(comm, FlatParamReshard(unit[0]));
    FSDPCallAbort(comm, FlatParamUnshard(unit[1]));
    FSDPCallAbort(comm, FlatParamGetParam(unit[1], id[2], (void **)&w2));
    FSDPCallAbort(comm, FlatParamGetParam(unit[1], id[3], (void **)&b2));
    linear(HIDDEN, NOUT, w2, b2, a, y);
    for (int i = 0; i < ROWS * NOUT; i++) dy[i] = 2 * (y[i] - target[i]) / (float)(NOUT * ROWS);
    FSDPCallAbort(comm, FSDPContextBeginBackward(ctx));
    FSDPCallAbort(comm, FlatParamGetGrad(unit[1], id[2], (void **)&gw2));
    FSDPCallAbort(comm, FlatParamGetGrad(unit[1], id[3], (void **)&gb2));
    linear_backward(HIDDEN, NOUT, w2, a, dy, gw2, gb2, da);
    FSDPCallAbort(comm, FlatParamReduceGrad(unit[1]));
    for (int i = 0; i < ROWS * HIDDEN; i++) da[i] = da[i] * (1 - a[i] * a[i]);
    FSDPCallAbort(comm, FlatParamUnshard(unit[0]));
    FSDPCallAbort(comm, FlatParamGetParam(unit[0], id[0], (void **)&w1));
    FSDPCallAbort(comm, FlatParamGetGrad(unit[0], id[0], (void **)&gw1));
    FSDPCallAbort(comm, FlatParamGetGrad(unit[0], id[1], (void **)&gb1));
    linear_backward(NIN, HIDDEN, w1, x, da, gw1, gb1, NULL);
    FSDPCallAbort(comm, FlatParamReduceGrad(unit[0]));
    FSDPCallAbort(comm, FSDPContextFinishBackward(ctx));
    FSDPCallAbort(comm, FSDPOptimizerStep(opt));
  }

  for (int u = 0; u < 2; u++) {
    float *shard, *gshard;
    int64_t n;
    FSDPCallAbort(comm, FlatParamGetShard(unit[u], (void **)&shard, &n));
    FSDPCallAbort(comm, FlatParamGetGradShard(unit[u], (void **)&gshard, &n));
    for (int64_t k = 0; k < n; k++) printf("r%d u%d p%lld %.9e %.9e\n", rank, u + 1, (long long)k, shard[k], gshard[k]);
  }
  FSDPCallAbort(comm, FSDPOptimizerDestroy(&opt));
  FSDPCallAbort(comm, FSDPContextDestroy(&ctx));
  FSDPCallAbort(comm, FSDPFinalize());
  return 0;
}
