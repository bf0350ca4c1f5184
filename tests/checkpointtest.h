/* What the checkpoint tests share: a scratch directory, files in it that
   rank 0 copies, this rank's shards, and one training step of a tiny MLP
   (in=3, out=2). */
#ifndef FSDP_CHECKPOINTTEST_H
#define FSDP_CHECKPOINTTEST_H

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsdp_nn.h"
#include "fsdptest.h"
#include "formattest.h"

static char dir[256];
static int rank;

static inline const char *file(const char *name)
{
  static char paths[8][320];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, 320, "%s/%s", dir, name);
  return p;
}

static inline bool exists(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0;
}

/* Rank 0 copies a file byte for byte; everyone waits. */
static inline void copy_file(const char *from, const char *to)
{
  if (rank == 0) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[65536];
    size_t n;
    TEST_ASSERT(in && out, "cannot copy %s to %s", from, to);
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 0 writes `value` into dataset `name` of the file at `path`, at index
   `at` (every value if at < 0), and gives it a valid checksum again; everyone
   waits.  A forgery only the values' own checks can refuse. */
static inline void forge_value(const char *path, const char *name, int64_t at, float value)
{
  if (rank == 0) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), ds = H5Dopen2(f, name, H5P_DEFAULT), space;
    hssize_t n;
    float *v;
    TEST_ASSERT(ds >= 0, "no %s in %s", name, path);
    space = H5Dget_space(ds);
    n = H5Sget_simple_extent_npoints(space);
    v = malloc((size_t)n * sizeof *v);
    TEST_ASSERT(at < n && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "cannot read %s", name);
    for (hssize_t i = 0; i < n; i++)
      if (at < 0 || i == at) v[i] = value;
    TEST_ASSERT(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "cannot write %s", name);
    put_crc(ds, name, bound_crc(file_id(f), name, (const unsigned char *)v, (size_t)n * sizeof *v));
    H5Sclose(space);
    H5Dclose(ds);
    H5Fclose(f);
    free(v);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* This rank's shards, one after another. */
static inline float *shards(FSDPContext ctx)
{
  int nunits;
  float *all = NULL;
  int64_t total = 0;
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam unit;
    void *v;
    int64_t n;
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetShard(unit, &v, &n));
    all = realloc(all, (size_t)(total + n) * sizeof *all);
    memcpy(all + total, v, (size_t)n * sizeof *all);
    total += n;
  }
  return all;
}

static inline int64_t shard_total(FSDPContext ctx)
{
  int64_t n;
  TEST_OK(FSDPContextGetSizes(ctx, NULL, &n, NULL));
  return n;
}

static inline void train(FSDPContext ctx, FSDPModel model, FSDPOptimizer opt)
{
  float x[3] = {0.5f, -1.0f, 0.25f}, *y, dy[2] = {0.3f, -0.2f};
  TEST_OK(FSDPContextZeroGrad(ctx));
  TEST_OK(FSDPModelForward(model, 1, x, &y));
  TEST_OK(FSDPModelBackward(model, dy));
  TEST_OK(FSDPOptimizerStep(opt));
}

/* A FULL_SHARD context over every rank, the model `spec` (in=3, out=2, for
   train) with AdamW, set up and trained `steps` steps. */
static inline void trained_job(const char *spec, int steps, FSDPContext *ctx, FSDPModel *model, FSDPOptimizer *opt)
{
  *ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  TEST_OK(FSDPModelCreate(*ctx, spec, model));
  TEST_OK(FSDPModelSetUp(*model));
  TEST_OK(FSDPOptimizerCreate(*ctx, opt));
  TEST_OK(FSDPOptimizerSetUp(*opt));
  for (int s = 0; s < steps; s++) train(*ctx, *model, *opt);
}

/* Rank 0 makes the scratch directory TMPDIR/<prefix>-XXXXXX; every rank learns its name. */
static inline void make_scratch_dir(const char *prefix)
{
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    snprintf(dir, sizeof dir, "%s/%s-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", prefix);
    TEST_ASSERT(mkdtemp(dir), "cannot create %s", dir);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Removes a directory and everything in it (links as links, never followed). */
static inline void remove_tree(const char *path)
{
  struct stat st;
  DIR *d;
  struct dirent *e;
  if (lstat(path, &st) || !S_ISDIR(st.st_mode)) {
    unlink(path);
    return;
  }
  d = opendir(path);
  while (d && (e = readdir(d))) {
    char child[2048];
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if ((size_t)snprintf(child, sizeof child, "%s/%s", path, e->d_name) < sizeof child) remove_tree(child);
  }
  if (d) closedir(d);
  rmdir(path);
}

#endif
