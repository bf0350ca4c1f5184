/* Checkpoints across layouts: a model trained at W = 4 under hybrid
   sharding (2 emulated nodes, F = 2) with AdamW is saved, then loaded at
   W = 1, 2, 3 and 4 under other strategies, factors and wrappings.  Each
   load must give back exactly the saved parameters, optimizer step and
   training state; saving again from the new layout must give identical
   datasets (parameters and optimizer state, bit for bit); and one more
   training step must match the original job's next step: bit for bit at
   the same W and strategy, within fp32 rounding elsewhere.  Rank 0 also
   recomputes every dataset's CRC-32C with its own bitwise code.
   mpitest: -n 4 */
#include "fsdp_config.h"

#ifndef FSDP_HAVE_HDF5
int main(void) { return 77; } /* built without HDF5: no checkpoints */
#else
#include <math.h>

#include <hdf5.h>

#include "fsdp_nn.h"
#include "formattest.h"
#include "fsdptest.h"

#define SPEC "mlp:in=5,hidden=7,depth=3,out=2,act=gelu,norm=layernorm"
#define FROZEN "blocks.1.fc.bias"
enum { IN = 5, OUT = 2, BATCH = 12, TRAIN_STEPS = 3 };

typedef struct {
  char **names;
  int64_t *offset, *numel;
  int n;
  int64_t total;
} Catalog;

static Catalog catalog;

/* Every parameter's name and place in a flat buffer, in the model's order. */
static void make_catalog(FSDPContext ctx)
{
  int nunits;
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam unit;
    int np;
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetNumParams(unit, &np));
    for (int i = 0; i < np; i++) {
      const char *name;
      int64_t numel;
      TEST_OK(FlatParamGetParamInfo(unit, i, &name, NULL, NULL, &numel));
      catalog.names = realloc(catalog.names, (size_t)(catalog.n + 1) * sizeof *catalog.names);
      catalog.offset = realloc(catalog.offset, (size_t)(catalog.n + 1) * sizeof *catalog.offset);
      catalog.numel = realloc(catalog.numel, (size_t)(catalog.n + 1) * sizeof *catalog.numel);
      catalog.names[catalog.n] = strdup(name);
      catalog.offset[catalog.n] = catalog.total;
      catalog.numel[catalog.n] = numel;
      catalog.total += numel;
      catalog.n++;
    }
  }
}

/* All parameters, unsharded, in catalog order (collective). */
static float *snapshot(FSDPContext ctx)
{
  float *all = calloc((size_t)catalog.total, sizeof *all);
  int nunits;
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam unit;
    int np;
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetNumParams(unit, &np));
    TEST_OK(FlatParamUnshard(unit));
    for (int i = 0; i < np; i++) {
      const char *name;
      void *v;
      int k = 0;
      TEST_OK(FlatParamGetParamInfo(unit, i, &name, NULL, NULL, NULL));
      while (k < catalog.n && strcmp(catalog.names[k], name)) k++;
      TEST_ASSERT(k < catalog.n, "parameter %s is not in the catalog", name);
      TEST_OK(FlatParamGetParam(unit, i, &v));
      memcpy(all + catalog.offset[k], v, (size_t)catalog.numel[k] * sizeof(float));
    }
    TEST_OK(FlatParamReshard(unit));
  }
  return all;
}

typedef struct {
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
} Job;

static Job make_job(MPI_Comm comm, FSDPShardingStrategy strategy, int factor, FSDPWrapPolicy wrap)
{
  Job j;
  FlatParam unit;
  FSDPParamId id;
  j.ctx = test_context(comm, strategy, factor);
  TEST_OK(FSDPModelCreate(j.ctx, SPEC, &j.model));
  TEST_OK(FSDPModelSetWrapPolicy(j.model, wrap, 40));
  TEST_OK(FSDPModelSetSeed(j.model, 3));
  TEST_OK(FSDPModelSetUp(j.model));
  TEST_OK(FSDPContextFindParam(j.ctx, FROZEN, &unit, &id));
  TEST_OK(FlatParamSetTrainable(unit, id, false));
  TEST_OK(FSDPOptimizerCreate(j.ctx, &j.opt));
  TEST_OK(FSDPOptimizerSetLearningRate(j.opt, 1e-2));
  TEST_OK(FSDPOptimizerSetUp(j.opt));
  return j;
}

static void free_job(Job *j)
{
  TEST_OK(FSDPOptimizerDestroy(&j->opt));
  TEST_OK(FSDPModelDestroy(&j->model));
  TEST_OK(FSDPContextDestroy(&j->ctx));
}

/* One optimizer step on global batch b, split evenly over the ranks of comm; the global loss. */
static double train_step(Job *j, MPI_Comm comm, int64_t b)
{
  int rank, size;
  float x[BATCH * IN], t[BATCH * OUT], dy[BATCH * OUT], *y;
  double loss;
  int64_t per;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  per = BATCH / size;
  for (int64_t i = 0; i < per * IN; i++) x[i] = test_value(100 + (uint64_t)b, rank * per * IN + i);
  for (int64_t i = 0; i < per * OUT; i++) t[i] = test_value(200 + (uint64_t)b, rank * per * OUT + i);
  TEST_OK(FSDPContextZeroGrad(j->ctx));
  TEST_OK(FSDPModelForward(j->model, per, x, &y));
  TEST_OK(FSDPMSELoss(per, OUT, y, t, &loss, dy));
  TEST_OK(FSDPModelBackward(j->model, dy));
  TEST_OK(FSDPOptimizerStep(j->opt));
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, comm);
  return loss / size;
}

/* ------------------------------------------------------------------ reading files without libfsdp */

/* A dataset's values as raw bytes and its crc32c attribute. */
static unsigned char *read_dataset(hid_t file, const char *path, size_t *bytes, uint32_t *crc)
{
  hid_t ds = H5Dopen2(file, path, H5P_DEFAULT), type, space, attr;
  unsigned char *buf;
  TEST_ASSERT(ds >= 0, "no dataset %s", path);
  type = H5Dget_type(ds);
  space = H5Dget_space(ds);
  *bytes = (size_t)H5Sget_simple_extent_npoints(space) * H5Tget_size(type);
  buf = malloc(*bytes + 1);
  TEST_ASSERT(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0, "cannot read %s", path);
  attr = H5Aopen(ds, "crc32c", H5P_DEFAULT);
  TEST_ASSERT(attr >= 0 && H5Aread(attr, H5T_NATIVE_UINT32, crc) >= 0, "%s has no crc32c attribute", path);
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(ds);
  return buf;
}

/* Every dataset the checkpoint must have: parameters, and AdamW's two
   state tensors for each trainable one. */
static int dataset_paths(char paths[][128], int max)
{
  int n = 0;
  for (int k = 0; k < catalog.n && n < max; k++) snprintf(paths[n++], 128, "/params/%s", catalog.names[k]);
  for (int s = 0; s < 2; s++)
    for (int k = 0; k < catalog.n && n < max; k++)
      if (strcmp(catalog.names[k], FROZEN))
        snprintf(paths[n++], 128, "/optim/%s/%s", s ? "exp_avg_sq" : "exp_avg", catalog.names[k]);
  return n;
}

/* Rank 0: every dataset's stored CRC-32C is that of its values bound to its
   path and the file's id, and (other not NULL) the datasets of the two files
   hold the same values; each file has its own id. */
static void check_files(const char *path, const char *other, const float *params)
{
  char paths[256][128];
  int n = dataset_paths(paths, 256);
  hid_t f1 = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), f2 = other ? H5Fopen(other, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
  TEST_ASSERT(f1 >= 0 && (!other || f2 >= 0), "cannot open %s or %s", path, other ? other : "");
  for (int k = 0; k < n; k++) {
    size_t b1, b2;
    uint32_t c1, c2;
    unsigned char *v1 = read_dataset(f1, paths[k], &b1, &c1);
    TEST_ASSERT(bound_crc(file_id(f1), paths[k], v1, b1) == c1,
                "%s: %s has the bound CRC-32C 0x%08x, its attribute says 0x%08x", path, paths[k],
                bound_crc(file_id(f1), paths[k], v1, b1), c1);
    if (k < catalog.n && params)
      TEST_ASSERT(b1 == (size_t)catalog.numel[k] * 4 && !memcmp(v1, params + catalog.offset[k], b1),
                  "%s: %s is not the job's parameter", path, paths[k]);
    if (other) {
      unsigned char *v2 = read_dataset(f2, paths[k], &b2, &c2);
      TEST_ASSERT(b1 == b2 && !memcmp(v1, v2, b1), "%s differs between %s and %s", paths[k], path, other);
      TEST_ASSERT(k || file_id(f1) != file_id(f2), "%s and %s have the same file_id", path, other);
      free(v2);
    }
    free(v1);
  }
  H5Fclose(f1);
  if (f2 >= 0) H5Fclose(f2);
}

/* ------------------------------------------------------------------ the test */

typedef struct {
  int w;
  FSDPShardingStrategy strategy;
  int factor;
  FSDPWrapPolicy wrap;
  FSDPCheckpointIO io;
} Case;

int main(int argc, char **argv)
{
  /* Collective transfers cost several synchronizations per dataset, slow
     with 4 ranks on 2 cores: most cases use independent or POSIX ones (the
     original job's save takes auto's choice: POSIX there). */
  static const Case cases[] = {
      {1, FSDP_FULL_SHARD, 0, FSDP_WRAP_BLOCK, FSDP_CHECKPOINT_IO_POSIX},
      {2, FSDP_HYBRID_SHARD, 1, FSDP_WRAP_BLOCK, FSDP_CHECKPOINT_IO_COLLECTIVE},
      {2, FSDP_SHARD_GRAD_OP, 0, FSDP_WRAP_MODEL, FSDP_CHECKPOINT_IO_INDEPENDENT},
      {3, FSDP_FULL_SHARD, 0, FSDP_WRAP_SIZE, FSDP_CHECKPOINT_IO_COLLECTIVE},
      {3, FSDP_NO_SHARD, 0, FSDP_WRAP_BLOCK, FSDP_CHECKPOINT_IO_POSIX},
      {4, FSDP_HYBRID_SHARD, 2, FSDP_WRAP_BLOCK, FSDP_CHECKPOINT_IO_COLLECTIVE},
      {4, FSDP_HYBRID_SHARD_ZERO2, 2, FSDP_WRAP_MODEL, FSDP_CHECKPOINT_IO_INDEPENDENT},
      {4, FSDP_FULL_SHARD, 0, FSDP_WRAP_SIZE, FSDP_CHECKPOINT_IO_POSIX},
  };
  char dir[256] = "", path[300], again[300];
  int rank, size;
  Job orig;
  float *saved, *next;
  double next_loss;
  FSDPTrainingState ts = {0, 42, {1, 2, 3, 0xfedcba9876543210ULL}}, got;
  int64_t step;

  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    snprintf(dir, sizeof dir, "%s/fsdp-test-checkpoint-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    TEST_ASSERT(mkdtemp(dir), "cannot create %s", dir);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  snprintf(path, sizeof path, "%s/ckpt.h5", dir);
  snprintf(again, sizeof again, "%s/again.h5", dir);

  /* The original job: hybrid over two emulated nodes of two ranks. */
  TEST_OK(FSDPOptionsSetValue("-fsdp_ranks_per_node", size >= 2 ? "2" : "1"));
  orig = make_job(MPI_COMM_WORLD, FSDP_HYBRID_SHARD, 0, FSDP_WRAP_BLOCK);
  TEST_OK(FSDPOptionsClearValue("-fsdp_ranks_per_node"));
  make_catalog(orig.ctx);
  for (int64_t b = 0; b < TRAIN_STEPS; b++) train_step(&orig, MPI_COMM_WORLD, b);
  TEST_OK(FSDPContextSetTrainingState(orig.ctx, &ts));
  TEST_OK(FSDPContextSave(orig.ctx, orig.opt, path));
  saved = snapshot(orig.ctx);
  next_loss = train_step(&orig, MPI_COMM_WORLD, TRAIN_STEPS);
  next = snapshot(orig.ctx);
  free_job(&orig);
  if (rank == 0) check_files(path, NULL, saved);

  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const Case *k = &cases[c];
    MPI_Comm comm;
    if (k->w > size) continue;
    MPI_Comm_split(MPI_COMM_WORLD, rank < k->w ? 0 : MPI_UNDEFINED, rank, &comm);
    if (comm != MPI_COMM_NULL) {
      Job j = make_job(comm, k->strategy, k->factor, k->wrap);
      float *loaded, *after;
      double loss;
      bool same_layout = k->w == size && k->strategy == FSDP_HYBRID_SHARD && k->factor == 2;
      int sub;

      MPI_Comm_rank(comm, &sub);
      TEST_OK(FSDPContextSetCheckpointIO(j.ctx, k->io));
      TEST_OK(FSDPContextLoad(j.ctx, j.opt, path));
      loaded = snapshot(j.ctx);
      TEST_ASSERT(!memcmp(loaded, saved, (size_t)catalog.total * sizeof(float)),
                  "W=%d %s: the loaded parameters are not the saved ones", k->w, FSDPShardingStrategyName(k->strategy));
      TEST_OK(FSDPOptimizerGetStep(j.opt, &step));
      TEST_OK(FSDPContextGetTrainingState(j.ctx, &got));
      TEST_ASSERT(step == TRAIN_STEPS && got.step == TRAIN_STEPS && got.data_cursor == ts.data_cursor &&
                      !memcmp(got.rng, ts.rng, sizeof ts.rng),
                  "W=%d: step %lld, training state step %lld cursor %lld", k->w, (long long)step, (long long)got.step,
                  (long long)got.data_cursor);
      /* The state came back exactly: saving it again from this layout writes the same datasets. */
      TEST_OK(FSDPContextSave(j.ctx, j.opt, again));
      if (sub == 0) check_files(again, path, saved);
      loss = train_step(&j, comm, TRAIN_STEPS);
      after = snapshot(j.ctx);
      if (same_layout)
        TEST_ASSERT(loss == next_loss && !memcmp(after, next, (size_t)catalog.total * sizeof(float)),
                    "W=%d hybrid F=2: the step after loading is not bit-identical (loss %.17g vs %.17g)", k->w, loss,
                    next_loss);
      TEST_ASSERT(fabs(loss - next_loss) <= 1e-5 * fabs(next_loss), "W=%d %s: loss %.9g after loading, %.9g in the job",
                  k->w, FSDPShardingStrategyName(k->strategy), loss, next_loss);
      for (int64_t i = 0; i < catalog.total; i++)
        TEST_ASSERT(fabsf(after[i] - next[i]) <= 1e-5f, "W=%d %s: element %lld is %.9g after the step, %.9g in the job",
                    k->w, FSDPShardingStrategyName(k->strategy), (long long)i, after[i], next[i]);
      free(loaded);
      free(after);
      free_job(&j);
      MPI_Comm_free(&comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (rank == 0) {
    unlink(path);
    unlink(again);
    rmdir(dir);
  }
  free(saved);
  free(next);
  for (int k = 0; k < catalog.n; k++) free(catalog.names[k]);
  free(catalog.names);
  free(catalog.offset);
  free(catalog.numel);
  TEST_OK(FSDPFinalize());
  return 0;
}
#endif
