/* What a save and a load compute over every value, on datasets long enough
   for their fast paths (the CRC's interleaved lanes, the blocks of the
   non-finite and negative scans, more than one step per piece), each
   rank's piece starting at an odd place (W = 3): rank 0 recomputes every
   dataset's CRC-32C with the bitwise code of formattest.h; NaNs, infinities
   and negative second moments (the smallest negative float too) placed
   inside blocks, in a piece's second step and at its very end, each under a
   valid checksum, are refused with their index, and leave the shards and
   the optimizer state as they were; -0 and a positive denormal are not
   refused, nor is a NaN with its sign bit set taken for a negative.  A
   load keeps each shard where it was (FlatParamGetShard's address), though
   its pages change places with staging's.  Run again with POSIX transfers
   (which read and scan a step at a time) and the baseline's scans.
   mpitest: -n 3
   mpitest: -n 3 -fsdp_checkpoint_io posix -fsdp_simd generic */
#include "fsdp_config.h"

#ifndef FSDP_HAVE_HDF5
int main(void) { return 77; } /* built without HDF5: no checkpoints */
#else
#include <math.h>

#include <hdf5.h>

#include "checkpointtest.h"

#define SPEC "mlp:in=3,hidden=400,depth=2,out=2"
#define WEIGHT "/params/blocks.1.fc.weight" /* 400 x 400: a piece of 53,467 values per rank */
#define SECOND "/optim/exp_avg_sq/blocks.1.fc.weight"

/* Rank 0: each dataset's crc32c attribute is the bitwise CRC of its values,
   bound to its path and the file; the longest dataset's length. */
static herr_t check_crc(hid_t f, const char *name, const LinkInfo *info, void *arg)
{
  char path[512];
  hid_t ds, space, type, a;
  size_t bytes;
  unsigned char *v;
  uint32_t want;
  (void)info;
  snprintf(path, sizeof path, "/%s", name);
  ds = H5Dopen2(f, path, H5P_DEFAULT); /* fails, quietly, on a group */
  if (ds < 0) return 0;
  space = H5Dget_space(ds);
  type = H5Dget_type(ds);
  bytes = (size_t)H5Sget_simple_extent_npoints(space) * H5Tget_size(type);
  v = malloc(bytes + 1);
  TEST_ASSERT(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "cannot read %s", path);
  a = H5Aopen(ds, "crc32c", H5P_DEFAULT);
  TEST_ASSERT(a >= 0 && H5Aread(a, H5T_NATIVE_UINT32, &want) >= 0, "%s has no crc32c", path);
  TEST_ASSERT(bound_crc(file_id(f), path, v, bytes) == want, "%s: the bitwise CRC is 0x%08x, the file says 0x%08x",
              path, bound_crc(file_id(f), path, v, bytes), want);
  if (bytes > *(size_t *)arg) *(size_t *)arg = bytes;
  free(v);
  H5Aclose(a);
  H5Tclose(type);
  H5Sclose(space);
  H5Dclose(ds);
  return 0;
}

/* A copy of good.h5 whose dataset `name` has `value` at index `at`, with a valid checksum. */
static void forge(const char *copy, const char *name, int64_t at, float value)
{
  copy_file(file("good.h5"), copy);
  forge_value(copy, name, at, value);
}

/* Rank 0: the optimizer state saved in `after` is the one in `before`, value for value. */
static void same_state(const char *before, const char *after)
{
  hid_t f1 = H5Fopen(before, H5F_ACC_RDONLY, H5P_DEFAULT), f2 = H5Fopen(after, H5F_ACC_RDONLY, H5P_DEFAULT);
  const char *names[] = {"exp_avg", "exp_avg_sq"};
  TEST_ASSERT(f1 >= 0 && f2 >= 0, "cannot open %s or %s", before, after);
  for (int k = 0; k < 2; k++) {
    char path[256];
    hid_t d1, d2;
    float *v1 = malloc(400 * 400 * sizeof *v1), *v2 = malloc(400 * 400 * sizeof *v2);
    snprintf(path, sizeof path, "/optim/%s/blocks.1.fc.weight", names[k]);
    d1 = H5Dopen2(f1, path, H5P_DEFAULT);
    d2 = H5Dopen2(f2, path, H5P_DEFAULT);
    TEST_ASSERT(d1 >= 0 && d2 >= 0 && H5Dread(d1, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v1) >= 0 &&
                    H5Dread(d2, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v2) >= 0,
                "cannot read %s", path);
    TEST_ASSERT(!memcmp(v1, v2, 400 * 400 * sizeof *v1), "a refused load changed %s", path);
    free(v1);
    free(v2);
    H5Dclose(d1);
    H5Dclose(d2);
  }
  H5Fclose(f1);
  H5Fclose(f2);
}

/* Refused with `code`, every rank naming the value ("path[at] is value"):
   the rank that read it, and the others relaying its error. */
static void expect_refused(FSDPContext ctx, FSDPOptimizer opt, const char *path, FSDPErrorCode code, const char *text)
{
  TEST_CODE(code, FSDPContextLoad(ctx, opt, path));
  TEST_MESSAGE_HAS(text);
}

int main(int argc, char **argv)
{
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  size_t longest = 0;
  float *want, *got;
  int64_t total;

  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  make_scratch_dir("fsdp-test-scan");
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

  trained_job(SPEC, 2, &ctx, &model, &opt);
  TEST_OK(FSDPContextSave(ctx, opt, file("good.h5")));
  want = shards(ctx);
  total = shard_total(ctx);

  if (rank == 0) {
    hid_t f = H5Fopen(file("good.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    TEST_ASSERT(f >= 0 && VISIT(f, H5_INDEX_NAME, H5_ITER_INC, check_crc, &longest) >= 0, "cannot visit good.h5");
    H5Fclose(f);
    /* Each rank's third is longer than one step of the scan (48 blocks of 1,024 values, format.c). */
    TEST_ASSERT(longest / 3 > 48 * 1024 * sizeof(float),
                "the longest dataset has %zu bytes: too short for the fast paths", longest);
  }
  train(ctx, model, opt);
  {
    FlatParam unit;
    void *before, *after;
    int64_t n;
    TEST_OK(FSDPContextGetUnit(ctx, 1, &unit)); /* the 400 x 400 weight's */
    TEST_OK(FlatParamGetShard(unit, &before, &n));
    TEST_OK(FSDPContextLoad(ctx, opt, file("good.h5")));
    TEST_OK(FlatParamGetShard(unit, &after, &n));
    TEST_ASSERT(after == before, "the load moved unit 1's shard from %p to %p", before, after);
  }
  got = shards(ctx);
  TEST_ASSERT(!memcmp(want, got, (size_t)total * sizeof *got), "the load did not give back the saved shards");
  free(got);

  /* Rank 1 holds values 53,467 to 106,933 of the unit, its second step
     from 102,619; rank 0's second step starts at 49,152; 159,999 is the
     weight's last value, in rank 2's piece after its last whole block. */
  forge(file("nan.h5"), WEIGHT, 104000, NAN);
  expect_refused(ctx, opt, file("nan.h5"), FSDP_ERR_NOT_FINITE, WEIGHT "[104000] is nan");
  forge(file("inf.h5"), WEIGHT, 70000, INFINITY);
  expect_refused(ctx, opt, file("inf.h5"), FSDP_ERR_NOT_FINITE, WEIGHT "[70000] is inf");
  forge(file("last.h5"), WEIGHT, 400 * 400 - 1, -INFINITY);
  expect_refused(ctx, opt, file("last.h5"), FSDP_ERR_NOT_FINITE, WEIGHT "[159999] is -inf");
  forge(file("negative.h5"), SECOND, 50000, -1e-30f);
  expect_refused(ctx, opt, file("negative.h5"), FSDP_ERR_CORRUPT, SECOND "[50000] is -1e-30: AdamW's second moment");
  forge(file("denormal.h5"), SECOND, 12345, -1e-45f); /* the smallest negative float */
  expect_refused(ctx, opt, file("denormal.h5"), FSDP_ERR_CORRUPT, SECOND "[12345] is -1.4013e-45");
  forge(file("minus-inf.h5"), SECOND, 150000, -INFINITY); /* negative, before it is non-finite */
  expect_refused(ctx, opt, file("minus-inf.h5"), FSDP_ERR_CORRUPT, SECOND "[150000] is -inf: AdamW's second moment");
  forge(file("nan-moment.h5"), SECOND, 30000, NAN); /* not negative: non-finite */
  expect_refused(ctx, opt, file("nan-moment.h5"), FSDP_ERR_NOT_FINITE, SECOND "[30000] is nan");
  forge(file("minus-nan.h5"), SECOND, 31000, -NAN); /* its sign bit set, still not negative */
  expect_refused(ctx, opt, file("minus-nan.h5"), FSDP_ERR_NOT_FINITE, SECOND "[31000] is -nan");
  got = shards(ctx);
  TEST_ASSERT(!memcmp(want, got, (size_t)total * sizeof *got), "a refused load changed the shards");
  free(got);
  TEST_OK(FSDPContextSave(ctx, opt, file("after.h5")));
  if (rank == 0) same_state(file("good.h5"), file("after.h5"));
  forge(file("zero.h5"), SECOND, 20000, -0.0f); /* -0 is not less than 0 */
  TEST_OK(FSDPContextLoad(ctx, opt, file("zero.h5")));
  forge(file("tiny.h5"), SECOND, 21000, 1e-45f);
  TEST_OK(FSDPContextLoad(ctx, opt, file("tiny.h5")));
  TEST_OK(FSDPContextSetCheckFinite(ctx, false)); /* the second moment's sign is still checked */
  TEST_OK(FSDPContextLoad(ctx, opt, file("nan.h5")));
  expect_refused(ctx, opt, file("negative.h5"), FSDP_ERR_CORRUPT, SECOND "[50000] is -1e-30");

  free(want);
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0 && !getenv("KEEP")) remove_tree(dir);
  TEST_OK(FSDPFinalize());
  return 0;
}
#endif
