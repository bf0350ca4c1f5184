/* bench-overlap: the overlap engine on fsdp-train's MLP, measured in one run:
   step time and exposed communication for each engine, prefetch setting and
   limit L, next to the synchronous path with no prefetching.  Settings run
   interleaved, round after round, so that drift in the machine's speed hits
   them alike; each setting's time is its median round (the slowest rank's).
   make benchmarks && OPENBLAS_NUM_THREADS=1 mpiexec -n 4 ./benchmarks/bench-overlap [-fsdp_bench_hidden H] [-fsdp_bench_depth D] [-fsdp_bench_batch B] [-fsdp_bench_steps S] [-fsdp_bench_rounds R]
   Prints one table; doc/performance.md has the numbers measured here. */
#include <string.h>

#include "benchmlp.h"

typedef struct {
  const char *name;
  FSDPCommEngine engine;
  FSDPBackwardPrefetch backward;
  bool forward;
  int limit;
} Setting;

static const Setting settings[] = {
    {"sync, no prefetch", FSDP_COMM_ENGINE_SYNC, FSDP_BACKWARD_PREFETCH_NONE, false, 2},
    {"thread, no prefetch", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_NONE, false, 2},
    {"thread, pre, L=1", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_PRE, true, 1},
    {"thread, pre, L=2", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_PRE, true, 2},
    {"thread, pre, unlimited", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_PRE, true, 0},
    {"thread, post, L=2", FSDP_COMM_ENGINE_THREAD, FSDP_BACKWARD_PREFETCH_POST, true, 2},
    {"nonblocking, no prefetch", FSDP_COMM_ENGINE_NONBLOCKING, FSDP_BACKWARD_PREFETCH_NONE, false, 2},
    {"nonblocking, pre, L=2", FSDP_COMM_ENGINE_NONBLOCKING, FSDP_BACKWARD_PREFETCH_PRE, true, 2},
};
#define NSETTINGS (int)(sizeof settings / sizeof settings[0])
#define MAXROUNDS 64

typedef struct {
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
} Job;

static FSDPErrorCode job_create(const Setting *s, const char *spec, Job *j)
{
  FSDPCall(FSDPContextCreate(MPI_COMM_WORLD, &j->ctx));
  FSDPCall(FSDPContextSetFromOptions(j->ctx));
  FSDPCall(FSDPContextSetCommEngine(j->ctx, s->engine));
  FSDPCall(FSDPContextSetBackwardPrefetch(j->ctx, s->backward));
  FSDPCall(FSDPContextSetForwardPrefetch(j->ctx, s->forward));
  FSDPCall(FSDPContextSetLimitAllGathers(j->ctx, s->limit));
  FSDPCall(FSDPModelCreate(j->ctx, spec, &j->model));
  FSDPCall(FSDPModelSetUp(j->model));
  FSDPCall(bench_adamw(j->ctx, false, &j->opt));
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  BenchMLP b;
  int rank, size;
  Job jobs[NSETTINGS];
  double times[NSETTINGS][MAXROUNDS], comm[NSETTINGS], exposed[NSETTINGS];

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bench_mlp_setup(&b, MAXROUNDS);
  for (int k = 0; k < NSETTINGS; k++) {
    FSDPCallAbort(MPI_COMM_WORLD, job_create(&settings[k], b.spec, &jobs[k]));
    FSDPCallAbort(MPI_COMM_WORLD, bench_mlp_steps(&b, jobs[k].ctx, jobs[k].model, jobs[k].opt, 2)); /* warm up */
  }
  FSDPCommStats before[NSETTINGS];
  for (int k = 0; k < NSETTINGS; k++) FSDPCallAbort(MPI_COMM_WORLD, FSDPContextGetCommStats(jobs[k].ctx, &before[k]));
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
  for (int k = 0; k < NSETTINGS; k++) {
    FSDPCommStats st;
    double v[2];
    FSDPCallAbort(MPI_COMM_WORLD, FSDPContextGetCommStats(jobs[k].ctx, &st));
    v[0] = st.comm_time - before[k].comm_time;
    v[1] = st.exposed_time - before[k].exposed_time;
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    comm[k] = v[0] / size / (double)(b.rounds * b.steps);
    exposed[k] = v[1] / size / (double)(b.rounds * b.steps);
    qsort(times[k], (size_t)b.rounds, sizeof(double), bench_compare_doubles);
  }
  if (rank == 0) {
    int64_t numel, shard, maxunit;
    FSDPCallAbort(MPI_COMM_WORLD, FSDPContextGetSizes(jobs[0].ctx, &numel, &shard, &maxunit));
    printf("bench-overlap: W = %d, %s, %lld parameters, batch %lld per rank; %lld rounds of %lld steps, median\n", size,
           b.spec, (long long)numel, (long long)b.batch, (long long)b.rounds, (long long)b.steps);
    printf("%-28s %12s %10s %14s %14s %10s\n", "setting", "ms/step", "vs sync", "comm ms/step", "exposed ms/step",
           "overlap");
    for (int k = 0; k < NSETTINGS; k++) {
      double med = times[k][b.rounds / 2];
      printf("%-28s %12.3f %10.3f %14.3f %14.3f %9.1f%%\n", settings[k].name, 1e3 * med, med / times[0][b.rounds / 2],
             1e3 * comm[k], 1e3 * exposed[k], comm[k] > 0 ? 100.0 * (1.0 - exposed[k] / comm[k]) : 0.0);
    }
    fflush(stdout);
  }
  for (int k = 0; k < NSETTINGS; k++) {
    FSDPCallAbort(MPI_COMM_WORLD, bench_destroy(&jobs[k].opt, &jobs[k].model, &jobs[k].ctx));
  }
  bench_mlp_free(&b);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
