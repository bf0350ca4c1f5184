/* bench-checkpoint: FSDPContextSave and FSDPContextLoad of a model with AdamW
   state, next to a plain MPI-IO write and read of the same bytes (each rank
   its shard and state, contiguous, into a new file, MPI_File_write_at_all
   then MPI_File_sync), measured in one run, interleaved round after round; each
   time is the median round of the slowest rank.  Peak memory is what each
   operation added to the library's tracked allocations on the worst rank.
   make benchmarks && OPENBLAS_NUM_THREADS=1 mpiexec -n W ./benchmarks/bench-checkpoint
     [-fsdp_bench_model SPEC] [-fsdp_bench_dir DIR] [-fsdp_bench_rounds R]
   doc/performance.md has the numbers measured here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsdp.h"
#include "fsdp_nn.h"

#define MAXROUNDS 32

/* Saves and loads in each transfer mode, then the plain MPI-IO baseline. */
enum { SAVE_COLL, SAVE_INDEP, SAVE_POSIX, LOAD_COLL, LOAD_INDEP, LOAD_POSIX, MPIIO_WRITE, MPIIO_READ, NOPS };
static const char *const op_names[NOPS] = {"FSDPContextSave, collective",  "FSDPContextSave, independent",
                                           "FSDPContextSave, posix",       "FSDPContextLoad, collective",
                                           "FSDPContextLoad, independent", "FSDPContextLoad, posix",
                                           "MPI-IO write_at_all + sync",   "MPI-IO read_at_all"};
static const FSDPCheckpointIO op_modes[LOAD_POSIX + 1] = {
    FSDP_CHECKPOINT_IO_COLLECTIVE, FSDP_CHECKPOINT_IO_INDEPENDENT, FSDP_CHECKPOINT_IO_POSIX,
    FSDP_CHECKPOINT_IO_COLLECTIVE, FSDP_CHECKPOINT_IO_INDEPENDENT, FSDP_CHECKPOINT_IO_POSIX};

typedef struct {
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  MPI_Comm comm;
  int rank, size;
  char path[1100], raw[1100];
  int64_t bytes; /* this rank's share: shards and state */
  void *buffer;  /* the plain MPI-IO baseline's copy of them */
} Bench;

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static FSDPErrorCode mpiio(Bench *b, bool write)
{
  MPI_File fh;
  MPI_Offset at = 0, mine = b->bytes;
  FSDPCallMPI(MPI_Exscan(&mine, &at, 1, MPI_OFFSET, MPI_SUM, b->comm));
  if (b->rank == 0) at = 0;
  /* A new file, as each save writes one: no blocks of the last round to reuse. */
  if (write && b->rank == 0) unlink(b->raw);
  if (write) FSDPCallMPI(MPI_Barrier(b->comm));
  FSDPCallMPI(
      MPI_File_open(b->comm, b->raw, write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
  /* Counts are ints: large shares go in 1 GiB pieces (collective: every rank the same number). */
  {
    int64_t chunk = 1 << 30, n = (b->bytes + chunk - 1) / chunk, most = n;
    FSDPCallMPI(MPI_Allreduce(&n, &most, 1, MPI_INT64_T, MPI_MAX, b->comm));
    for (int64_t k = 0; k < most; k++) {
      int64_t off = k * chunk, len = off < b->bytes ? (b->bytes - off < chunk ? b->bytes - off : chunk) : 0;
      if (write)
        FSDPCallMPI(
            MPI_File_write_at_all(fh, at + off, (char *)b->buffer + off, (int)len, MPI_BYTE, MPI_STATUS_IGNORE));
      else
        FSDPCallMPI(MPI_File_read_at_all(fh, at + off, (char *)b->buffer + off, (int)len, MPI_BYTE, MPI_STATUS_IGNORE));
    }
  }
  if (write) FSDPCallMPI(MPI_File_sync(fh));
  FSDPCallMPI(MPI_File_close(&fh));
  return FSDP_SUCCESS;
}

/* One operation: its time (slowest rank) and the tracked bytes it added at its peak (worst rank). */
static FSDPErrorCode run_op(Bench *b, int op, double *seconds, double *extra)
{
  FSDPMemoryStats before, after;
  double t;
  FSDPCall(FSDPGetMemoryStats(&before));
  FSDPCall(FSDPMemoryResetPeak());
  if (op <= LOAD_POSIX) FSDPCall(FSDPContextSetCheckpointIO(b->ctx, op_modes[op]));
  FSDPCallMPI(MPI_Barrier(b->comm));
  t = MPI_Wtime();
  if (op <= SAVE_POSIX) FSDPCall(FSDPContextSave(b->ctx, b->opt, b->path));
  else if (op <= LOAD_POSIX) FSDPCall(FSDPContextLoad(b->ctx, b->opt, b->path));
  else FSDPCall(mpiio(b, op == MPIIO_WRITE));
  t = MPI_Wtime() - t;
  FSDPCall(FSDPGetMemoryStats(&after));
  *extra = (double)after.total_peak - (double)before.total_current;
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, b->comm));
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, extra, 1, MPI_DOUBLE, MPI_MAX, b->comm));
  *seconds = t;
  return FSDP_SUCCESS;
}

static FSDPErrorCode bench(void)
{
  char spec[256], dir[1024];
  int64_t rounds, numel, shard, state;
  double times[NOPS][MAXROUNDS], extra[NOPS] = {0}, total_bytes;
  Bench b;
  char mem[32];

  memset(&b, 0, sizeof b);
  FSDPCall(FSDPOptionsGetString("-fsdp_bench_model", "model spec", "mlp:in=2048,hidden=2048,depth=6,out=16", spec,
                                sizeof spec, NULL));
  FSDPCall(FSDPOptionsGetString("-fsdp_bench_dir", "directory for the files", ".", dir, sizeof dir, NULL));
  FSDPCall(FSDPOptionsGetInt("-fsdp_bench_rounds", "rounds", 5, 1, MAXROUNDS, &rounds, NULL));
  b.comm = MPI_COMM_WORLD;
  MPI_Comm_rank(b.comm, &b.rank);
  MPI_Comm_size(b.comm, &b.size);
  snprintf(b.path, sizeof b.path, "%s/bench-checkpoint.h5", dir);
  snprintf(b.raw, sizeof b.raw, "%s/bench-checkpoint.raw", dir);

  FSDPCall(FSDPContextCreate(b.comm, &b.ctx));
  FSDPCall(FSDPContextSetFromOptions(b.ctx));
  FSDPCall(FSDPModelCreate(b.ctx, spec, &b.model));
  FSDPCall(FSDPModelSetUp(b.model));
  FSDPCall(FSDPOptimizerCreate(b.ctx, &b.opt));
  FSDPCall(FSDPOptimizerSetUp(b.opt));
  FSDPCall(FSDPContextGetSizes(b.ctx, &numel, &shard, NULL));
  FSDPCall(FSDPOptimizerGetStateSize(b.opt, &state));
  {
    ShardGroup group;
    int nreplicas;
    FSDPCall(FSDPContextGetShardGroup(b.ctx, &group));
    FSDPCall(ShardGroupGetReplicateComm(group, NULL, NULL, &nreplicas));
    /* The same bytes as the file (a little more: shards include padding); replicas split theirs. */
    b.bytes = 4 * (shard + state) / nreplicas;
  }
  FSDPCall(FSDPMalloc((size_t)b.bytes, FSDP_MEM_OTHER, &b.buffer));
  memset(b.buffer, 1, (size_t)b.bytes);
  total_bytes = 4.0 * 3.0 * (double)numel; /* parameters and two AdamW tensors */

  for (int r = 0; r < rounds; r++)
    for (int op = 0; op < NOPS; op++) {
      double e;
      FSDPCall(run_op(&b, op, &times[op][r], &e));
      extra[op] = e > extra[op] ? e : extra[op];
    }
  if (b.rank == 0) {
    FSDPShardingStrategy strategy;
    struct stat st;
    FSDPCall(FSDPContextGetShardingStrategy(b.ctx, &strategy));
    printf("bench-checkpoint: %s, %lld parameters, AdamW; %d ranks, %s sharding; %.3f MB of data, a %.3f MB file; "
           "median of %lld rounds\n",
           spec, (long long)numel, b.size, FSDPShardingStrategyName(strategy), total_bytes / 1e6,
           stat(b.path, &st) ? 0.0 : (double)st.st_size / 1e6, (long long)rounds);
    printf("%-32s %10s %10s %12s %16s\n", "operation", "time (s)", "GB/s", "vs MPI-IO", "peak extra/rank");
  }
  {
    double med[NOPS];
    for (int op = 0; op < NOPS; op++) med[op] = median(times[op], (int)rounds);
    for (int op = 0; b.rank == 0 && op < NOPS; op++) {
      bool writes = op <= SAVE_POSIX || op == MPIIO_WRITE;
      double base = writes ? med[MPIIO_WRITE] : med[MPIIO_READ];
      snprintf(mem, sizeof mem, "%.1f MB", extra[op] / 1e6);
      printf("%-32s %10.3f %10.3f %11.2fx %16s\n", op_names[op], med[op], total_bytes / med[op] / 1e9, med[op] / base,
             op < MPIIO_WRITE ? mem : "-");
    }
  }
  if (b.rank == 0) {
    char older[1200];
    unlink(b.path);
    unlink(b.raw);
    snprintf(older, sizeof older, "%s.1", b.path);
    unlink(older);
  }
  FSDPCall(FSDPFree(&b.buffer));
  FSDPCall(FSDPOptimizerDestroy(&b.opt));
  FSDPCall(FSDPModelDestroy(&b.model));
  FSDPCall(FSDPContextDestroy(&b.ctx));
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  FSDPCallAbort(MPI_COMM_WORLD, bench());
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
