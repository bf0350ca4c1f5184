/* bench-collectives: the all-gather and reduce-scatter of one FlatParam,
   size by size, in nccl-tests' terms: S is the unsharded buffer's bytes,
   t the median time of one collective (the slowest rank's, host-observed:
   launch to completion), algbw = S / t, busbw = algbw (n - 1) / n for the n
   ranks of the shard group.  The sharding strategy is grad-op, so that the
   backward pass reduces without gathering again.  Runs on the host (MPI) or
   on GPUs (-fsdp_device cuda: NCCL, or MPI through staging when ranks share
   a GPU, as -fsdp_view says).
   make benchmarks && mpiexec -n 4 ./benchmarks/bench-collectives [-fsdp_device cuda]
     [-fsdp_bench_min_kb K] [-fsdp_bench_max_mb M] [-fsdp_bench_iters N] */
#include <stdio.h>
#include <stdlib.h>

#include "fsdp.h"

#define MAXITERS 1000

static int compare_doubles(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The slowest rank's time of each iteration, sorted. */
static double median_over(double *t, int64_t n)
{
  MPI_Allreduce(MPI_IN_PLACE, t, (int)n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  qsort(t, (size_t)n, sizeof *t, compare_doubles);
  return t[n / 2];
}

static FSDPErrorCode measure(int64_t numel, int64_t iters, double *t_gather, double *t_reduce, int *n)
{
  FSDPContext ctx;
  FlatParam unit;
  double tg[MAXITERS], tr[MAXITERS];
  int size;

  MPI_Comm_size(MPI_COMM_WORLD, &size);
  FSDPCall(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  FSDPCall(FSDPContextSetFromOptions(ctx));
  FSDPCall(FSDPContextSetShardingStrategy(ctx, FSDP_SHARD_GRAD_OP)); /* over all ranks: n = W */
  FSDPCall(FSDPContextAddUnit(ctx, "unit", &unit));
  FSDPCall(FlatParamAddParam(unit, "unit.w", 1, &numel, NULL));
  FSDPCall(FSDPContextSetUp(ctx));
  *n = size;
  for (int64_t i = -3; i < iters; i++) { /* three to warm up */
    void *g;
    double t0, t1, t2;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    FSDPCall(FSDPContextBeginForward(ctx));
    FSDPCall(FlatParamUnshard(unit));
    t1 = MPI_Wtime();
    FSDPCall(FlatParamReshard(unit));
    FSDPCall(FSDPContextBeginBackward(ctx));
    FSDPCall(FlatParamUnshard(unit)); /* kept from forward (grad-op): no collective */
    FSDPCall(FlatParamGetGrad(unit, 0, &g));
    MPI_Barrier(MPI_COMM_WORLD);
    t2 = MPI_Wtime();
    FSDPCall(FlatParamReduceGrad(unit));
    FSDPCall(FSDPContextFinishBackward(ctx));
    if (i >= 0) {
      tg[i] = t1 - t0;
      tr[i] = MPI_Wtime() - t2;
    }
  }
  *t_gather = median_over(tg, iters);
  *t_reduce = median_over(tr, iters);
  FSDPCall(FSDPContextDestroy(&ctx));
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  int rank;
  int64_t min_kb, max_mb, iters;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_min_kb", "smallest unsharded buffer, KiB", 64, 1,
                                                  1 << 20, &min_kb, NULL));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_max_mb", "largest unsharded buffer, MiB", 256, 1,
                                                  1 << 16, &max_mb, NULL));
  FSDPCallAbort(MPI_COMM_WORLD,
                FSDPOptionsGetInt("-fsdp_bench_iters", "timed collectives per size", 20, 1, MAXITERS, &iters, NULL));
  if (rank == 0) {
    printf("bench-collectives: fp32, median of %lld; S = unsharded bytes, n = ranks in the shard group\n",
           (long long)iters);
    printf("%12s %4s | %10s %10s %10s | %10s %10s %10s\n", "S (bytes)", "n", "gather us", "algbw GB/s", "busbw GB/s",
           "reduce us", "algbw GB/s", "busbw GB/s");
  }
  for (int64_t bytes = min_kb << 10; bytes <= max_mb << 20; bytes *= 4) {
    double tg, tr;
    int n;
    FSDPCallAbort(MPI_COMM_WORLD, measure(bytes / 4, iters, &tg, &tr, &n));
    if (rank == 0) {
      double f = n > 1 ? (double)(n - 1) / n : 0;
      printf("%12lld %4d | %10.1f %10.3f %10.3f | %10.1f %10.3f %10.3f\n", (long long)bytes, n, 1e6 * tg,
             (double)bytes / tg / 1e9, (double)bytes / tg / 1e9 * f, 1e6 * tr, (double)bytes / tr / 1e9,
             (double)bytes / tr / 1e9 * f);
      fflush(stdout);
    }
  }
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
