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
#include <string.h>

#include "benchmlp.h"

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
  FSDPCall(bench_adamw(j->ctx, s->param == FSDP_FLOAT16 || s->reduce == FSDP_FLOAT16, &j->opt));
  return FSDP_SUCCESS;
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
static void measure_alone(const Setting *s, const BenchMLP *b, Job *j, int64_t steps)
{
  FSDPMemoryStats before, after;
  double v[4], g0, r0;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPGetMemoryStats(&before));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPMemoryResetPeak());
  FSDPCallAbort(MPI_COMM_WORLD, job_create(s, b->spec, j));
  g0 = event_bytes("AllGather");
  r0 = event_bytes("ReduceScatter") + event_bytes("AllReduce");
  FSDPCallAbort(MPI_COMM_WORLD, bench_mlp_steps(b, j->ctx, j->model, j->opt, steps));
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
  BenchMLP b;
  int rank, size;
  Job jobs[NSETTINGS];
  double times[NSETTINGS][MAXROUNDS];

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bench_mlp_setup(&b, MAXROUNDS);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPLogSetActive(true)); /* the byte counters, while measuring alone */
  for (int k = 0; k < NSETTINGS; k++) measure_alone(&settings[k], &b, &jobs[k], 2);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPLogSetActive(false));
  for (int64_t r = 0; r < b.rounds; r++)
    for (int k = 0; k < NSETTINGS; k++) {
      double t0, dt;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      FSDPCallAbort(MPI_COMM_WORLD, bench_mlp_steps(&b, jobs[k].ctx, jobs[k].model, jobs[k].opt, b.steps));
      dt = (MPI_Wtime() - t0) / (double)b.steps;
      MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      times[k][r] = dt;
    }
  for (int k = 0; k < NSETTINGS; k++) qsort(times[k], (size_t)b.rounds, sizeof(double), bench_compare_doubles);
  if (rank == 0) {
    int64_t numel;
    FSDPShardingStrategy strategy;
    const Job *ref = &jobs[0];
    FSDPCallAbort(MPI_COMM_WORLD, FSDPContextGetSizes(jobs[0].ctx, &numel, NULL, NULL));
    FSDPCallAbort(MPI_COMM_WORLD, FSDPContextGetShardingStrategy(jobs[0].ctx, &strategy));
    printf("bench-mixed-precision: W = %d, %s sharding, %s, %lld parameters, batch %lld per rank; %lld rounds of %lld "
           "steps, median\n",
           size, FSDPShardingStrategyName(strategy), b.spec, (long long)numel, (long long)b.batch, (long long)b.rounds,
           (long long)b.steps);
    printf("%-26s %9s %7s %12s %7s %13s %7s %11s %11s\n", "setting", "ms/step", "vs fp32", "peak MB/rank", "vs fp32",
           "unsharded MB", "vs fp32", "gather MB", "reduce MB");
    for (int k = 0; k < NSETTINGS; k++) {
      const Job *j = &jobs[k];
      double med = times[k][b.rounds / 2];
      printf("%-26s %9.2f %7.3f %12.3f %7.3f %13.3f %7.3f %11.3f %11.3f\n", settings[k].name, 1e3 * med,
             med / times[0][b.rounds / 2], j->peak_total / 1e6, j->peak_total / ref->peak_total,
             j->peak_unsharded / 1e6, j->peak_unsharded / ref->peak_unsharded, j->gather_bytes / 1e6,
             j->reduce_bytes / 1e6);
    }
    printf("(peak: what a setting allocated at most above what existed before it; gather, reduce: bytes per step "
           "on a rank, reduce counting reduce-scatters and all-reduces)\n");
    fflush(stdout);
  }
  for (int k = 0; k < NSETTINGS; k++) {
    FSDPCallAbort(MPI_COMM_WORLD, bench_destroy(&jobs[k].opt, &jobs[k].model, &jobs[k].ctx));
  }
  bench_mlp_free(&b);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
