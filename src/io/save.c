/* FSDPContextSave: every rank writes its own pieces of each dataset into a
   temporary file, which rank 0 renames over the checkpoint once all of it is
   on disk (doc/checkpoint-format.md). */
#define _GNU_SOURCE          /* fallocate */
#define _FILE_OFFSET_BITS 64 /* pwrite's offsets on 32-bit builds */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "ioimpl.h"

#ifdef FSDP_HAVE_HDF5

/* Rank 0's random id of this save, the same on every rank: what each
   dataset's checksum is bound to (a dataset copied in from another file,
   even another save of the same run, fails it). */
static FSDPErrorCode new_file_id(FSDPContext ctx, uint64_t *id)
{
  *id = 0;
  if (ctx->rank == 0) {
    FILE *f = fopen("/dev/urandom", "rb");
    struct timespec t;
    if (!f || fread(id, sizeof *id, 1, f) != 1) { /* no /dev/urandom: the time and the process */
      clock_gettime(CLOCK_REALTIME, &t);
      *id = ((uint64_t)t.tv_sec * 1000000007ULL) ^ ((uint64_t)t.tv_nsec << 20) ^ (uint64_t)getpid();
    }
    if (f) fclose(f);
  }
  FSDPCallMPI(FSDPBcast_Private(id, 1, MPI_UINT64_T, 0, ctx->comm));
  return FSDP_SUCCESS;
}

/* The file's root attributes: what it is, who wrote it, how, and the training state. */
static FSDPErrorCode write_root(FSDPContext ctx, FSDPOptimizer opt, hid_t file, uint64_t file_id)
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
  FSDPCallMPI(FSDPBcast_Private(when, sizeof when, MPI_CHAR, 0, ctx->comm));
  FSDPCall(ShardGroupGetNode(ctx->group, &node, &nnodes));
  mine[0] = node;
  mine[1] = ctx->shard_index;
  mine[2] = ctx->replica_index;
  FSDPCall(FSDPMalloc((size_t)ctx->size * sizeof mine, FSDP_MEM_OTHER, &layout));
  ierr = MPI_RECORD(FSDPAllgather_Private(mine, 3, MPI_INT, layout, 3, MPI_INT, ctx->comm));
  snprintf(layout_text, sizeof layout_text, "%d shard group%s of %d ranks on %d node%s", ctx->nreplicas,
           ctx->nreplicas == 1 ? "" : "s", ctx->factor, nnodes, nnodes == 1 ? "" : "s");
  if (!ierr && file >= 0) { /* POSIX transfers: rank 0's file only */
    int version = FORMAT_VERSION;
    s |= CheckpointPutString_Private(file, "format", FORMAT_NAME);
    s |= CheckpointPutAttr_Private(file, "format_version", H5T_NATIVE_INT, 0, &version);
    s |= CheckpointPutString_Private(file, "library_version", FSDP_VERSION_STRING);
    s |= CheckpointPutString_Private(file, "creation_time", when);
    s |= CheckpointPutAttr_Private(file, "file_id", H5T_NATIVE_UINT64, 0, &file_id);
    s |= CheckpointPutInt64_Private(file, "step", step);
    s |= CheckpointPutInt64_Private(file, "data_cursor", ctx->training.data_cursor);
    s |= CheckpointPutAttr_Private(file, "rng_state", H5T_NATIVE_UINT64, 4, ctx->training.rng);
    s |= CheckpointPutInt64_Private(file, "world_size", ctx->size);
    s |= CheckpointPutString_Private(file, "sharding_strategy", FSDPShardingStrategyName(ctx->strategy));
    s |= CheckpointPutInt64_Private(file, "sharding_factor", ctx->factor);
    s |= CheckpointPutString_Private(file, "shard_group_layout", layout_text);
    s |= CheckpointPutArray_Private(file, "rank_node_shard_replica", H5T_NATIVE_INT, 2,
                                    (hsize_t[]){(hsize_t)ctx->size, 3}, layout);
    if (s < 0) ierr = H5ERR("cannot write the root attributes");
  }
  FSDPCall(FSDPFree(&layout));
  return ierr;
}

static FSDPErrorCode write_optim_attrs(FSDPOptimizer opt, hid_t group)
{
  herr_t s = 0;
  s |= CheckpointPutString_Private(group, "type", FSDPOptimizerTypeName(opt->type));
  s |= CheckpointPutInt64_Private(group, "step", opt->step);
  s |= CheckpointPutDouble_Private(group, "lr", opt->lr);
  s |= CheckpointPutDouble_Private(group, "weight_decay", opt->weight_decay);
  {
    char *groups = NULL;
    if (FSDPOptimizerDescribeGroups_Private(opt, &groups)) s = -1;
    else s |= CheckpointPutString_Private(group, "param_groups", groups);
    (void)FSDPFree(&groups);
  }
  if (opt->type == FSDP_OPTIMIZER_ADAMW) {
    double betas[2] = {opt->beta1, opt->beta2};
    s |= CheckpointPutAttr_Private(group, "betas", H5T_NATIVE_DOUBLE, 2, betas);
    s |= CheckpointPutDouble_Private(group, "eps", opt->eps);
  } else {
    int nesterov = opt->nesterov;
    s |= CheckpointPutDouble_Private(group, "momentum", opt->momentum);
    s |= CheckpointPutAttr_Private(group, "nesterov", H5T_NATIVE_INT, 0, &nesterov);
  }
  s |= CheckpointPutString_Private(group, "lr_schedule", FSDPLRScheduleName(opt->schedule));
  s |= CheckpointPutInt64_Private(group, "warmup_steps", opt->warmup);
  s |= CheckpointPutInt64_Private(group, "total_steps", opt->total);
  s |= CheckpointPutDouble_Private(group, "clip_grad_norm", opt->max_norm);
  if (opt->scaler) { /* PyTorch's GradScaler state_dict: scale and _growth_tracker */
    s |= CheckpointPutDouble_Private(group, "grad_scale", opt->scale);
    s |= CheckpointPutInt64_Private(group, "grad_scaler_growth_tracker", opt->growth_tracker);
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
  FSDPCallMPI(FSDPBarrier_Private(ctx->comm));
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

/* After this rank's write failed, HDF5's collective calls may not return on
   every rank (MPI-IO need not fail alike everywhere, and a rank that skips
   one of HDF5's own collectives leaves the others in it): the save then gets
   the collective timeout to finish, after which the job ends with this
   rank's message rather than hang. */
static void watch_failure(FSDPContext ctx, FSDPErrorCode failed, const char *tmp, FSDPWatch *watch)
{
  const char *msg = "";
  if (!failed || *watch) return;
  FSDPGetLastError(NULL, &msg, NULL);
  (void)FSDPWatchStart_Private(ctx->timeout, failed, watch,
                               "FSDPContextSave: %s; the save of '%s' has not ended on every rank %g s after this "
                               "failure (-fsdp_collective_timeout): the checkpoint was not written",
                               msg, tmp, ctx->timeout);
}

/* What a save writes, ready on every rank before the file is touched: the
   sources, and each dataset's checksum, combined across ranks. */
typedef struct {
  const Item *items;
  int nitems;
  const char *names[2]; /* the optimizer's state tensors */
  uint32_t *crc;        /* each dataset's, bound to its path and the file */
  Piece *pieces;        /* one unit's, as each dataset needs them */
  Source *src;
  int64_t *offsets; /* POSIX transfers: where each dataset's values start in the file (rank 0's, broadcast) */
} Payload;

static FSDPErrorCode payload_free(FSDPContext ctx, Payload *pl)
{
  FSDPErrorCode ierr = FSDPFree(&pl->crc), e; /* each freed whatever the others did */
  if ((e = FSDPFree(&pl->offsets)) && !ierr) ierr = e;
  if ((e = FSDPFree(&pl->pieces)) && !ierr) ierr = e;
  if ((e = sources_free(ctx, &pl->src)) && !ierr) ierr = e;
  return ierr;
}

/* Collective: the sources and the checksums, from memory, with one
   reduction for the whole file; non-finite values refused. */
static FSDPErrorCode payload_get(FSDPContext ctx, FSDPOptimizer opt, const char *tmp, uint64_t file_id, Payload *pl)
{
  int maxp = 1, nstates = opt ? opt->nstates : 0, nitems = pl->nitems;
  FSDPErrorCode ierr = FSDP_SUCCESS, nonfinite = FSDP_SUCCESS;

  for (int s = 0; s < nstates; s++) pl->names[s] = FSDPOptimizerStateName_Private(opt, s);
  for (int u = 0; u < ctx->nunits; u++) maxp = ctx->units[u]->nparams > maxp ? ctx->units[u]->nparams : maxp;
  /* Agreed before the first collective: a rank whose allocation failed must not leave the others waiting. */
  ierr = FSDPCalloc((size_t)(nitems ? nitems : 1), sizeof *pl->crc, FSDP_MEM_OTHER, &pl->crc);
  if (!ierr) ierr = FSDPCalloc((size_t)(nitems ? nitems : 1), sizeof *pl->offsets, FSDP_MEM_OTHER, &pl->offsets);
  if (!ierr) ierr = FSDPMalloc((size_t)maxp * sizeof *pl->pieces, FSDP_MEM_OTHER, &pl->pieces);
  if (!ierr) ierr = sources_get(ctx, opt, &pl->src);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);

  for (int k = 0; k < nitems && !ierr; k++) {
    const Item *it = &pl->items[k];
    const Source *s = &pl->src[it->unit->index];
    void *state = it->state >= 0 ? s->state[it->state] : NULL;
    const Piece *pc;
    const void *mem;
    uint32_t crc;
    int64_t at = -1;
    CheckpointWritePieces_Private(it->unit, pl->pieces);
    pc = &pl->pieces[it->param];
    mem = CheckpointPieceMemory_Private(it, pc, s->shard, state);
    /* Each element is some rank's to write: each is checked once. */
    CheckpointScanValues_Private(it->unit->dtype, mem, pc->end - pc->begin, &crc,
                                 ctx->check_finite && !nonfinite ? &at : NULL, NULL);
    pl->crc[k] = CheckpointPlaceCRC_Private(it, pc, crc, FSDPDataTypeSize(it->unit->dtype));
    if (at >= 0) {
      char path[1200];
      CheckpointItemPath_Private(it, pl->names, path, sizeof path);
      nonfinite = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_NOT_FINITE,
                            "FSDPContextSave: %s[%lld] is %g: non-finite parameters or optimizer state are not saved; "
                            "'%s' was not written (-fsdp_check_finite false writes them)",
                            path, (long long)(pc->begin + at), CheckpointValue_Private(it->unit->dtype, mem, at), tmp);
    }
  }
  if (!ierr) ierr = MPI_RECORD(FSDPAllreduce_Private(MPI_IN_PLACE, pl->crc, nitems, MPI_UINT32_T, MPI_BXOR, ctx->comm));
  for (int k = 0; k < nitems && !ierr; k++) { /* each values' CRC, bound to its dataset's path and this file */
    char path[1200];
    CheckpointItemPath_Private(&pl->items[k], pl->names, path, sizeof path);
    pl->crc[k] = CheckpointBindCRC_Private(file_id, path, pl->crc[k]);
  }
  if (!ierr) ierr = nonfinite;
  return FSDPErrorAgree_Private(ctx->comm, ierr);
}

/* Creates every dataset with its attributes.  Through MPI-IO every rank
   then writes its own pieces, with one collective H5Dwrite per dataset.
   With POSIX transfers only rank 0 has the file open (the others pass
   file < 0): its datasets are contiguous and allocated now, and their
   offsets go to pl->offsets for write_values_posix. */
static FSDPErrorCode write_datasets(FSDPContext ctx, hid_t file, const char *tmp, Payload *pl, int64_t *bytes,
                                    FSDPWatch *watch)
{
  bool posix = ctx->checkpoint_save_io == FSDP_CHECKPOINT_IO_POSIX;
  hid_t dxpl = -1, dcpl = -1;
  FSDPErrorCode ierr = FSDP_SUCCESS, failed = FSDP_SUCCESS;

  if (file >= 0) {
    dxpl = CheckpointTransferList_Private(ctx->checkpoint_save_io);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dxpl < 0 || dcpl < 0 || H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
        (posix && H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0))
      ierr = H5ERR("cannot create property lists");
  }
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  /* Every rank makes every call, whatever failed on it (`failed`): they are
     collective.  The ranks agree on the outcome at the end. */
  for (int k = 0; k < pl->nitems && !ierr && file >= 0; k++) {
    const Item *it = &pl->items[k];
    const ParamInfo *p = &it->unit->params[it->param];
    const Source *src_unit = &pl->src[it->unit->index];
    void *state = it->state >= 0 ? src_unit->state[it->state] : NULL;
    hid_t mtype = CheckpointNativeType_Private(it->unit->dtype), ftype = CheckpointFileType_Private(it->unit->dtype);
    char path[1200], reason[256];
    hid_t space, ds = -1, memspace = -1;
    herr_t status = -1;

    if (!posix && it->state == 0 && (k == 0 || pl->items[k - 1].state != 0)) { /* every rank: a barrier */
      FSDPErrorCode e = pause_for_test(ctx, tmp);
      if (!failed) failed = e;
    }
    CheckpointItemPath_Private(it, pl->names, path, sizeof path);
    CheckpointWritePieces_Private(it->unit, pl->pieces);
    space = CheckpointMakeSpace_Private(p);
    if (space >= 0) ds = H5Dcreate2(file, path, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds >= 0 &&
        (CheckpointPutAttr_Private(ds, "crc32c", H5T_NATIVE_UINT32, 0, &pl->crc[k]) < 0 ||
         (it->state < 0 && CheckpointPutString_Private(ds, "unit", it->unit->name) < 0)) &&
        !failed)
      failed = H5ERR("cannot write the attributes of %s", path);
    if (ds >= 0 && posix) { /* the ranks write the values themselves (write_values_posix checks the byte order) */
      haddr_t at = p->numel ? H5Dget_offset(ds) : 0;
      status = 0;
      if (at == HADDR_UNDEF && !failed) failed = H5ERR("%s has no place in '%s' yet", path, tmp);
      pl->offsets[k] = (int64_t)at;
    } else if (ds >= 0) {
      if (p->numel == 0) status = 0; /* nothing to write, on any rank */
      else {
        /* A rank whose selection failed still takes part, with nothing to write. */
        if (CheckpointSelectPiece_Private(space, &memspace, p, &pl->pieces[it->param]) < 0 && memspace >= 0) {
          if (!failed) failed = H5ERR("cannot select this rank's part of %s", path);
          H5Sselect_none(space);
          H5Sselect_none(memspace);
        }
        if (memspace >= 0)
          status = H5Dwrite(ds, mtype, memspace, space, dxpl,
                            CheckpointPieceMemory_Private(it, &pl->pieces[it->param], src_unit->shard, state));
      }
      *bytes += (pl->pieces[it->param].end - pl->pieces[it->param].begin) * (int64_t)FSDPDataTypeSize(it->unit->dtype);
    }
    if (status < 0 && !failed) failed = H5ERR("cannot write %s: %s", path, CheckpointH5Reason_Private(reason));
    watch_failure(ctx, failed, tmp, watch);
    if (memspace >= 0) H5Sclose(memspace);
    if (ds >= 0) H5Dclose(ds);
    if (space >= 0) H5Sclose(space);
  }
  if (!ierr) ierr = failed;
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (dxpl >= 0) H5Pclose(dxpl);
  if (dcpl >= 0) H5Pclose(dcpl);
  return ierr;
}

/* All of buf at offset, through interruptions and short writes. */
static int pwrite_all(int fd, const char *buf, size_t len, off_t offset)
{
  while (len) {
    ssize_t n = pwrite(fd, buf, len, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    buf += n;
    len -= (size_t)n;
    offset += n;
  }
  return 0;
}

/* POSIX transfers, once rank 0 has made and closed the file: every rank
   writes its own pieces straight into their datasets (contiguous in the
   file, as in memory) and syncs them.  Collective, and agreed. */
static FSDPErrorCode write_values_posix(FSDPContext ctx, const char *tmp, Payload *pl, int64_t *bytes)
{
  FSDPErrorCode ierr, failed = FSDP_SUCCESS;
  int fd = -1, err;

  ierr = MPI_RECORD(FSDPBcast_Private(pl->offsets, pl->nitems, MPI_INT64_T, 0, ctx->comm));
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (ierr) return ierr;
  /* Write-only (not O_RDWR): an NFS client then never reads back pages that another node's rank shares. */
  fd = open(tmp, O_WRONLY);
  if (fd < 0)
    failed = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                       "FSDPContextSave: cannot open '%s' to write this rank's values: %s", tmp, strerror(errno));
  else if (H5Tequal(H5T_NATIVE_FLOAT, H5T_IEEE_F32LE) <= 0 || H5Tequal(H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE) <= 0)
    failed = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_UNSUPPORTED,
                       "FSDPContextSave: -fsdp_checkpoint_io posix writes values as they are in memory, and this "
                       "machine's byte order is not the file's (little-endian): use independent");
  for (int k = 0; k < pl->nitems; k++) { /* every rank to the end: the test pause is collective */
    const Item *it = &pl->items[k];
    const Source *s = &pl->src[it->unit->index];
    size_t es = FSDPDataTypeSize(it->unit->dtype);
    const Piece *pc;
    int64_t n;
    char path[1200];

    if (it->state == 0 && (k == 0 || pl->items[k - 1].state != 0)) { /* every rank, failed or not: a barrier */
      FSDPErrorCode e = pause_for_test(ctx, tmp);
      if (!failed) failed = e;
    }
    if (failed) continue;
    CheckpointWritePieces_Private(it->unit, pl->pieces);
    pc = &pl->pieces[it->param];
    n = pc->end - pc->begin;
    if (n <= 0) continue;
    err = pwrite_all(fd, CheckpointPieceMemory_Private(it, pc, s->shard, it->state >= 0 ? s->state[it->state] : NULL),
                     (size_t)n * es, (off_t)(pl->offsets[k] + pc->begin * (int64_t)es));
    if (err) {
      CheckpointItemPath_Private(it, pl->names, path, sizeof path);
      failed = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                         "FSDPContextSave: cannot write %s into '%s': %s", path, tmp, strerror(err));
    }
    *bytes += n * (int64_t)es;
  }
  /* Each rank syncs what it wrote: on another node, rank 0's sync would not reach it. */
  if (fd >= 0 && !failed && fsync(fd))
    failed = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                       "FSDPContextSave: cannot sync '%s': %s", tmp, strerror(errno));
  if (fd >= 0 && close(fd) && !failed)
    failed = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                       "FSDPContextSave: cannot close '%s': %s", tmp, strerror(errno));
  return FSDPErrorAgree_Private(ctx->comm, failed);
}

/* /params and /optim with its attributes and one group per state tensor. */
static FSDPErrorCode write_groups(FSDPOptimizer opt, hid_t file, const char *tmp)
{
  FSDPErrorCode ierr = FSDP_SUCCESS;
  /* Groups track creation order, so h5dump lists datasets as the model has them. */
  hid_t g, gcpl = H5Pcreate(H5P_GROUP_CREATE);
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
  return ierr;
}

/* The groups, attributes and datasets of a new file at tmp.  Collective.
   Through MPI-IO every rank has the file open and makes every HDF5 call;
   with POSIX transfers rank 0 alone makes the file, closes it, and then
   every rank writes its values into it. */
static FSDPErrorCode write_file(FSDPContext ctx, FSDPOptimizer opt, const char *tmp, int64_t *bytes)
{
  Item *items = NULL;
  hid_t fapl, file = -1;
  char reason[256];
  FSDPWatch watch = NULL;
  FSDPErrorCode ierr = FSDP_SUCCESS, e;
  uint64_t file_id;
  Payload pl = {0};
  bool posix = ctx->checkpoint_save_io == FSDP_CHECKPOINT_IO_POSIX, opens = !posix || ctx->rank == 0;

  FSDPCall(new_file_id(ctx, &file_id));
  FSDPCall(CheckpointListItems_Private(ctx, opt ? opt->nstates : 0, &items, &pl.nitems));
  pl.items = items;
  if (opens) {
    fapl = CheckpointFileAccess_Private(ctx, ctx->checkpoint_save_io);
    if (fapl >= 0) file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0)
      ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO, "cannot create '%s': %s", tmp,
                       CheckpointH5Reason_Private(reason));
    if (fapl >= 0) H5Pclose(fapl);
  }
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (!ierr) ierr = FSDPErrorAgree_Private(ctx->comm, write_root(ctx, opt, file, file_id));
  if (!ierr) ierr = FSDPErrorAgree_Private(ctx->comm, opens ? write_groups(opt, file, tmp) : FSDP_SUCCESS);
  if (!ierr) { /* every rank wrote the same attributes: the same checksum */
    uint32_t crc;
    if (opens && (CheckpointMetadataDigest_Private(file, &crc) < 0 ||
                  CheckpointPutAttr_Private(file, METADATA_CRC, H5T_NATIVE_UINT32, 0, &crc) < 0))
      ierr = H5ERR("cannot write the metadata checksum of '%s': %s", tmp, CheckpointH5Reason_Private(reason));
    ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  }
  if (!ierr) ierr = payload_get(ctx, opt, tmp, file_id, &pl);
  if (!ierr) ierr = write_datasets(ctx, file, tmp, &pl, bytes, &watch);
  if (file >= 0) {
    if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0 && !ierr)
      ierr = H5ERR("cannot flush '%s': %s", tmp, CheckpointH5Reason_Private(reason));
    watch_failure(ctx, ierr, tmp, &watch);
    if (H5Fclose(file) < 0 && !ierr) ierr = H5ERR("cannot close '%s': %s", tmp, CheckpointH5Reason_Private(reason));
    watch_failure(ctx, ierr, tmp, &watch); /* the others may still be in the close's collective work */
  }
  /* A rank whose data did not reach the file stops the rename on rank 0. */
  if (file >= 0 || posix) ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  if (!ierr && posix) ierr = write_values_posix(ctx, tmp, &pl, bytes);
  e = FSDPWatchStop_Private(&watch);
  if (!ierr) ierr = e;
  e = payload_free(ctx, &pl);
  if (!ierr) ierr = e;
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

/* Bytes a checkpoint of these tensors takes: the values, and HDF5's metadata
   with room to spare (measured: 460 to 820 bytes a dataset, and the root's
   attributes, of which the rank table grows with the ranks). */
static int64_t checkpoint_bytes(FSDPContext ctx, FSDPOptimizer opt, int64_t *values)
{
  int64_t data = 0, meta = 8192 + 12 * (int64_t)ctx->size;
  for (int u = 0; u < ctx->nunits; u++)
    for (int i = 0; i < ctx->units[u]->nparams; i++) {
      const ParamInfo *p = &ctx->units[u]->params[i];
      int64_t copies = 1 + (opt && !p->frozen ? opt->nstates : 0);
      data += copies * p->numel * (int64_t)FSDPDataTypeSize(ctx->units[u]->dtype);
      meta += copies * (1024 + 2 * (int64_t)strlen(p->name));
    }
  *values = data;
  return data + meta;
}

/* Rank 0, before HDF5 writes anything: the file system must have room for
   the whole checkpoint.  HDF5's collective writes do not fail alike on every
   rank when the disk fills under them (one rank leaves a collective the
   others are in), so a full disk is found here, where every rank can be told.
   The room is reserved in a probe file beside the temporary and given back at
   once (fallocate counts quotas as writes do; where a file system cannot
   reserve, statvfs's free space must be as large).  The temporary itself is
   left for MPI-IO to create, so that striping hints and the umask apply. */
static FSDPErrorCode reserve_space(FSDPContext ctx, FSDPOptimizer opt, const char *tmp)
{
  int64_t values, need = checkpoint_bytes(ctx, opt, &values);
  char probe[4300], b1[32], b2[32], b3[32] = "";
  int fd, err = 0;
  struct statvfs fs;
  const char *test = getenv("FSDP_TEST_CHECKPOINT_UNRESERVED"); /* test hook: a disk that fills during the save */

  if (test && atoi(test) > 0) return FSDP_SUCCESS;
  snprintf(probe, sizeof probe, "%s.reserve", tmp);
  fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  if (fd < 0 && errno == EEXIST && unlink(probe) == 0) /* left by a save that died here */
    fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  FSDPCheck(fd >= 0, MPI_COMM_SELF, FSDP_ERR_IO, "FSDPContextSave: cannot create '%s': %s", probe, strerror(errno));
#ifdef __linux__
  if (fallocate(fd, 0, 0, (off_t)need)) err = errno;
#else
  err = EOPNOTSUPP;
#endif
  if (err && err != ENOSPC && err != EDQUOT && err != EFBIG) /* cannot reserve here: the free space must do */
    err = fstatvfs(fd, &fs) == 0 && fs.f_blocks > 0 && (double)fs.f_bavail * (double)fs.f_frsize < (double)need ? ENOSPC
                                                                                                                : 0;
  if (err && fstatvfs(fd, &fs) == 0 && fs.f_blocks > 0)
    FSDPFormatBytes(b3, sizeof b3, (double)fs.f_bavail * (double)fs.f_frsize);
  close(fd);
  unlink(probe);
  if (!err) return FSDP_SUCCESS;
  FSDPFormatBytes(b1, sizeof b1, (double)need);
  FSDPFormatBytes(b2, sizeof b2, (double)values);
  FSDPCheck(false, MPI_COMM_SELF, FSDP_ERR_IO,
            "FSDPContextSave: no room for '%s': %s (the checkpoint takes about %s: %s of tensors and HDF5's "
            "metadata%s%s%s); nothing was written",
            tmp, strerror(err), b1, b2, b3[0] ? "; the file system has " : "", b3, b3[0] ? " free" : "");
}

/* The temporary file beside path that a save writes and renames. */
static void temporary_path(const char *path, char *tmp, size_t len) { snprintf(tmp, len, "%s.partial", path); }

/* Where a save to `path` goes: the file a chain of symbolic links ends at
   (it need not exist yet), so that the rename replaces the link's target, not
   the link, and the older checkpoints sit beside the target. */
static FSDPErrorCode follow_links(const char *path, char *target, size_t len)
{
  char cur[4200], link[4200];
  snprintf(cur, sizeof cur, "%s", path);
  for (int hops = 0;; hops++) {
    struct stat st;
    ssize_t n;
    char *slash;
    if (lstat(cur, &st) || !S_ISLNK(st.st_mode)) break;
    FSDPCheck(hops < 40, MPI_COMM_SELF, FSDP_ERR_IO, "FSDPContextSave: '%s': too many levels of symbolic links", path);
    n = readlink(cur, link, sizeof link - 1);
    FSDPCheck(n >= 0, MPI_COMM_SELF, FSDP_ERR_IO, "FSDPContextSave: cannot read the link '%s': %s", cur,
              strerror(errno));
    link[n] = '\0';
    slash = strrchr(cur, '/');
    if (link[0] == '/' || !slash) snprintf(cur, sizeof cur, "%s", link);
    else snprintf(slash + 1, sizeof cur - (size_t)(slash + 1 - cur), "%s", link); /* relative to the link's folder */
  }
  FSDPCheck(strlen(cur) < 4000, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPContextSave: '%s' is a link to a path longer than 4000 characters", path);
  snprintf(target, len, "%s", cur);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPContextSave(FSDPContext ctx, FSDPOptimizer opt, const char *path)
{
  char tmp[4200], target[4200] = "";
  int64_t bytes = 0;
  QuietHDF5 quiet;
  struct stat st;
  FSDPErrorCode ierr = FSDP_SUCCESS;

  CHECK_CTX_SETUP(ctx);
  FSDPCollective(ctx->comm);
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
  FSDPCall(CheckpointAgreeSettings_Private(ctx, "FSDPContextSave", ctx->checkpoint_save_io));
  /* Rank 0 resolves links, and every rank writes the file it chose. */
  if (ctx->rank == 0) ierr = follow_links(path, target, sizeof target);
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, ierr));
  FSDPCallMPI(FSDPBcast_Private(target, sizeof target, MPI_CHAR, 0, ctx->comm));
  temporary_path(target, tmp, sizeof tmp);
  /* Found now, not at the rename, after the whole file is written. */
  if (ctx->rank == 0 && is_directory(target))
    ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                     "FSDPContextSave: '%s' is a directory: a checkpoint is a file", path);
  /* A save that died left its temporary (a link, too, is removed, never followed): say so, and start afresh. */
  if (!ierr && ctx->rank == 0 && lstat(tmp, &st) == 0) {
    if (unlink(tmp) == 0) fprintf(stderr, "FSDPContextSave: removed '%s', left by an interrupted save\n", tmp);
    else
      ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_IO,
                       "FSDPContextSave: cannot remove '%s', left by an interrupted save: %s", tmp, strerror(errno));
  }
  if (!ierr && ctx->rank == 0) ierr = reserve_space(ctx, opt, tmp);
  FSDPCall(FSDPErrorAgree_Private(ctx->comm, ierr));
  FSDPCall(FSDPLogEventBegin(ctx->ev_save));
  CheckpointQuietBegin_Private(&quiet);
  ierr = write_file(ctx, opt, tmp, &bytes);
  CheckpointQuietEnd_Private(&quiet);
  if (ierr) {
    ierr = FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
    if (ctx->rank == 0) unlink(tmp);
  } else if (ctx->rank == 0) ierr = commit_file(tmp, target, ctx->checkpoint_keep);
  ierr = FSDPErrorAgree_Private(ctx->comm, ierr);
  FSDPCall(FSDPLogEventEnd(ctx->ev_save, bytes));
  FSDPCall(ierr);
  return FSDP_SUCCESS;
}
#endif

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
