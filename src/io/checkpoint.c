/* FSDPContextSave and FSDPContextLoad: sharded checkpoints in one parallel
   HDF5 file (doc/checkpoint-format.md).  Datasets have the parameters' full
   shapes; every rank writes and reads only the pieces that lie in its own
   shard, as hyperslabs, with MPI-IO (collective or independent transfers),
   so nothing is gathered and a file loads at any world size, strategy and
   wrapping. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../optim/optimimpl.h"
#include "ioimpl.h"

#define CHECK_CTX_SETUP(c)                                                                                             \
  do {                                                                                                                 \
    FSDPCheck(c, MPI_COMM_SELF, FSDP_ERR_ARG, "%s: ctx must not be NULL", __func__);                                   \
    FSDPCheck((c)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: the context is not set up: call FSDPContextSetUp first", \
              __func__);                                                                                               \
    FSDPCall(DeviceEnter_Private((c)->dev));                                                                           \
  } while (0)

FSDPErrorCode FSDPContextSetTrainingState(FSDPContext ctx, const FSDPTrainingState *state)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetTrainingState: ctx must not be NULL");
  FSDPCheck(state, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetTrainingState: state must not be NULL");
  ctx->training = *state;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetTrainingState(FSDPContext ctx, FSDPTrainingState *state)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetTrainingState: ctx must not be NULL");
  if (state) *state = ctx->training;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCheckpointKeep(FSDPContext ctx, int keep)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckpointKeep: ctx must not be NULL");
  FSDPCheck(keep >= 1, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckpointKeep: keep %d must be at least 1", keep);
  ctx->checkpoint_keep = keep;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetCheckpointKeep(FSDPContext ctx, int *keep)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetCheckpointKeep: ctx must not be NULL");
  FSDPCheck(keep, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetCheckpointKeep: keep must not be NULL");
  *keep = ctx->checkpoint_keep;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCheckpointIO(FSDPContext ctx, FSDPCheckpointIO io)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckpointIO: ctx must not be NULL");
  FSDPCheck((int)io >= 0 && io < FSDP_NUM_CHECKPOINT_IO, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSetCheckpointIO: io %d is not collective or independent", (int)io);
  ctx->checkpoint_io = io;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCheckpointStrict(FSDPContext ctx, bool strict)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckpointStrict: ctx must not be NULL");
  ctx->checkpoint_strict = strict;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSetCheckFinite(FSDPContext ctx, bool check)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSetCheckFinite: ctx must not be NULL");
  ctx->check_finite = check;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextGetCheckFinite(FSDPContext ctx, bool *check)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetCheckFinite: ctx must not be NULL");
  FSDPCheck(check, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextGetCheckFinite: check must not be NULL");
  *check = ctx->check_finite;
  return FSDP_SUCCESS;
}

#ifdef FSDP_HAVE_HDF5
#include <hdf5.h>

#define FORMAT_NAME "libfsdp checkpoint"
#define FORMAT_VERSION 1

/* ------------------------------------------------------------------ what each rank handles */

/* One dataset: a parameter (state < 0) or state tensor `state` of one. */
typedef struct {
  FlatParam unit;
  int param, state;
} Item;

/* Elements [begin, end) of a flattened parameter that this rank handles;
   they sit at element `at` of its shard and `packed` of its packed
   optimizer state (trainable parameters only). */
typedef struct {
  int64_t begin, end, at, packed;
} Piece;

/* Each parameter's piece within elements [lo, hi) of the unit's flat buffer,
   a part of this rank's shard. */
static void find_pieces(FlatParam unit, int64_t lo, int64_t hi, Piece *pieces)
{
  int64_t first = (int64_t)unit->ctx->shard_index * unit->shard_numel, last = first + unit->shard_numel, packed = 0;
  for (int i = 0; i < unit->nparams; i++) {
    const ParamInfo *p = &unit->params[i];
    int64_t b = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
    int64_t in_shard = p->offset > first ? p->offset : first; /* the parameter's first element in the shard */
    if (e <= b) pieces[i] = (Piece){0, 0, 0, 0};
    else pieces[i] = (Piece){b - p->offset, e - p->offset, b - first, packed + (b - in_shard)};
    if (!p->frozen && p->offset + p->numel > first && p->offset < last)
      packed += (p->offset + p->numel < last ? p->offset + p->numel : last) - in_shard;
  }
}

/* Saving: the shard group writes each unit once; replicas of a shard split it. */
static void write_pieces(FlatParam unit, Piece *pieces)
{
  FSDPContext ctx = unit->ctx;
  int64_t first = (int64_t)ctx->shard_index * unit->shard_numel, n = unit->shard_numel;
  find_pieces(unit, first + n * ctx->replica_index / ctx->nreplicas,
              first + n * (ctx->replica_index + 1) / ctx->nreplicas, pieces);
}

static void read_pieces(FlatParam unit, Piece *pieces)
{
  int64_t first = (int64_t)unit->ctx->shard_index * unit->shard_numel;
  find_pieces(unit, first, first + unit->shard_numel, pieces);
}

/* Where item's piece is in memory: the shard, or the packed optimizer state. */
static char *piece_memory(const Item *it, const Piece *pc, void *shard, void *state)
{
  size_t es = FSDPDataTypeSize(it->unit->dtype);
  return it->state < 0 ? (char *)shard + (size_t)pc->at * es : (char *)state + (size_t)pc->packed * es;
}

/* The first of n values that is NaN or infinite (its value in *v), or -1. */
static int64_t first_nonfinite(FSDPDataType dtype, const void *mem, int64_t n, double *v)
{
  for (int64_t i = 0; i < n; i++) {
    double x = dtype == FSDP_FLOAT64 ? ((const double *)mem)[i] : (double)((const float *)mem)[i];
    if (!isfinite(x)) {
      *v = x;
      return i;
    }
  }
  return -1;
}

static uint32_t piece_crc(const Item *it, const Piece *pc, const void *mem, size_t es)
{
  const ParamInfo *p = &it->unit->params[it->param];
  if (pc->end <= pc->begin) return 0;
  return FSDPCRC32CShift_Private(FSDPCRC32C_Private(0, mem, (size_t)(pc->end - pc->begin) * es),
                                 (uint64_t)(p->numel - pc->end) * es);
}

/* Every dataset of the checkpoint, in file order: parameters, then each
   state tensor of each trainable parameter. */
static FSDPErrorCode list_items(FSDPContext ctx, int nstates, Item **items, int *n)
{
  int count = 0, k = 0;
  for (int u = 0; u < ctx->nunits; u++)
    for (int i = 0; i < ctx->units[u]->nparams; i++) count += 1 + (ctx->units[u]->params[i].frozen ? 0 : nstates);
  FSDPCall(FSDPMalloc((size_t)(count ? count : 1) * sizeof **items, FSDP_MEM_OTHER, items));
  for (int s = -1; s < nstates; s++)
    for (int u = 0; u < ctx->nunits; u++)
      for (int i = 0; i < ctx->units[u]->nparams; i++)
        if (s < 0 || !ctx->units[u]->params[i].frozen) (*items)[k++] = (Item){ctx->units[u], i, s};
  *n = count;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ HDF5 helpers */

/* The innermost message of HDF5's error stack: what actually went wrong. */
static herr_t last_message(unsigned n, const H5E_error2_t *e, void *arg)
{
  (void)n;
  if (e->desc && *e->desc) snprintf(arg, 256, "%s", e->desc);
  return 0;
}

static const char *h5_reason(char buf[256])
{
  buf[0] = '\0';
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, last_message, buf);
  return buf[0] ? buf : "no detail from HDF5";
}

static hid_t file_type(FSDPDataType dtype) { return dtype == FSDP_FLOAT64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE; }
static hid_t native_type(FSDPDataType dtype) { return dtype == FSDP_FLOAT64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT; }

static void item_path(const Item *it, const char *const *state_names, char *buf, size_t len)
{
  const char *name = it->unit->params[it->param].name;
  if (it->state < 0) snprintf(buf, len, "/params/%s", name);
  else snprintf(buf, len, "/optim/%s/%s", state_names[it->state], name);
}

static herr_t add_block(hid_t space, const hsize_t *start, const hsize_t *count, bool *first)
{
  herr_t s = H5Sselect_hyperslab(space, *first ? H5S_SELECT_SET : H5S_SELECT_OR, start, NULL, count, NULL);
  *first = false;
  return s;
}

/* Selects row-major elements [b, e) of the block whose indices in
   dimensions before d are start[0..d): a partial first row, whole rows, and
   a partial last row, each of the last two recursing one dimension down. */
static herr_t select_rows(hid_t space, int ndim, const hsize_t *dims, int d, hsize_t *start, hsize_t *count, int64_t b,
                          int64_t e, bool *first)
{
  int64_t inner = 1, r0, r1, full_end;
  if (b >= e) return 0;
  if (d == ndim - 1) {
    start[d] = (hsize_t)b;
    count[d] = (hsize_t)(e - b);
    return add_block(space, start, count, first);
  }
  for (int k = d + 1; k < ndim; k++) inner *= (int64_t)dims[k];
  r0 = b / inner;
  r1 = (e - 1) / inner;
  if (r0 == r1 || b > r0 * inner) { /* the first row, partly */
    int64_t row_end = r0 == r1 ? e - r0 * inner : inner;
    start[d] = (hsize_t)r0;
    count[d] = 1;
    if (select_rows(space, ndim, dims, d + 1, start, count, b - r0 * inner, row_end, first) < 0) return -1;
    if (r0 == r1) return 0;
    r0++;
  }
  full_end = e == (r1 + 1) * inner ? r1 + 1 : r1;
  if (full_end > r0) {
    start[d] = (hsize_t)r0;
    count[d] = (hsize_t)(full_end - r0);
    for (int k = d + 1; k < ndim; k++) {
      start[k] = 0;
      count[k] = dims[k];
    }
    if (add_block(space, start, count, first) < 0) return -1;
  }
  if (full_end == r1) { /* the last row, partly */
    start[d] = (hsize_t)r1;
    count[d] = 1;
    return select_rows(space, ndim, dims, d + 1, start, count, 0, e - r1 * inner, first);
  }
  return 0;
}

/* The file and memory selections of a piece; none when it is empty. */
static herr_t select_piece(hid_t filespace, hid_t *memspace, const ParamInfo *p, const Piece *pc)
{
  hsize_t dims[32], start[32], count[32], n = pc->end > pc->begin ? (hsize_t)(pc->end - pc->begin) : 1;
  bool first = true;
  *memspace = H5Screate_simple(1, &n, NULL);
  if (*memspace < 0) return -1;
  if (pc->end <= pc->begin) return H5Sselect_none(filespace) < 0 || H5Sselect_none(*memspace) < 0 ? -1 : 0;
  if (p->ndim == 0) return H5Sselect_all(filespace);
  if (p->ndim > 32) return -1;
  for (int d = 0; d < p->ndim; d++) dims[d] = (hsize_t)p->shape[d];
  if (select_rows(filespace, p->ndim, dims, 0, start, count, pc->begin, pc->end, &first) < 0) return -1;
  /* Sizes that differ would fail this rank's transfer alone, and the others would wait for it. */
  return H5Sget_select_npoints(filespace) == (hssize_t)n ? 0 : -1;
}

static hid_t make_space(const ParamInfo *p)
{
  hsize_t dims[32];
  if (p->ndim == 0) return H5Screate(H5S_SCALAR);
  if (p->ndim > 32) return -1;
  for (int d = 0; d < p->ndim; d++) dims[d] = (hsize_t)p->shape[d];
  return H5Screate_simple(p->ndim, dims, NULL);
}

/* Attributes: a scalar (rank 0), a vector of dims[0] or a matrix dims[0] x dims[1]. */
static herr_t put_array(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims, const void *value)
{
  hid_t space = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR), attr;
  herr_t status = -1;
  if (space < 0) return -1;
  attr = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr >= 0) {
    status = H5Awrite(attr, type, value);
    H5Aclose(attr);
  }
  H5Sclose(space);
  return status;
}

static herr_t put_attr(hid_t loc, const char *name, hid_t type, int n, const void *value)
{
  hsize_t dims = (hsize_t)n;
  return put_array(loc, name, type, n ? 1 : 0, &dims, value);
}

static herr_t put_string(hid_t loc, const char *name, const char *value)
{
  hid_t type = H5Tcopy(H5T_C_S1);
  herr_t status = type >= 0 && H5Tset_size(type, strlen(value) + 1) >= 0 && H5Tset_strpad(type, H5T_STR_NULLTERM) >= 0
                      ? put_attr(loc, name, type, 0, value)
                      : -1;
  if (type >= 0) H5Tclose(type);
  return status;
}

static herr_t put_int64(hid_t loc, const char *name, int64_t v) { return put_attr(loc, name, H5T_NATIVE_INT64, 0, &v); }
static herr_t put_double(hid_t loc, const char *name, double v)
{
  return put_attr(loc, name, H5T_NATIVE_DOUBLE, 0, &v);
}

/* Reads a numeric attribute of n values, converted to `type`: 1 when read,
   0 when absent, -1 when it is there and cannot be read (damaged metadata
   fails HDF5's checksum) or has another number of values. */
static int get_attr(hid_t loc, const char *name, hid_t type, int n, void *value)
{
  hid_t attr, space;
  int ok = 0;
  htri_t there = H5Aexists(loc, name);
  if (there <= 0) return there < 0 ? -1 : 0;
  attr = H5Aopen(loc, name, H5P_DEFAULT);
  space = attr >= 0 ? H5Aget_space(attr) : -1;
  if (space >= 0 && H5Sget_simple_extent_npoints(space) == (n ? n : 1) && H5Aread(attr, type, value) >= 0) ok = 1;
  else ok = -1;
  if (space >= 0) H5Sclose(space);
  if (attr >= 0) H5Aclose(attr);
  return ok;
}

/* A fixed-length string attribute, as get_attr. */
static int get_string(hid_t loc, const char *name, char *value, size_t len)
{
  hid_t attr, type, mem;
  int ok = -1;
  htri_t there = H5Aexists(loc, name);
  value[0] = '\0';
  if (there <= 0) return there < 0 ? -1 : 0;
  attr = H5Aopen(loc, name, H5P_DEFAULT);
  type = attr >= 0 ? H5Aget_type(attr) : -1;
  mem = H5Tcopy(H5T_C_S1);
  if (type >= 0 && H5Tget_class(type) == H5T_STRING && !H5Tis_variable_str(type) && H5Tget_size(type) < len &&
      H5Tset_size(mem, H5Tget_size(type) + 1) >= 0 && H5Aread(attr, mem, value) >= 0)
    ok = 1;
  H5Tclose(mem);
  if (type >= 0) H5Tclose(type);
  if (attr >= 0) H5Aclose(attr);
  return ok;
}

/* ------------------------------------------------------------------ the metadata checksum */

/* metadata_crc32c, a root attribute, is the CRC-32C of every attribute of /
   and /optim but itself, in name order: each one's name, type class, type
   size, number of values and values as stored.  HDF5's own checksums catch
   damage to the file; this catches an edit (h5py, h5repack with changes)
   that rewrote them consistently. */
#define METADATA_CRC "metadata_crc32c"

typedef struct {
  uint32_t crc;
} Digest;

static void digest_u64(Digest *d, uint64_t v)
{
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i)); /* little-endian on every host */
  d->crc = FSDPCRC32C_Private(d->crc, b, sizeof b);
}

static herr_t digest_attr(hid_t loc, const char *name, const H5A_info_t *info, void *arg)
{
  Digest *d = arg;
  hid_t attr, type = -1, space = -1, mem = -1;
  hssize_t npoints = -1;
  herr_t status = -1;
  (void)info;
  if (!strcmp(name, METADATA_CRC)) return 0;
  attr = H5Aopen(loc, name, H5P_DEFAULT);
  if (attr >= 0) {
    type = H5Aget_type(attr);
    space = H5Aget_space(attr);
  }
  if (space >= 0) npoints = H5Sget_simple_extent_npoints(space);
  if (type >= 0 && npoints >= 0) {
    H5T_class_t cls = H5Tget_class(type);
    size_t size = H5Tget_size(type);
    d->crc = FSDPCRC32C_Private(d->crc, name, strlen(name) + 1);
    digest_u64(d, (uint64_t)cls);
    digest_u64(d, (uint64_t)size);
    digest_u64(d, (uint64_t)npoints);
    if (cls == H5T_STRING && H5Tis_variable_str(type) > 0) { /* h5py writes str attributes so */
      char **strings = calloc((size_t)npoints + 1, sizeof *strings);
      mem = H5Tcopy(H5T_C_S1);
      if (strings && mem >= 0 && H5Tset_size(mem, H5T_VARIABLE) >= 0 && H5Aread(attr, mem, strings) >= 0) {
        for (hssize_t i = 0; i < npoints; i++)
          if (strings[i]) d->crc = FSDPCRC32C_Private(d->crc, strings[i], strlen(strings[i]) + 1);
        status = 0;
      }
      for (hssize_t i = 0; strings && i < npoints; i++) H5free_memory(strings[i]);
      free(strings);
    } else if (cls != H5T_VLEN && cls != H5T_REFERENCE) { /* the values as the file has them */
      void *buf = malloc((size_t)npoints * size + 1);
      if (buf && H5Aread(attr, type, buf) >= 0) {
        d->crc = FSDPCRC32C_Private(d->crc, buf, (size_t)npoints * size);
        status = 0;
      }
      free(buf);
    }
  }
  if (mem >= 0) H5Tclose(mem);
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (attr >= 0) H5Aclose(attr);
  return status;
}

/* The checksum of the root's and /optim's attributes; -1 when one cannot be read. */
static int metadata_digest(hid_t file, uint32_t *crc)
{
  Digest d = {0};
  htri_t optim;
  if (H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, NULL, digest_attr, &d) < 0) return -1;
  optim = H5Lexists(file, "optim", H5P_DEFAULT);
  if (optim < 0) return -1;
  if (optim) {
    hid_t g = H5Gopen2(file, "optim", H5P_DEFAULT);
    herr_t status = g >= 0 ? H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, NULL, digest_attr, &d) : -1;
    if (g >= 0) H5Gclose(g);
    if (status < 0) return -1;
    d.crc = FSDPCRC32C_Private(d.crc, "/optim", 7);
  }
  *crc = d.crc;
  return 0;
}

/* A parallel file access list: MPI-IO on comm, metadata read by one rank
   and broadcast, written collectively; object headers with checksums. */
static hid_t file_access(MPI_Comm comm)
{
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) return -1;
  if (H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) < 0 || H5Pset_all_coll_metadata_ops(fapl, true) < 0 ||
      H5Pset_coll_metadata_write(fapl, true) < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) < 0) {
    H5Pclose(fapl);
    return -1;
  }
  return fapl;
}

/* HDF5's own error stack would print on every rank; the library's errors say
   what went wrong once, plainly. */
typedef struct {
  H5E_auto2_t func;
  void *data;
} QuietHDF5;

static void quiet_begin(QuietHDF5 *q)
{
  H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void quiet_end(const QuietHDF5 *q) { H5Eset_auto2(H5E_DEFAULT, q->func, q->data); }

/* An MPI call whose failure is recorded, not returned: the caller still has
   collective work to finish with the other ranks. */
#define MPI_RECORD(call) mpi_record((call), __LINE__, __func__, #call)
static FSDPErrorCode mpi_record(int err, int line, const char *func, const char *call)
{
  return err == MPI_SUCCESS ? FSDP_SUCCESS : FSDPErrorMPI(line, func, __FILE__, err, call);
}

static H5FD_mpio_xfer_t transfer_mode(FSDPContext ctx)
{
  return ctx->checkpoint_io == FSDP_CHECKPOINT_IO_COLLECTIVE ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT;
}

#define H5ERR(...) FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_HDF5, __VA_ARGS__)

/* ------------------------------------------------------------------ save */

/* The file's root attributes: what it is, who wrote it, how, and the training state. */
static FSDPErrorCode write_root(FSDPContext ctx, FSDPOptimizer opt, hid_t file)
{
  char when[64] = "", layout_text[128];
  int *layout = NULL, mine[3], node, nnodes;
  int64_t step = opt ? opt->step : ctx->training.step;
  herr_t s = 0;
  FSDPErrorCode ierr;

  /* Collective metadata writes need the same values on every rank. */
  if (ctx->rank == 0) {
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  }
  FSDPCallMPI(MPI_Bcast(when, sizeof when, MPI_CHAR, 0, ctx->comm));
  FSDPCall(ShardGroupGetNode(ctx->group, &node, &nnodes));
  mine[0] = node;
  mine[1] = ctx->shard_index;
  mine[2] = ctx->replica_index;
  FSDPCall(FSDPMalloc((size_t)ctx->size * sizeof mine, FSDP_MEM_OTHER, &layout));
  ierr = MPI_RECORD(MPI_Allgather(mine, 3, MPI_INT, layout, 3, MPI_INT, ctx->comm));
  snprintf(layout_text, sizeof layout_text, "%d shard group%s of %d ranks on %d node%s", ctx->nreplicas,
           ctx->nreplicas == 1 ? "" : "s", ctx->factor, nnodes, nnodes == 1 ? "" : "s");
  if (!ierr) {
    int version = FORMAT_VERSION;
    s |= put_string(file, "format", FORMAT_NAME);
    s |= put_attr(file, "format_version", H5T_NATIVE_INT, 0, &version);
    s |= put_string(file, "library_version", FSDP_VERSION_STRING);
    s |= put_string(file, "creation_time", when);
    s |= put_int64(file, "step", step);
    s |= put_int64(file, "data_cursor", ctx->training.data_cursor);
    s |= put_attr(file, "rng_state", H5T_NATIVE_UINT64, 4, ctx->training.rng);
    s |= put_int64(file, "world_size", ctx->size);
    s |= put_string(file, "sharding_strategy", FSDPShardingStrategyName(ctx->strategy));
    s |= put_int64(file, "sharding_factor", ctx->factor);
    s |= put_string(file, "shard_group_layout", layout_text);
    s |= put_array(file, "rank_node_shard_replica", H5T_NATIVE_INT, 2, (hsize_t[]){(hsize_t)ctx->size, 3}, layout);
    if (s < 0) ierr = H5ERR("cannot write the root attributes");
  }
  FSDPCall(FSDPFree(&layout));
  return ierr;
}

static FSDPErrorCode write_optim_attrs(FSDPOptimizer opt, hid_t group)
{
  herr_t s = 0;
  s |= put_string(group, "type", FSDPOptimizerTypeName(opt->type));
  s |= put_int64(group, "step", opt->step);
  s |= put_double(group, "lr", opt->lr);
  s |= put_double(group, "weight_decay", opt->weight_decay);
  if (opt->type == FSDP_OPTIMIZER_ADAMW) {
    double betas[2] = {opt->beta1, opt->beta2};
    s |= put_attr(group, "betas", H5T_NATIVE_DOUBLE, 2, betas);
    s |= put_double(group, "eps", opt->eps);
  } else {
    int nesterov = opt->nesterov;
    s |= put_double(group, "momentum", opt->momentum);
    s |= put_attr(group, "nesterov", H5T_NATIVE_INT, 0, &nesterov);
  }
  s |= put_string(group, "lr_schedule", FSDPLRScheduleName(opt->schedule));
  s |= put_int64(group, "warmup_steps", opt->warmup);
  s |= put_int64(group, "total_steps", opt->total);
  s |= put_double(group, "clip_grad_norm", opt->max_norm);
  if (opt->scaler) { /* PyTorch's GradScaler state_dict: scale and _growth_tracker */
    s |= put_double(group, "grad_scale", opt->scale);
    s |= put_int64(group, "grad_scaler_growth_tracker", opt->growth_tracker);
  }
  FSDPCheck(s >= 0, MPI_COMM_SELF, FSDP_ERR_HDF5, "cannot write the attributes of /optim");
  return FSDP_SUCCESS;
}

/* Test hook (doc/checkpoint-format.md): FSDP_TEST_CHECKPOINT_PAUSE=seconds
   stops every rank halfway through the save, after the parameters, and
   rank 0 creates <temporary>.paused, so a test can kill the job there. */
static FSDPErrorCode pause_for_test(FSDPContext ctx, const char *tmp)
{
  const char *env = getenv("FSDP_TEST_CHECKPOINT_PAUSE");
  char marker[4300];
  if (!env || atoi(env) <= 0) return FSDP_SUCCESS;
  FSDPCallMPI(MPI_Barrier(ctx->comm));
  if (ctx->rank == 0) {
    FILE *fp;
    snprintf(marker, sizeof marker, "%s.paused", tmp);
    fp = fopen(marker, "w");
    if (fp) fclose(fp);
  }
  sleep((unsigned)atoi(env));
  return FSDP_SUCCESS;
}

/* What a save reads of one unit: its shard and optimizer state, or, on a
   GPU, host copies of them (HDF5 reads host memory). */
typedef struct {
  void *shard, *state[2]; /* the state tensors follow the shard in a copy */
  bool copied;            /* shard is a host copy, to be freed; else the unit's own memory */
} Source;

static FSDPErrorCode sources_free(FSDPContext ctx, Source **src)
{
  for (int u = 0; *src && u < ctx->nunits; u++)
    if ((*src)[u].copied) FSDPCall(FSDPFree(&(*src)[u].shard));
  FSDPCall(FSDPFree(src));
  return FSDP_SUCCESS;
}

static FSDPErrorCode sources_get(FSDPContext ctx, FSDPOptimizer opt, Source **src)
{
  int nstates = opt ? opt->nstates : 0;
  FSDPCall(FSDPCalloc((size_t)(ctx->nunits ? ctx->nunits : 1), sizeof **src, FSDP_MEM_OTHER, src));
  for (int u = 0; u < ctx->nunits; u++) {
    FlatParam unit = ctx->units[u];
    Source *s = &(*src)[u];
    size_t shard_bytes = (size_t)unit->shard_numel * FSDPDataTypeSize(unit->dtype), state_bytes = 0;
    s->shard = unit->shard;
    for (int k = 0; k < nstates; k++) s->state[k] = opt->units[u].state[k];
    if (!ctx->dev) continue;
    if (nstates) state_bytes = opt->units[u].state_bytes;
    FSDPCall(FSDPMalloc(shard_bytes + (size_t)nstates * state_bytes + 1, FSDP_MEM_COMM_STAGING, &s->shard));
    s->copied = true;
    FSDPCall(DeviceToHost_Private(ctx->dev, s->shard, unit->shard, shard_bytes));
    for (int k = 0; k < nstates; k++) {
      s->state[k] = (char *)s->shard + shard_bytes + (size_t)k * state_bytes;
      FSDPCall(DeviceToHost_Private(ctx->dev, s->state[k], opt->units[u].state[k], state_bytes));
    }
  }
  return FSDP_SUCCESS;
}

/* Writes every dataset: each rank its own pieces, with one collective
   H5Dwrite per dataset, and their checksums, combined beforehand. */
static FSDPErrorCode write_datasets(FSDPContext ctx, FSDPOptimizer opt, hid_t file, const char *tmp, const Item *items,
                                    int nitems, int64_t *bytes)
{
  const char *names[2] = {NULL, NULL};
  uint32_t *crc = NULL;
  Piece *pieces = NULL;
  Source *src = NULL;
  int maxp = 1, nstates = opt ? opt->nstates : 0;
  hid_t dxpl = -1, dcpl = -1;
  FSDPErrorCode ierr = FSDP_SUCCESS, failed = FSDP_SUCCESS, nonfinite = FSDP_SUCCESS;

  for (int s = 0; s < nstates; s++) names[s] = FSDPOptimizerStateName_Private(opt, s);
  for (int u = 0; u < ctx->nunits; u++) maxp = ctx->units[u]->nparams > maxp ? ctx->units[u]->nparams : maxp;
  /* Agreed before the first collective: a rank whose allocation failed must not leave the others waiting. */
  ierr = FSDPCalloc((size_t)(nitems ? nitems : 1), sizeof *crc, FSDP_MEM_OTHER, &crc);
  if (!ierr) ierr = FSDPMalloc((size_t)maxp * sizeof *pieces, FSDP_MEM_OTHER, &pieces);
  if (!ierr) ierr = sources_get(ctx, opt, &src);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);

  /* The checksums first, from memory: one reduction for the whole file. */
  for (int k = 0; k < nitems && !ierr; k++) {
    const Item *it = &items[k];
    const Source *s = &src[it->unit->index];
    void *state = it->state >= 0 ? s->state[it->state] : NULL;
    const Piece *pc;
    const void *mem;
    write_pieces(it->unit, pieces);
    pc = &pieces[it->param];
    mem = piece_memory(it, pc, s->shard, state);
    crc[k] = piece_crc(it, pc, mem, FSDPDataTypeSize(it->unit->dtype));
    if (ctx->check_finite && !nonfinite) { /* each element is some rank's to write: each is checked once */
      double v;
      int64_t at = first_nonfinite(it->unit->dtype, mem, pc->end - pc->begin, &v);
      char path[1200];
      if (at >= 0) {
        item_path(it, names, path, sizeof path);
        nonfinite =
            FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_NOT_FINITE,
                      "FSDPContextSave: %s[%lld] is %g: non-finite parameters or optimizer state are not saved; "
                      "'%s' was not written (-fsdp_check_finite false writes them)",
                      path, (long long)(pc->begin + at), v, tmp);
      }
    }
  }
  if (!ierr) ierr = MPI_RECORD(MPI_Allreduce(MPI_IN_PLACE, crc, nitems, MPI_UINT32_T, MPI_BXOR, ctx->comm));
  if (!ierr) ierr = nonfinite;

  dxpl = H5Pcreate(H5P_DATASET_XFER);
  dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!ierr && (dxpl < 0 || dcpl < 0 || H5Pset_dxpl_mpio(dxpl, transfer_mode(ctx)) < 0 ||
                H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0))
    ierr = H5ERR("cannot create property lists");
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  /* Every rank makes every call, whatever failed on it (`failed`): they are
     collective.  The ranks agree on the outcome at the end. */
  for (int k = 0; k < nitems && !ierr; k++) {
    const Item *it = &items[k];
    const ParamInfo *p = &it->unit->params[it->param];
    const Source *src_unit = &src[it->unit->index];
    void *state = it->state >= 0 ? src_unit->state[it->state] : NULL;
    char path[1200], reason[256];
    hid_t space, ds = -1, memspace = -1;
    herr_t status = -1;

    if (it->state == 0 && (k == 0 || items[k - 1].state != 0)) failed = failed ? failed : pause_for_test(ctx, tmp);
    item_path(it, names, path, sizeof path);
    write_pieces(it->unit, pieces);
    space = make_space(p);
    if (space >= 0) ds = H5Dcreate2(file, path, file_type(it->unit->dtype), space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds >= 0 &&
        (put_attr(ds, "crc32c", H5T_NATIVE_UINT32, 0, &crc[k]) < 0 ||
         (it->state < 0 && put_string(ds, "unit", it->unit->name) < 0)) &&
        !failed)
      failed = H5ERR("cannot write the attributes of %s", path);
    if (ds >= 0) {
      if (p->numel == 0) status = 0; /* nothing to write, on any rank */
      else {
        /* A rank whose selection failed still takes part, with nothing to write. */
        if (select_piece(space, &memspace, p, &pieces[it->param]) < 0 && memspace >= 0) {
          if (!failed) failed = H5ERR("cannot select this rank's part of %s", path);
          H5Sselect_none(space);
          H5Sselect_none(memspace);
        }
        if (memspace >= 0)
          status = H5Dwrite(ds, native_type(it->unit->dtype), memspace, space, dxpl,
                            piece_memory(it, &pieces[it->param], src_unit->shard, state));
      }
    }
    if (status < 0 && !failed) failed = H5ERR("cannot write %s: %s", path, h5_reason(reason));
    *bytes += (pieces[it->param].end - pieces[it->param].begin) * (int64_t)FSDPDataTypeSize(it->unit->dtype);
    if (memspace >= 0) H5Sclose(memspace);
    if (ds >= 0) H5Dclose(ds);
    if (space >= 0) H5Sclose(space);
  }
  if (!ierr) ierr = failed;
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (dxpl >= 0) H5Pclose(dxpl);
  if (dcpl >= 0) H5Pclose(dcpl);
  FSDPCall(FSDPFree(&crc));
  FSDPCall(FSDPFree(&pieces));
  FSDPCall(sources_free(ctx, &src));
  return ierr;
}

/* The groups, attributes and datasets of a new file at tmp.  Collective. */
static FSDPErrorCode write_file(FSDPContext ctx, FSDPOptimizer opt, const char *tmp, int64_t *bytes)
{
  Item *items = NULL;
  int nitems;
  hid_t fapl, file = -1, gcpl;
  char reason[256];
  FSDPErrorCode ierr = FSDP_SUCCESS;

  FSDPCall(list_items(ctx, opt ? opt->nstates : 0, &items, &nitems));
  fapl = file_access(ctx->comm);
  if (fapl >= 0) file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (file < 0)
    ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO, "cannot create '%s': %s", tmp,
                     h5_reason(reason));
  if (fapl >= 0) H5Pclose(fapl);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (!ierr) ierr = FSDPErrorAgree_Private(ctx->comm, write_root(ctx, opt, file));
  if (!ierr) {
    /* Groups track creation order, so h5dump lists datasets as the model has them. */
    hid_t g;
    gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (gcpl < 0 || H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED) < 0 ||
        (g = H5Gcreate2(file, "params", H5P_DEFAULT, gcpl, H5P_DEFAULT)) < 0)
      ierr = H5ERR("cannot create /params in '%s'", tmp);
    else H5Gclose(g);
    if (!ierr && opt) {
      g = H5Gcreate2(file, "optim", H5P_DEFAULT, gcpl, H5P_DEFAULT);
      if (g < 0) ierr = H5ERR("cannot create /optim in '%s'", tmp);
      else {
        ierr = write_optim_attrs(opt, g);
        for (int s = 0; s < opt->nstates && !ierr; s++) {
          hid_t sg = H5Gcreate2(g, FSDPOptimizerStateName_Private(opt, s), H5P_DEFAULT, gcpl, H5P_DEFAULT);
          if (sg < 0) ierr = H5ERR("cannot create /optim/%s in '%s'", FSDPOptimizerStateName_Private(opt, s), tmp);
          else H5Gclose(sg);
        }
        H5Gclose(g);
      }
    }
    if (gcpl >= 0) H5Pclose(gcpl);
    ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  }
  if (!ierr) { /* every rank wrote the same attributes: the same checksum */
    uint32_t crc;
    if (metadata_digest(file, &crc) < 0 || put_attr(file, METADATA_CRC, H5T_NATIVE_UINT32, 0, &crc) < 0)
      ierr = H5ERR("cannot write the metadata checksum of '%s': %s", tmp, h5_reason(reason));
    ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  }
  if (!ierr) ierr = write_datasets(ctx, opt, file, tmp, items, nitems, bytes);
  if (file >= 0) {
    herr_t s = H5Fflush(file, H5F_SCOPE_GLOBAL);
    if (H5Fclose(file) < 0 || s < 0) {
      if (!ierr) ierr = H5ERR("cannot flush and close '%s': %s", tmp, h5_reason(reason));
    }
    /* A rank whose data did not reach the file stops the rename on rank 0. */
    ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  }
  FSDPCall(FSDPFree(&items));
  return ierr;
}

static bool exists(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0;
}

static bool is_directory(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static FSDPErrorCode fsync_path(const char *path)
{
  int fd = open(path, O_RDONLY);
  FSDPCheck(fd >= 0, MPI_COMM_SELF, FSDP_ERR_IO, "cannot open '%s' to sync it: %s", path, strerror(errno));
  if (fsync(fd) && errno != EINVAL) { /* EINVAL: a file system that cannot sync directories */
    int e = errno;
    close(fd);
    FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_IO, "cannot sync '%s': %s", path, strerror(e));
  }
  close(fd);
  return FSDP_SUCCESS;
}

/* Rank 0, once the temporary is complete: make it durable, shift the older
   checkpoints (path.1, path.2, ...), and rename it over path.  path is
   replaced atomically: at every moment it is a complete checkpoint. */
static FSDPErrorCode commit_file(const char *tmp, const char *path, int keep)
{
  char older[4200], newer[4200], dir[4200];
  char *slash;

  FSDPCall(fsync_path(tmp));
  if (keep > 1 && exists(path)) {
    for (int k = keep - 1; k >= 2; k--) {
      snprintf(older, sizeof older, "%s.%d", path, k);
      snprintf(newer, sizeof newer, "%s.%d", path, k - 1);
      FSDPCheck(!exists(newer) || rename(newer, older) == 0, MPI_COMM_SELF, FSDP_ERR_IO,
                "cannot rename '%s' to '%s': %s", newer, older, strerror(errno));
    }
    snprintf(newer, sizeof newer, "%s.1", path);
    FSDPCheck(!exists(newer) || unlink(newer) == 0, MPI_COMM_SELF, FSDP_ERR_IO, "cannot remove '%s': %s", newer,
              strerror(errno));
    /* A hard link keeps path in place until the rename replaces it. */
    if (link(path, newer))
      FSDPCheck(rename(path, newer) == 0, MPI_COMM_SELF, FSDP_ERR_IO, "cannot rename '%s' to '%s': %s", path, newer,
                strerror(errno));
  }
  FSDPCheck(rename(tmp, path) == 0, MPI_COMM_SELF, FSDP_ERR_IO,
            "cannot rename '%s' to '%s': %s (the new checkpoint is complete in '%s')", tmp, path, strerror(errno), tmp);
  snprintf(dir, sizeof dir, "%s", path);
  slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
  FSDPCall(fsync_path(dir));
  return FSDP_SUCCESS;
}

/* The temporary file beside path that a save writes and renames. */
static void temporary_path(const char *path, char *tmp, size_t len) { snprintf(tmp, len, "%s.partial", path); }

FSDPErrorCode FSDPContextSave(FSDPContext ctx, FSDPOptimizer opt, const char *path)
{
  char tmp[4200];
  int64_t bytes = 0;
  QuietHDF5 quiet;
  FSDPErrorCode ierr = FSDP_SUCCESS;

  CHECK_CTX_SETUP(ctx);
  FSDPCheck(path && *path, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSave: path must not be NULL or empty");
  FSDPCheck(strlen(path) < 4000, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextSave: path is longer than 4000 characters");
  FSDPCheck(!opt || opt->ctx == ctx, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSave: the optimizer belongs to another context");
  FSDPCheck(
      !opt || opt->setup, MPI_COMM_SELF, FSDP_ERR_STATE,
      "FSDPContextSave: the optimizer is not set up: call FSDPOptimizerSetUp, or pass NULL to save parameters only");
  FSDPCheck(!opt || opt->trainable_changes == ctx->trainable_changes, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPContextSave: parameters were frozen or unfrozen after FSDPOptimizerSetUp: the optimizer state no "
            "longer matches them (set trainability before it)");
  temporary_path(path, tmp, sizeof tmp);
  /* Found now, not at the rename, after the whole file is written. */
  if (ctx->rank == 0 && is_directory(path))
    ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                     "FSDPContextSave: '%s' is a directory: a checkpoint is a file", path);
  /* A save that died left its temporary: say so, and start afresh. */
  if (!ierr && ctx->rank == 0 && exists(tmp)) {
    if (unlink(tmp) == 0) fprintf(stderr, "FSDPContextSave: removed '%s', left by an interrupted save\n", tmp);
    else
      ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                       "FSDPContextSave: cannot remove '%s', left by an interrupted save: %s", tmp, strerror(errno));
  }
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, ierr));
  FSDPCall(FSDPLogEventBegin(ctx->ev_save));
  quiet_begin(&quiet);
  ierr = write_file(ctx, opt, tmp, &bytes);
  quiet_end(&quiet);
  if (ierr) {
    ierr = FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
    if (ctx->rank == 0) unlink(tmp);
  } else if (ctx->rank == 0) ierr = commit_file(tmp, path, ctx->checkpoint_keep);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  FSDPCall(FSDPLogEventEnd(ctx->ev_save, bytes));
  FSDPCall(ierr);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ load */

/* What a load reads and checks before any tensor: the root's and /optim's
   attributes. */
typedef struct {
  bool libfsdp;    /* written by FSDPContextSave, not by another tool */
  bool have_optim; /* the file has /optim */
  char optim_type[32];
  FSDPTrainingState training;
  int64_t step, growth_tracker; /* /optim's */
  double scale;
  bool have_scale;
  bool have_metadata_crc; /* files of libfsdp before 0.? have none */
} Header;

/* Metadata that cannot be read, or reads as impossible: the file is damaged
   (or was edited), and nothing of it is loaded. */
#define DAMAGED(...) FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_CORRUPT, __VA_ARGS__)

static FSDPErrorCode unreadable(const char *path, const char *what)
{
  char reason[256];
  return DAMAGED("FSDPContextLoad: '%s' is damaged: %s cannot be read (%s); nothing was loaded", path, what,
                 h5_reason(reason));
}

/* A required attribute: read, or an error that says why not. */
static FSDPErrorCode require_attr(hid_t loc, const char *where, const char *name, hid_t type, int n, void *value,
                                  const char *path)
{
  char what[128];
  int got = get_attr(loc, name, type, n, value);
  snprintf(what, sizeof what, "the attribute %s of %s", name, where);
  if (got < 0) return unreadable(path, what);
  FSDPCheck(got > 0, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: %s is missing; nothing was loaded", path, what);
  return FSDP_SUCCESS;
}

static FSDPErrorCode require_string(hid_t loc, const char *where, const char *name, char *value, size_t len,
                                    const char *path)
{
  char what[128];
  int got = get_string(loc, name, value, len);
  snprintf(what, sizeof what, "the attribute %s of %s", name, where);
  if (got < 0) return unreadable(path, what);
  FSDPCheck(got > 0, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: %s is missing; nothing was loaded", path, what);
  return FSDP_SUCCESS;
}

/* The root attributes that make a file a libfsdp checkpoint. */
static const char *const root_attrs[] = {"format_version",  "step",
                                         "data_cursor",     "rng_state",
                                         "world_size",      "sharding_strategy",
                                         "sharding_factor", "rank_node_shard_replica",
                                         METADATA_CRC};

/* rank_node_shard_replica: W rows of a node, a shard index < F and a replica index < W/F. */
static FSDPErrorCode check_layout(hid_t file, const char *path, int64_t world, int64_t factor)
{
  int *layout = NULL, bad = -1;
  FSDPErrorCode ierr;
  FSDPCheck(world > 0 && world <= (1 << 24), MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: world_size %lld is not a number of ranks; nothing was loaded", path,
            (long long)world);
  FSDPCheck(
      factor >= 1 && factor <= world && world % factor == 0, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
      "FSDPContextLoad: '%s' is damaged: sharding_factor %lld does not divide world_size %lld; nothing was loaded",
      path, (long long)factor, (long long)world);
  FSDPCall(FSDPMalloc((size_t)world * 3 * sizeof *layout, FSDP_MEM_OTHER, &layout));
  ierr = require_attr(file, "/", "rank_node_shard_replica", H5T_NATIVE_INT, (int)world * 3, layout, path);
  for (int64_t r = 0; !ierr && r < world && bad < 0; r++)
    if (layout[3 * r] < 0 || layout[3 * r] >= world || layout[3 * r + 1] < 0 || layout[3 * r + 1] >= factor ||
        layout[3 * r + 2] < 0 || layout[3 * r + 2] >= world / factor)
      bad = (int)r;
  if (!ierr && bad >= 0)
    ierr = DAMAGED("FSDPContextLoad: '%s' is damaged: rank_node_shard_replica row %d (%d, %d, %d) is not a node, a "
                   "shard < %lld and a replica < %lld; nothing was loaded",
                   path, bad, layout[3 * bad], layout[3 * bad + 1], layout[3 * bad + 2], (long long)factor,
                   (long long)(world / factor));
  FSDPCall(FSDPFree(&layout));
  return ierr;
}

/* The root attributes, and /optim's: each one the load uses is read with
   its error checked (an attribute that cannot be read is never taken for
   one that is absent), checked for range, and cross-checked; the metadata
   checksum covers them all.  A file without root attributes is parameters
   written by another tool: its training state is zero. */
static FSDPErrorCode read_header(FSDPOptimizer opt, hid_t file, const char *path, Header *h)
{
  char format[64], strategy[32], what[64];
  int version = 0, got, known = 0;
  int64_t world, factor;
  uint32_t want, crc;
  htri_t optim;

  memset(h, 0, sizeof *h);
  got = get_string(file, "format", format, sizeof format);
  if (got < 0) return unreadable(path, "the root attribute format");
  if (!got) {
    for (size_t i = 0; i < sizeof root_attrs / sizeof root_attrs[0]; i++) {
      htri_t there = H5Aexists(file, root_attrs[i]);
      snprintf(what, sizeof what, "the root attribute %s", root_attrs[i]);
      if (there < 0) return unreadable(path, what);
      FSDPCheck(
          !there, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
          "FSDPContextLoad: '%s' is damaged: it has the root attribute %s of a libfsdp checkpoint but not format; "
          "nothing was loaded",
          path, root_attrs[i]);
    }
    FSDPCheck(
        !opt, MPI_COMM_SELF, FSDP_ERR_ARG,
        "FSDPContextLoad: '%s' is not a libfsdp checkpoint (no root attribute format): it holds no optimizer state "
        "or step; load its parameters without an optimizer (opt NULL, fsdp-train -init)",
        path);
    return FSDP_SUCCESS;
  }
  h->libfsdp = true;
  FSDPCheck(!strcmp(format, FORMAT_NAME), MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: its root attribute format is '%s', not '%s'; nothing was loaded", path,
            format, FORMAT_NAME);
  FSDPCall(require_attr(file, "/", "format_version", H5T_NATIVE_INT, 0, &version, path));
  FSDPCheck(
      version >= 1, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
      "FSDPContextLoad: '%s' is damaged: format_version %d is not a version (they start at 1); nothing was loaded",
      path, version);
  FSDPCheck(version <= FORMAT_VERSION, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "FSDPContextLoad: '%s' has checkpoint format %d; this libfsdp %s reads format %d and older: use a newer "
            "libfsdp",
            path, version, FSDP_VERSION_STRING, FORMAT_VERSION);

  /* Then the checksum, before any value is believed. */
  got = get_attr(file, METADATA_CRC, H5T_NATIVE_UINT32, 0, &want);
  if (got < 0) return unreadable(path, "the root attribute " METADATA_CRC);
  if (metadata_digest(file, &crc) < 0) return unreadable(path, "an attribute of / or /optim");
  FSDPCheck(!got || crc == want, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: the attributes of / and /optim fail their checksum (CRC-32C 0x%08x, "
            "%s says 0x%08x): they changed after the save; nothing was loaded",
            path, crc, METADATA_CRC, want);
  h->have_metadata_crc = got > 0;

  FSDPCall(require_attr(file, "/", "step", H5T_NATIVE_INT64, 0, &h->training.step, path));
  FSDPCall(require_attr(file, "/", "data_cursor", H5T_NATIVE_INT64, 0, &h->training.data_cursor, path));
  FSDPCall(require_attr(file, "/", "rng_state", H5T_NATIVE_UINT64, 4, h->training.rng, path));
  FSDPCheck(h->training.step >= 0 && h->training.data_cursor >= 0, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: step %lld and data_cursor %lld must not be negative; nothing was loaded",
            path, (long long)h->training.step, (long long)h->training.data_cursor);
  FSDPCall(require_attr(file, "/", "world_size", H5T_NATIVE_INT64, 0, &world, path));
  FSDPCall(require_attr(file, "/", "sharding_factor", H5T_NATIVE_INT64, 0, &factor, path));
  FSDPCall(require_string(file, "/", "sharding_strategy", strategy, sizeof strategy, path));
  for (int k = 0; k < FSDP_NUM_SHARDING_STRATEGIES; k++)
    known |= !strcmp(strategy, FSDPShardingStrategyName((FSDPShardingStrategy)k));
  FSDPCheck(known, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: sharding_strategy '%s' is not a strategy; nothing was loaded", path,
            strategy);
  FSDPCall(check_layout(file, path, world, factor));

  optim = H5Lexists(file, "optim", H5P_DEFAULT);
  if (optim < 0) return unreadable(path, "the link /optim");
  h->have_optim = optim > 0;
  if (h->have_optim) {
    hid_t g = H5Gopen2(file, "optim", H5P_DEFAULT);
    FSDPErrorCode ierr;
    int scale, tracker;
    if (g < 0) return unreadable(path, "the group /optim");
    ierr = require_string(g, "/optim", "type", h->optim_type, sizeof h->optim_type, path);
    if (!ierr) ierr = require_attr(g, "/optim", "step", H5T_NATIVE_INT64, 0, &h->step, path);
    scale = ierr ? 0 : get_attr(g, "grad_scale", H5T_NATIVE_DOUBLE, 0, &h->scale);
    tracker = ierr ? 0 : get_attr(g, "grad_scaler_growth_tracker", H5T_NATIVE_INT64, 0, &h->growth_tracker);
    H5Gclose(g);
    FSDPCall(ierr);
    if (scale < 0) return unreadable(path, "the attribute grad_scale of /optim");
    if (tracker < 0) return unreadable(path, "the attribute grad_scaler_growth_tracker of /optim");
    FSDPCheck(h->step == h->training.step, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
              "FSDPContextLoad: '%s' is damaged: the root says step %lld, /optim says step %lld; nothing was loaded",
              path, (long long)h->training.step, (long long)h->step);
    FSDPCheck(scale == tracker, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
              "FSDPContextLoad: '%s' is damaged: /optim has %s without %s; nothing was loaded", path,
              scale ? "grad_scale" : "grad_scaler_growth_tracker", scale ? "grad_scaler_growth_tracker" : "grad_scale");
    h->have_scale = scale > 0;
    FSDPCheck(!h->have_scale || (isfinite(h->scale) && h->scale > 0 && h->growth_tracker >= 0), MPI_COMM_SELF,
              FSDP_ERR_CORRUPT,
              "FSDPContextLoad: '%s' is damaged: grad_scale %g must be finite and positive and "
              "grad_scaler_growth_tracker %lld not negative; nothing was loaded",
              path, h->scale, (long long)h->growth_tracker);
  }
  return FSDP_SUCCESS;
}

/* A list of names for an error message or a report, cut to fit. */
typedef struct {
  char text[700];
  int count;
} NameList;

static void list_add(NameList *l, const char *name, const char *detail)
{
  size_t len = strlen(l->text);
  if (len < sizeof l->text - 1)
    snprintf(l->text + len, sizeof l->text - len, "%s%s%s", l->count ? ", " : "", name, detail ? detail : "");
  l->count++;
}

/* What the file holds that the context does not, and the other way round. */
typedef struct {
  NameList missing, shape, type, extra;
} Mismatch;

/* Whether dataset `path` has the parameter's shape and a float type (1); adds
   it to the right list when it does not, or is not there (0).  -1: its
   metadata cannot be read, and *err says so. */
static int check_dataset(hid_t file, const char *path, const char *fname, const ParamInfo *p, Mismatch *mm,
                         FSDPErrorCode *err)
{
  hsize_t dims[32];
  int ndim;
  bool same;
  hid_t ds, space, type;
  char detail[200], what[1300];
  size_t len = 0;
  htri_t there = H5Lexists(file, path, H5P_DEFAULT);

  snprintf(what, sizeof what, "the dataset %s", path);
  if (there < 0) return (*err = unreadable(fname, what)), -1;
  if (!there) {
    list_add(&mm->missing, path, NULL);
    return 0;
  }
  ds = H5Dopen2(file, path, H5P_DEFAULT);
  space = ds >= 0 ? H5Dget_space(ds) : -1;
  type = ds >= 0 ? H5Dget_type(ds) : -1;
  ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  if (ds < 0 || space < 0 || type < 0 || ndim < 0 || ndim > 32 ||
      H5Sget_simple_extent_dims(space, dims, NULL) != ndim) {
    *err = unreadable(fname, what);
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    if (ds >= 0) H5Dclose(ds);
    return -1;
  }
  same = ndim == p->ndim;
  for (int d = 0; same && d < ndim; d++) same = (int64_t)dims[d] == p->shape[d];
  if (!same) {
    len += (size_t)snprintf(detail + len, sizeof detail - len, " (file [");
    for (int d = 0; d < ndim && len < sizeof detail; d++)
      len += (size_t)snprintf(detail + len, sizeof detail - len, "%s%llu", d ? ", " : "", (unsigned long long)dims[d]);
    if (len < sizeof detail) len += (size_t)snprintf(detail + len, sizeof detail - len, "], model [");
    for (int d = 0; d < p->ndim && len < sizeof detail; d++)
      len += (size_t)snprintf(detail + len, sizeof detail - len, "%s%lld", d ? ", " : "", (long long)p->shape[d]);
    if (len < sizeof detail) snprintf(detail + len, sizeof detail - len, "])");
    list_add(&mm->shape, path, detail);
  } else if (H5Tget_class(type) != H5T_FLOAT || (H5Tget_size(type) != 4 && H5Tget_size(type) != 8)) {
    list_add(&mm->type, path, " (not float32 or float64)");
    same = false;
  }
  H5Tclose(type);
  H5Sclose(space);
  H5Dclose(ds);
  return same;
}

typedef struct {
  FSDPContext ctx;
  const char *group;
  NameList *extra;
  bool trainable_only;
} ExtraArgs;

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t LinkInfo;
#define ITERATE H5Literate2
#else
typedef H5L_info_t LinkInfo;
#define ITERATE H5Literate
#endif

static herr_t find_extra(hid_t group, const char *name, const LinkInfo *info, void *arg)
{
  ExtraArgs *a = arg;
  FlatParam unit;
  FSDPParamId id;
  char path[1200];
  (void)group;
  (void)info;
  if (!FSDPContextLookupParam_Private(a->ctx, name, &unit, &id) || (a->trainable_only && unit->params[id].frozen)) {
    snprintf(path, sizeof path, "%s/%s", a->group, name);
    list_add(a->extra, path, NULL);
  }
  return 0;
}

static FSDPErrorCode find_extras(FSDPContext ctx, hid_t file, const char *fname, const char *group, bool trainable_only,
                                 NameList *extra)
{
  ExtraArgs args = {ctx, group, extra, trainable_only};
  char what[128];
  htri_t there = H5Lexists(file, group, H5P_DEFAULT);
  hid_t g = there > 0 ? H5Gopen2(file, group, H5P_DEFAULT) : -1;
  herr_t status = g >= 0 ? ITERATE(g, H5_INDEX_NAME, H5_ITER_INC, NULL, find_extra, &args) : -1;
  if (g >= 0) H5Gclose(g);
  snprintf(what, sizeof what, "the group %s", group);
  if (!there) return FSDP_SUCCESS; /* its datasets are listed as missing */
  if (status < 0) return unreadable(fname, what);
  return FSDP_SUCCESS;
}

/* Names, shapes and types of every dataset the load would read; `load[k]`
   says whether item k is read.  Strict: any difference is an error listing
   them; otherwise the differences are reported on rank 0's stderr.
   Metadata that cannot be read is damage, never a difference. */
static FSDPErrorCode check_file(FSDPContext ctx, FSDPOptimizer opt, hid_t file, const char *path, const Header *h,
                                const Item *items, int nitems, bool *load)
{
  const char *names[2] = {NULL, NULL};
  Mismatch mm;
  bool have_optim = false;
  int loaded = 0;
  htri_t params = H5Lexists(file, "params", H5P_DEFAULT);

  memset(&mm, 0, sizeof mm);
  if (params < 0) return unreadable(path, "the link /params");
  FSDPCheck(params > 0 || !h->libfsdp, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: it has no group /params; nothing was loaded", path);
  FSDPCheck(params > 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextLoad: '%s' has no group /params (parameters are datasets /params/<name>)", path);
  if (opt) {
    have_optim = h->have_optim;
    FSDPCheck(have_optim || !ctx->checkpoint_strict, MPI_COMM_SELF, FSDP_ERR_ARG,
              "FSDPContextLoad: '%s' has parameters only (no /optim): load it without an optimizer (opt NULL)", path);
    FSDPCheck(!have_optim || !strcmp(h->optim_type, FSDPOptimizerTypeName(opt->type)), MPI_COMM_SELF, FSDP_ERR_ARG,
              "FSDPContextLoad: '%s' holds the state of a%s %s optimizer, not %s", path,
              h->optim_type[0] == 'a' ? "n" : "", h->optim_type, FSDPOptimizerTypeName(opt->type));
    for (int s = 0; s < opt->nstates; s++) names[s] = FSDPOptimizerStateName_Private(opt, s);
  }
  for (int k = 0; k < nitems; k++) {
    char dpath[1200];
    FSDPErrorCode err = FSDP_SUCCESS;
    int got;
    if (items[k].state >= 0 && !have_optim) {
      load[k] = false;
      continue;
    }
    item_path(&items[k], names, dpath, sizeof dpath);
    got = check_dataset(file, dpath, path, &items[k].unit->params[items[k].param], &mm, &err);
    FSDPCall(err);
    load[k] = got > 0;
    loaded += load[k] && items[k].state < 0;
    /* State without its parameter would not belong to the values it updates. */
    for (int j = 0; items[k].state >= 0 && j < k && load[k]; j++)
      if (items[j].state < 0 && items[j].unit == items[k].unit && items[j].param == items[k].param) load[k] = load[j];
  }
  FSDPCall(find_extras(ctx, file, path, "/params", false, &mm.extra));
  for (int s = 0; have_optim && s < opt->nstates; s++) {
    char g[64];
    snprintf(g, sizeof g, "/optim/%s", names[s]);
    FSDPCall(find_extras(ctx, file, path, g, true, &mm.extra));
  }
  if (!mm.missing.count && !mm.shape.count && !mm.type.count && !mm.extra.count && (!opt || have_optim))
    return FSDP_SUCCESS;
  {
    /* The differences, once, for the error or the report. */
    const NameList *lists[4] = {&mm.missing, &mm.shape, &mm.type, &mm.extra};
    const char *heads[4] = {" missing ", " wrong shape ", " wrong type ", " not in the model "};
    char text[4 * sizeof mm.missing.text + 100] = "";
    for (int l = 0; l < 4; l++)
      if (lists[l]->count) snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s;", heads[l], lists[l]->text);
    FSDPCheck(!ctx->checkpoint_strict, MPI_COMM_SELF, FSDP_ERR_ARG,
              "FSDPContextLoad: '%s' does not match the model:%s (-fsdp_checkpoint_strict false loads what matches)",
              path, text);
    if (ctx->rank == 0) {
      fprintf(stderr, "FSDPContextLoad: '%s': loaded %d parameters%s; not loaded:%s\n", path, loaded,
              opt && !have_optim ? " and no optimizer state (the file has none)" : "", text);
      fflush(stderr);
    }
  }
  return FSDP_SUCCESS;
}

/* Where state tensor s of a unit is staged: after the unit's shard. */
static char *staged_state(FlatParam unit, const Item *it, void *staging, int64_t state_numel)
{
  size_t es = FSDPDataTypeSize(unit->dtype);
  return (char *)staging +
         ((size_t)unit->shard_numel + (size_t)(it->state > 0 ? it->state : 0) * (size_t)state_numel) * es;
}

/* Loading one unit: what its steps share.  A unit's datasets are read into
   staging (its shard, then its packed state tensors), checked against their
   checksums and for non-finite values, and only then copied into the shard
   and the optimizer state.  Each step is collective: every rank makes every
   call, whatever failed on it, and the ranks agree on the outcome after. */
typedef struct {
  FSDPContext ctx;
  FSDPOptimizer opt;
  hid_t file;
  const char *path;
  const Header *h;
  FlatParam unit;
  const Item *items;
  const bool *load;
  int nitems;
  void *staging;
  int64_t state_numel;  /* elements of each optimizer state tensor of the unit */
  const char *names[2]; /* of the optimizer's state tensors */
  Piece *pieces;        /* this rank's piece of each parameter */
  uint32_t *crc, *want; /* per item: the CRC-32C of what was read, and the file's */
  int *have;            /* per item: whether the file has a checksum */
  hid_t dxpl;
} UnitLoad;

/* Staging and property list; on error what was made is left for unit_load_end. */
static FSDPErrorCode unit_load_begin(UnitLoad *L)
{
  FSDPErrorCode ierr;
  FSDPOptimizer opt = L->opt;
  L->state_numel = opt ? opt->units[L->unit->index].numel : 0;
  for (int s = 0; opt && s < opt->nstates; s++) L->names[s] = FSDPOptimizerStateName_Private(opt, s);
  if ((ierr = FSDPMalloc((size_t)L->unit->nparams * sizeof *L->pieces + 1, FSDP_MEM_OTHER, &L->pieces))) goto cleanup;
  if ((ierr = FSDPCalloc((size_t)L->nitems + 1, sizeof *L->crc, FSDP_MEM_OTHER, &L->crc))) goto cleanup;
  if ((ierr = FSDPCalloc((size_t)L->nitems + 1, sizeof *L->want, FSDP_MEM_OTHER, &L->want))) goto cleanup;
  if ((ierr = FSDPCalloc((size_t)L->nitems + 1, sizeof *L->have, FSDP_MEM_OTHER, &L->have))) goto cleanup;
  read_pieces(L->unit, L->pieces);
  L->dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (L->dxpl < 0 || H5Pset_dxpl_mpio(L->dxpl, transfer_mode(L->ctx)) < 0)
    ierr = H5ERR("cannot create a transfer property list");
cleanup:
  return ierr;
}

static FSDPErrorCode unit_load_end(UnitLoad *L)
{
  FSDPErrorCode ierr = FSDP_SUCCESS, e;
  if (L->dxpl >= 0) H5Pclose(L->dxpl);
  L->dxpl = -1;
  if ((e = FSDPFree(&L->pieces)) && !ierr) ierr = e;
  if ((e = FSDPFree(&L->crc)) && !ierr) ierr = e;
  if ((e = FSDPFree(&L->want)) && !ierr) ierr = e;
  if ((e = FSDPFree(&L->have)) && !ierr) ierr = e;
  return ierr;
}

/* Where item k of the unit is staged. */
static char *unit_load_staged(const UnitLoad *L, int k)
{
  const Item *it = &L->items[k];
  return piece_memory(it, &L->pieces[it->param], L->staging, staged_state(L->unit, it, L->staging, L->state_numel));
}

/* Item k's dataset, this rank's piece of it, into staging, with its CRC.
   Collective (a collective read): a rank that fails still takes part, with
   nothing to read; every handle it opened is closed on every path.  *ierr
   keeps the rank's first error: once it is set, nothing raises another. */
static void read_item(UnitLoad *L, int k, int64_t *bytes, FSDPErrorCode *ierr)
{
  const Item *it = &L->items[k];
  const ParamInfo *p = &L->unit->params[it->param];
  const Piece *pc = &L->pieces[it->param];
  size_t es = FSDPDataTypeSize(L->unit->dtype);
  char *mem = unit_load_staged(L, k), dpath[1200], reason[256];
  int64_t len = pc->end - pc->begin;
  hid_t ds, space = -1, memspace = -1, ftype = -1;
  void *convert = NULL;
  herr_t status = -1;

  item_path(it, L->names, dpath, sizeof dpath);
  ds = H5Dopen2(L->file, dpath, H5P_DEFAULT);
  if (ds >= 0) {
    int got = get_attr(ds, "crc32c", H5T_NATIVE_UINT32, 0, &L->want[k]);
    L->have[k] = got > 0;
    /* Other tools' files load unverified; libfsdp's never do. */
    if ((got < 0 || (!got && L->h->libfsdp)) && !*ierr)
      *ierr = DAMAGED("FSDPContextLoad: '%s' is damaged: the crc32c attribute of %s is %s", L->path, dpath,
                      got < 0 ? "unreadable" : "missing");
    space = H5Dget_space(ds);
    ftype = H5Dget_type(ds);
  }
  if (space >= 0 && ftype >= 0 && p->numel == 0) status = 0;
  else if (space >= 0 && ftype >= 0) {
    /* The checksum is of the file's values: read a different type as it is, then convert. */
    size_t fs = H5Tget_size(ftype);
    bool selected = select_piece(space, &memspace, p, pc) >= 0;
    if (selected && fs != es && FSDPMalloc((size_t)(len > 0 ? len : 1) * fs, FSDP_MEM_COMM_STAGING, &convert)) {
      if (!*ierr) *ierr = FSDPErrorTraceback(__LINE__, __func__, __FILE__, FSDP_ERR_MEM);
      selected = false;
    }
    if (!selected && memspace >= 0) { /* still take part in the collective read, with nothing to read */
      if (!*ierr) *ierr = H5ERR("FSDPContextLoad: cannot select this rank's part of %s", dpath);
      H5Sselect_none(space);
      H5Sselect_none(memspace);
      len = 0;
    }
    if (memspace >= 0)
      status = H5Dread(ds, fs == 8 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, memspace, space, L->dxpl,
                       convert ? convert : mem);
    if (status >= 0 && len > 0) {
      L->crc[k] = piece_crc(it, pc, convert ? convert : mem, fs);
      if (convert && !*ierr)
        *ierr = FSDPDataTypeConvert(L->unit->dtype, mem, fs == 8 ? FSDP_FLOAT64 : FSDP_FLOAT32, convert, len);
    }
    *bytes += len * (int64_t)fs;
  }
  if (status < 0 && !*ierr)
    *ierr = DAMAGED("FSDPContextLoad: '%s' is damaged: %s cannot be read (%s)", L->path, dpath, h5_reason(reason));
  if (convert) {
    FSDPErrorCode e = FSDPFree(&convert);
    if (!*ierr) *ierr = e;
  }
  if (ftype >= 0) H5Tclose(ftype);
  if (memspace >= 0) H5Sclose(memspace);
  if (space >= 0) H5Sclose(space);
  if (ds >= 0) H5Dclose(ds);
}

/* The shard group read every element of the unit once: its pieces' CRCs
   combine to each dataset's, which must be the file's.  Collective on the
   shard group. */
static FSDPErrorCode verify_checksums(UnitLoad *L)
{
  NameList bad = {{0}, 0};
  int m = 0;
  FSDPErrorCode ierr;

  for (int k = 0; k < L->nitems; k++) /* this unit's entries only, packed at the front */
    if (L->items[k].unit == L->unit) L->crc[m++] = L->crc[k];
  ierr = MPI_RECORD(MPI_Allreduce(MPI_IN_PLACE, L->crc, m, MPI_UINT32_T, MPI_BXOR, L->ctx->shard_comm));
  for (int k = L->nitems - 1; k >= 0; k--)
    if (L->items[k].unit == L->unit) L->crc[k] = L->crc[--m];
  for (int k = 0; k < L->nitems && !ierr; k++)
    if (L->items[k].unit == L->unit && L->load[k] && L->have[k] && L->crc[k] != L->want[k]) {
      char dpath[1200], detail[64];
      item_path(&L->items[k], L->names, dpath, sizeof dpath);
      snprintf(detail, sizeof detail, " (CRC-32C 0x%08x, the file says 0x%08x)", L->crc[k], L->want[k]);
      list_add(&bad, dpath, detail);
    }
  if (!ierr && bad.count)
    ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_CORRUPT,
                     "FSDPContextLoad: '%s' is corrupt: checksum mismatch in %s; unit '%s' and those after it were not "
                     "loaded",
                     L->path, bad.text, L->unit->name);
  return ierr;
}

/* Values that verify can still be NaN: saved with -fsdp_check_finite false, or by another tool. */
static FSDPErrorCode verify_finite(const UnitLoad *L)
{
  for (int k = 0; k < L->nitems && L->ctx->check_finite; k++) {
    const Item *it = &L->items[k];
    const Piece *pc = &L->pieces[it->param];
    int64_t at;
    double v;
    char dpath[1200];
    if (it->unit != L->unit || !L->load[k] || pc->end <= pc->begin) continue;
    at = first_nonfinite(L->unit->dtype, unit_load_staged(L, k), pc->end - pc->begin, &v);
    if (at < 0) continue;
    item_path(it, L->names, dpath, sizeof dpath);
    FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_NOT_FINITE,
              "FSDPContextLoad: '%s': %s[%lld] is %g: the file holds non-finite values; unit '%s' and those after "
              "it were not loaded (-fsdp_check_finite false loads them)",
              L->path, dpath, (long long)(pc->begin + at), v, L->unit->name);
  }
  return FSDP_SUCCESS;
}

/* Verified: the unit's shard and optimizer state take the staged values. */
static FSDPErrorCode commit_unit(const UnitLoad *L)
{
  size_t es = FSDPDataTypeSize(L->unit->dtype);
  for (int k = 0; k < L->nitems; k++) {
    const Item *it = &L->items[k];
    const Piece *pc = &L->pieces[it->param];
    void *state = it->state >= 0 ? L->opt->units[L->unit->index].state[it->state] : NULL;
    if (it->unit != L->unit || !L->load[k] || pc->end <= pc->begin) continue;
    /* On a GPU the unit's memory is device memory: DeviceFromHost is memcpy on the host. */
    FSDPCall(DeviceFromHost_Private(L->ctx->dev, piece_memory(it, pc, L->unit->shard, state), unit_load_staged(L, k),
                                    (size_t)(pc->end - pc->begin) * es));
  }
  return FSDP_SUCCESS;
}

/* Collective: reads, verifies and installs one unit; on any rank's error
   every rank returns one and the unit is unchanged. */
static FSDPErrorCode load_unit(FSDPContext ctx, FSDPOptimizer opt, hid_t file, const char *path, const Header *h,
                               FlatParam unit, const Item *items, const bool *load, int nitems, void *staging,
                               int64_t *bytes)
{
  UnitLoad L = {.ctx = ctx,
                .opt = opt,
                .file = file,
                .path = path,
                .h = h,
                .unit = unit,
                .items = items,
                .load = load,
                .nitems = nitems,
                .staging = staging,
                .dxpl = -1};
  FSDPErrorCode ierr = unit_load_begin(&L), e;

  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  for (int k = 0, go = !ierr; k < nitems && go; k++) { /* every rank reads every item, failed or not */
    if (items[k].unit != unit || !load[k]) continue;
    read_item(&L, k, bytes, &ierr);
  }
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (!ierr) ierr = verify_checksums(&L);
  if (!ierr) ierr = verify_finite(&L);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (!ierr) ierr = commit_unit(&L);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  e = unit_load_end(&L);
  return ierr ? ierr : e;
}

static FSDPErrorCode load_file(FSDPContext ctx, FSDPOptimizer opt, hid_t file, const char *path, int64_t *bytes)
{
  Item *items = NULL;
  bool *load = NULL;
  int nitems;
  size_t staging_bytes = 0;
  void *staging = NULL;
  Header h;
  FSDPErrorCode ierr, e;

  /* One cleanup at the end; the ranks agree before each collective step. */
  ierr = list_items(ctx, opt ? opt->nstates : 0, &items, &nitems);
  if (!ierr) ierr = FSDPCalloc((size_t)nitems + 1, sizeof *load, FSDP_MEM_OTHER, &load);
  if (!ierr) ierr = read_header(opt, file, path, &h);
  if (!ierr) ierr = check_file(ctx, opt, file, path, &h, items, nitems, load);
  if (!ierr && h.libfsdp && !h.have_metadata_crc && ctx->rank == 0) {
    fprintf(stderr,
            "FSDPContextLoad: '%s' has no %s (an older libfsdp wrote it): its attributes are checked for range "
            "and consistency only\n",
            path, METADATA_CRC);
    fflush(stderr);
  }
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  /* Staging for the largest unit: its shard and its state tensors. */
  for (int u = 0; u < ctx->nunits && !ierr; u++) {
    FlatParam unit = ctx->units[u];
    size_t b =
        ((size_t)unit->shard_numel + (size_t)(opt ? opt->nstates : 0) * (size_t)(opt ? opt->units[u].numel : 0)) *
        FSDPDataTypeSize(unit->dtype);
    staging_bytes = b > staging_bytes ? b : staging_bytes;
  }
  if (!ierr) ierr = FSDPMalloc(staging_bytes ? staging_bytes : 1, FSDP_MEM_COMM_STAGING, &staging);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  /* Unsharded copies kept from forward, or prefetched, would go stale. */
  for (int u = 0; u < ctx->nunits && !ierr; u++) ierr = FlatParamDropKept_Private(ctx->units[u]);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  for (int u = 0; u < ctx->nunits && !ierr; u++)
    ierr = load_unit(ctx, opt, file, path, &h, ctx->units[u], items, load, nitems, staging, bytes);
  if (!ierr) {
    ctx->training = h.training;
    if (opt && h.have_optim) opt->step = h.step;
    if (opt && h.have_scale && opt->scaler) {
      opt->scale = h.scale;
      opt->growth_tracker = h.growth_tracker;
    }
  }
  if ((e = FSDPFree(&staging)) && !ierr) ierr = e;
  if ((e = FSDPFree(&load)) && !ierr) ierr = e;
  if ((e = FSDPFree(&items)) && !ierr) ierr = e;
  return ierr;
}
#endif

FSDPErrorCode FSDPContextLoad(FSDPContext ctx, FSDPOptimizer opt, const char *path)
{
  CHECK_CTX_SETUP(ctx);
  FSDPCheck(path && *path, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextLoad: path must not be NULL or empty");
  FSDPCheck(!opt || opt->ctx == ctx, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextLoad: the optimizer belongs to another context");
  FSDPCheck(!opt || opt->setup, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPContextLoad: the optimizer is not set up: call FSDPOptimizerSetUp first, or pass NULL to load "
            "parameters only");
  FSDPCheck(!opt || opt->trainable_changes == ctx->trainable_changes, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPContextLoad: parameters were frozen or unfrozen after FSDPOptimizerSetUp: the optimizer state no "
            "longer matches them (set trainability before it)");
  /* A unit in REDUCING is ctx->reducing: the state says it all. */
  for (int u = 0; u < ctx->nunits; u++)
    FSDPCheck(ctx->units[u]->state == FSDP_FLATPARAM_SHARDED, MPI_COMM_SELF, FSDP_ERR_STATE,
              "FSDPContextLoad: unit '%s' is %s: load between steps, after FSDPContextFinishBackward or "
              "FSDPOptimizerStep",
              ctx->units[u]->name, FlatParamStateName(ctx->units[u]->state));
#ifdef FSDP_HAVE_HDF5
  {
    FSDPErrorCode ierr = FSDP_SUCCESS;
    QuietHDF5 quiet;
    hid_t fapl, file = -1;
    int64_t bytes = 0;
    char reason[256];

    FSDPCall(FSDPLogEventBegin(ctx->ev_load));
    quiet_begin(&quiet);
    fapl = file_access(ctx->comm);
    if (fapl >= 0) file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (file < 0) {
      if (access(path, R_OK))
        ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                         "FSDPContextLoad: cannot open '%s': %s", path, strerror(errno));
      else
        ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_CORRUPT,
                         "FSDPContextLoad: '%s' is not a readable HDF5 file (truncated or corrupt?): %s", path,
                         h5_reason(reason));
    }
    if (fapl >= 0) H5Pclose(fapl);
    ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
    if (!ierr) ierr = load_file(ctx, opt, file, path, &bytes);
    if (file >= 0) H5Fclose(file);
    quiet_end(&quiet);
    FSDPCall(FSDPLogEventEnd(ctx->ev_load, bytes));
    FSDPCall(ierr);
  }
  return FSDP_SUCCESS;
#else
  FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "FSDPContextLoad: '%s': this libfsdp was built without HDF5 (configure --with-hdf5)", path);
#endif
}

#ifndef FSDP_HAVE_HDF5
FSDPErrorCode FSDPContextSave(FSDPContext ctx, FSDPOptimizer opt, const char *path)
{
  CHECK_CTX_SETUP(ctx);
  (void)opt;
  FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "FSDPContextSave: '%s': this libfsdp was built without HDF5 (configure --with-hdf5)",
            path ? path : "(null)");
}
#endif
