/* What a load believes only once it is checked: the root's and /optim's
   attributes, the datasets' names, shapes and types against the model, and
   each unit's values against their checksums and for NaN.  Damage is an
   error that names the file and what is wrong; nothing is loaded from a file
   that fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ioimpl.h"

#ifdef FSDP_HAVE_HDF5

static FSDPErrorCode unreadable(const char *path, const char *what)
{
  char reason[256];
  return DAMAGED("FSDPContextLoad: '%s' is damaged: %s cannot be read (%s); nothing was loaded", path, what,
                 CheckpointH5Reason_Private(reason));
}

/* A required attribute: read, or an error that says why not. */
static FSDPErrorCode require_attr(hid_t loc, const char *where, const char *name, hid_t type, int n, void *value,
                                  const char *path)
{
  char what[128];
  int got = CheckpointGetAttr_Private(loc, name, type, n, value);
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
  int got = CheckpointGetString_Private(loc, name, value, len);
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
                                         METADATA_CRC,      "file_id"};

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
FSDPErrorCode CheckpointReadHeader_Private(FSDPOptimizer opt, hid_t file, const char *path, Header *h)
{
  char format[64], strategy[32], what[64];
  int version = 0, got, known = 0;
  int64_t world, factor;
  uint32_t want, crc;
  htri_t optim;

  memset(h, 0, sizeof *h);
  got = CheckpointGetString_Private(file, "format", format, sizeof format);
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
  got = CheckpointGetAttr_Private(file, METADATA_CRC, H5T_NATIVE_UINT32, 0, &want);
  if (got < 0) return unreadable(path, "the root attribute " METADATA_CRC);
  if (CheckpointMetadataDigest_Private(file, &crc) < 0) return unreadable(path, "an attribute of / or /optim");
  FSDPCheck(!got || crc == want, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: the attributes of / and /optim fail their checksum (CRC-32C 0x%08x, "
            "%s says 0x%08x): they changed after the save; nothing was loaded",
            path, crc, METADATA_CRC, want);
  h->have_metadata_crc = got > 0;
  h->version = version;
  /* Format 2 always writes both: a file that claims it and lacks one was edited. */
  FSDPCheck(version < 2 || h->have_metadata_crc, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: format_version %d always has the root attribute %s, and it is "
            "missing; nothing was loaded",
            path, version, METADATA_CRC);
  if (version >= 2) FSDPCall(require_attr(file, "/", "file_id", H5T_NATIVE_UINT64, 0, &h->file_id, path));

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
    if (!ierr && CheckpointGetStringAlloc_Private(g, "param_groups", &h->param_groups) < 0)
      ierr = unreadable(path, "the attribute param_groups of /optim");
    scale = ierr ? 0 : CheckpointGetAttr_Private(g, "grad_scale", H5T_NATIVE_DOUBLE, 0, &h->scale);
    tracker =
        ierr ? 0 : CheckpointGetAttr_Private(g, "grad_scaler_growth_tracker", H5T_NATIVE_INT64, 0, &h->growth_tracker);
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

/* Keeps the entry when it fits whole; counts it either way. */
void CheckpointNameListAdd_Private(NameList *l, const char *name, const char *detail)
{
  size_t len = l->kept ? (size_t)l->ends[l->kept - 1] : 0;
  int n;
  l->count++;
  if (l->full || l->kept == (int)(sizeof l->ends / sizeof l->ends[0])) return;
  n = snprintf(l->text + len, sizeof l->text - len, "%s%s%s", l->kept ? ", " : "", name, detail ? detail : "");
  if (n < 0 || (size_t)n >= sizeof l->text - len) {
    l->text[len] = '\0'; /* it did not fit: the entries before it stay whole, */
    l->full = true;      /* and no later, shorter one jumps the queue */
    return;
  }
  l->ends[l->kept++] = (int)(len + (size_t)n);
}

/* The list in at most len - 1 characters: whole entries, then "... and N
   more" for the entries that did not fit here or when they were added. */
void CheckpointNameListFormat_Private(const NameList *l, char *buf, size_t len)
{
  int shown = l->count < l->kept ? l->count : l->kept;
  if (!len) return;
  for (; shown >= 0; shown--) {
    int more = l->count - shown;
    size_t head = shown ? (size_t)l->ends[shown - 1] : 0;
    char tail[64] = "";
    if (more) snprintf(tail, sizeof tail, "%s%d%s", shown ? ", ... and " : "", more, shown ? " more" : " of them");
    if (head + strlen(tail) >= len) continue;
    snprintf(buf, len, "%.*s%s", (int)head, l->text, tail);
    return;
  }
  buf[0] = '\0';
}

/* What the file holds that the context does not, and the other way round. */
typedef struct {
  NameList missing, shape, type, extra;
} Mismatch;

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t LinkInfo;
#define ITERATE H5Literate2
#define LINK_INFO H5Lget_info2
#else
typedef H5L_info_t LinkInfo;
#define ITERATE H5Literate
#define LINK_INFO H5Lget_info
#endif

/* A libfsdp checkpoint's groups and datasets are hard links, each object
   under its own name: a soft or external link would load another dataset's
   values under this one's name. */
static FSDPErrorCode check_hard_link(hid_t file, const char *path, const char *fname)
{
  LinkInfo info;
  char what[1300];
  snprintf(what, sizeof what, "the link %s", path);
  if (LINK_INFO(file, path, &info, H5P_DEFAULT) < 0) return unreadable(fname, what);
  FSDPCheck(info.type == H5L_TYPE_HARD, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
            "FSDPContextLoad: '%s' is damaged: %s is %s link, and a checkpoint has none; nothing was loaded", fname,
            path,
            info.type == H5L_TYPE_SOFT       ? "a soft"
            : info.type == H5L_TYPE_EXTERNAL ? "an external"
                                             : "a user-defined");
  return FSDP_SUCCESS;
}

/* Whether dataset `path` has the parameter's shape and a float type (1); adds
   it to the right list when it does not, or is not there (0).  -1: its
   metadata cannot be read, and *err says so. */
static int check_dataset(hid_t file, const char *path, const char *fname, bool libfsdp, const ParamInfo *p,
                         Mismatch *mm, FSDPErrorCode *err)
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
    CheckpointNameListAdd_Private(&mm->missing, path, NULL);
    return 0;
  }
  if (libfsdp && (*err = check_hard_link(file, path, fname))) return -1;
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
    CheckpointNameListAdd_Private(&mm->shape, path, detail);
  } else if (H5Tget_class(type) != H5T_FLOAT || (H5Tget_size(type) != 4 && H5Tget_size(type) != 8)) {
    CheckpointNameListAdd_Private(&mm->type, path, " (not float32 or float64)");
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
    CheckpointNameListAdd_Private(a->extra, path, NULL);
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
FSDPErrorCode CheckpointCheckFile_Private(FSDPContext ctx, FSDPOptimizer opt, hid_t file, const char *path,
                                          const Header *h, const Item *items, int nitems, bool *load)
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
    if (have_optim) { /* the state of one grouping resumes that grouping */
      char *groups = NULL;
      const char *saved = h->param_groups && h->param_groups[0] ? h->param_groups : "(none)";
      bool same;
      FSDPCall(FSDPOptimizerDescribeGroups_Private(opt, &groups));
      same = !strcmp(groups, h->param_groups ? h->param_groups : "");
      if (!same && ctx->checkpoint_strict) {
        FSDPErrorCode e = FSDPError(
            MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_ARG,
            "FSDPContextLoad: '%s' was saved with the parameter groups '%s' and this optimizer has '%s': load it "
            "with the same groups (FSDPOptimizerAddParamGroup, -fsdp_no_decay, fsdp-train -no_decay), or with "
            "-fsdp_checkpoint_strict false to go on under this optimizer's",
            path, saved, groups[0] ? groups : "(none)");
        FSDPCall(FSDPFree(&groups));
        return e;
      }
      if (!same && ctx->rank == 0) {
        fprintf(stderr, "FSDPContextLoad: '%s' was saved with the parameter groups '%s'; going on with '%s'\n", path,
                saved, groups[0] ? groups : "(none)");
        fflush(stderr);
      }
      FSDPCall(FSDPFree(&groups));
    }
  }
  if (h->libfsdp) FSDPCall(check_hard_link(file, "/params", path));
  if (h->libfsdp && have_optim) {
    FSDPCall(check_hard_link(file, "/optim", path));
    for (int s = 0; s < opt->nstates; s++) {
      char g[64];
      htri_t there;
      snprintf(g, sizeof g, "/optim/%s", names[s]);
      there = H5Lexists(file, g, H5P_DEFAULT);
      if (there < 0) return unreadable(path, g);
      if (there) FSDPCall(check_hard_link(file, g, path));
    }
  }
  for (int k = 0; k < nitems; k++) {
    char dpath[1200];
    FSDPErrorCode err = FSDP_SUCCESS;
    int got;
    if (items[k].state >= 0 && !have_optim) {
      load[k] = false;
      continue;
    }
    CheckpointItemPath_Private(&items[k], names, dpath, sizeof dpath);
    got = check_dataset(file, dpath, path, h->libfsdp, &items[k].unit->params[items[k].param], &mm, &err);
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
    /* The differences, once, for the error or the report: each list cut to
       its share of what an error message holds, so that the hint at the end
       survives however many names there are. */
    const NameList *lists[4] = {&mm.missing, &mm.shape, &mm.type, &mm.extra};
    const char *heads[4] = {" missing ", " wrong shape ", " wrong type ", " not in the model "};
    char text[FSDP_MAX_MESSAGE] = "";
    size_t reserve = strlen(path) + 200; /* the rest of the message, and "on rank N: " */
    size_t room = reserve < sizeof text ? sizeof text - reserve : 0;
    size_t need[4], share[4] = {0, 0, 0, 0};
    bool given[4] = {false, false, false, false};
    int left = 0;
    /* Each list gets what it needs, or an equal share of what the shorter ones left. */
    for (int l = 0; l < 4; l++) {
      need[l] = lists[l]->count
                    ? strlen(heads[l]) + (size_t)(lists[l]->kept ? lists[l]->ends[lists[l]->kept - 1] : 0) + 40
                    : 0;
      left += lists[l]->count > 0;
    }
    for (; left > 0; left--) {
      int pick = -1;
      for (int l = 0; l < 4; l++)
        if (lists[l]->count && !given[l] && (pick < 0 || need[l] < need[pick])) pick = l;
      share[pick] = need[pick] < room / (size_t)left ? need[pick] : room / (size_t)left;
      given[pick] = true;
      room -= share[pick];
    }
    for (int l = 0; l < 4; l++) {
      size_t used = strlen(text), avail = sizeof text - used - 2; /* and the ';' */
      size_t mine = share[l] < avail ? share[l] : avail;
      if (!lists[l]->count || mine <= strlen(heads[l]) + 2) continue;
      snprintf(text + used, sizeof text - used, "%s", heads[l]);
      CheckpointNameListFormat_Private(lists[l], text + strlen(text), mine - strlen(heads[l]) - 1);
      snprintf(text + strlen(text), sizeof text - strlen(text), ";");
    }
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

/* The shard group read every element of the unit once: its pieces' CRCs
   combine to each dataset's, which must be the file's.  Collective on the
   shard group. */
FSDPErrorCode CheckpointVerifyChecksums_Private(UnitLoad *L)
{
  NameList bad = {{0}, {0}, 0, 0, false};
  char text[FSDP_MAX_MESSAGE / 2];
  int m = 0;
  FSDPErrorCode ierr;

  for (int k = 0; k < L->nitems; k++) /* this unit's entries only, packed at the front */
    if (L->items[k].unit == L->unit) L->crc[m++] = L->crc[k];
  ierr = MPI_RECORD(FSDPAllreduce_Private(MPI_IN_PLACE, L->crc, m, MPI_UINT32_T, MPI_BXOR, L->ctx->shard_comm));
  for (int k = L->nitems - 1; k >= 0; k--)
    if (L->items[k].unit == L->unit) L->crc[k] = L->crc[--m];
  for (int k = 0; k < L->nitems && !ierr; k++) {
    char dpath[1200], detail[64];
    uint32_t got;
    if (L->items[k].unit != L->unit || !L->load[k] || !L->have[k]) continue;
    CheckpointItemPath_Private(&L->items[k], L->names, dpath, sizeof dpath);
    /* Format 2 binds the values' CRC to the dataset's path and the file's id. */
    got = L->h->version >= 2 ? CheckpointBindCRC_Private(L->h->file_id, dpath, L->crc[k]) : L->crc[k];
    if (got == L->want[k]) continue;
    snprintf(detail, sizeof detail, " (CRC-32C 0x%08x, the file says 0x%08x)", got, L->want[k]);
    CheckpointNameListAdd_Private(&bad, dpath, detail);
  }
  CheckpointNameListFormat_Private(&bad, text, sizeof text);
  if (!ierr && bad.count)
    ierr = FSDPError(MPI_COMM_SELF, __LINE__, __func__, __FILE__, FSDP_ERR_CORRUPT,
                     "FSDPContextLoad: '%s' is corrupt: checksum mismatch in %s (values changed, or a dataset moved, "
                     "linked or copied from another file); unit '%s' and those after it were not loaded",
                     L->path, text, L->unit->name);
  return ierr;
}

/* Item k's first bad value, as an error message's "path[index] is value". */
static const char *bad_value(const UnitLoad *L, int k, int64_t at, char *buf, size_t len)
{
  const Item *it = &L->items[k];
  char dpath[1200];
  CheckpointItemPath_Private(it, L->names, dpath, sizeof dpath);
  snprintf(buf, len, "%s[%lld] is %g", dpath, (long long)(L->pieces[it->param].begin + at),
           CheckpointValue_Private(L->unit->dtype, CheckpointStaged_Private(L, k), at));
  return buf;
}

/* Values that verify can still be impossible: NaN (saved with
   -fsdp_check_finite false, or by another tool), or a negative second moment
   of AdamW, which would drive the weights to NaN.  read_item found the first
   of each (an item of another unit has no piece here, nor a value found). */
FSDPErrorCode CheckpointVerifyFinite_Private(const UnitLoad *L)
{
  char what[1300];
  for (int k = 0; k < L->nitems; k++)
    FSDPCheck(L->negative[k] < 0, MPI_COMM_SELF, FSDP_ERR_CORRUPT,
              "FSDPContextLoad: '%s' is damaged: %s: AdamW's second moment is never negative; unit '%s' and those "
              "after it were not loaded",
              L->path, bad_value(L, k, L->negative[k], what, sizeof what), L->unit->name);
  for (int k = 0; k < L->nitems; k++)
    FSDPCheck(L->nonfinite[k] < 0, MPI_COMM_SELF, FSDP_ERR_NOT_FINITE,
              "FSDPContextLoad: '%s': %s: the file holds non-finite values; unit '%s' and those after it were not "
              "loaded (-fsdp_check_finite false loads them)",
              L->path, bad_value(L, k, L->nonfinite[k], what, sizeof what), L->unit->name);
  return FSDP_SUCCESS;
}
#endif
