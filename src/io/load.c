/* FSDPContextLoad: a unit at a time, each rank reads the pieces of its own
   shard into staging; only what verifies (verify.c) replaces the shard and
   the optimizer state. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ioimpl.h"

#ifdef FSDP_HAVE_HDF5
/* Staging and property list; on error what was made is left for unit_load_end. */
static FSDPErrorCode unit_load_begin(UnitLoad *L)
{
  FSDPErrorCode ierr;
  FSDPOptimizer opt = L->opt;
  L->state_numel = opt ? opt->units[L->unit->index].numel : 0;
  size_t es = FSDPDataTypeSize(L->unit->dtype);
  char *next = L->staging;
  for (int s = 0; opt && s < opt->nstates; s++) L->names[s] = FSDPOptimizerStateName_Private(opt, s);
  /* load_file left a page of room for each. */
  for (int r = 0; r < 1 + (opt ? opt->nstates : 0); r++) {
    const char *mirrored = r ? (const char *)opt->units[L->unit->index].state[r - 1] : (const char *)L->unit->shard;
    L->staged[r] = next + (((uintptr_t)mirrored - (uintptr_t)next) & (FSDPPageSize_Private() - 1));
    next = L->staged[r] + (size_t)(r ? L->state_numel : L->unit->shard_numel) * es;
  }
  if ((ierr = FSDPMalloc((size_t)L->unit->nparams * sizeof *L->pieces + 1, FSDP_MEM_OTHER, &L->pieces))) goto cleanup;
  if ((ierr = FSDPCalloc((size_t)L->nitems + 1, sizeof *L->crc, FSDP_MEM_OTHER, &L->crc))) goto cleanup;
  if ((ierr = FSDPCalloc((size_t)L->nitems + 1, sizeof *L->want, FSDP_MEM_OTHER, &L->want))) goto cleanup;
  if ((ierr = FSDPCalloc((size_t)L->nitems + 1, sizeof *L->have, FSDP_MEM_OTHER, &L->have))) goto cleanup;
  if ((ierr = FSDPMalloc(((size_t)L->nitems + 1) * sizeof *L->nonfinite, FSDP_MEM_OTHER, &L->nonfinite))) goto cleanup;
  if ((ierr = FSDPMalloc(((size_t)L->nitems + 1) * sizeof *L->negative, FSDP_MEM_OTHER, &L->negative))) goto cleanup;
  for (int k = 0; k < L->nitems; k++) L->nonfinite[k] = L->negative[k] = -1;
  CheckpointReadPieces_Private(L->unit, L->pieces);
  L->dxpl = CheckpointTransferList_Private(L->ctx->checkpoint_load_io);
  if (L->ctx->checkpoint_load_io == FSDP_CHECKPOINT_IO_INDEPENDENT)
    L->dxpl_chunked = CheckpointTransferList_Private(FSDP_CHECKPOINT_IO_COLLECTIVE);
  if (L->dxpl < 0 || (L->ctx->checkpoint_load_io == FSDP_CHECKPOINT_IO_INDEPENDENT && L->dxpl_chunked < 0))
    ierr = H5ERR("cannot create a transfer property list");
cleanup:
  return ierr;
}

static FSDPErrorCode unit_load_end(UnitLoad *L)
{
  FSDPErrorCode ierr = FSDP_SUCCESS, e;
  if (L->dxpl >= 0) H5Pclose(L->dxpl);
  if (L->dxpl_chunked >= 0) H5Pclose(L->dxpl_chunked);
  L->dxpl = L->dxpl_chunked = -1;
  if ((e = FSDPFree(&L->pieces)) && !ierr) ierr = e;
  if ((e = FSDPFree(&L->crc)) && !ierr) ierr = e;
  if ((e = FSDPFree(&L->want)) && !ierr) ierr = e;
  if ((e = FSDPFree(&L->have)) && !ierr) ierr = e;
  if ((e = FSDPFree(&L->nonfinite)) && !ierr) ierr = e;
  if ((e = FSDPFree(&L->negative)) && !ierr) ierr = e;
  return ierr;
}

/* Up to `want` bytes at `offset` into mem: HDF5's file descriptor with
   POSIX transfers, its MPI-IO file (an independent read) with independent
   ones.  Bytes read (0 at the end of the file), or -1 with errno set (EIO
   for MPI-IO's, whose code L->mpi_error keeps). */
static ssize_t read_some(UnitLoad *L, char *mem, size_t want, off_t offset)
{
  MPI_Status st;
  int got, rc;
  if (L->fd >= 0) return pread(L->fd, mem, want, offset);
  rc = MPI_File_read_at(*L->mpi_file, (MPI_Offset)offset, mem, (int)want, MPI_BYTE, &st);
  if (rc == MPI_SUCCESS) rc = MPI_Get_count(&st, MPI_BYTE, &got);
  if (rc == MPI_SUCCESS && got == MPI_UNDEFINED) rc = MPI_ERR_COUNT;
  if (rc != MPI_SUCCESS) {
    L->mpi_error = rc;
    errno = EIO;
    return -1;
  }
  return got;
}

/* POSIX or independent transfers of a contiguous dataset in the unit's
   type, as this machine has it: its piece straight from the file, a step at
   a time, each scanned (CRC and checks) while it is still in cache.  0, the
   errno of a failed read, or -1 where the file ends before the piece. */
static int read_direct(UnitLoad *L, int k, haddr_t at, char *mem, int64_t len, int64_t *nonfinite, int64_t *negative)
{
  enum { CHUNK = 256 * 1024 }; /* bytes: read and scanned in L2 */
  const Item *it = &L->items[k];
  const Piece *pc = &L->pieces[it->param];
  size_t es = FSDPDataTypeSize(L->unit->dtype), total = (size_t)len * es, done = 0;
  uint32_t crc = 0;
  off_t offset = (off_t)(at + (haddr_t)pc->begin * es);

  while (done < total) {
    size_t want = total - done < CHUNK ? total - done : CHUNK, got = 0;
    while (got < want) { /* through interruptions and short reads */
      ssize_t n = read_some(L, mem + done + got, want - got, offset + (off_t)(done + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? errno : -1;
      got += (size_t)n;
    }
    CheckpointScanMore_Private(L->unit->dtype, mem + done, (int64_t)(want / es), (int64_t)(done / es), &crc, nonfinite,
                               negative);
    done += want;
  }
  L->crc[k] = CheckpointPlaceCRC_Private(it, pc, crc, es);
  return 0;
}

/* Whether a dataset is contiguous, from its creation properties, which
   H5Dopen read: nothing more is read from the file. */
static bool contiguous(hid_t ds)
{
  hid_t dcpl = H5Dget_create_plist(ds);
  bool yes = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS;
  if (dcpl >= 0) H5Pclose(dcpl);
  return yes;
}

/* Where a contiguous dataset's values start in the file when read_direct
   can read them, else HADDR_UNDEF.  Only libfsdp's own files, whose
   datasets are hard links (verify.c), so in this file: another tool's may
   link to another file, whose offsets mean nothing in this one. */
static haddr_t direct_offset(const UnitLoad *L, hid_t ds, hid_t ftype, int64_t numel)
{
  hid_t native = L->unit->dtype == FSDP_FLOAT64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
  hid_t little = L->unit->dtype == FSDP_FLOAT64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
  if ((L->fd < 0 && !L->mpi_file) || !L->h->libfsdp || H5Tequal(ftype, native) <= 0 || H5Tequal(native, little) <= 0)
    return HADDR_UNDEF;
  /* Contiguous, and all of it allocated (H5Dget_offset of one that is not can be garbage). */
  if (H5Dget_storage_size(ds) != (hsize_t)numel * FSDPDataTypeSize(L->unit->dtype)) return HADDR_UNDEF;
  return H5Dget_offset(ds);
}

/* Item k's dataset, this rank's piece of it, into staging, with its CRC and
   the first values verify.c refuses (scanned while they are in cache).
   Collective (a collective read): a rank that fails still takes part, with
   nothing to read; every handle it opened is closed on every path.  *ierr
   keeps the rank's first error: once it is set, nothing raises another. */
static void read_item(UnitLoad *L, int k, int64_t *bytes, FSDPErrorCode *ierr)
{
  const Item *it = &L->items[k];
  const ParamInfo *p = &L->unit->params[it->param];
  const Piece *pc = &L->pieces[it->param];
  size_t es = FSDPDataTypeSize(L->unit->dtype);
  char *mem = CheckpointStaged_Private(L, k), dpath[1200], reason[256];
  int64_t len = pc->end - pc->begin;
  hid_t ds, space = -1, memspace = -1, ftype = -1, dxpl = L->dxpl;
  haddr_t at;
  bool contig = false;
  /* What verify.c refuses: non-finite values (unless the check is off), and AdamW's negative second moments. */
  int64_t *nonfinite = L->ctx->check_finite ? &L->nonfinite[k] : NULL;
  int64_t *negative = it->state >= 0 && !strcmp(L->names[it->state], "exp_avg_sq") ? &L->negative[k] : NULL;
  void *convert = NULL;
  herr_t status = -1;

  CheckpointItemPath_Private(it, L->names, dpath, sizeof dpath);
  ds = H5Dopen2(L->file, dpath, H5P_DEFAULT);
  if (ds >= 0) {
    int got = CheckpointGetAttr_Private(ds, "crc32c", H5T_NATIVE_UINT32, 0, &L->want[k]);
    L->have[k] = got > 0;
    /* Other tools' files load unverified; libfsdp's never do. */
    if ((got < 0 || (!got && L->h->libfsdp)) && !*ierr)
      *ierr = DAMAGED("FSDPContextLoad: '%s' is damaged: the crc32c attribute of %s is %s", L->path, dpath,
                      got < 0 ? "unreadable" : "missing");
    space = H5Dget_space(ds);
    ftype = H5Dget_type(ds);
    /* The file's metadata is read collectively (CheckpointFileAccess_Private):
       a chunked dataset's independent read would have each rank read its own
       part of the chunk index, so every rank reads such a dataset
       collectively, as every rank sees the same layout. */
    contig = contiguous(ds);
    if (!contig && L->dxpl_chunked >= 0) dxpl = L->dxpl_chunked;
  }
  if (space >= 0 && ftype >= 0 && p->numel == 0) status = 0;
  else if (space >= 0 && ftype >= 0 && len > 0 && contig &&
           (at = direct_offset(L, ds, ftype, p->numel)) != HADDR_UNDEF) {
    int err = read_direct(L, k, at, mem, len, nonfinite, negative);
    if (err < 0 && !*ierr)
      *ierr = DAMAGED("FSDPContextLoad: '%s' is damaged: it ends before the values of %s", L->path, dpath);
    else if (err && !*ierr) {
      char why[MPI_MAX_ERROR_STRING] = "";
      int n;
      if (L->mpi_error == MPI_SUCCESS || MPI_Error_string(L->mpi_error, why, &n) != MPI_SUCCESS)
        snprintf(why, sizeof why, "%s", strerror(err));
      *ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                        "FSDPContextLoad: cannot read %s from '%s': %s", dpath, L->path, why);
    }
    status = 0;
    *bytes += len * (int64_t)es;
  } else if (space >= 0 && ftype >= 0) {
    /* The checksum is of the file's values: read a different type as it is, then convert. */
    size_t fs = H5Tget_size(ftype);
    bool selected = CheckpointSelectPiece_Private(space, &memspace, p, pc) >= 0;
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
      status =
          H5Dread(ds, fs == 8 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT, memspace, space, dxpl, convert ? convert : mem);
    if (status >= 0 && len > 0) {
      uint32_t crc;
      if (convert) { /* the CRC of the file's values, the checks of the unit's: three passes */
        L->crc[k] = CheckpointPieceCRC_Private(it, pc, convert, fs);
        if (!*ierr)
          *ierr = FSDPDataTypeConvert(L->unit->dtype, mem, fs == 8 ? FSDP_FLOAT64 : FSDP_FLOAT32, convert, len);
        if (!*ierr) CheckpointScanValues_Private(L->unit->dtype, mem, len, NULL, nonfinite, negative);
      } else {
        CheckpointScanValues_Private(L->unit->dtype, mem, len, &crc, nonfinite, negative);
        L->crc[k] = CheckpointPlaceCRC_Private(it, pc, crc, fs);
      }
    }
    *bytes += len * (int64_t)fs;
  }
  if (status < 0 && !*ierr)
    *ierr = DAMAGED("FSDPContextLoad: '%s' is damaged: %s cannot be read (%s)", L->path, dpath,
                    CheckpointH5Reason_Private(reason));
  if (convert) {
    FSDPErrorCode e = FSDPFree(&convert);
    if (!*ierr) *ierr = e;
  }
  if (ftype >= 0) H5Tclose(ftype);
  if (memspace >= 0) H5Sclose(memspace);
  if (space >= 0) H5Sclose(space);
  if (ds >= 0) H5Dclose(ds);
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
    char *to = CheckpointPieceMemory_Private(it, pc, L->unit->shard, state), *from = CheckpointStaged_Private(L, k);
    size_t bytes = (size_t)(pc->end - pc->begin) * es;
    /* On the host, pages change places (staging keeps the old ones for the
       next unit), but not with a shard in the node's shared segment: the
       other ranks would not see them.  On a GPU, a copy to the device. */
    if (!L->ctx->dev && !(it->state < 0 && L->unit->shard_shared)) FSDPTakeBytes_Private(to, from, bytes);
    else FSDPCall(DeviceFromHost_Private(L->ctx->dev, to, from, bytes));
  }
  return FSDP_SUCCESS;
}

/* Collective: reads, verifies and installs one unit; on any rank's error
   every rank returns one and the unit is unchanged. */
static FSDPErrorCode load_unit(FSDPContext ctx, FSDPOptimizer opt, hid_t file, const char *path, const Header *h,
                               FlatParam unit, const Item *items, const bool *load, int nitems, void *staging, int fd,
                               MPI_File *mpi_file, int64_t *bytes)
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
                .fd = fd,
                .mpi_file = mpi_file,
                .mpi_error = MPI_SUCCESS,
                .dxpl = -1,
                .dxpl_chunked = -1};
  FSDPErrorCode ierr = unit_load_begin(&L), e;

  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  for (int k = 0, go = !ierr; k < nitems && go; k++) { /* every rank reads every item, failed or not */
    if (items[k].unit != unit || !load[k]) continue;
    read_item(&L, k, bytes, &ierr);
  }
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (!ierr) ierr = CheckpointVerifyChecksums_Private(&L);
  if (!ierr) ierr = CheckpointVerifyFinite_Private(&L);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (!ierr) ierr = commit_unit(&L);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  e = unit_load_end(&L);
  return ierr ? ierr : e;
}

/* Whether fh's view is the whole file in bytes, where an offset is the file's. */
static bool default_view(MPI_File fh)
{
  MPI_Offset disp;
  MPI_Datatype etype, filetype;
  char rep[MPI_MAX_DATAREP_STRING];
  int n, a, d, combiner;
  bool plain = true;
  if (MPI_File_get_view(fh, &disp, &etype, &filetype, rep) != MPI_SUCCESS) return false;
  for (int t = 0; t < 2; t++) { /* a named type is MPI_BYTE or not; a derived one is freed */
    MPI_Datatype type = t ? filetype : etype;
    if (MPI_Type_get_envelope(type, &n, &a, &d, &combiner) != MPI_SUCCESS) plain = false;
    else if (combiner != MPI_COMBINER_NAMED) {
      plain = false;
      MPI_Type_free(&type);
    } else if (type != MPI_BYTE) plain = false;
  }
  return plain && disp == 0 && !strcmp(rep, "native");
}

static FSDPErrorCode load_file(FSDPContext ctx, FSDPOptimizer opt, hid_t file, const char *path, int64_t *bytes)
{
  Item *items = NULL;
  bool *load = NULL;
  int nitems;
  size_t staging_bytes = 0;
  void *staging = NULL;
  int fd = -1;
  MPI_File *mpi_file = NULL;
  Header h = {0};
  FSDPErrorCode ierr, e;

  /* One cleanup at the end; the ranks agree before each collective step. */
  ierr = CheckpointListItems_Private(ctx, opt ? opt->nstates : 0, &items, &nitems);
  if (!ierr) ierr = FSDPCalloc((size_t)nitems + 1, sizeof *load, FSDP_MEM_OTHER, &load);
  if (!ierr) ierr = CheckpointReadHeader_Private(opt, file, path, &h);
  if (!ierr) ierr = CheckpointCheckFile_Private(ctx, opt, file, path, &h, items, nitems, load);
  if (!ierr && h.libfsdp && !h.have_metadata_crc && ctx->rank == 0) {
    fprintf(stderr,
            "FSDPContextLoad: '%s' has no %s (an older libfsdp wrote it): its attributes are checked for range "
            "and consistency only\n",
            path, METADATA_CRC);
    fflush(stderr);
  }
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (!ierr && ctx->checkpoint_load_io == FSDP_CHECKPOINT_IO_POSIX) {
    /* Each rank opened the file alone: the same one, unless path was replaced in between. */
    uint64_t id[2] = {h.file_id, ~h.file_id};
    ierr = MPI_RECORD(FSDPAllreduce_Private(MPI_IN_PLACE, id, 2, MPI_UINT64_T, MPI_MIN, ctx->comm));
    if (!ierr && id[0] != ~id[1])
      ierr = FSDPError(ctx->comm, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                       "FSDPContextLoad: '%s' was replaced while the ranks opened it (another job saving it?): they "
                       "read different checkpoints; nothing was loaded",
                       path);
  }
  /* POSIX and independent transfers: the values are read with the file
     descriptor or the MPI-IO file HDF5 opened (its view the whole file in
     bytes, as HDF5 leaves it between its own transfers). */
  if (!ierr && ctx->checkpoint_load_io != FSDP_CHECKPOINT_IO_COLLECTIVE) {
    hid_t fapl = H5Fget_access_plist(file), driver = fapl >= 0 ? H5Pget_driver(fapl) : -1;
    void *handle = NULL;
    if (driver >= 0 && (driver == H5FD_SEC2 || driver == H5FD_MPIO) && H5Fget_vfd_handle(file, fapl, &handle) >= 0 &&
        handle) {
      if (driver == H5FD_SEC2) fd = *(int *)handle;
      else if (default_view(*(MPI_File *)handle)) mpi_file = handle;
    }
    if (fapl >= 0) H5Pclose(fapl);
  }
  /* Staging for the largest unit: its shard and its state tensors, each
     with a page of room to sit at the offset within a page of what it mirrors. */
  for (int u = 0; u < ctx->nunits && !ierr; u++) {
    FlatParam unit = ctx->units[u];
    size_t b =
        ((size_t)unit->shard_numel + (size_t)(opt ? opt->nstates : 0) * (size_t)(opt ? opt->units[u].numel : 0)) *
        FSDPDataTypeSize(unit->dtype);
    staging_bytes = b > staging_bytes ? b : staging_bytes;
  }
  staging_bytes += (size_t)(1 + (opt ? opt->nstates : 0)) * FSDPPageSize_Private();
  if (!ierr) ierr = FSDPPagesAlloc_Private(staging_bytes, FSDP_MEM_COMM_STAGING, &staging);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  /* Unsharded copies kept from forward, or prefetched, would go stale. */
  for (int u = 0; u < ctx->nunits && !ierr; u++) ierr = FlatParamDropKept_Private(ctx->units[u]);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  for (int u = 0; u < ctx->nunits && !ierr; u++)
    ierr = load_unit(ctx, opt, file, path, &h, ctx->units[u], items, load, nitems, staging, fd, mpi_file, bytes);
  if (!ierr) {
    ctx->training = h.training;
    FSDPContextSetStep_Private(ctx, h.training.step);
    if (opt && h.have_optim) opt->step = h.step;
    if (opt && h.have_scale && opt->scaler) {
      opt->scale = h.scale;
      opt->growth_tracker = h.growth_tracker;
    }
  }
  if ((e = FSDPPagesFree_Private(&staging, staging_bytes, FSDP_MEM_COMM_STAGING)) && !ierr) ierr = e;
  if ((e = FSDPFree(&h.param_groups)) && !ierr) ierr = e;
  if ((e = FSDPFree(&load)) && !ierr) ierr = e;
  if ((e = FSDPFree(&items)) && !ierr) ierr = e;
  return ierr;
}
#endif

FSDPErrorCode FSDPContextLoad(FSDPContext ctx, FSDPOptimizer opt, const char *path)
{
  CHECK_CTX_SETUP(ctx);
  FSDPCollective(ctx->comm);
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

    FSDPCall(CheckpointAgreeSettings_Private(ctx, "FSDPContextLoad", ctx->checkpoint_load_io));
    FSDPCall(FSDPLogEventBegin(ctx->ev_load));
    CheckpointQuietBegin_Private(&quiet);
    /* POSIX transfers: each rank opens the file alone */
    fapl = CheckpointFileAccess_Private(ctx, ctx->checkpoint_load_io);
    if (fapl >= 0) file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (file < 0) {
      struct stat st;
      if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                         "FSDPContextLoad: '%s' is a directory: a checkpoint is a file", path);
      else if (access(path, R_OK))
        ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                         "FSDPContextLoad: cannot open '%s': %s", path, strerror(errno));
      else
        ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_CORRUPT,
                         "FSDPContextLoad: '%s' is not a readable HDF5 file (truncated or corrupt?): %s", path,
                         CheckpointH5Reason_Private(reason));
    }
    if (fapl >= 0) H5Pclose(fapl);
    ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
    if (!ierr) ierr = load_file(ctx, opt, file, path, &bytes);
    if (file >= 0) H5Fclose(file);
    CheckpointQuietEnd_Private(&quiet);
    FSDPCall(FSDPLogEventEnd(ctx->ev_load, bytes));
    FSDPCall(ierr);
  }
  return FSDP_SUCCESS;
#else
  FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "FSDPContextLoad: '%s': this libfsdp was built without HDF5 (configure --with-hdf5)", path);
#endif
}
