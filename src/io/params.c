/* FSDPContextLoadParams: parameters by name from /params/<name> of an HDF5
   file (the layout doc/nn.md describes, and the one checkpoints will share).
   Every rank reads the parameters its shards touch, one at a time, so
   nothing larger than the largest parameter is ever staged. */
#include <stdio.h>
#include <string.h>

#include "../core/coreimpl.h"

#ifdef FSDP_HAVE_HDF5
#include <hdf5.h>

/* A list of names for an error message, cut to fit. */
typedef struct {
  char text[600];
  int count;
} NameList;

static void list_add(NameList *l, const char *name, const char *detail)
{
  size_t len = strlen(l->text);
  if (len < sizeof l->text - 1)
    snprintf(l->text + len, sizeof l->text - len, "%s%s%s", l->count ? ", " : "", name, detail ? detail : "");
  l->count++;
}

typedef struct {
  FSDPContext ctx;
  NameList *extra;
} IterArgs;

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t LinkInfo;
#define ITERATE H5Literate2
#else
typedef H5L_info_t LinkInfo;
#define ITERATE H5Literate
#endif

static herr_t find_extra(hid_t group, const char *name, const LinkInfo *info, void *arg)
{
  IterArgs *a = arg;
  FlatParam unit;
  FSDPParamId id;
  (void)group;
  (void)info;
  if (!FSDPContextLookupParam_Private(a->ctx, name, &unit, &id)) list_add(a->extra, name, NULL);
  return 0;
}

/* Checks names and shapes; fills the error message when they do not match. */
static FSDPErrorCode check_file(FSDPContext ctx, hid_t file, const char *path)
{
  NameList missing = {{0}, 0}, shapes = {{0}, 0}, extra = {{0}, 0};
  IterArgs args = {ctx, &extra};
  hid_t group;

  group = H5Gopen2(file, "params", H5P_DEFAULT);
  FSDPCheck(group >= 0, MPI_COMM_SELF, FSDP_ERR_HDF5, "%s: no group /params (parameters are datasets /params/<name>)",
            path);
  for (int u = 0; u < ctx->nunits; u++)
    for (int i = 0; i < ctx->units[u]->nparams; i++) {
      const ParamInfo *p = &ctx->units[u]->params[i];
      hsize_t dims[16];
      int ndim;
      bool same;
      hid_t ds, space;
      char detail[160];

      if (H5Lexists(group, p->name, H5P_DEFAULT) <= 0) {
        list_add(&missing, p->name, NULL);
        continue;
      }
      ds = H5Dopen2(group, p->name, H5P_DEFAULT);
      space = ds >= 0 ? H5Dget_space(ds) : -1;
      ndim = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
      if (ndim < 0 || ndim > 16 || H5Sget_simple_extent_dims(space, dims, NULL) != ndim) ndim = 0; /* printed as [] */
      same = space >= 0 && ndim == p->ndim;
      for (int d = 0; same && d < ndim; d++) same = (int64_t)dims[d] == p->shape[d];
      if (!same) {
        size_t len = 0;
        len += (size_t)snprintf(detail + len, sizeof detail - len, " (file [");
        for (int d = 0; d < ndim && d < 16 && len < sizeof detail; d++)
          len += (size_t)snprintf(detail + len, sizeof detail - len, "%s%llu", d ? ", " : "", (unsigned long long)dims[d]);
        if (len < sizeof detail) len += (size_t)snprintf(detail + len, sizeof detail - len, "], model [");
        for (int d = 0; d < p->ndim && len < sizeof detail; d++)
          len += (size_t)snprintf(detail + len, sizeof detail - len, "%s%lld", d ? ", " : "", (long long)p->shape[d]);
        if (len < sizeof detail) snprintf(detail + len, sizeof detail - len, "])");
        list_add(&shapes, p->name, detail);
      }
      if (space >= 0) H5Sclose(space);
      if (ds >= 0) H5Dclose(ds);
    }
  ITERATE(group, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, find_extra, &args);
  H5Gclose(group);
  FSDPCheck(!missing.count && !shapes.count && !extra.count, MPI_COMM_SELF, FSDP_ERR_ARG,
            "%s does not match the model:%s%s%s%s%s%s%s%s%s", path, missing.count ? " missing " : "", missing.text,
            missing.count ? ";" : "", shapes.count ? " wrong shape " : "", shapes.text, shapes.count ? ";" : "",
            extra.count ? " not in the model " : "", extra.text, extra.count ? ";" : "");
  return FSDP_SUCCESS;
}

/* Reads each parameter this rank's shards hold part of and copies that part in. */
static FSDPErrorCode read_shards(FSDPContext ctx, hid_t file, const char *path)
{
  /* Unsharded copies kept from forward, or prefetched, would go stale. */
  for (int u = 0; u < ctx->nunits; u++) FSDPCall(FlatParamDropKept_Private(ctx->units[u]));
  for (int u = 0; u < ctx->nunits; u++) {
    FlatParam unit = ctx->units[u];
    hid_t memtype = unit->dtype == FSDP_FLOAT64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
    size_t es = FSDPDataTypeSize(unit->dtype);
    for (int i = 0; i < unit->nparams; i++) {
      const ParamInfo *p = &unit->params[i];
      int64_t begin, end, offset;
      void *buf = NULL;
      hid_t ds;
      herr_t status;
      char dsname[1100];

      FSDPCall(FlatParamGetShardRange(unit, i, &begin, &end, &offset));
      if (begin == end) continue;
      snprintf(dsname, sizeof dsname, "params/%s", p->name);
      FSDPCall(FSDPMalloc((size_t)p->numel * es, FSDP_MEM_COMM_STAGING, &buf));
      ds = H5Dopen2(file, dsname, H5P_DEFAULT);
      status = ds >= 0 ? H5Dread(ds, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) : -1;
      if (ds >= 0) H5Dclose(ds);
      if (status >= 0) memcpy((char *)unit->shard + (size_t)offset * es, (char *)buf + (size_t)begin * es, (size_t)(end - begin) * es);
      FSDPCall(FSDPFree(&buf));
      FSDPCheck(status >= 0, MPI_COMM_SELF, FSDP_ERR_HDF5, "%s: cannot read /params/%s as %s", path, p->name,
                FSDPDataTypeName(unit->dtype));
    }
  }
  return FSDP_SUCCESS;
}
#endif

FSDPErrorCode FSDPContextLoadParams(FSDPContext ctx, const char *path)
{
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextLoadParams: ctx must not be NULL");
  FSDPCheck(path, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPContextLoadParams: path must not be NULL");
  FSDPCheck(ctx->setup, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPContextLoadParams: the context is not set up: call FSDPContextSetUp first");
#ifdef FSDP_HAVE_HDF5
  {
    FSDPErrorCode ierr = FSDP_SUCCESS;
    H5E_auto2_t func;
    void *data;
    hid_t fapl, file = -1;

    /* HDF5's own stack would print on every rank; the error below says it once, plainly. */
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0 && H5Pset_fapl_mpio(fapl, ctx->comm, MPI_INFO_NULL) >= 0)
      file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (file < 0)
      ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                       "FSDPContextLoadParams: cannot open '%s' as an HDF5 file", path);
    if (!ierr) ierr = check_file(ctx, file, path);
    ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
    if (!ierr) ierr = FSDPErrorAgree_Private(ctx->comm, read_shards(ctx, file, path));
    if (file >= 0) H5Fclose(file);
    H5Eset_auto2(H5E_DEFAULT, func, data);
    FSDPCall(ierr);
  }
  return FSDP_SUCCESS;
#else
  FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "FSDPContextLoadParams: '%s': this libfsdp was built without HDF5 (configure --with-hdf5)", path);
#endif
}
