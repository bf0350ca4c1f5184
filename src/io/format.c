/* The checkpoint format's pieces that save and load share
   (doc/checkpoint-format.md): which elements of each dataset a rank
   handles, the HDF5 helpers (selections, attributes, error text), the
   metadata checksum, and the parallel file access. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ioimpl.h"
#include "simd.h"

#ifdef FSDP_HAVE_HDF5

/* ------------------------------------------------------------------ what each rank handles */

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
void CheckpointWritePieces_Private(FlatParam unit, Piece *pieces)
{
  FSDPContext ctx = unit->ctx;
  int64_t first = (int64_t)ctx->shard_index * unit->shard_numel, n = unit->shard_numel;
  find_pieces(unit, first + n * ctx->replica_index / ctx->nreplicas,
              first + n * (ctx->replica_index + 1) / ctx->nreplicas, pieces);
}

void CheckpointReadPieces_Private(FlatParam unit, Piece *pieces)
{
  int64_t first = (int64_t)unit->ctx->shard_index * unit->shard_numel;
  find_pieces(unit, first, first + unit->shard_numel, pieces);
}

/* Where item's piece is in memory: the shard, or the packed optimizer state. */
char *CheckpointPieceMemory_Private(const Item *it, const Piece *pc, void *shard, void *state)
{
  size_t es = FSDPDataTypeSize(it->unit->dtype);
  return it->state < 0 ? (char *)shard + (size_t)pc->at * es : (char *)state + (size_t)pc->packed * es;
}

/* Saves and loads check every value.  A float32 is tested on its bits: the
   same test, with integer operations only, for a whole block of SCAN values
   (a constant count and an OR of integers, which GCC 12 vectorizes at -O2)
   and then, in a block that has one, value by value.  A step of the scan:
   192 KB of float32, in L2 for the CRC and both checks. */
enum { SCAN = 1024, STEP = 48 * SCAN };

static inline uint32_t bits32(const void *mem, int64_t i)
{
  uint32_t w;
  memcpy(&w, (const char *)mem + 4 * i, 4);
  return w;
}

static inline bool nonfinite32(uint32_t w) { return (w & 0x7f800000u) == 0x7f800000u; } /* exponent all ones */

/* Less than 0: the sign set, and neither -0 nor a NaN. */
static inline bool negative32(uint32_t w) { return (w >> 31) & ((w & 0x7fffffffu) - 1u < 0x7f800000u); }

/* Compiled for each SIMD path (simd.h): AVX-512 tests 16 values at a time
   where the baseline's SSE2 tests 4. */
FSDP_INLINE void nonfinite_block_body(const void *mem, uint32_t *any)
{
  uint32_t a = 0; /* an integer: a bool's OR vectorizes 4 times slower */
  for (int i = 0; i < SCAN; i++) a |= nonfinite32(bits32(mem, i));
  *any = a;
}
FSDP_SIMD_KERNEL(nonfinite_block, (const void *mem, uint32_t *any), (mem, any))

FSDP_INLINE void negative_block_body(const void *mem, uint32_t *any)
{
  uint32_t a = 0;
  for (int i = 0; i < SCAN; i++) a |= negative32(bits32(mem, i));
  *any = a;
}
FSDP_SIMD_KERNEL(negative_block, (const void *mem, uint32_t *any), (mem, any))

static bool block_has_nonfinite32(const void *mem)
{
  uint32_t any;
  nonfinite_block(mem, &any);
  return any;
}

static bool block_has_negative32(const void *mem)
{
  uint32_t any;
  negative_block(mem, &any);
  return any;
}

/* The first of n values that is NaN or infinite, or -1. */
static int64_t first_nonfinite(FSDPDataType dtype, const void *mem, int64_t n)
{
  int64_t i = 0;
  if (dtype == FSDP_FLOAT64) {
    for (; i < n; i++)
      if (!isfinite(((const double *)mem)[i])) return i;
    return -1;
  }
  while (i + SCAN <= n && !block_has_nonfinite32((const float *)mem + i)) i += SCAN;
  for (; i < n; i++)
    if (nonfinite32(bits32(mem, i))) return i;
  return -1;
}

/* The first of n values that is less than 0, or -1. */
static int64_t first_negative(FSDPDataType dtype, const void *mem, int64_t n)
{
  int64_t i = 0;
  if (dtype == FSDP_FLOAT64) {
    for (; i < n; i++) /* isless is quiet: a NaN raises no FP exception */
      if (isless(((const double *)mem)[i], 0)) return i;
    return -1;
  }
  while (i + SCAN <= n && !block_has_negative32((const float *)mem + i)) i += SCAN;
  for (; i < n; i++)
    if (negative32(bits32(mem, i))) return i;
  return -1;
}

/* Value i of n in memory, for an error message. */
double CheckpointValue_Private(FSDPDataType dtype, const void *mem, int64_t i)
{
  return dtype == FSDP_FLOAT64 ? ((const double *)mem)[i] : (double)((const float *)mem)[i];
}

/* The CRC-32C of item's values from the CRC-32C `crc` of this piece's: as
   if the bytes after it in the dataset followed (XOR with the other pieces'
   gives the dataset's). */
uint32_t CheckpointPlaceCRC_Private(const Item *it, const Piece *pc, uint32_t crc, size_t es)
{
  const ParamInfo *p = &it->unit->params[it->param];
  if (pc->end <= pc->begin) return 0;
  return FSDPCRC32CShift_Private(crc, (uint64_t)(p->numel - pc->end) * es);
}

uint32_t CheckpointPieceCRC_Private(const Item *it, const Piece *pc, const void *mem, size_t es)
{
  if (pc->end <= pc->begin) return 0;
  return CheckpointPlaceCRC_Private(it, pc, FSDPCRC32C_Private(0, mem, (size_t)(pc->end - pc->begin) * es), es);
}

/* n values in memory: the CRC-32C of their bytes (crc not NULL), the first
   non-finite one (nonfinite not NULL) and the first negative one (negative
   not NULL), -1 for none.  One pass, STEP values at a time, each step
   checked while it is in cache: the values cross memory once. */
void CheckpointScanValues_Private(FSDPDataType dtype, const void *mem, int64_t n, uint32_t *crc, int64_t *nonfinite,
                                  int64_t *negative)
{
  if (crc) *crc = 0;
  if (nonfinite) *nonfinite = -1;
  if (negative) *negative = -1;
  CheckpointScanMore_Private(dtype, mem, n, 0, crc, nonfinite, negative);
}

/* The first of m values that first() finds: among the first `flagged` of
   them only where `suspect` says one may be there, then among the rest. */
static int64_t first_of(int64_t (*first)(FSDPDataType, const void *, int64_t), FSDPDataType dtype, const char *mem,
                        int64_t m, int64_t flagged, bool suspect)
{
  int64_t at;
  if (suspect && (at = first(dtype, mem, flagged)) >= 0) return at;
  if ((at = first(dtype, mem + (size_t)flagged * FSDPDataTypeSize(dtype), m - flagged)) >= 0) return flagged + at;
  return -1;
}

/* The same scan continued: mem holds the n values after the first `done`.
   On the AVX-512 path, where the CPU folds the CRC, its loads of float32
   values also flag the ones the checks look for
   (FSDPCRC32CFlagFloats_Private): one pass, not three. */
void CheckpointScanMore_Private(FSDPDataType dtype, const void *mem, int64_t n, int64_t done, uint32_t *crc,
                                int64_t *nonfinite, int64_t *negative)
{
  size_t es = FSDPDataTypeSize(dtype);
  for (int64_t i = 0; i < n; i += STEP) {
    int64_t m = n - i < STEP ? n - i : STEP, at, flagged = 0;
    const char *step = (const char *)mem + (size_t)i * es;
    size_t bytes = (size_t)m * es, body = bytes & ~(size_t)63;
    bool maybe_nonfinite = true, maybe_negative = true;
    if (crc && dtype == FSDP_FLOAT32 && FSDPSimdLevel_Private() == FSDP_SIMD_AVX512 &&
        FSDPCRC32CFlagFloats_Private(crc, step, body, &maybe_nonfinite, &maybe_negative)) {
      *crc = FSDPCRC32C_Private(*crc, step + body, bytes - body);
      flagged = (int64_t)(body / es);
    } else if (crc) *crc = FSDPCRC32C_Private(*crc, step, bytes);
    if (nonfinite && *nonfinite < 0 && (at = first_of(first_nonfinite, dtype, step, m, flagged, maybe_nonfinite)) >= 0)
      *nonfinite = done + i + at;
    if (negative && *negative < 0 && (at = first_of(first_negative, dtype, step, m, flagged, maybe_negative)) >= 0)
      *negative = done + i + at;
  }
}

/* A dataset's crc32c in format 2: the CRC-32C of its values, bound to its
   path and to the file's id, so that a dataset moved, swapped with another of
   its shape, or copied with its checksum from another file fails it. */
uint32_t CheckpointBindCRC_Private(uint64_t file_id, const char *path, uint32_t values)
{
  unsigned char b[8];
  uint32_t crc;
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(file_id >> (8 * i)); /* little-endian on every host */
  crc = FSDPCRC32C_Private(0, b, sizeof b);
  crc = FSDPCRC32C_Private(crc, path, strlen(path) + 1);
  for (int i = 0; i < 4; i++) b[i] = (unsigned char)(values >> (8 * i));
  return FSDPCRC32C_Private(crc, b, 4);
}

/* Every dataset of the checkpoint, in file order: parameters, then each
   state tensor of each trainable parameter. */
FSDPErrorCode CheckpointListItems_Private(FSDPContext ctx, int nstates, Item **items, int *n)
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

const char *CheckpointH5Reason_Private(char buf[256])
{
  buf[0] = '\0';
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, last_message, buf);
  for (char *c = buf; *c; c++) /* MPI-IO's error strings span lines: an error message is one */
    if (*c == '\n') *c = ' ';
  return buf[0] ? buf : "no detail from HDF5";
}

hid_t CheckpointFileType_Private(FSDPDataType dtype) { return dtype == FSDP_FLOAT64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE; }
hid_t CheckpointNativeType_Private(FSDPDataType dtype)
{
  return dtype == FSDP_FLOAT64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
}

void CheckpointItemPath_Private(const Item *it, const char *const *state_names, char *buf, size_t len)
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
herr_t CheckpointSelectPiece_Private(hid_t filespace, hid_t *memspace, const ParamInfo *p, const Piece *pc)
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

hid_t CheckpointMakeSpace_Private(const ParamInfo *p)
{
  hsize_t dims[32];
  if (p->ndim == 0) return H5Screate(H5S_SCALAR);
  if (p->ndim > 32) return -1;
  for (int d = 0; d < p->ndim; d++) dims[d] = (hsize_t)p->shape[d];
  return H5Screate_simple(p->ndim, dims, NULL);
}

/* Attributes: a scalar (rank 0), a vector of dims[0] or a matrix dims[0] x dims[1]. */
herr_t CheckpointPutArray_Private(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims,
                                  const void *value)
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

herr_t CheckpointPutAttr_Private(hid_t loc, const char *name, hid_t type, int n, const void *value)
{
  hsize_t dims = (hsize_t)n;
  return CheckpointPutArray_Private(loc, name, type, n ? 1 : 0, &dims, value);
}

herr_t CheckpointPutString_Private(hid_t loc, const char *name, const char *value)
{
  hid_t type = H5Tcopy(H5T_C_S1);
  herr_t status = type >= 0 && H5Tset_size(type, strlen(value) + 1) >= 0 && H5Tset_strpad(type, H5T_STR_NULLTERM) >= 0
                      ? CheckpointPutAttr_Private(loc, name, type, 0, value)
                      : -1;
  if (type >= 0) H5Tclose(type);
  return status;
}

herr_t CheckpointPutInt64_Private(hid_t loc, const char *name, int64_t v)
{
  return CheckpointPutAttr_Private(loc, name, H5T_NATIVE_INT64, 0, &v);
}
herr_t CheckpointPutDouble_Private(hid_t loc, const char *name, double v)
{
  return CheckpointPutAttr_Private(loc, name, H5T_NATIVE_DOUBLE, 0, &v);
}

/* Reads a numeric attribute of n values, converted to `type`: 1 when read,
   0 when absent, -1 when it is there and cannot be read (damaged metadata
   fails HDF5's checksum) or has another number of values. */
int CheckpointGetAttr_Private(hid_t loc, const char *name, hid_t type, int n, void *value)
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

/* A fixed-length string attribute, as CheckpointGetAttr_Private. */
int CheckpointGetString_Private(hid_t loc, const char *name, char *value, size_t len)
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

/* A fixed-length string attribute of any length, in memory of its own
   (*value, to be freed; NULL when absent): as CheckpointGetString_Private. */
int CheckpointGetStringAlloc_Private(hid_t loc, const char *name, char **value)
{
  hid_t attr, type;
  size_t size = 0;
  int got;
  htri_t there = H5Aexists(loc, name);
  *value = NULL;
  if (there <= 0) return there < 0 ? -1 : 0;
  attr = H5Aopen(loc, name, H5P_DEFAULT);
  type = attr >= 0 ? H5Aget_type(attr) : -1;
  if (type >= 0) size = H5Tget_size(type);
  if (type >= 0) H5Tclose(type);
  if (attr >= 0) H5Aclose(attr);
  if (!size || FSDPMalloc(size + 1, FSDP_MEM_OTHER, value)) return -1;
  got = CheckpointGetString_Private(loc, name, *value, size + 1);
  if (got <= 0) (void)FSDPFree(value);
  return got;
}

/* ------------------------------------------------------------------ the metadata checksum */

/* metadata_crc32c, a root attribute, is the CRC-32C of every attribute of /
   and /optim but itself, in name order: each one's name, type class, type
   size, number of values and values as stored.  HDF5's own checksums catch
   damage to the file; this catches an edit (h5py, h5repack with changes)
   that rewrote them consistently. */
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
int CheckpointMetadataDigest_Private(hid_t file, uint32_t *crc)
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

/* The file access list of a save or a load: MPI-IO on the context's
   communicator, metadata read by one rank and broadcast, written
   collectively; or, for POSIX transfers, a plain file (HDF5's sec2 driver)
   that a rank opens alone, without HDF5's advisory lock where HDF5 can turn
   it off (1.10.7 on; the library orders the ranks' accesses itself, and file
   systems without flock refuse it; older HDF5 needs HDF5_USE_FILE_LOCKING=FALSE
   there).
   Object headers with checksums either way. */
hid_t CheckpointFileAccess_Private(FSDPContext ctx, FSDPCheckpointIO io)
{
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  herr_t s = 0;
  if (fapl < 0) return -1;
  if (io == FSDP_CHECKPOINT_IO_POSIX) {
#if (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7) || H5_VERSION_GE(1, 12, 1)
    s |= H5Pset_file_locking(fapl, false, true);
#endif
  } else {
    s |= H5Pset_fapl_mpio(fapl, ctx->comm, MPI_INFO_NULL);
    s |= H5Pset_all_coll_metadata_ops(fapl, true);
    s |= H5Pset_coll_metadata_write(fapl, true);
  }
  s |= H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST);
  if (s < 0) {
    H5Pclose(fapl);
    return -1;
  }
  return fapl;
}

/* The transfer list of H5Dread and H5Dwrite: MPI-IO's collective or
   independent mode; POSIX transfers need none. */
hid_t CheckpointTransferList_Private(FSDPCheckpointIO io)
{
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  H5FD_mpio_xfer_t mode = io == FSDP_CHECKPOINT_IO_COLLECTIVE ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT;
  if (dxpl >= 0 && io != FSDP_CHECKPOINT_IO_POSIX && H5Pset_dxpl_mpio(dxpl, mode) < 0) {
    H5Pclose(dxpl);
    return -1;
  }
  return dxpl;
}

void CheckpointQuietBegin_Private(QuietHDF5 *q)
{
  FSDPFPEnter_Private(&q->fenv); /* before the first HDF5 call, which may start the library */
  H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void CheckpointQuietEnd_Private(const QuietHDF5 *q)
{
  H5Eset_auto2(H5E_DEFAULT, q->func, q->data);
  FSDPFPLeave_Private(&q->fenv);
}

/* Collective: the settings a save or a load acts on, which a rank may have
   changed since SetUp (FSDPContextSetCheckpointIO, ...), must be every
   rank's: another transfer mode is another collective, another strictness
   another set of reads. */
FSDPErrorCode CheckpointAgreeSettings_Private(FSDPContext ctx, const char *caller, FSDPCheckpointIO io)
{
  FSDPSetting s[4];
  FSDPCall(FSDPSettingSet_Private(&s[0], "-fsdp_checkpoint_io", "%s", FSDPCheckpointIOName_Private(io)));
  FSDPCall(FSDPSettingSet_Private(&s[1], "-fsdp_checkpoint_strict", "%s", ctx->checkpoint_strict ? "true" : "false"));
  FSDPCall(FSDPSettingSet_Private(&s[2], "-fsdp_checkpoint_keep", "%d", ctx->checkpoint_keep));
  FSDPCall(FSDPSettingSet_Private(&s[3], "-fsdp_check_finite", "%s", ctx->check_finite ? "true" : "false"));
  FSDPCall(FSDPSettingsAgree_Private(ctx->comm, caller, 4, s));
  return FSDP_SUCCESS;
}

/* An MPI call whose failure is recorded, not returned (MPI_RECORD). */
FSDPErrorCode CheckpointMPIRecord_Private(int err, int line, const char *func, const char *call)
{
  return err == MPI_SUCCESS ? FSDP_SUCCESS : FSDPErrorMPI(line, func, __FILE__, err, call);
}

/* Where item k of the unit is staged. */
char *CheckpointStaged_Private(const UnitLoad *L, int k)
{
  const Item *it = &L->items[k];
  return CheckpointPieceMemory_Private(it, &L->pieces[it->param], L->staged[0],
                                       it->state >= 0 ? L->staged[1 + it->state] : NULL);
}
#endif
