/* bench-optimizer: the optimizers' steps against the memory bandwidth of
   this machine, measured in the same run.  A STREAM-style triad
   (a = b + s c over float arrays) gives the bandwidth; then SGD (plain and
   with momentum) and AdamW step one unit of N fp32 parameters, each round
   interleaved with the triad.  Bandwidth counts the bytes each must read
   and write per element, as STREAM does (no write-allocate):
     triad 12, SGD 12, SGD with momentum 20, AdamW 28.
   The step is FSDPOptimizerStep with -fsdp_check_finite false unless given
   (the guard adds a pass that reads the gradient: 4 bytes).
   make benchmarks && OPENBLAS_NUM_THREADS=1 mpiexec -n 1 ./benchmarks/bench-optimizer
     [-fsdp_bench_numel N] [-fsdp_bench_rounds R] [-fsdp_simd ...] [-fsdp_check_finite true] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchmlp.h"

#define MAXROUNDS 64

/* Vectorized as the library's kernels are (this file is built with their
   flags, -fopenmp-simd among them), so that it runs at memory speed. */
static double triad(float *restrict a, const float *restrict b, const float *restrict c, int64_t n)
{
  double t0 = MPI_Wtime();
#pragma omp simd
  for (int64_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
  return MPI_Wtime() - t0;
}

typedef struct {
  const char *name;
  FSDPOptimizerType type;
  double momentum;
  int bytes;
} Setting;

static const Setting settings[] = {
    {"SGD", FSDP_OPTIMIZER_SGD, 0, 12},
    {"SGD, momentum", FSDP_OPTIMIZER_SGD, 0.9, 20},
    {"AdamW", FSDP_OPTIMIZER_ADAMW, 0, 28},
};
#define NSETTINGS (int)(sizeof settings / sizeof settings[0])

int main(int argc, char **argv)
{
  int64_t n, rounds;
  float *a, *b, *c;
  double t_triad[MAXROUNDS], t_opt[NSETTINGS][MAXROUNDS];
  FSDPContext ctx;
  FlatParam unit;
  FSDPOptimizer opt[NSETTINGS];
  FSDPSimd simd;
  bool guard;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  FSDPCallAbort(MPI_COMM_WORLD,
                FSDPOptionsGetInt("-fsdp_bench_numel", "parameters (fp32)", 1 << 25, 1024, (int64_t)1 << 31, &n, NULL));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_rounds", "rounds", 9, 1, MAXROUNDS, &rounds, NULL));
  a = malloc(sizeof(float) * (size_t)n);
  b = malloc(sizeof(float) * (size_t)n);
  c = malloc(sizeof(float) * (size_t)n);
  if (!a || !b || !c) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int64_t i = 0; i < n; i++) a[i] = b[i] = c[i] = (float)(i % 100) * 0.01f;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextCreate(MPI_COMM_SELF, &ctx));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextSetCheckFinite(ctx, false));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextSetFromOptions(ctx));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextAddUnit(ctx, "w", &unit));
  FSDPCallAbort(MPI_COMM_WORLD, FlatParamAddParam(unit, "w", 1, &n, NULL));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextSetUp(ctx));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextGetCheckFinite(ctx, &guard));
  {
    float *g;
    int64_t m;
    FSDPCallAbort(MPI_COMM_WORLD, FlatParamGetGradShard(unit, (void **)&g, &m));
    for (int64_t i = 0; i < m; i++) g[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
  }
  for (int s = 0; s < NSETTINGS; s++) {
    FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerCreate(ctx, &opt[s]));
    FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerSetType(opt[s], settings[s].type));
    FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerSetLearningRate(opt[s], 1e-6));
    if (settings[s].momentum > 0)
      FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerSetMomentum(opt[s], settings[s].momentum, false));
    FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerSetUp(opt[s]));
    FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerStep(opt[s])); /* first touch of its state */
  }
  (void)triad(a, b, c, n);
  for (int r = 0; r < rounds; r++) {
    t_triad[r] = triad(a, b, c, n);
    for (int s = 0; s < NSETTINGS; s++) {
      double t0 = MPI_Wtime();
      FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerStep(opt[s]));
      t_opt[s][r] = MPI_Wtime() - t0;
    }
  }
  FSDPCallAbort(MPI_COMM_WORLD, FSDPGetSimd(&simd, NULL));
  qsort(t_triad, (size_t)rounds, sizeof(double), bench_compare_doubles);
  {
    double bw = 12.0 * (double)n / t_triad[rounds / 2] / 1e9;
    printf("bench-optimizer: %lld fp32 parameters, %s kernels, -fsdp_check_finite %s, median of %lld rounds\n",
           (long long)n, FSDPSimdName(simd), guard ? "true" : "false", (long long)rounds);
    printf("  %-16s %9.2f ms  %6.1f GB/s  (12 B per element)\n", "triad", t_triad[rounds / 2] * 1e3, bw);
    for (int s = 0; s < NSETTINGS; s++) {
      double t, g;
      qsort(t_opt[s], (size_t)rounds, sizeof(double), bench_compare_doubles);
      t = t_opt[s][rounds / 2];
      g = settings[s].bytes * (double)n / t / 1e9;
      printf("  %-16s %9.2f ms  %6.1f GB/s  (%d B per parameter)  %.2f of the triad's bandwidth\n", settings[s].name,
             t * 1e3, g, settings[s].bytes, g / bw);
    }
  }
  for (int s = 0; s < NSETTINGS; s++) FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerDestroy(&opt[s]));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPContextDestroy(&ctx));
  free(a);
  free(b);
  free(c);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
