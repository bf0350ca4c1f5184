/* Damaged checkpoints never load as something else.  A sweep flips one byte
   of a good checkpoint at a time, over its metadata (every 7th byte; every
   FSDP_FUZZ_STRIDE-th with that set: 1 tries them all, in about 30 s) and at
   every 13th byte of its data, and loads each copy: it must either fail with FSDP_ERR_CORRUPT and a
   message that says the file is damaged or corrupt, or load exactly the saved
   state (parameters, step, training state, and the optimizer state, seen
   through one more step).  Then each root attribute is deleted and edited;
   with the metadata checksum removed, the range and cross checks refuse the
   edits on their own.  Non-finite values are neither saved nor loaded
   unless -fsdp_check_finite is off.
   mpitest: -n 2 */
#include "fsdp_config.h"

#ifndef FSDP_HAVE_HDF5
int main(void) { return 77; } /* built without HDF5: no checkpoints */
#else
#include <hdf5.h>
#include <math.h>

#include "checkpointtest.h"

#define SPEC "mlp:in=3,hidden=4,depth=1,out=2"

/* What a load must restore. */
typedef struct {
  float *shards, *next; /* the shards, and the shards one step later */
  int64_t total, step;
  FSDPTrainingState ts;
} State;

/* Whether the context holds `want`; it then takes a step, which also reads the optimizer state. */
static bool holds(FSDPContext ctx, FSDPModel model, FSDPOptimizer opt, const State *want, const char **what)
{
  int64_t step, total = shard_total(ctx);
  FSDPTrainingState ts;
  float *now = shards(ctx);
  bool same = total == want->total && !memcmp(now, want->shards, (size_t)total * sizeof *now);
  free(now);
  *what = "the parameters";
  if (!same) return false;
  TEST_OK(FSDPOptimizerGetStep(opt, &step));
  TEST_OK(FSDPContextGetTrainingState(ctx, &ts));
  *what = "the step or the training state";
  if (step != want->step || memcmp(&ts, &want->ts, sizeof ts)) return false;
  train(ctx, model, opt);
  now = shards(ctx);
  same = !memcmp(now, want->next, (size_t)total * sizeof *now);
  free(now);
  *what = "the optimizer state (the next step differs)";
  return same;
}

static void write_bytes(const char *path, const unsigned char *bytes, size_t n)
{
  FILE *fp = fopen(path, "wb");
  TEST_ASSERT(fp && fwrite(bytes, 1, n, fp) == n && fclose(fp) == 0, "cannot write %s", path);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
  FILE *fp = fopen(path, "rb");
  struct stat st;
  unsigned char *b;
  TEST_ASSERT(fp && stat(path, &st) == 0, "cannot read %s", path);
  b = malloc((size_t)st.st_size + 1);
  TEST_ASSERT(fread(b, 1, (size_t)st.st_size, fp) == (size_t)st.st_size, "cannot read %s", path);
  fclose(fp);
  *n = (size_t)st.st_size;
  return b;
}

/* Marks the bytes that hold the datasets' values. */
typedef struct {
  char *is_data;
  size_t n;
} DataMap;

static herr_t mark_data(hid_t loc, const char *name, const LinkInfo *info, void *arg)
{
  DataMap *m = arg;
  hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT); /* fails, quietly, on a group */
  (void)info;
  if (ds >= 0) {
    haddr_t at = H5Dget_offset(ds);
    hsize_t size = H5Dget_storage_size(ds);
    for (hsize_t i = 0; at != HADDR_UNDEF && i < size && at + i < m->n; i++) m->is_data[at + i] = 1;
    H5Dclose(ds);
  }
  return 0;
}

/* Loads `path` after resetting the context from `reset`: a failure must be
   damage, a success the saved state.  Returns whether it loaded. */
static bool check_load(FSDPContext ctx, FSDPModel model, FSDPOptimizer opt, const char *reset, const char *path,
                       const State *want, const char *label)
{
  FSDPErrorCode code;
  const char *msg, *what;
  TEST_OK(FSDPContextLoad(ctx, opt, reset));
  code = FSDPContextLoad(ctx, opt, path);
  FSDPGetLastError(NULL, &msg, NULL);
  /* Every object the load opened is closed again, whatever failed (valgrind.supp relies on it). */
  TEST_ASSERT(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0, "%s: the load left %lld HDF5 objects open", label,
              (long long)H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL));
  if (code) {
    TEST_ASSERT(code == FSDP_ERR_CORRUPT && strstr(msg, path) && (strstr(msg, "damaged") || strstr(msg, "corrupt")),
                "%s: refused with code %d and a message that does not say the file is damaged: %s", label, (int)code,
                msg);
    return false;
  }
  TEST_ASSERT(holds(ctx, model, opt, want, &what), "%s: loaded without an error, but %s differ from the saved ones",
              label, what);
  return true;
}

/* Every stride-th metadata byte and a sample of data bytes, each flipped in turn. */
static void sweep(FSDPContext ctx, FSDPModel model, FSDPOptimizer opt, const State *want, long stride)
{
  unsigned char *bytes = NULL;
  size_t n = 0;
  DataMap map = {NULL, 0};
  long counts[4] = {0, 0, 0, 0}; /* metadata refused, metadata loaded, data refused, data loaded */
  double t0 = MPI_Wtime();

  if (rank == 0) {
    hid_t f;
    bytes = read_bytes(file("good.h5"), &n);
    map.n = n;
    map.is_data = calloc(n + 1, 1);
    f = H5Fopen(file("good.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    TEST_ASSERT(f >= 0 && VISIT(f, H5_INDEX_NAME, H5_ITER_INC, mark_data, &map) >= 0, "cannot map good.h5");
    H5Fclose(f);
  }
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  if (rank) map.is_data = calloc(n + 1, 1);
  MPI_Bcast(map.is_data, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
  for (size_t at = 0, data_seen = 0; at < n; at++) {
    char label[96];
    bool data = map.is_data[at], loaded;
    /* Data bytes: every 13th, so each dataset is hit and its checksum is what refuses it. */
    if (data ? data_seen++ % 13 != 0 : (long)at % stride != 0) continue;
    if (rank == 0) {
      unsigned char c = bytes[at];
      bytes[at] ^= (unsigned char)(at % 2 ? 0x01 : 0x80);
      write_bytes(file("flip.h5"), bytes, n);
      bytes[at] = c;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    snprintf(label, sizeof label, "byte %zu of %zu (%s) flipped", at, n, data ? "data" : "metadata");
    loaded = check_load(ctx, model, opt, file("other.h5"), file("flip.h5"), want, label);
    counts[2 * data + loaded]++;
  }
  if (rank == 0)
    printf("sweep of %zu bytes, every %ld metadata byte(s) and every 13th data byte in %.1f s: metadata %ld refused, "
           "%ld loaded the saved state; data %ld refused, %ld loaded it\n",
           n, stride, MPI_Wtime() - t0, counts[0], counts[1], counts[2], counts[3]);
  /* A flipped data byte always changes a value: its checksum must refuse it. */
  TEST_ASSERT(counts[3] == 0 && counts[2] > 0, "flipped data bytes: %ld loaded, %ld refused", counts[3], counts[2]);
  TEST_ASSERT(counts[0] > 0, "no flipped metadata byte was refused");
  free(bytes);
  free(map.is_data);
}

/* Rank 0 edits a copy of good.h5: deletes attribute `name` of `group`, or
   writes `value` into it (an int64 or int attribute, as stored), or sets a
   string attribute; optionally deletes the metadata checksum too. */
typedef enum { DELETE, SET_INT, SET_STRING, CHANGE } EditKind;

/* An older file: format 1 had each dataset's crc32c over its values alone,
   no file_id, and (before the metadata checksum) no metadata_crc32c. */
static herr_t unbind_crc(hid_t f, const char *name, const LinkInfo *info, void *arg)
{
  hid_t o = H5Oopen(f, name, H5P_DEFAULT), type, space;
  (void)info;
  (void)arg;
  if (H5Iget_type(o) == H5I_DATASET) {
    size_t bytes;
    unsigned char *buf;
    type = H5Dget_type(o);
    space = H5Dget_space(o);
    bytes = (size_t)H5Sget_simple_extent_npoints(space) * H5Tget_size(type);
    buf = malloc(bytes + 1);
    TEST_ASSERT(H5Dread(o, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0, "cannot read %s", name);
    put_crc(o, name, crc32c_extend(0, buf, bytes));
    free(buf);
    H5Sclose(space);
    H5Tclose(type);
  }
  H5Oclose(o);
  return 0;
}

static void make_format1(hid_t f)
{
  hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
  int one = 1;
  TEST_ASSERT(a >= 0 && H5Awrite(a, H5T_NATIVE_INT, &one) >= 0, "cannot set format_version");
  H5Aclose(a);
  if (H5Aexists(f, "file_id") > 0) TEST_ASSERT(H5Adelete(f, "file_id") >= 0, "cannot delete file_id");
  TEST_ASSERT(VISIT(f, H5_INDEX_NAME, H5_ITER_INC, unbind_crc, NULL) >= 0, "cannot rewrite the checksums");
}

static void edit(const char *path, const char *group, const char *name, EditKind kind, long long value,
                 const char *text, bool drop_crc)
{
  if (rank == 0) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), g = H5Oopen(f, group, H5P_DEFAULT), a, type, space;
    TEST_ASSERT(f >= 0 && g >= 0, "cannot open %s in %s", group, path);
    if (drop_crc) make_format1(f); /* a format-1 file from before the metadata checksum, then the edit */
    if (kind == DELETE) TEST_ASSERT(H5Adelete(g, name) >= 0, "cannot delete %s", name);
    else {
      a = H5Aopen(g, name, H5P_DEFAULT);
      TEST_ASSERT(a >= 0, "no attribute %s in %s", name, group);
      type = H5Aget_type(a);
      space = H5Aget_space(a);
      if (kind == SET_STRING) {
        hid_t mem = H5Tcopy(type);
        char buf[256] = "";
        snprintf(buf, sizeof buf, "%s", text);
        TEST_ASSERT(H5Awrite(a, mem, buf) >= 0, "cannot set %s", name);
        H5Tclose(mem);
      } else {
        /* Read every value as stored, change the first one, write them back. */
        size_t size = H5Tget_size(type);
        hssize_t np = H5Sget_simple_extent_npoints(space);
        unsigned char *buf = calloc((size_t)np, size);
        TEST_ASSERT(H5Aread(a, type, buf) >= 0, "cannot read %s", name);
        if (kind == CHANGE) buf[0] ^= 1;
        else if (size == 8) memcpy(buf, &(int64_t){value}, 8);
        else memcpy(buf, &(int32_t){(int32_t)value}, 4);
        TEST_ASSERT(H5Awrite(a, type, buf) >= 0, "cannot write %s", name);
        free(buf);
      }
      H5Sclose(space);
      H5Tclose(type);
      H5Aclose(a);
    }
    if (drop_crc) TEST_ASSERT(H5Adelete(f, "metadata_crc32c") >= 0, "cannot delete metadata_crc32c");
    H5Oclose(g);
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

static void expect_refused(FSDPContext ctx, FSDPOptimizer opt, const char *path, FSDPErrorCode code, const char *text)
{
  TEST_OK(FSDPContextLoad(ctx, opt, file("other.h5")));
  TEST_CODE(code, FSDPContextLoad(ctx, opt, path));
  TEST_MESSAGE_HAS(text);
}

static herr_t collect_name(hid_t loc, const char *name, const H5A_info_t *info, void *arg)
{
  char(*names)[64] = arg;
  int k = 0;
  (void)loc;
  (void)info;
  while (names[k][0]) k++;
  if (k < 31) snprintf(names[k], 64, "%s", name);
  return 0;
}

static void attribute_edits(FSDPContext ctx, FSDPModel model, FSDPOptimizer opt, const State *want)
{
  char names[32][64], e[320];
  memset(names, 0, sizeof names);
  snprintf(e, sizeof e, "%s", file("edit.h5")); /* file()'s buffers are reused */
  if (rank == 0) {
    hid_t f = H5Fopen(file("good.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    H5Aiterate2(f, H5_INDEX_NAME, H5_ITER_INC, NULL, collect_name, names);
    H5Fclose(f);
  }
  MPI_Bcast(names, sizeof names, MPI_CHAR, 0, MPI_COMM_WORLD);
  TEST_ASSERT(!strcmp(names[0], "creation_time") && names[13][0] && !names[14][0],
              "expected the 14 root attributes of doc/checkpoint-format.md, from creation_time");

  /* Each root attribute deleted, or its first byte changed: refused, never loaded as something else. */
  for (int k = 0; names[k][0]; k++) {
    bool is_crc = !strcmp(names[k], "metadata_crc32c");
    copy_file(file("good.h5"), e);
    edit(e, "/", names[k], DELETE, 0, NULL, false);
    if (is_crc) { /* format 2 always has it; a format-1 file from before the checksum loads, its values checked */
      const char *what;
      expect_refused(ctx, opt, e, FSDP_ERR_CORRUPT, "format_version 2 always has the root attribute metadata_crc32c");
      copy_file(file("good.h5"), e);
      edit(e, "/", "creation_time", SET_STRING, 0, "2026-01-01T00:00:00Z", true);
      TEST_OK(FSDPContextLoad(ctx, opt, file("other.h5")));
      TEST_OK(FSDPContextLoad(ctx, opt, e));
      TEST_ASSERT(holds(ctx, model, opt, want, &what), "a format-1 file without metadata_crc32c: %s differ", what);
    } else expect_refused(ctx, opt, e, FSDP_ERR_CORRUPT, "is damaged");
    copy_file(file("good.h5"), e);
    edit(e, "/", names[k], CHANGE, 0, NULL, false);
    if (!strcmp(names[k], "format_version")) /* 2 became 3: a newer format, which this library cannot check */
      expect_refused(ctx, opt, e, FSDP_ERR_UNSUPPORTED, "has checkpoint format 3");
    else expect_refused(ctx, opt, e, FSDP_ERR_CORRUPT, is_crc ? "fail their checksum" : "is damaged");
  }
  /* The /optim attributes the load uses are under the checksum too. */
  copy_file(file("good.h5"), e);
  edit(e, "/optim", "step", SET_INT, 3, NULL, false);
  expect_refused(ctx, opt, e, FSDP_ERR_CORRUPT, "the attributes of / and /optim fail their checksum");
  copy_file(file("good.h5"), e);
  edit(e, "/optim", "lr", CHANGE, 0, NULL, false);
  expect_refused(ctx, opt, e, FSDP_ERR_CORRUPT, "fail their checksum");

  /* Without the checksum, the checks of each value still refuse edits. */
  struct {
    const char *group, *name;
    EditKind kind;
    long long value;
    const char *text, *message;
    FSDPErrorCode code;
  } cases[] = {
      {"/", "step", SET_INT, -5, NULL, "step -5 and data_cursor 5 must not be negative", FSDP_ERR_CORRUPT},
      {"/", "data_cursor", SET_INT, -1, NULL, "data_cursor -1 must not be negative", FSDP_ERR_CORRUPT},
      {"/", "step", SET_INT, 30, NULL, "the root says step 30, /optim says step 2", FSDP_ERR_CORRUPT},
      {"/optim", "step", SET_INT, 3, NULL, "the root says step 2, /optim says step 3", FSDP_ERR_CORRUPT},
      {"/", "format_version", SET_INT, 0, NULL, "format_version 0 is not a version", FSDP_ERR_CORRUPT},
      {"/", "format_version", DELETE, 0, NULL, "the attribute format_version of / is missing", FSDP_ERR_CORRUPT},
      {"/", "format_version", SET_INT, 3, NULL, "has checkpoint format 3", FSDP_ERR_UNSUPPORTED},
      {"/", "format", SET_STRING, 0, "libfsdp checkpoinX", "format is 'libfsdp checkpoinX'", FSDP_ERR_CORRUPT},
      {"/", "format", DELETE, 0, NULL, "the root attribute format_version of a libfsdp checkpoint but not format",
       FSDP_ERR_CORRUPT},
      {"/", "step", DELETE, 0, NULL, "the attribute step of / is missing", FSDP_ERR_CORRUPT},
      {"/", "sharding_factor", SET_INT, 3, NULL, "sharding_factor 3 does not divide world_size 2", FSDP_ERR_CORRUPT},
      {"/", "sharding_strategy", SET_STRING, 0, "fool", "sharding_strategy 'fool' is not a strategy", FSDP_ERR_CORRUPT},
      {"/optim", "type", DELETE, 0, NULL, "the attribute type of /optim is missing", FSDP_ERR_CORRUPT},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    copy_file(file("good.h5"), e);
    edit(e, cases[k].group, cases[k].name, cases[k].kind, cases[k].value, cases[k].text, true);
    expect_refused(ctx, opt, e, cases[k].code, cases[k].message);
  }
}

/* NaN is not saved, and a file holding one is not loaded, unless -fsdp_check_finite is off. */
static void non_finite(FSDPContext ctx, FSDPOptimizer opt)
{
  FlatParam unit;
  void *v;
  int64_t n;
  float keep;
  TEST_OK(FSDPContextLoad(ctx, opt, file("good.h5")));
  TEST_OK(FSDPContextGetUnit(ctx, 0, &unit));
  TEST_OK(FlatParamGetShard(unit, &v, &n));
  keep = ((float *)v)[0];
  if (rank == 1) ((float *)v)[0] = NAN; /* one rank's shard: the error must still stop every rank */
  TEST_CODE(FSDP_ERR_NOT_FINITE, FSDPContextSave(ctx, opt, file("nan.h5")));
  if (rank == 1) TEST_MESSAGE_HAS("is nan: non-finite parameters or optimizer state are not saved");
  else TEST_MESSAGE_HAS("on rank 1");
  TEST_ASSERT(!exists(file("nan.h5")) && !exists(file("nan.h5.partial")), "a refused save left a file");
  TEST_OK(FSDPContextSetCheckFinite(ctx, false));
  TEST_OK(FSDPContextSave(ctx, opt, file("nan.h5")));
  TEST_OK(FSDPContextSetCheckFinite(ctx, true));
  ((float *)v)[0] = keep;
  TEST_OK(FSDPContextLoad(ctx, opt, file("good.h5")));
  TEST_CODE(FSDP_ERR_NOT_FINITE, FSDPContextLoad(ctx, opt, file("nan.h5")));
  if (rank == 1) TEST_MESSAGE_HAS("the file holds non-finite values");
  TEST_OK(FlatParamGetShard(unit, &v, &n));
  TEST_ASSERT(!isnan(((float *)v)[0]), "a refused load put the NaN into the shard");
  TEST_OK(FSDPContextSetCheckFinite(ctx, false));
  TEST_OK(FSDPContextLoad(ctx, opt, file("nan.h5")));
  TEST_OK(FlatParamGetShard(unit, &v, &n));
  TEST_ASSERT(rank != 1 || isnan(((float *)v)[0]), "-fsdp_check_finite false did not load the NaN");
  TEST_OK(FSDPContextSetCheckFinite(ctx, true));
}

int main(int argc, char **argv)
{
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  State want;
  const char *env = getenv("FSDP_FUZZ_STRIDE");
  /* Under valgrind (make check-valgrind) each load costs ~50 times more: a sparser sample. */
  long stride = env && atol(env) > 0 ? atol(env) : getenv("FSDP_TEST_WRAPPER") ? 101 : 7;

  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  make_scratch_dir("fsdp-test-damage");
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the test's own HDF5 calls */

  trained_job(SPEC, 2, &ctx, &model, &opt);
  want.ts = (FSDPTrainingState){2, 5, {7, 8, 9, 10}};
  TEST_OK(FSDPContextSetTrainingState(ctx, &want.ts));
  TEST_OK(FSDPContextSave(ctx, opt, file("good.h5")));
  want.shards = shards(ctx);
  want.total = shard_total(ctx);
  want.step = 2;
  train(ctx, model, opt);
  want.next = shards(ctx);
  TEST_OK(FSDPContextSetTrainingState(ctx, &(FSDPTrainingState){3, 6, {1, 2, 3, 4}}));
  TEST_OK(FSDPContextSave(ctx, opt, file("other.h5"))); /* each case starts from this */
  TEST_ASSERT(check_load(ctx, model, opt, file("other.h5"), file("good.h5"), &want, "the good file"),
              "the good file did not load");

  attribute_edits(ctx, model, opt, &want);
  non_finite(ctx, opt);
  sweep(ctx, model, opt, &want, stride);

  free(want.shards);
  free(want.next);
  TEST_OK(FSDPOptimizerDestroy(&opt));
  TEST_OK(FSDPModelDestroy(&model));
  TEST_OK(FSDPContextDestroy(&ctx));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) remove_tree(dir);
  TEST_OK(FSDPFinalize());
  return 0;
}
#endif
