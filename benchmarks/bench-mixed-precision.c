/* bench-mixed-precision: fp32 against bf16 and fp16 (with the gradient
   scaler) on fsdp-train's MLP, measured in one run.  Memory: each setting is
   set up and stepped alone first, and its peak above what was allocated
   before it (total, and the unsharded buffers) is read from the library's
   tracked allocator, with the all-gather and reduce-scatter bytes of a step.
   Time: the settings then run interleaved, round after round, so that drift
   in the machine's speed hits them alike; each setting's time is its median
   round (the slowest rank's).
   make benchmarks && OPENBLAS_NUM_THREADS=1 mpiexec -n 4 ./benchmarks/bench-mixed-precision [-fsdp_bench_hidden H] [-fsdp_bench_depth D] [-fsdp_bench_batch B] [-fsdp_bench_steps S] [-fsdp_bench_rounds R] [-fsdp_sharding_strategy ...]
   Prints one table; doc/performance.md has the numbers measured here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp.h"
#include "fsdp_nn.h"

typedef struct {
  const char *name;
  FSDPDataType param, reduce;
} Setting;

static const Setting settings[] = {
  {"fp32", FSDP_FLOAT32, FSDP_FLOAT32},
  {"bf16", FSDP_BFLOAT16, FSDP_BFLOAT16},
  {"bf16 params, fp32 reduce", FSDP_BFLOAT16, FSDP_FLOAT32},
  {"fp16 + scaler", FSDP_FLOAT16, FSDP_FLOAT16},
};
#define NSETTINGS (int)(sizeof settings / sizeof settings[0])
#define MAXROUNDS 64

typedef struct {
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  double peak_total, peak_unsharded, gather_bytes, reduce_bytes; /* per rank, largest over ranks; bytes per step */
} Job;

static FSDPErrorCode job_create(const Setting *s, const char *spec, Job *j)
{
  FSDPCall(FSDPContextCreate(MPI_COMM_WORLD, &j->ctx));
  FSDPCall(FSDPContextSetFromOptions(j->ctx));
  FSDPCall(FSDPContextSetMixedPrecision(j->ctx, s->param, s->reduce));
  FSDPCall(FSDPModelCreate(j->ctx, spec, &j->model));
  FSDPCall(FSDPModelSetUp(j->model));
  FSDPCall(FSDPOptimizerCreate(j->ctx, &j->opt));
  FSDPCall(FSDPOptimizerSetType(j->opt, FSDP_OPTIMIZER_ADAMW));
  FSDPCall(FSDPOptimizerSetLearningRate(j->opt, 1e-4));
  FSDPCall(FSDPOptimizerSetGradScaler(j->opt, s->param == FSDP_FLOAT16 || s->reduce == FSDP_FLOAT16));
  FSDPCall(FSDPOptimizerSetUp(j->opt));
  return FSDP_SUCCESS;
}

static FSDPErrorCode job_steps(Job *j, int64_t steps, int64_t batch, int out, const float *x, const float *t, float *dy)
{
  for (int64_t s = 0; s < steps; s++) {
    float *y;
    double loss, scale;
    FSDPCall(FSDPOptimizerGetGradScale(j->opt, &scale, NULL));
    FSDPCall(FSDPContextZeroGrad(j->ctx));
    FSDPCall(FSDPModelForward(j->model, batch, x, &y));
    FSDPCall(FSDPMSELoss(batch, out, y, t, &loss, dy));
    if (scale != 1)
      for (int64_t i = 0; i < batch * out; i++) dy[i] *= (float)scale;
    FSDPCall(FSDPModelBackward(j->model, dy));
    FSDPCall(FSDPOptimizerStep(j->opt));
  }
  return FSDP_SUCCESS;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double event_bytes(const char *name)
{
  FSDPLogEvent ev;
  FSDPLogEventInfo info;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPLogEventRegister(name, &ev));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPLogEventGetInfo(ev, &info));
  return (double)info.bytes;
}

/* Creates the job alone and measures what it allocates and moves in `steps` steps. */
static void measure_alone(const Setting *s, const char *spec, Job *j, int64_t steps, int64_t batch, int out,
                          const float *x, const float *t, float *dy)
{
  FSDPMemoryStats before, after;
  double v[4], g0, r0;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPGetMemoryStats(&before));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPMemoryResetPeak());
  FSDPCallAbort(MPI_COMM_WORLD, job_create(s, spec, j));
  g0 = event_bytes("AllGather");
  r0 = event_bytes("ReduceScatter") + event_bytes("AllReduce");
  FSDPCallAbort(MPI_COMM_WORLD, job_steps(j, steps, batch, out, x, t, dy));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPGetMemoryStats(&after));
  v[0] = (double)(after.total_peak - before.total_current);
  v[1] = (double)(after.peak[FSDP_MEM_UNSHARDED] - before.current[FSDP_MEM_UNSHARDED]);
  v[2] = (event_bytes("AllGather") - g0) / (double)steps;
  v[3] = (event_bytes("ReduceScatter") + event_bytes("AllReduce") - r0) / (double)steps;
  MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  j->peak_total = v[0];
  j->peak_unsharded = v[1];
  j->gather_bytes = v[2];
  j->reduce_bytes = v[3];
}

int main(int argc, char **argv)
{
  int64_t hidden, depth, batch, steps, rounds;
  int rank, size, in = 64, out = 16;
  char spec[256];
  Job jobs[NSETTINGS];
  double times[NSETTINGS][MAXROUNDS];
  float *x, *t, *dy;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_hidden", "MLP width", 512, 8, 1 << 16, &hidden, NULL));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_depth", "MLP blocks (one unit each)", 6, 1, 1024, &depth, NULL));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_batch", "rows per rank per step", 64, 1, 1 << 20, &batch, NULL));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_steps", "steps per round", 5, 1, 1 << 20, &steps, NULL));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetInt("-fsdp_bench_rounds", "rounds (each setting once per round)", 7, 1, MAXROUNDS, &rounds, NULL));
  snprintf(spec, sizeof spec, "mlp:in=%d,hidden=%lld,depth=%lld,out=%d,act=gelu,norm=layernorm", in,
           (long long)hidden, (long long)depth, out);
  x = malloc(sizeof(float) * (size_t)(batch * in));
  t = malloc(sizeof(float) * (size_t)(batch * out));
  dy = malloc(sizeof(float) * (size_t)(batch * out));
  for (int64_t i = 0; i < batch * in; i++) x[i] = (float)((i * 7919 + rank * 13) % 1000) / 1000.0f - 0.5f;
  for (int64_t i = 0; i < batch * out; i++) t[i] = (float)((i * 104729 + rank) % 1000) / 1000.0f - 0.5f;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPLogSetActive(true)); /* the byte counters, while measuring alone */
  for (int k = 0; k < NSETTINGS; k++) measure_alone(&settings[k], spec, &jobs[k], 2, batch, out, x, t, dy);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPLogSetActive(false));
  for (int64_t r = 0; r < rounds; r++)
    for (int k = 0; k < NSETTINGS; k++) {
      double t0, dt;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      FSDPCallAbort(MPI_COMM_WORLD, job_steps(&jobs[k], steps, batch, out, x, t, dy));
      dt = (MPI_Wtime() - t0) / (double)steps;
      MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      times[k][r] = dt;
    }
  for (int k = 0; k < NSETTINGS; k++) qsort(times[k], (size_t)rounds, sizeof(double), cmp);
  if (rank == 0) {
    int64_t numel;
    FSDPShardingStrategy strategy;
    const Job *ref = &jobs[0];
    FSDPCallAbort(MPI_COMM_WORLD, FSDPContextGetSizes(jobs[0].ctx, &numel, NULL, NULL));
    FSDPCallAbort(MPI_COMM_WORLD, FSDPContextGetShardingStrategy(jobs[0].ctx, &strategy));
    printf("bench-mixed-precision: W = %d, %s sharding, %s, %lld parameters, batch %lld per rank; %lld rounds of %lld "
           "steps, median\n", size, FSDPShardingStrategyName(strategy), spec, (long long)numel, (long long)batch,
           (long long)rounds, (long long)steps);
    printf("%-26s %9s %7s %12s %7s %13s %7s %11s %11s\n", "setting", "ms/step", "vs fp32", "peak MB/rank", "vs fp32",
           "unsharded MB", "vs fp32", "gather MB", "reduce MB");
    for (int k = 0; k < NSETTINGS; k++) {
      const Job *j = &jobs[k];
      double med = times[k][rounds / 2];
      printf("%-26s %9.2f %7.3f %12.3f %7.3f %13.3f %7.3f %11.3f %11.3f\n", settings[k].name, 1e3 * med,
             med / times[0][rounds / 2], j->peak_total / 1e6, j->peak_total / ref->peak_total,
             j->peak_unsharded / 1e6, j->peak_unsharded / ref->peak_unsharded, j->gather_bytes / 1e6,
             j->reduce_bytes / 1e6);
    }
    printf("(peak: what a setting allocated at most above what existed before it; gather, reduce: bytes per step "
           "on a rank, reduce counting reduce-scatters and all-reduces)\n");
    fflush(stdout);
  }
  for (int k = 0; k < NSETTINGS; k++) {
    FSDPCallAbort(MPI_COMM_WORLD, FSDPOptimizerDestroy(&jobs[k].opt));
    FSDPCallAbort(MPI_COMM_WORLD, FSDPModelDestroy(&jobs[k].model));
    FSDPCallAbort(MPI_COMM_WORLD, FSDPContextDestroy(&jobs[k].ctx));
  }
  free(x);
  free(t);
  free(dy);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
