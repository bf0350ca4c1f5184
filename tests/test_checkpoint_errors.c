/* Checkpoint verification and file handling: a flipped byte in a parameter
   or state dataset, a truncated file, a removed parameter, a changed shape,
   an unexpected dataset, a newer format, an optimizer of another type and a
   parameters-only file each fail on every rank with a message naming what
   is wrong, and change nothing; the non-strict mode loads what matches and
   reports the rest; keep-K rotation and the removal of a stale temporary;
   a float64 file loads into float32 parameters.
   mpitest: -n 2 */
#include "fsdp_config.h"

#ifndef FSDP_HAVE_HDF5
int main(void) { return 77; } /* built without HDF5: no checkpoints */
#else
#include <hdf5.h>

#include "checkpointtest.h"

#define SPEC "mlp:in=3,hidden=6,depth=2,out=2"

/* Rank 0 flips one byte of a dataset's values, where HDF5 stored them. */
static void flip_byte(const char *path, const char *dataset, int64_t at)
{
  if (rank == 0) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), ds = H5Dopen2(f, dataset, H5P_DEFAULT);
    haddr_t offset = H5Dget_offset(ds);
    FILE *fp;
    int c;
    TEST_ASSERT(offset != HADDR_UNDEF, "%s has no stored values", dataset);
    H5Dclose(ds);
    H5Fclose(f);
    fp = fopen(path, "r+b");
    fseek(fp, (long)(offset + (haddr_t)at), SEEK_SET);
    c = fgetc(fp);
    fseek(fp, (long)(offset + (haddr_t)at), SEEK_SET);
    fputc(c ^ 0x10, fp);
    fclose(fp);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 0 edits a file with the HDF5 library: remove a dataset, or
   (re)create one of shape [n] (n > 0), or set an integer root attribute. */
static void edit(const char *path, const char *remove, const char *create, hsize_t n, const char *attr, int value)
{
  if (rank == 0) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    TEST_ASSERT(f >= 0, "cannot open %s", path);
    if (remove) TEST_ASSERT(H5Ldelete(f, remove, H5P_DEFAULT) >= 0, "cannot remove %s", remove);
    if (create) {
      hid_t space = H5Screate_simple(1, &n, NULL);
      float *v = calloc(n, sizeof *v);
      hid_t ds = H5Dcreate2(f, create, H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      TEST_ASSERT(ds >= 0 && H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "cannot create %s",
                  create);
      H5Dclose(ds);
      H5Sclose(space);
      free(v);
    }
    if (attr) {
      hid_t a = H5Aopen(f, attr, H5P_DEFAULT);
      TEST_ASSERT(a >= 0 && H5Awrite(a, H5T_NATIVE_INT, &value) >= 0, "cannot set %s", attr);
      H5Aclose(a);
    }
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 0 renames datasets or groups of a file: a to b, then c to a (a swap with b = tmp), as h5py's move does. */
static void move_links(const char *path, const char *const *moves, int n)
{
  if (rank == 0) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    TEST_ASSERT(f >= 0, "cannot open %s", path);
    for (int i = 0; i < n; i++)
      TEST_ASSERT(H5Lmove(f, moves[2 * i], f, moves[2 * i + 1], H5P_DEFAULT, H5P_DEFAULT) >= 0, "cannot move %s to %s",
                  moves[2 * i], moves[2 * i + 1]);
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank 0 replaces dataset `name` of `to` by `from`'s (values and attributes, its checksum too). */
static void copy_dataset(const char *from, const char *to, const char *name)
{
  if (rank == 0) {
    hid_t src = H5Fopen(from, H5F_ACC_RDONLY, H5P_DEFAULT), dst = H5Fopen(to, H5F_ACC_RDWR, H5P_DEFAULT);
    TEST_ASSERT(src >= 0 && dst >= 0 && H5Ldelete(dst, name, H5P_DEFAULT) >= 0 &&
                    H5Ocopy(src, name, dst, name, H5P_DEFAULT, H5P_DEFAULT) >= 0,
                "cannot copy %s from %s to %s", name, from, to);
    H5Fclose(src);
    H5Fclose(dst);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Load must fail with `code` and a message containing `text`, on every
   rank, and leave the shards, the optimizer's step and the training state
   as they were. */
static void expect_failure(FSDPContext ctx, FSDPOptimizer opt, const char *path, FSDPErrorCode code, const char *text)
{
  float *before = shards(ctx), *after;
  int64_t step0 = -1, step1 = -2;
  FSDPTrainingState ts0, ts1;
  if (opt) TEST_OK(FSDPOptimizerGetStep(opt, &step0));
  TEST_OK(FSDPContextGetTrainingState(ctx, &ts0));
  TEST_CODE(code, FSDPContextLoad(ctx, opt, path));
  TEST_MESSAGE_HAS(text);
  after = shards(ctx);
  TEST_ASSERT(!memcmp(before, after, (size_t)shard_total(ctx) * sizeof(float)),
              "a failed load of %s changed the shards", path);
  if (opt) TEST_OK(FSDPOptimizerGetStep(opt, &step1));
  TEST_OK(FSDPContextGetTrainingState(ctx, &ts1));
  TEST_ASSERT((!opt || step0 == step1) && !memcmp(&ts0, &ts1, sizeof ts0),
              "a failed load of %s changed the optimizer step (%lld to %lld) or the training state", path,
              (long long)step0, (long long)step1);
  free(before);
  free(after);
}

/* A corrupt dataset in the last unit: the units before it load, it does not. */
static void corrupt_last_unit(FSDPContext ctx, FSDPOptimizer opt, const float *good)
{
  float *before = shards(ctx), *after;
  int nunits;
  FlatParam last;
  int64_t n, total = shard_total(ctx);
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  TEST_OK(FSDPContextGetUnit(ctx, nunits - 1, &last));
  TEST_OK(FlatParamGetSizes(last, NULL, NULL, &n));
  TEST_CODE(FSDP_ERR_CORRUPT, FSDPContextLoad(ctx, opt, file("flip-head.h5")));
  TEST_MESSAGE_HAS("checksum mismatch in /params/head.weight");
  TEST_MESSAGE_HAS("unit 'root' and those after it were not loaded");
  after = shards(ctx);
  TEST_ASSERT(!memcmp(after, good, (size_t)(total - n) * sizeof(float)),
              "the units before the corrupt one did not load");
  TEST_ASSERT(!memcmp(after + total - n, before + total - n, (size_t)n * sizeof(float)), "the corrupt unit changed");
  free(before);
  free(after);
}

static int64_t root_step(const char *path)
{
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), a;
  int64_t step = -1;
  TEST_ASSERT(f >= 0, "cannot open %s", path);
  a = H5Aopen(f, "step", H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_INT64, &step);
  H5Aclose(a);
  H5Fclose(f);
  return step;
}

/* A unit of float64 parameters saved, and loaded into float32 ones. */
static void test_conversion(void)
{
  FSDPContext c64, c32;
  FlatParam u;
  int64_t shape[2] = {3, 5}, n;
  void *v;
  double *d;
  float *f;

  c64 = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  TEST_OK(FSDPContextAddUnit(c64, "u", &u));
  TEST_OK(FlatParamSetDataType(u, FSDP_FLOAT64));
  TEST_OK(FlatParamAddParam(u, "w", 2, shape, NULL));
  TEST_OK(FSDPContextSetUp(c64));
  TEST_OK(FlatParamGetShard(u, &v, &n));
  d = v;
  for (int64_t i = 0; i < n; i++) d[i] = 1.0 / 3.0 + (double)(rank * n + i);
  TEST_OK(FSDPContextSave(c64, NULL, file("f64.h5")));
  TEST_OK(FSDPContextDestroy(&c64));

  c32 = test_context(MPI_COMM_WORLD, FSDP_NO_SHARD, 0);
  TEST_OK(FSDPContextAddUnit(c32, "v", &u));
  TEST_OK(FlatParamAddParam(u, "w", 2, shape, NULL));
  TEST_OK(FSDPContextSetUp(c32));
  TEST_OK(FSDPContextLoad(c32, NULL, file("f64.h5")));
  TEST_OK(FlatParamGetShard(u, &v, &n));
  f = v;
  for (int64_t i = 0; i < n; i++)
    TEST_ASSERT(f[i] == (float)(1.0 / 3.0 + (double)i), "element %lld loaded as %.9g, expected %.9g", (long long)i,
                f[i], (float)(1.0 / 3.0 + (double)i));
  /* A flipped byte in the float64 values is caught too: the checksum is the file's. */
  copy_file(file("f64.h5"), file("f64-flip.h5"));
  flip_byte(file("f64-flip.h5"), "/params/w", 17);
  TEST_CODE(FSDP_ERR_CORRUPT, FSDPContextLoad(c32, NULL, file("f64-flip.h5")));
  TEST_MESSAGE_HAS("checksum mismatch in /params/w");
  TEST_OK(FSDPContextDestroy(&c32));
}

/* Values that depend on the parameter's name and the element only. */
static float shape_value(const char *name, int64_t i) { return (float)(name[0] * 1000 + i) + 0.25f; }

static FSDPErrorCode fill_by_name(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values, void *user)
{
  const char *name;
  (void)user;
  FSDPCall(FlatParamGetParamInfo(unit, id, &name, NULL, NULL, NULL));
  for (int64_t i = begin; i < end; i++) ((float *)values)[i - begin] = shape_value(name, i);
  return FSDP_SUCCESS;
}

/* A scalar, empty tensors (one alone in its unit), a 3-d and a 4-d one whose
   shards end mid-row: saved under full sharding, loaded with every
   parameter in one unit on every rank (none), each value where it belongs. */
static void test_shapes(void)
{
  static const int64_t empty[2] = {0, 3}, cube[3] = {3, 5, 7}, four[4] = {2, 3, 1, 5}, none_[1] = {0};
  FSDPContext a, b;
  FlatParam u;
  void *v;
  int64_t n;

  a = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 0);
  TEST_OK(FSDPContextAddUnit(a, "u0", &u));
  TEST_OK(FlatParamAddParam(u, "scalar", 0, NULL, NULL));
  TEST_OK(FlatParamAddParam(u, "cube", 3, cube, NULL));
  TEST_OK(FlatParamAddParam(u, "empty", 2, empty, NULL));
  TEST_OK(FSDPContextAddUnit(a, "u1", &u));
  TEST_OK(FlatParamAddParam(u, "nothing", 1, none_, NULL));
  TEST_OK(FSDPContextAddUnit(a, "u2", &u));
  TEST_OK(FlatParamAddParam(u, "four", 4, four, NULL));
  TEST_OK(FSDPContextSetShardInit(a, fill_by_name, NULL));
  TEST_OK(FSDPContextSetUp(a));
  TEST_OK(FSDPContextSave(a, NULL, file("shapes.h5")));
  TEST_OK(FSDPContextDestroy(&a));

  b = test_context(MPI_COMM_WORLD, FSDP_NO_SHARD, 0);
  TEST_OK(FSDPContextAddUnit(b, "all", &u));
  TEST_OK(FlatParamAddParam(u, "four", 4, four, NULL));
  TEST_OK(FlatParamAddParam(u, "nothing", 1, none_, NULL));
  TEST_OK(FlatParamAddParam(u, "cube", 3, cube, NULL));
  TEST_OK(FlatParamAddParam(u, "empty", 2, empty, NULL));
  TEST_OK(FlatParamAddParam(u, "scalar", 0, NULL, NULL));
  TEST_OK(FSDPContextSetUp(b));
  TEST_OK(FSDPContextLoad(b, NULL, file("shapes.h5")));
  TEST_OK(FlatParamGetShard(u, &v, &n));
  for (int id = 0; id < 5; id++) {
    const char *name;
    int64_t begin, end, offset;
    TEST_OK(FlatParamGetParamInfo(u, id, &name, NULL, NULL, NULL));
    TEST_OK(FlatParamGetShardRange(u, id, &begin, &end, &offset));
    for (int64_t i = begin; i < end; i++)
      TEST_ASSERT(((float *)v)[offset + i - begin] == shape_value(name, i), "%s[%lld] loaded as %g, expected %g", name,
                  (long long)i, ((float *)v)[offset + i - begin], shape_value(name, i));
  }
  TEST_OK(FSDPContextDestroy(&b));
}

int main(int argc, char **argv)
{
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt, sgd;
  FlatParam unit;
  Capture cap;
  float *good, *now;
  int64_t total;
  char *text;

  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  make_scratch_dir("fsdp-test-ckerr");

  trained_job(SPEC, 1, &ctx, &model, &opt);
  TEST_OK(FSDPContextSave(ctx, opt, file("good.h5")));
  good = shards(ctx);
  total = shard_total(ctx);
  train(ctx, model, opt); /* the context now differs from the file */

  /* Files that must not load, each with its message. */
  expect_failure(ctx, opt, file("none.h5"), FSDP_ERR_IO, "cannot open");
  copy_file(file("good.h5"), file("flip.h5"));
  flip_byte(file("flip.h5"), "/params/blocks.0.fc.weight", 6);
  expect_failure(ctx, opt, file("flip.h5"), FSDP_ERR_CORRUPT, "checksum mismatch in /params/blocks.0.fc.weight");
  copy_file(file("good.h5"), file("flip-state.h5"));
  flip_byte(file("flip-state.h5"), "/optim/exp_avg_sq/blocks.0.fc.bias", 1);
  expect_failure(ctx, opt, file("flip-state.h5"), FSDP_ERR_CORRUPT,
                 "checksum mismatch in /optim/exp_avg_sq/blocks.0.fc.bias");
  { /* each transfer mode reads and checks the values its own way (POSIX and independent: a step at a time) */
    static const FSDPCheckpointIO modes[] = {FSDP_CHECKPOINT_IO_COLLECTIVE, FSDP_CHECKPOINT_IO_INDEPENDENT,
                                             FSDP_CHECKPOINT_IO_POSIX};
    for (int m = 0; m < 3; m++) {
      TEST_OK(FSDPContextSetCheckpointIO(ctx, modes[m]));
      expect_failure(ctx, opt, file("flip.h5"), FSDP_ERR_CORRUPT, "checksum mismatch in /params/blocks.0.fc.weight");
      expect_failure(ctx, opt, file("flip-state.h5"), FSDP_ERR_CORRUPT,
                     "checksum mismatch in /optim/exp_avg_sq/blocks.0.fc.bias");
    }
    TEST_OK(FSDPContextSetCheckpointIO(ctx, FSDP_CHECKPOINT_IO_AUTO));
  }
  copy_file(file("good.h5"), file("flip-head.h5"));
  flip_byte(file("flip-head.h5"), "/params/head.weight", 0);
  corrupt_last_unit(ctx, opt, good);
  train(ctx, model, opt);
  copy_file(file("good.h5"), file("short.h5"));
  if (rank == 0) {
    struct stat st;
    stat(file("short.h5"), &st);
    TEST_ASSERT(truncate(file("short.h5"), st.st_size / 2) == 0, "cannot truncate");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_failure(ctx, opt, file("short.h5"), FSDP_ERR_CORRUPT, "truncated");
  copy_file(file("good.h5"), file("missing.h5"));
  edit(file("missing.h5"), "/params/head.bias", NULL, 0, NULL, 0);
  expect_failure(ctx, opt, file("missing.h5"), FSDP_ERR_ARG, "does not match the model: missing /params/head.bias;");
  copy_file(file("good.h5"), file("shape.h5"));
  edit(file("shape.h5"), "/params/head.weight", "/params/head.weight", 12, NULL, 0);
  expect_failure(ctx, opt, file("shape.h5"), FSDP_ERR_ARG, "wrong shape /params/head.weight (file [12], model [2, 6])");
  copy_file(file("good.h5"), file("extra.h5"));
  edit(file("extra.h5"), NULL, "/params/extra.weight", 4, NULL, 0);
  expect_failure(ctx, opt, file("extra.h5"), FSDP_ERR_ARG, "not in the model /params/extra.weight;");
  /* More differences than a message holds: whole names, "... and N more", and the hint still at the end. */
  copy_file(file("good.h5"), file("many.h5"));
  for (int i = 0; i < 70; i++) {
    char name[96];
    snprintf(name, sizeof name, "/params/an.unexpected.dataset.with.a.long.name.%02d.weight", i);
    edit(file("many.h5"), NULL, name, 4, NULL, 0);
  }
  expect_failure(ctx, opt, file("many.h5"), FSDP_ERR_ARG, " more; (-fsdp_checkpoint_strict false loads what matches)");
  {
    const char *m, *more;
    FSDPGetLastError(NULL, &m, NULL);
    more = strstr(m, ", ... and ");
    int shown = 0;
    for (const char *p = strstr(m, "/params/an."); p; p = strstr(p + 1, "/params/an.")) shown++;
    TEST_ASSERT(more && shown > 0 && shown + atoi(more + strlen(", ... and ")) == 70,
                "%d names shown and '%s' do not add up to the 70 not in the model: %s", shown, more ? more : "", m);
    TEST_ASSERT(strlen(m) < 1000, "the message is %zu characters: it may be cut: %s", strlen(m), m);
  }
  { /* the same under a path of 850 characters: the lists get less room, and nothing overflows */
    char deep[1200], component[201];
    memset(component, 'd', 200);
    component[200] = '\0';
    snprintf(deep, sizeof deep, "%s", dir);
    for (int k = 0; k < 4; k++) {
      snprintf(deep + strlen(deep), sizeof deep - strlen(deep), "/%s", component);
      if (rank == 0) TEST_ASSERT(mkdir(deep, 0755) == 0, "cannot create %s", deep);
    }
    snprintf(deep + strlen(deep), sizeof deep - strlen(deep), "/many.h5");
    copy_file(file("many.h5"), deep);
    TEST_CODE(FSDP_ERR_ARG, FSDPContextLoad(ctx, opt, deep));
    TEST_MESSAGE_HAS("does not match the model");
  }
  copy_file(file("good.h5"), file("newer.h5"));
  edit(file("newer.h5"), NULL, NULL, 0, "format_version", 3);
  expect_failure(ctx, opt, file("newer.h5"), FSDP_ERR_UNSUPPORTED, "has checkpoint format 3");

  /* Datasets that each verify alone, in the wrong place: each checksum is bound to its name and its file. */
  copy_file(file("good.h5"), file("swap.h5")); /* two parameters of one shape, swapped */
  move_links(file("swap.h5"),
             (const char *const[]){"/params/blocks.0.fc.bias", "/params/tmp", "/params/blocks.1.fc.bias",
                                   "/params/blocks.0.fc.bias", "/params/tmp", "/params/blocks.1.fc.bias"},
             3);
  expect_failure(ctx, opt, file("swap.h5"), FSDP_ERR_CORRUPT, "checksum mismatch in /params/blocks.0.fc.bias");
  copy_file(file("good.h5"), file("states.h5")); /* AdamW's two moments, swapped */
  move_links(file("states.h5"),
             (const char *const[]){"/optim/exp_avg", "/optim/tmp", "/optim/exp_avg_sq", "/optim/exp_avg", "/optim/tmp",
                                   "/optim/exp_avg_sq"},
             3);
  expect_failure(ctx, opt, file("states.h5"), FSDP_ERR_CORRUPT, "checksum mismatch in /optim/exp_avg/");
  copy_file(file("good.h5"), file("soft.h5")); /* one parameter a soft link to another */
  if (rank == 0) {
    hid_t f = H5Fopen(file("soft.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
    TEST_ASSERT(
        H5Ldelete(f, "/params/blocks.1.fc.bias", H5P_DEFAULT) >= 0 &&
            H5Lcreate_soft("/params/blocks.0.fc.bias", f, "/params/blocks.1.fc.bias", H5P_DEFAULT, H5P_DEFAULT) >= 0,
        "cannot make the soft link");
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_failure(ctx, opt, file("soft.h5"), FSDP_ERR_CORRUPT, "/params/blocks.1.fc.bias is a soft link");
  TEST_OK(FSDPContextSave(ctx, opt, file("later.h5"))); /* a later save of the same run, one dataset from good.h5 */
  copy_dataset(file("good.h5"), file("later.h5"), "/params/head.bias");
  expect_failure(ctx, opt, file("later.h5"), FSDP_ERR_CORRUPT, "checksum mismatch in /params/head.bias");
  copy_file(file("good.h5"), file("negative.h5")); /* forged with a valid checksum: still impossible */
  forge_value(file("negative.h5"), "/optim/exp_avg_sq/blocks.0.fc.bias", -1, -1.0f);
  expect_failure(ctx, opt, file("negative.h5"), FSDP_ERR_CORRUPT,
                 "/optim/exp_avg_sq/blocks.0.fc.bias[0] is -1: AdamW's second moment is never negative");
  copy_file(file("good.h5"), file("nocrc.h5")); /* the metadata checksum deleted, the step edited in both places */
  if (rank == 0) {
    hid_t f = H5Fopen(file("nocrc.h5"), H5F_ACC_RDWR, H5P_DEFAULT), a, b;
    int64_t step = 1000;
    TEST_ASSERT(H5Adelete(f, "metadata_crc32c") >= 0, "cannot delete metadata_crc32c");
    a = H5Aopen(f, "step", H5P_DEFAULT);
    b = H5Aopen_by_name(f, "optim", "step", H5P_DEFAULT, H5P_DEFAULT);
    TEST_ASSERT(H5Awrite(a, H5T_NATIVE_INT64, &step) >= 0 && H5Awrite(b, H5T_NATIVE_INT64, &step) >= 0,
                "cannot edit the step");
    H5Aclose(a);
    H5Aclose(b);
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_failure(ctx, opt, file("nocrc.h5"), FSDP_ERR_CORRUPT,
                 "format_version 2 always has the root attribute metadata_crc32c, and it is missing");
  TEST_OK(FSDPOptimizerCreate(ctx, &sgd));
  TEST_OK(FSDPOptimizerSetType(sgd, FSDP_OPTIMIZER_SGD));
  TEST_OK(FSDPOptimizerSetMomentum(sgd, 0.9, false));
  TEST_OK(FSDPOptimizerSetUp(sgd));
  expect_failure(ctx, sgd, file("good.h5"), FSDP_ERR_ARG, "holds the state of an adamw optimizer, not sgd");
  TEST_OK(FSDPOptimizerDestroy(&sgd));
  /* State saved under parameter groups resumes those groups only. */
  TEST_OK(FSDPOptimizerCreate(ctx, &sgd));
  TEST_OK(FSDPOptimizerAddParamGroup(sgd, "*.bias", 0.0, 1.0));
  TEST_OK(FSDPOptimizerSetUp(sgd));
  TEST_OK(FSDPContextSave(ctx, sgd, file("grouped.h5")));
  expect_failure(ctx, opt, file("grouped.h5"), FSDP_ERR_ARG,
                 "was saved with the parameter groups '*.bias: weight decay 0, lr x1' and this optimizer has '(none)'");
  expect_failure(ctx, sgd, file("good.h5"), FSDP_ERR_ARG,
                 "saved with the parameter groups '(none)' and this optimizer has '*.bias: weight decay 0, lr x1'");
  TEST_OK(FSDPContextLoad(ctx, sgd, file("grouped.h5")));
  TEST_OK(FSDPOptimizerDestroy(&sgd));
  { /* more groups than a short text holds, told apart in their last digits */
    FSDPOptimizer many[2];
    for (int o = 0; o < 2; o++) {
      TEST_OK(FSDPOptimizerCreate(ctx, &many[o]));
      for (int g = 0; g < 60; g++)
        TEST_OK(FSDPOptimizerAddParamGroup(many[o], "*", g < 59 || !o ? 1e-7 : 1.0000001e-7, 1));
      TEST_OK(FSDPOptimizerSetUp(many[o]));
    }
    TEST_OK(FSDPContextSave(ctx, many[0], file("many-groups.h5")));
    TEST_OK(FSDPContextLoad(ctx, many[0], file("many-groups.h5")));
    expect_failure(ctx, many[1], file("many-groups.h5"), FSDP_ERR_ARG, "was saved with the parameter groups");
    for (int o = 0; o < 2; o++) TEST_OK(FSDPOptimizerDestroy(&many[o]));
  }
  TEST_OK(FSDPContextGetUnit(ctx, 0, &unit));
  TEST_OK(FlatParamUnshard(unit));
  TEST_CODE(FSDP_ERR_STATE, FSDPContextLoad(ctx, opt, file("good.h5")));
  TEST_MESSAGE_HAS("unit 'blocks.0' is unsharded: load between steps");
  TEST_OK(FlatParamReshard(unit));

  /* Settings changed after SetUp on one rank only: refused on every rank, naming the setting (it hung in the first save). */
  TEST_OK(FSDPContextSetCheckpointIO(ctx, rank == 1 ? FSDP_CHECKPOINT_IO_INDEPENDENT : FSDP_CHECKPOINT_IO_COLLECTIVE));
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSave(ctx, opt, file("mixed.h5")));
  TEST_MESSAGE_HAS("-fsdp_checkpoint_io differs across ranks: rank 0 has collective, rank 1 has independent");
  TEST_CODE(FSDP_ERR_ARG, FSDPContextLoad(ctx, opt, file("good.h5")));
  TEST_OK(FSDPContextSetCheckpointIO(ctx, FSDP_CHECKPOINT_IO_AUTO));
  TEST_OK(FSDPContextSetCheckFinite(ctx, rank == 1));
  TEST_CODE(FSDP_ERR_ARG, FSDPContextLoad(ctx, opt, file("good.h5")));
  TEST_MESSAGE_HAS("-fsdp_check_finite differs across ranks");
  TEST_OK(FSDPContextSetCheckFinite(ctx, true));
  TEST_ASSERT(!exists(file("mixed.h5.partial")) && !exists(file("mixed.h5")), "a refused save left a file");

  /* A directory where the checkpoint goes: refused before anything is written. */
  if (rank == 0) TEST_ASSERT(mkdir(file("dir.h5"), 0755) == 0, "cannot create %s", file("dir.h5"));
  MPI_Barrier(MPI_COMM_WORLD);
  TEST_CODE(FSDP_ERR_IO, FSDPContextSave(ctx, opt, file("dir.h5")));
  TEST_MESSAGE_HAS("dir.h5' is a directory: a checkpoint is a file");
  TEST_ASSERT(!exists(file("dir.h5.partial")), "a refused save left %s", file("dir.h5.partial"));
  TEST_CODE(FSDP_ERR_IO, FSDPContextLoad(ctx, opt, file("dir.h5"))); /* and a load from one */
  TEST_MESSAGE_HAS("dir.h5' is a directory: a checkpoint is a file");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) rmdir(file("dir.h5"));

  /* Links are followed: the save replaces the target, kept copies sit beside
     it, the link stays a link; a stale temporary that is a link (dangling: a
     save through it would create its target) is removed, and so is a link
     where the save probes for room, their targets untouched. */
  if (rank == 0) {
    FILE *f = fopen(file("untouched"), "w");
    TEST_ASSERT(f && fputs("mine", f) >= 0 && fclose(f) == 0, "cannot write %s", file("untouched"));
    TEST_ASSERT(mkdir(file("real"), 0755) == 0 && symlink("real/run.h5", file("link.h5")) == 0 &&
                    symlink("../not-yet", file("real/run.h5.partial")) == 0 &&
                    symlink("../untouched", file("real/run.h5.partial.reserve")) == 0,
                "cannot make the links");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  TEST_OK(FSDPContextSetCheckpointKeep(ctx, 2));
  TEST_OK(FSDPContextSave(ctx, opt, file("link.h5")));
  TEST_OK(FSDPContextSave(ctx, opt, file("link.h5")));
  TEST_OK(FSDPContextSetCheckpointKeep(ctx, 1));
  if (rank == 0) {
    struct stat st;
    char buf[8] = "";
    FILE *f = fopen(file("untouched"), "r");
    TEST_ASSERT(lstat(file("link.h5"), &st) == 0 && S_ISLNK(st.st_mode), "the save replaced the link itself");
    TEST_ASSERT(exists(file("real/run.h5")) && exists(file("real/run.h5.1")),
                "no checkpoint and kept copy at the target");
    TEST_ASSERT(lstat(file("real/run.h5.partial"), &st) != 0, "the stale temporary link is still there");
    TEST_ASSERT(!exists(file("not-yet")), "the save created the target of a dangling link in its way");
    TEST_ASSERT(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "mine"), "the probe link's target changed");
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  TEST_OK(FSDPContextLoad(ctx, opt, file("link.h5")));

  /* A parameters-only file: not for an optimizer, fine without one. */
  TEST_OK(FSDPContextSave(ctx, NULL, file("params.h5")));
  expect_failure(ctx, opt, file("params.h5"), FSDP_ERR_ARG, "has parameters only (no /optim)");
  TEST_OK(FSDPContextLoad(ctx, opt, file("good.h5")));
  now = shards(ctx);
  TEST_ASSERT(!memcmp(now, good, (size_t)total * sizeof(float)), "the good file did not load");
  free(now);

  /* Non-strict: what matches loads, the rest is reported and left alone. */
  train(ctx, model, opt);
  TEST_OK(FSDPContextSetCheckpointStrict(ctx, false));
  capture_begin(&cap, 2);
  TEST_OK(FSDPContextLoad(ctx, opt, file("grouped.h5")));
  text = capture_end(&cap);
  if (rank == 0)
    TEST_ASSERT(strstr(text, "saved with the parameter groups '*.bias: weight decay 0, lr x1'; going on with '(none)'"),
                "the non-strict note on other groups is '%s'", text);
  free(text);
  capture_begin(&cap, 2);
  TEST_OK(FSDPContextLoad(ctx, opt, file("missing.h5")));
  text = capture_end(&cap);
  if (rank == 0)
    TEST_ASSERT(strstr(text, "loaded 5 parameters; not loaded: missing /params/head.bias;"),
                "the non-strict report is '%s'", text);
  free(text);
  {
    FSDPParamId id;
    int64_t begin, end, offset, last_shard, skip;
    now = shards(ctx);
    TEST_OK(FSDPContextFindParam(ctx, "head.bias", &unit, &id));
    TEST_OK(FlatParamGetShardRange(unit, id, &begin, &end, &offset));
    TEST_OK(FlatParamGetSizes(unit, NULL, NULL, &last_shard));
    skip = total - last_shard + offset; /* head.bias, in the last unit, is where this rank's shards differ */
    for (int64_t i = 0; i < total; i++)
      if (i < skip || i >= skip + (end - begin))
        TEST_ASSERT(now[i] == good[i], "non-strict: element %lld of the shards was not loaded", (long long)i);
    TEST_ASSERT(end == begin || memcmp(now + skip, good + skip, (size_t)(end - begin) * sizeof(float)),
                "non-strict: head.bias, missing from the file, changed");
    free(now);
  }
  /* ... and a parameters-only file loads into a job with an optimizer, saying the state is not there. */
  capture_begin(&cap, 2);
  TEST_OK(FSDPContextLoad(ctx, opt, file("params.h5")));
  text = capture_end(&cap);
  if (rank == 0)
    TEST_ASSERT(strstr(text, "loaded 6 parameters and no optimizer state (the file has none)"),
                "the non-strict report is '%s'", text);
  free(text);
  TEST_OK(FSDPContextSetCheckpointStrict(ctx, true));

  /* keep 3: k.h5 is the newest, then k.h5.1 and k.h5.2; a stale temporary goes. */
  TEST_OK(FSDPContextSetCheckpointKeep(ctx, 3));
  if (rank == 0) {
    FILE *fp = fopen(file("k.h5.partial"), "w");
    fputs("left by a save that was killed", fp);
    fclose(fp);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  capture_begin(&cap, 2);
  for (int s = 0; s < 4; s++) {
    train(ctx, model, opt);
    TEST_OK(FSDPContextSave(ctx, opt, file("k.h5")));
  }
  text = capture_end(&cap);
  if (rank == 0) {
    int64_t step = root_step(file("k.h5"));
    TEST_ASSERT(strstr(text, "k.h5.partial', left by an interrupted save"), "no word of the stale temporary: '%s'",
                text);
    TEST_ASSERT(!exists(file("k.h5.partial")) && exists(file("k.h5.2")) && !exists(file("k.h5.3")),
                "keep 3 left the wrong files");
    TEST_ASSERT(root_step(file("k.h5.1")) == step - 1 && root_step(file("k.h5.2")) == step - 2,
                "k.h5, .1, .2 have steps %lld, %lld, %lld", (long long)step, (long long)root_step(file("k.h5.1")),
                (long long)root_step(file("k.h5.2")));
  }
  free(text);
  TEST_CODE(FSDP_ERR_ARG, FSDPContextSetCheckpointKeep(ctx, 0));
  TEST_MESSAGE_HAS("keep 0 must be at least 1");

  /* Freezing after the optimizer's set-up leaves its state packed for the old set: refused (last: opt is out of step with the context from here on). */
  {
    FSDPParamId id;
    TEST_OK(FSDPContextFindParam(ctx, "blocks.0.fc.bias", &unit, &id));
    TEST_OK(FlatParamSetTrainable(unit, id, false));
    TEST_CODE(FSDP_ERR_STATE, FSDPContextSave(ctx, opt, file("frozen.h5")));
    TEST_MESSAGE_HAS("frozen or unfrozen after FSDPOptimizerSetUp");
    TEST_CODE(FSDP_ERR_STATE, FSDPContextLoad(ctx, opt, file("good.h5")));
  }

  test_conversion();
  test_shapes();
  free(good);
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
  if (rank == 0) remove_tree(dir); /* every file, link and folder the test made */
  TEST_OK(FSDPFinalize());
  return 0;
}
#endif
