/* bench-device: fsdp-train's MLP stepping on the host and on the GPU, fp32,
   TF32 and bf16, measured in one run.  The settings run interleaved, round
   after round, so that drift in the machine's speed hits them alike; each
   setting's time is its median round (the slowest rank's).  Rates count
   6 x parameters x rows FLOPs per step (forward and backward GEMMs).
   make benchmarks && OPENBLAS_NUM_THREADS=1 mpiexec -n 1 ./benchmarks/bench-device \
     -fsdp_bench_hidden 4096 -fsdp_bench_depth 8 -fsdp_bench_batch 2048 [-fsdp_bench_host false]
   Without a GPU it says so and exits 0 after the host setting alone. */
#include <string.h>

#include "benchmlp.h"

typedef struct {
  const char *name;
  FSDPDeviceType device;
  FSDPDataType param;
  bool tf32;
} Setting;

static const Setting settings[] = {
    {"host fp32", FSDP_DEVICE_HOST, FSDP_FLOAT32, false},
    {"cuda fp32", FSDP_DEVICE_CUDA, FSDP_FLOAT32, false},
    {"cuda tf32", FSDP_DEVICE_CUDA, FSDP_FLOAT32, true},
    {"cuda bf16", FSDP_DEVICE_CUDA, FSDP_BFLOAT16, false},
};
#define NSETTINGS (int)(sizeof settings / sizeof settings[0])
#define MAXROUNDS 64

typedef struct {
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  bool on;
} Job;

static FSDPErrorCode job_create(const Setting *s, const char *spec, Job *j)
{
  FSDPCall(FSDPContextCreate(MPI_COMM_WORLD, &j->ctx));
  FSDPCall(FSDPContextSetFromOptions(j->ctx));
  FSDPCall(FSDPContextSetDevice(j->ctx, s->device));
  FSDPCall(FSDPContextSetMixedPrecision(j->ctx, s->param, FSDP_FLOAT32));
  FSDPCall(FSDPModelCreate(j->ctx, spec, &j->model));
  FSDPCall(FSDPModelSetTF32(j->model, s->tf32));
  FSDPCall(FSDPModelSetUp(j->model));
  FSDPCall(bench_adamw(j->ctx, false, &j->opt));
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  BenchMLP b;
  int rank, size;
  bool host;
  Job jobs[NSETTINGS];
  double times[NSETTINGS][MAXROUNDS];
  int64_t numel = 0;

  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  FSDPCallAbort(MPI_COMM_WORLD, FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bench_mlp_setup(&b, MAXROUNDS);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPOptionsGetBool("-fsdp_bench_host", "include the host setting (slow at GPU sizes)",
                                                   true, &host, NULL));
  memset(jobs, 0, sizeof jobs);
  for (int k = 0; k < NSETTINGS; k++) {
    FSDPErrorCode ierr;
    if (settings[k].device == FSDP_DEVICE_HOST && !host) continue;
    ierr = job_create(&settings[k], b.spec, &jobs[k]);
    if (settings[k].device == FSDP_DEVICE_CUDA && (ierr == FSDP_ERR_CUDA || ierr == FSDP_ERR_UNSUPPORTED)) {
      /* no GPU, or no CUDA: SetUp failed on every rank together */
      const char *msg;
      FSDPGetLastError(NULL, &msg, NULL);
      if (rank == 0)
        printf("bench-device: %s: no usable GPU (%s): the CUDA settings are skipped\n", settings[k].name, msg);
      FSDPCallAbort(MPI_COMM_WORLD, bench_destroy(&jobs[k].opt, &jobs[k].model, &jobs[k].ctx));
      break;
    }
    FSDPCallAbort(MPI_COMM_WORLD, ierr);
    jobs[k].on = true;
    FSDPCallAbort(MPI_COMM_WORLD, FSDPContextGetSizes(jobs[k].ctx, &numel, NULL, NULL));
    FSDPCallAbort(MPI_COMM_WORLD, bench_mlp_steps(&b, jobs[k].ctx, jobs[k].model, jobs[k].opt, 1)); /* warm-up */
  }
  for (int64_t r = 0; r < b.rounds; r++)
    for (int k = 0; k < NSETTINGS; k++) {
      double t0, dt;
      if (!jobs[k].on) continue;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      FSDPCallAbort(MPI_COMM_WORLD, bench_mlp_steps(&b, jobs[k].ctx, jobs[k].model, jobs[k].opt, b.steps));
      FSDPCallAbort(MPI_COMM_WORLD, FSDPContextSynchronize(jobs[k].ctx)); /* the last optimizer step too */
      dt = (MPI_Wtime() - t0) / (double)b.steps;
      MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      times[k][r] = dt;
    }
  if (rank == 0) {
    double base_host = 0, base_gpu = 0;
    printf("bench-device: W = %d, %s, %lld parameters, batch %lld per rank; %lld rounds of %lld steps, median\n", size,
           b.spec, (long long)numel, (long long)b.batch, (long long)b.rounds, (long long)b.steps);
    printf("%-10s %10s %12s %10s %9s %12s\n", "setting", "ms/step", "samples/s", "TFLOP/s", "vs host", "vs cuda fp32");
    for (int k = 0; k < NSETTINGS; k++) {
      double med;
      if (!jobs[k].on) continue;
      qsort(times[k], (size_t)b.rounds, sizeof(double), bench_compare_doubles);
      med = times[k][b.rounds / 2];
      if (k == 0) base_host = med;
      if (k == 1) base_gpu = med;
      printf("%-10s %10.3f %12.1f %10.3f", settings[k].name, 1e3 * med, (double)(b.batch * size) / med,
             6.0 * (double)numel * (double)b.batch / med / 1e12);
      if (base_host > 0) printf(" %9.2f", base_host / med);
      else printf(" %9s", "-");
      if (base_gpu > 0) printf(" %12.2f\n", base_gpu / med);
      else printf(" %12s\n", "-");
    }
    printf("(vs: how many times faster than that setting, in this run; TFLOP/s per rank)\n");
    fflush(stdout);
  }
  for (int k = 0; k < NSETTINGS; k++)
    if (jobs[k].on) FSDPCallAbort(MPI_COMM_WORLD, bench_destroy(&jobs[k].opt, &jobs[k].model, &jobs[k].ctx));
  bench_mlp_free(&b);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
