/* bench-step: where a training step's time goes on the host.  Trains an
   MLP (by default the one of issue 26: mlp:in=256,hidden=1024,depth=4,
   out=16,act=gelu,norm=layernorm, AdamW, 128 rows per rank) and, round by
   round, measures in the same run:
     step       the median step (the slowest rank's);
     GEMM       the time inside the library's GEMMs during those steps
                (the "GEMM" event, so logging is on while it runs);
     optimizer  the time inside FSDPOptimizerStep;
     other      the rest: activations, LayerNorm, the loss, biases, copies,
                collectives, waits;
     sgemm      the same GEMMs (shapes and order) called alone, through the
                library's linear kernels without biases.
   make benchmarks && OPENBLAS_NUM_THREADS=1 mpiexec -n W ./benchmarks/bench-step
     [-fsdp_bench_spec SPEC] [-fsdp_bench_batch ROWS] [-fsdp_bench_steps S] [-fsdp_bench_rounds R]
     [-fsdp_bench_optimizer adamw|sgd] [-fsdp_simd generic|avx2|avx512] [-fsdp_* options] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchmlp.h"

#define MAXROUNDS 64
#define MAXLAYERS 256

typedef struct {
  int64_t in, out;
} Shape;

/* The MLP's linear layers, from its spec (doc/nn.md: depth blocks, then the head). */
static int linear_shapes(const char *spec, Shape *s)
{
  long long in = 0, hidden = 0, depth = 0, out = 0;
  const char *p;
  int n = 0;
  if ((p = strstr(spec, "in="))) in = atoll(p + 3);
  if ((p = strstr(spec, "hidden="))) hidden = atoll(p + 7);
  if ((p = strstr(spec, "depth="))) depth = atoll(p + 6);
  if ((p = strstr(spec, "out="))) out = atoll(p + 4);
  for (long long i = 0; i < depth && n < MAXLAYERS - 1; i++) s[n++] = (Shape){i ? hidden : in, hidden};
  s[n++] = (Shape){hidden, out};
  return n;
}

/* One step's GEMMs alone: forward, then backward (weight gradient; input
   gradient except for the first layer), as FSDPModel calls them. */
static double sgemm_step(const Shape *s, int n, int64_t rows, float *x, float *w, float *y, float *dw, float *dx)
{
  double t0 = MPI_Wtime();
  for (int l = 0; l < n; l++) FSDPCallAbort(MPI_COMM_SELF, FSDPLinearForward(rows, s[l].in, s[l].out, x, w, NULL, y));
  for (int l = n - 1; l >= 0; l--)
    FSDPCallAbort(MPI_COMM_SELF, FSDPLinearBackward(rows, s[l].in, s[l].out, x, w, y, l ? dx : NULL, dw, NULL));
  return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
  BenchMLP b;
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  FSDPLogEvent gemm;
  Shape shapes[MAXLAYERS];
  char spec[256], optname[16];
  static const char *const optimizers[] = {"adamw", "sgd", NULL};
  double step[MAXROUNDS], gemm_t[MAXROUNDS], opt_t[MAXROUNDS], alone[MAXROUNDS];
  int rank, size, nlayers, choice;
  int64_t widest = 0, numel = 0;
  float *x, *w, *y, *dw, *dx;
  FSDPSimd simd;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bench_mlp_setup(&b, MAXROUNDS); /* options, and a batch per rank (resized below) */
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetString("-fsdp_bench_spec", "the model",
                                                     "mlp:in=256,hidden=1024,depth=4,out=16,act=gelu,norm=layernorm",
                                                     spec, sizeof spec, NULL));
  FSDPCallAbort(MPI_COMM_WORLD,
                FSDPOptionsGetEnum("-fsdp_bench_optimizer", "adamw or sgd", optimizers, 0, &choice, NULL));
  snprintf(optname, sizeof optname, "%s", optimizers[choice]);
  nlayers = linear_shapes(spec, shapes);
  for (int l = 0; l < nlayers; l++) {
    if (shapes[l].in > widest) widest = shapes[l].in;
    if (shapes[l].out > widest) widest = shapes[l].out;
  }
  /* This benchmark's default batch is 128 rows (issue 26's), not benchmlp's 64:
     read again, the option keeps a value given and takes this default otherwise. */
  FSDPCallAbort(MPI_COMM_WORLD,
                FSDPOptionsGetInt("-fsdp_bench_batch", "rows per rank per step", 128, 1, 1 << 20, &b.batch, NULL));
  free(b.x);
  free(b.t);
  b.in = (int)shapes[0].in;
  b.out = (int)shapes[nlayers - 1].out;
  snprintf(b.spec, sizeof b.spec, "%s", spec);
  b.x = malloc(sizeof(float) * (size_t)(b.batch * b.in));
  b.t = malloc(sizeof(float) * (size_t)(b.batch * b.out));
  x = malloc(sizeof(float) * (size_t)(b.batch * widest));
  y = malloc(sizeof(float) * (size_t)(b.batch * widest));
  dx = malloc(sizeof(float) * (size_t)(b.batch * widest));
  w = malloc(sizeof(float) * (size_t)(widest * widest));
  dw = malloc(sizeof(float) * (size_t)(widest * widest));
  if (!b.x || !b.t || !x || !y || !dx || !w || !dw) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int64_t i = 0; i < b.batch * b.in; i++) b.x[i] = (float)((i * 7919 + rank * 13) % 1000) / 1000.0f - 0.5f;
  for (int64_t i = 0; i < b.batch * b.out; i++) b.t[i] = (float)((i * 104729 + rank) % 1000) / 1000.0f - 0.5f;
  for (int64_t i = 0; i < b.batch * widest; i++) x[i] = y[i] = (float)(i % 17) / 17.0f - 0.5f;
  for (int64_t i = 0; i < widest * widest; i++) w[i] = dw[i] = (float)(i % 13) / 130.0f;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextSetFromOptions(ctx));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPModelCreate(ctx, spec, &model));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPModelSetFromOptions(model)); /* -fsdp_fuse, -fsdp_wrap, ... */
  FSDPCallAbort(MPI_COMM_WORLD, FSDPModelSetUp(model));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerCreate(ctx, &opt));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerSetType(opt, choice ? FSDP_OPTIMIZER_SGD : FSDP_OPTIMIZER_ADAMW));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerSetLearningRate(opt, 1e-4));
  if (choice) FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerSetMomentum(opt, 0.9, false));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerSetUp(opt));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPModelGetSizes(model, NULL, NULL, &numel));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPLogEventRegister("GEMM", &gemm));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPLogSetActive(true));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPGetSimd(&simd, NULL));
  FSDPCallAbort(MPI_COMM_WORLD, bench_mlp_steps(&b, ctx, model, opt, 2)); /* warm up */

  for (int r = 0; r < b.rounds; r++) {
    FSDPLogEventInfo g0, g1;
    double t_opt = 0, t0, t1, mine[3], all[3];
    MPI_Barrier(MPI_COMM_WORLD);
    FSDPCallAbort(MPI_COMM_WORLD, FSDPLogEventGetInfo(gemm, &g0));
    t0 = MPI_Wtime();
    for (int64_t s = 0; s < b.steps; s++) {
      float *yy, *dy;
      double loss, a;
      FSDPCallAbort(MPI_COMM_WORLD, FSDPContextZeroGrad(ctx));
      FSDPCallAbort(MPI_COMM_WORLD, FSDPModelForward(model, b.batch, b.x, &yy));
      FSDPCallAbort(MPI_COMM_WORLD, FSDPModelLoss(model, FSDP_LOSS_MSE, b.t, 1.0, &loss, &dy));
      FSDPCallAbort(MPI_COMM_WORLD, FSDPModelBackward(model, dy));
      a = MPI_Wtime();
      FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerStep(opt));
      t_opt += MPI_Wtime() - a;
    }
    t1 = MPI_Wtime();
    FSDPCallAbort(MPI_COMM_WORLD, FSDPLogEventGetInfo(gemm, &g1));
    mine[0] = (t1 - t0) / (double)b.steps;
    mine[1] = (g1.time - g0.time) / (double)b.steps;
    mine[2] = t_opt / (double)b.steps;
    MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    step[r] = all[0];
    gemm_t[r] = all[1];
    opt_t[r] = all[2];
    /* The same GEMMs alone, right after. */
    MPI_Barrier(MPI_COMM_WORLD);
    mine[0] = 0;
    for (int64_t s = 0; s < b.steps; s++) mine[0] += sgemm_step(shapes, nlayers, b.batch, x, w, y, dw, dx);
    mine[0] /= (double)b.steps;
    MPI_Allreduce(mine, all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    alone[r] = all[0];
  }
  if (rank == 0) {
    double flops = 0, ms, mg, mo, ma;
    for (int l = 0; l < nlayers; l++)
      flops += 2.0 * (double)b.batch * (double)(shapes[l].in * shapes[l].out) * (l ? 3 : 2);
    qsort(step, (size_t)b.rounds, sizeof(double), bench_compare_doubles);
    qsort(gemm_t, (size_t)b.rounds, sizeof(double), bench_compare_doubles);
    qsort(opt_t, (size_t)b.rounds, sizeof(double), bench_compare_doubles);
    qsort(alone, (size_t)b.rounds, sizeof(double), bench_compare_doubles);
    ms = step[b.rounds / 2] * 1e3;
    mg = gemm_t[b.rounds / 2] * 1e3;
    mo = opt_t[b.rounds / 2] * 1e3;
    ma = alone[b.rounds / 2] * 1e3;
    printf("bench-step: %s, %lld parameters, W = %d, %lld rows per rank, %s, %s kernels, %lld rounds of %lld steps "
           "(medians; the slowest rank)\n",
           spec, (long long)numel, size, (long long)b.batch, optname, FSDPSimdName(simd), (long long)b.rounds,
           (long long)b.steps);
    printf("  %-34s %9.2f ms\n", "step", ms);
    printf("  %-34s %9.2f ms  %5.1f%%  (%.1f GFLOP/s)\n", "GEMM (inside the step)", mg, 100 * mg / ms,
           flops / (mg * 1e-3) / 1e9);
    printf("  %-34s %9.2f ms  %5.1f%%\n", "optimizer step", mo, 100 * mo / ms);
    printf("  %-34s %9.2f ms  %5.1f%%\n", "other", ms - mg - mo, 100 * (ms - mg - mo) / ms);
    printf("  %-34s %9.2f ms  (%.1f GFLOP/s); GEMM in the step / alone: %.3f\n", "the same GEMMs alone (sgemm)", ma,
           flops / (ma * 1e-3) / 1e9, mg / ma);
  }
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerDestroy(&opt));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPModelDestroy(&model));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextDestroy(&ctx));
  bench_mlp_free(&b);
  free(x);
  free(y);
  free(dx);
  free(w);
  free(dw);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
