/* FSDPOptimizer: SGD and AdamW on shards (doc/optim.md).  Each unit's
   trainable elements in this rank's shard form a few segments (frozen
   parameters and padding are the gaps, and a parameter group's parameters
   are segments of their own); state is allocated for the segments only,
   packed, and every update walks the segments. */
#include <float.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimimpl.h"
#include "simd.h"

#define FSDP_PI 3.14159265358979323846

static const char *const type_names[] = {"sgd", "adamw", NULL};
static const char *const schedule_names[] = {"constant", "cosine", NULL};

const char *FSDPOptimizerTypeName(FSDPOptimizerType type)
{
  if ((int)type < 0 || type > FSDP_OPTIMIZER_ADAMW) return "unknown optimizer";
  return type_names[type];
}

const char *FSDPLRScheduleName(FSDPLRSchedule schedule)
{
  if ((int)schedule < 0 || schedule > FSDP_LR_COSINE) return "unknown schedule";
  return schedule_names[schedule];
}

int FSDPOptimizerStateCount_Private(FSDPOptimizerType type, double momentum)
{
  return type == FSDP_OPTIMIZER_ADAMW ? 2 : momentum > 0 ? 1 : 0;
}

const char *FSDPOptimizerStateName_Private(FSDPOptimizer opt, int s)
{
  static const char *const adamw[] = {"exp_avg", "exp_avg_sq"};
  if (s < 0 || s >= opt->nstates) return NULL;
  return opt->type == FSDP_OPTIMIZER_ADAMW ? adamw[s] : "momentum_buffer";
}

#define CHECK_OPT(o) FSDPCheck(o, MPI_COMM_SELF, FSDP_ERR_ARG, "%s: opt must not be NULL", __func__)
#define CHECK_NOT_SETUP(o)                                                                                             \
  do {                                                                                                                 \
    CHECK_OPT(o);                                                                                                      \
    FSDPCheck(!(o)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: the optimizer is set up: its %s settings are fixed",    \
              __func__, type_names[(o)->type]);                                                                        \
  } while (0)
#define CHECK_SETUP(o)                                                                                                 \
  do {                                                                                                                 \
    CHECK_OPT(o);                                                                                                      \
    FSDPCheck((o)->setup, MPI_COMM_SELF, FSDP_ERR_STATE, "%s: the optimizer is not set up: call FSDPOptimizerSetUp",   \
              __func__);                                                                                               \
    FSDPCall(DeviceEnter_Private((o)->dev));                                                                           \
  } while (0)
#define CHECK_HYPER(cond, what, value)                                                                                 \
  FSDPCheck(cond, MPI_COMM_SELF, FSDP_ERR_ARG, "%s: %s %g is out of range", __func__, what, (double)(value))

FSDPErrorCode FSDPOptimizerCreate(FSDPContext ctx, FSDPOptimizer *opt)
{
  FSDPOptimizer o;
  FSDPCheck(opt, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPOptimizerCreate: opt must not be NULL");
  *opt = NULL;
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPOptimizerCreate: ctx must not be NULL");
  FSDPCall(FSDPCalloc(1, sizeof *o, FSDP_MEM_OTHER, &o));
  o->ctx = ctx;
  o->type = FSDP_OPTIMIZER_ADAMW;
  o->lr = 1e-3;
  o->weight_decay = 0.01;
  o->beta1 = 0.9;
  o->beta2 = 0.999;
  o->eps = 1e-8;
  o->last_norm = NAN;
  /* torch.cuda.amp.GradScaler's defaults */
  o->init_scale = o->scale = 65536.0;
  o->growth_factor = 2.0;
  o->backoff_factor = 0.5;
  o->growth_interval = 2000;
  if (FSDPLogEventRegister("OptimizerStep", &o->ev_step)) o->ev_step = -1;
  *opt = o;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetType(FSDPOptimizer opt, FSDPOptimizerType type)
{
  CHECK_NOT_SETUP(opt);
  FSDPCheck((int)type >= 0 && type <= FSDP_OPTIMIZER_ADAMW, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptimizerSetType: type %d is not sgd or adamw", (int)type);
  opt->type = type;
  /* Each type's own default, unless the user chose one. */
  if (!opt->weight_decay_set) opt->weight_decay = type == FSDP_OPTIMIZER_ADAMW ? 0.01 : 0.0;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetLearningRate(FSDPOptimizer opt, double lr)
{
  CHECK_OPT(opt);
  CHECK_HYPER(lr >= 0 && isfinite(lr), "learning rate", lr);
  opt->lr = lr; /* may change between steps, as param_groups[0]["lr"] does */
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetWeightDecay(FSDPOptimizer opt, double weight_decay)
{
  CHECK_OPT(opt);
  CHECK_HYPER(weight_decay >= 0 && isfinite(weight_decay), "weight decay", weight_decay);
  opt->weight_decay = weight_decay;
  opt->weight_decay_set = true;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetMomentum(FSDPOptimizer opt, double momentum, bool nesterov)
{
  CHECK_NOT_SETUP(opt);
  CHECK_HYPER(momentum >= 0 && momentum < INFINITY, "momentum", momentum);
  FSDPCheck(!nesterov || momentum > 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptimizerSetMomentum: nesterov momentum needs a momentum above 0, not %g", momentum);
  opt->momentum = momentum;
  opt->nesterov = nesterov;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetBetas(FSDPOptimizer opt, double beta1, double beta2)
{
  CHECK_OPT(opt);
  CHECK_HYPER(beta1 >= 0 && beta1 < 1, "beta1", beta1);
  CHECK_HYPER(beta2 >= 0 && beta2 < 1, "beta2", beta2);
  opt->beta1 = beta1;
  opt->beta2 = beta2;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetEps(FSDPOptimizer opt, double eps)
{
  CHECK_OPT(opt);
  CHECK_HYPER(eps >= 0 && isfinite(eps), "eps", eps);
  opt->eps = eps;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetSchedule(FSDPOptimizer opt, FSDPLRSchedule schedule, int64_t warmup_steps,
                                       int64_t total_steps)
{
  CHECK_OPT(opt);
  FSDPCheck((int)schedule >= 0 && schedule <= FSDP_LR_COSINE, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptimizerSetSchedule: schedule %d is not constant or cosine", (int)schedule);
  FSDPCheck(warmup_steps >= 0 && total_steps >= 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptimizerSetSchedule: warmup_steps %lld and total_steps %lld must not be negative",
            (long long)warmup_steps, (long long)total_steps);
  FSDPCheck(schedule != FSDP_LR_COSINE || total_steps > warmup_steps, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptimizerSetSchedule: the cosine schedule needs more total steps (%lld) than warmup steps (%lld)",
            (long long)total_steps, (long long)warmup_steps);
  opt->schedule = schedule;
  opt->warmup = warmup_steps;
  opt->total = total_steps;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetClipGradNorm(FSDPOptimizer opt, double max_norm)
{
  CHECK_OPT(opt);
  CHECK_HYPER(max_norm >= 0 && isfinite(max_norm), "max_norm", max_norm);
  opt->max_norm = max_norm;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetGradScaler(FSDPOptimizer opt, bool enable)
{
  CHECK_NOT_SETUP(opt);
  opt->scaler = enable;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetGradScalerParams(FSDPOptimizer opt, double init_scale, double growth_factor,
                                               double backoff_factor, int64_t growth_interval)
{
  CHECK_NOT_SETUP(opt);
  CHECK_HYPER(init_scale > 0 && isfinite(init_scale), "init_scale", init_scale);
  CHECK_HYPER(growth_factor > 1 && isfinite(growth_factor), "growth_factor", growth_factor);
  CHECK_HYPER(backoff_factor > 0 && backoff_factor < 1, "backoff_factor", backoff_factor);
  CHECK_HYPER(growth_interval > 0, "growth_interval", growth_interval);
  opt->init_scale = opt->scale = init_scale;
  opt->growth_factor = growth_factor;
  opt->backoff_factor = backoff_factor;
  opt->growth_interval = growth_interval;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerGetGradScaler(FSDPOptimizer opt, bool *enabled)
{
  CHECK_OPT(opt);
  if (enabled) *enabled = opt->scaler;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerGetGradScale(FSDPOptimizer opt, double *scale, int64_t *skipped)
{
  CHECK_OPT(opt);
  if (scale) *scale = opt->scaler ? opt->scale : 1.0;
  if (skipped) *skipped = opt->skipped;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ parameter groups */

/* "ndim<N", "ndim<=N", "ndim=N", "ndim>=N", "ndim>N": 1 when ndim satisfies
   it, 0 when not, -1 when the pattern is not one of these. */
static int ndim_test(const char *pattern, int ndim)
{
  static const char *const ops[] = {"<=", ">=", "<", ">", "="};
  if (strncmp(pattern, "ndim", 4)) return -1;
  for (int k = 0; k < 5; k++) {
    size_t len = strlen(ops[k]);
    char *end;
    long n;
    if (strncmp(pattern + 4, ops[k], len)) continue;
    n = strtol(pattern + 4 + len, &end, 10);
    if (end == pattern + 4 + len || *end || n < 0) return -1;
    switch (k) {
    case 0: return ndim <= n;
    case 1: return ndim >= n;
    case 2: return ndim < n;
    case 3: return ndim > n;
    default: return ndim == n;
    }
  }
  return -1;
}

static bool selects(const char *pattern, const ParamInfo *p)
{
  int t = ndim_test(pattern, p->ndim);
  return t >= 0 ? t == 1 : fnmatch(pattern, p->name, 0) == 0;
}

/* The group a parameter is in: the last that selects it, or -1. */
static int group_of(FSDPOptimizer opt, const ParamInfo *p)
{
  for (int g = opt->ngroups - 1; g >= 0; g--)
    if (selects(opt->groups[g].pattern, p)) return g;
  return -1;
}

FSDPErrorCode FSDPOptimizerAddParamGroup(FSDPOptimizer opt, const char *pattern, double weight_decay, double lr_scale)
{
  ParamGroup *g;
  CHECK_NOT_SETUP(opt);
  FSDPCheck(pattern && *pattern, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptimizerAddParamGroup: the pattern must not be NULL or empty");
  FSDPCheck(strncmp(pattern, "ndim", 4) || ndim_test(pattern, 0) >= 0, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptimizerAddParamGroup: '%s' is not a dimension test (ndim<N, ndim<=N, ndim=N, ndim>=N or ndim>N)",
            pattern);
  CHECK_HYPER(weight_decay >= 0 && isfinite(weight_decay), "weight decay", weight_decay);
  CHECK_HYPER(lr_scale >= 0 && isfinite(lr_scale), "learning-rate scale", lr_scale);
  FSDPCall(FSDPGrowArray_Private(&opt->groups, sizeof *opt->groups, opt->ngroups + 1, &opt->groups_capacity,
                                 FSDP_MEM_OTHER));
  g = &opt->groups[opt->ngroups];
  FSDPCall(FSDPStrdup(pattern, &g->pattern));
  g->weight_decay = weight_decay;
  g->lr_scale = lr_scale;
  opt->ngroups++;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerGetParamSettings(FSDPOptimizer opt, const char *name, double *weight_decay, double *lr_scale)
{
  FlatParam unit;
  FSDPParamId id;
  int g;
  CHECK_OPT(opt);
  FSDPCheck(name, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPOptimizerGetParamSettings: name must not be NULL");
  FSDPCheck(FSDPContextLookupParam_Private(opt->ctx, name, &unit, &id), MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptimizerGetParamSettings: the context has no parameter '%s'", name);
  g = group_of(opt, &unit->params[id]);
  if (weight_decay) *weight_decay = g < 0 ? opt->weight_decay : opt->groups[g].weight_decay;
  if (lr_scale) *lr_scale = g < 0 ? 1.0 : opt->groups[g].lr_scale;
  return FSDP_SUCCESS;
}

/* A rate or a decay as text: the shortest that reads back as the same double. */
static void number_text(double v, char buf[32])
{
  for (int digits = 6; digits <= 17; digits++) {
    snprintf(buf, 32, "%.*g", digits, v);
    if (strtod(buf, NULL) == v) return;
  }
}

FSDPErrorCode FSDPOptimizerDescribeGroups_Private(FSDPOptimizer opt, char **text)
{
  size_t len = 1, used = 0;
  char wd[32], scale[32];
  for (int pass = 0; pass < 2; pass++) { /* measure, then write */
    if (pass) {
      FSDPCall(FSDPMalloc(len, FSDP_MEM_OTHER, text));
      (*text)[0] = '\0';
    }
    for (int g = 0; g < opt->ngroups; g++) {
      int n;
      number_text(opt->groups[g].weight_decay, wd);
      number_text(opt->groups[g].lr_scale, scale);
      n = snprintf(pass ? *text + used : NULL, pass ? len - used : 0, "%s%s: weight decay %s, lr x%s", g ? "; " : "",
                   opt->groups[g].pattern, wd, scale);
      if (pass) used += (size_t)n;
      else len += (size_t)n;
    }
  }
  return FSDP_SUCCESS;
}

/* -fsdp_no_decay: a comma-separated list of patterns whose parameters take no weight decay. */
static FSDPErrorCode no_decay_from_options(FSDPOptimizer opt)
{
  char list[1024], *item, *save = NULL;
  bool set;
  FSDPCall(FSDPOptionsGetString("-fsdp_no_decay",
                                "parameters without weight decay: comma-separated patterns (shell globs on the names, "
                                "or ndim<2: nanoGPT's rule, no decay for biases and LayerNorm's weights)",
                                "", list, sizeof list, &set));
  if (!set || opt->setup || opt->no_decay_read) return FSDP_SUCCESS; /* once, however often SetFromOptions runs */
  for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save))
    FSDPCall(FSDPOptimizerAddParamGroup(opt, item, 0.0, 1.0));
  opt->no_decay_read = true;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetFromOptions(FSDPOptimizer opt)
{
  int choice;
  double v, v2;
  bool set, set2, nesterov;
  int64_t warmup, total;

  CHECK_OPT(opt);
  FSDPCall(FSDPOptionsGetEnum("-fsdp_optimizer", "optimizer", type_names, (int)opt->type, &choice, &set));
  if (set && !opt->setup) FSDPCall(FSDPOptimizerSetType(opt, (FSDPOptimizerType)choice));
  FSDPCall(FSDPOptionsGetReal("-fsdp_lr", "learning rate (peak rate of a schedule)", opt->lr, &v, &set));
  if (set) FSDPCall(FSDPOptimizerSetLearningRate(opt, v));
  FSDPCall(FSDPOptionsGetReal("-fsdp_weight_decay", "weight decay (decoupled for adamw)", opt->weight_decay, &v, &set));
  if (set) FSDPCall(FSDPOptimizerSetWeightDecay(opt, v));
  FSDPCall(no_decay_from_options(opt));
  FSDPCall(FSDPOptionsGetReal("-fsdp_momentum", "sgd momentum", opt->momentum, &v, &set));
  FSDPCall(FSDPOptionsGetBool("-fsdp_nesterov", "sgd nesterov momentum", opt->nesterov, &nesterov, &set2));
  if (set || set2) FSDPCall(FSDPOptimizerSetMomentum(opt, v, nesterov));
  FSDPCall(FSDPOptionsGetReal("-fsdp_beta1", "adamw beta1", opt->beta1, &v, &set));
  FSDPCall(FSDPOptionsGetReal("-fsdp_beta2", "adamw beta2", opt->beta2, &v2, &set2));
  if (set || set2) FSDPCall(FSDPOptimizerSetBetas(opt, v, v2));
  FSDPCall(FSDPOptionsGetReal("-fsdp_eps", "adamw eps", opt->eps, &v, &set));
  if (set) FSDPCall(FSDPOptimizerSetEps(opt, v));
  FSDPCall(FSDPOptionsGetEnum("-fsdp_lr_schedule", "learning-rate schedule", schedule_names, (int)opt->schedule,
                              &choice, &set));
  FSDPCall(FSDPOptionsGetInt("-fsdp_warmup_steps", "linear warmup steps of the cosine schedule", opt->warmup, 0,
                             INT64_MAX, &warmup, &set2));
  FSDPCall(FSDPOptionsGetInt("-fsdp_lr_decay_steps", "step at which the cosine schedule reaches zero", opt->total, 0,
                             INT64_MAX, &total, &set2));
  FSDPCall(FSDPOptimizerSetSchedule(opt, set ? (FSDPLRSchedule)choice : opt->schedule, warmup, total));
  FSDPCall(FSDPOptionsGetReal("-fsdp_clip_grad_norm", "clip the global gradient norm to this (0: off)", opt->max_norm,
                              &v, &set));
  if (set) FSDPCall(FSDPOptimizerSetClipGradNorm(opt, v));
  if (!opt->setup) { /* the scaler's settings are fixed at SetUp */
    bool on;
    int64_t interval;
    FSDPCall(FSDPOptionsGetBool("-fsdp_grad_scaler",
                                "dynamic loss scaling (fp16): the loss gradient is multiplied by the scale, steps "
                                "with an inf or NaN gradient are skipped",
                                opt->scaler, &on, &set));
    if (set) FSDPCall(FSDPOptimizerSetGradScaler(opt, on));
    FSDPCall(FSDPOptionsGetReal("-fsdp_grad_scaler_init_scale", "the gradient scaler's first scale", opt->init_scale,
                                &v, &set));
    FSDPCall(FSDPOptionsGetInt("-fsdp_grad_scaler_growth_interval",
                               "steps without an inf or NaN after which the scale grows", opt->growth_interval, 1,
                               INT64_MAX, &interval, &set2));
    if (set || set2)
      FSDPCall(FSDPOptimizerSetGradScalerParams(opt, v, opt->growth_factor, opt->backoff_factor, interval));
  }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ set up */

static FSDPErrorCode build_segments(FSDPOptimizer opt, OptUnit *ou)
{
  FlatParam u = ou->unit;
  for (int i = 0; i < u->nparams; i++) {
    int64_t begin, end, offset;
    int group = group_of(opt, &u->params[i]);
    Segment *last = ou->nsegments > 0 ? &ou->segments[ou->nsegments - 1] : NULL;
    if (u->params[i].frozen) continue;
    FSDPCall(FlatParamGetShardRange(u, i, &begin, &end, &offset));
    if (begin == end) continue;
    /* Parameters are contiguous: neighbours in one group merge into one
       segment; a shard that spans a bias and a weight of two groups updates
       each with its own settings. */
    if (last && last->offset + last->numel == offset && last->group == group) last->numel += end - begin;
    else {
      FSDPCall(
          FSDPGrowArray_Private(&ou->segments, sizeof *ou->segments, ou->nsegments + 1, &ou->capacity, FSDP_MEM_OTHER));
      ou->segments[ou->nsegments++] = (Segment){offset, end - begin, group};
    }
    ou->numel += end - begin;
  }
  return FSDP_SUCCESS;
}

/* A group that selects no trainable parameter is, most often, a pattern with a typo. */
static FSDPErrorCode check_groups(FSDPOptimizer opt)
{
  FSDPContext ctx = opt->ctx;
  for (int g = 0; g < opt->ngroups; g++) {
    bool any = false;
    for (int u = 0; u < ctx->nunits && !any; u++)
      for (int i = 0; i < ctx->units[u]->nparams && !any; i++)
        any = !ctx->units[u]->params[i].frozen && selects(opt->groups[g].pattern, &ctx->units[u]->params[i]);
    FSDPCheck(any, MPI_COMM_SELF, FSDP_ERR_ARG,
              "FSDPOptimizerSetUp: parameter group '%s' selects no trainable parameter (a pattern is a shell glob on "
              "the names, e.g. '*.bias', or ndim<N; FSDPContextView lists the names)",
              opt->groups[g].pattern);
  }
  return FSDP_SUCCESS;
}

/* Which parameters are frozen must agree: a rank that updated a parameter
   the others froze would silently fork the replicas. */
static FSDPErrorCode agree_on_frozen(FSDPOptimizer opt)
{
  FSDPContext ctx = opt->ctx;
  uint64_t h = FSDP_HASH_INIT, minmax[2];
  for (int u = 0; u < ctx->nunits; u++)
    for (int i = 0; i < ctx->units[u]->nparams; i++)
      h = FSDPHashBytes_Private(h, &ctx->units[u]->params[i].frozen, sizeof(bool));
  minmax[0] = h;
  minmax[1] = ~h;
  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, minmax, 2, MPI_UINT64_T, MPI_MIN, ctx->comm));
  FSDPCheck(minmax[0] == h && ~minmax[1] == h, ctx->comm, FSDP_ERR_ARG,
            "FSDPOptimizerSetUp: ranks froze different parameters (FlatParamSetTrainable): every rank must freeze "
            "the same ones");
  return FSDP_SUCCESS;
}

/* The settings every rank must share, named by the options that set them: a
   rank with another rate or decay would fork the replicas of a shard, one
   with another clipping would miss the norm's all-reduce (doc/options.md,
   "Settings that must agree"). */
static FSDPErrorCode agree_on_settings(FSDPOptimizer opt)
{
  FSDPSetting s[FSDP_MAX_SETTINGS];
  char *groups = NULL;
  uint64_t groups_hash;
  int n = 0;
  FSDPCall(FSDPOptimizerDescribeGroups_Private(opt, &groups));
  groups_hash = FSDPHashBytes_Private(FSDP_HASH_INIT, groups, strlen(groups));
  FSDPCall(FSDPFree(&groups));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_optimizer", "%s", type_names[opt->type]));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_lr", "%.17g", opt->lr));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_weight_decay", "%.17g", opt->weight_decay));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_momentum", "%.17g", opt->momentum));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_nesterov", "%s", opt->nesterov ? "true" : "false"));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_beta1", "%.17g", opt->beta1));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_beta2", "%.17g", opt->beta2));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_eps", "%.17g", opt->eps));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_lr_schedule", "%s", schedule_names[opt->schedule]));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_warmup_steps", "%lld", (long long)opt->warmup));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_lr_decay_steps", "%lld", (long long)opt->total));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_clip_grad_norm", "%.17g", opt->max_norm));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_grad_scaler", "%s", opt->scaler ? "true" : "false"));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "-fsdp_grad_scaler_init_scale", "%.17g", opt->init_scale));
  FSDPCall(
      FSDPSettingSet_Private(&s[n++], "-fsdp_grad_scaler_growth_interval", "%lld", (long long)opt->growth_interval));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "grad scaler growth factor", "%.17g", opt->growth_factor));
  FSDPCall(FSDPSettingSet_Private(&s[n++], "grad scaler backoff factor", "%.17g", opt->backoff_factor));
  /* The groups (-fsdp_no_decay, FSDPOptimizerAddParamGroup) as a hash: their text can be long. */
  FSDPCall(FSDPSettingSet_Private(&s[n++], "parameter-group hash", "%016llx", (unsigned long long)groups_hash));
  FSDPCall(FSDPSettingsAgree_Private(opt->ctx->comm, "FSDPOptimizerSetUp", n, s));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerSetUp(FSDPOptimizer opt)
{
  FSDPContext ctx;
  CHECK_NOT_SETUP(opt);
  ctx = opt->ctx;
  FSDPCollective(ctx->comm);
  FSDPCheck(ctx->setup, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPOptimizerSetUp: the context is not set up: call FSDPContextSetUp (or FSDPModelSetUp) first");
  FSDPCall(DeviceEnter_Private(ctx->dev));
  FSDPCheck(opt->schedule != FSDP_LR_COSINE || opt->total > opt->warmup, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPOptimizerSetUp: the cosine schedule needs its total steps (%lld) above its warmup steps (%lld)",
            (long long)opt->total, (long long)opt->warmup);
  FSDPCall(agree_on_settings(opt));
  FSDPCall(agree_on_frozen(opt));
  FSDPCall(check_groups(opt));
  opt->nstates = FSDPOptimizerStateCount_Private(opt->type, opt->momentum);
  FSDPCall(
      FSDPCalloc((size_t)ctx->nunits > 0 ? (size_t)ctx->nunits : 1, sizeof *opt->units, FSDP_MEM_OTHER, &opt->units));
  opt->nunits = ctx->nunits;
  opt->dev = ctx->dev;
  for (int u = 0; u < ctx->nunits; u++) {
    OptUnit *ou = &opt->units[u];
    ou->unit = ctx->units[u];
    FSDPCall(build_segments(opt, ou));
    ou->state_bytes = (size_t)ou->numel * FSDPDataTypeSize(ou->unit->dtype);
    for (int s = 0; s < opt->nstates; s++)
      FSDPCall(DeviceCalloc_Private(ctx->dev, ou->state_bytes, FSDP_MEM_OPTIM_STATE, &ou->state[s]));
    opt->state_numel += (int64_t)opt->nstates * ou->numel;
  }
  opt->trainable_changes = ctx->trainable_changes;
  opt->setup = true;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ the schedule */

static double current_lr(const FSDPOptimizer opt)
{
  int64_t t = opt->step;
  if (opt->schedule == FSDP_LR_CONSTANT) return opt->lr;
  if (t < opt->warmup) return opt->lr * (double)(t + 1) / (double)opt->warmup;
  if (t >= opt->total) return 0.0;
  return opt->lr * 0.5 * (1.0 + cos(FSDP_PI * (double)(t - opt->warmup) / (double)(opt->total - opt->warmup)));
}

/* ------------------------------------------------------------------ the gradient scaler */

/* Multiplies this rank's trainable gradient elements by 1/scale and agrees
   over all ranks (every shard group and replica) whether any is an inf or a
   NaN: once between two steps (PyTorch's unscale_), however often clipping
   and stepping ask.  Collective. */
static void *at_elem(const OptUnit *ou, void *base, int64_t i)
{
  return (char *)base + (size_t)i * FSDPDataTypeSize(ou->unit->dtype);
}

/* One value over the context's ranks, waited for as the context waits
   (FSDPContextWait: it sleeps rather than polls on an oversubscribed node). */
static FSDPErrorCode allreduce(FSDPContext ctx, void *value, MPI_Datatype type, MPI_Op op)
{
  MPI_Request req;
  FSDPCallMPI(MPI_Iallreduce(MPI_IN_PLACE, value, 1, type, op, ctx->comm, &req));
  FSDPCall(FSDPContextWait(ctx, &req));
  return FSDP_SUCCESS;
}

static FSDPErrorCode unscale(FSDPOptimizer opt)
{
  FSDPContext ctx = opt->ctx;
  int bad = 0;
  if (!opt->scaler || opt->unscaled) return FSDP_SUCCESS;
  if (ctx->dev) {
    bool nonfinite;
    for (int u = 0; u < opt->nunits; u++) {
      OptUnit *ou = &opt->units[u];
      for (int s = 0; s < ou->nsegments; s++)
        FSDPCall(DeviceScale_Private(ctx->dev, ou->unit->dtype,
                                     at_elem(ou, ou->unit->grad_shard, ou->segments[s].offset), ou->segments[s].numel,
                                     1.0 / opt->scale, true));
    }
    FSDPCall(DeviceTakeReductions_Private(ctx->dev, &nonfinite, NULL));
    bad = nonfinite;
  } else
    for (int u = 0; u < opt->nunits; u++) {
      OptUnit *ou = &opt->units[u];
      for (int s = 0; s < ou->nsegments; s++) {
        int64_t off = ou->segments[s].offset, n = ou->segments[s].numel;
        if (ou->unit->dtype == FSDP_FLOAT64) {
          double *g = (double *)ou->unit->grad_shard + off, inv = 1.0 / opt->scale;
          for (int64_t i = 0; i < n; i++) {
            g[i] *= inv;
            bad |= !(fabs(g[i]) <= DBL_MAX); /* inf or NaN */
          }
        } else {
          float *g = (float *)ou->unit->grad_shard + off, inv = (float)(1.0 / opt->scale);
          for (int64_t i = 0; i < n; i++) {
            g[i] *= inv;
            bad |= !(fabsf(g[i]) <= FLT_MAX);
          }
        }
      }
    }
  FSDPCall(allreduce(ctx, &bad, MPI_INT, MPI_MAX));
  opt->found_inf = bad;
  opt->unscaled = true;
  return FSDP_SUCCESS;
}

/* After a step, taken or skipped: the scale for the next one (PyTorch's update). */
static void update_scale(FSDPOptimizer opt)
{
  if (!opt->scaler) return;
  if (opt->found_inf) {
    opt->scale *= opt->backoff_factor;
    opt->growth_tracker = 0;
    opt->skipped++;
  } else if (++opt->growth_tracker == opt->growth_interval) {
    opt->scale *= opt->growth_factor;
    opt->growth_tracker = 0;
  }
  opt->unscaled = opt->found_inf = false;
}

/* ------------------------------------------------------------------ clipping */

/* The global norm of the gradient shards, the same on every rank (NaN or
   Inf when any element is).  The first replica speaks for its shard:
   replicas hold the same one. */
/* sum g^2 in double (FSDP_LANE_SUM: the same bits on every SIMD path). */
FSDP_INLINE void sum_squares_f32_kernel_body(int64_t n, const float *restrict g, double *restrict sum)
{
#define SQUARE(k) ((double)g[k] * g[k])
  *sum = FSDP_LANE_SUM(n, SQUARE);
#undef SQUARE
}
FSDP_SIMD_KERNEL(sum_squares_f32_kernel, (int64_t n, const float *restrict g, double *restrict sum), (n, g, sum))
static double sum_squares_f32(int64_t n, const float *g)
{
  double sum;
  sum_squares_f32_kernel(n, g, &sum);
  return sum;
}

static FSDPErrorCode global_grad_norm(FSDPOptimizer opt, double *norm)
{
  FSDPContext ctx = opt->ctx;
  double sumsq = 0;
  if (ctx->replica_index == 0 && ctx->dev) {
    for (int u = 0; u < opt->nunits; u++) {
      OptUnit *ou = &opt->units[u];
      for (int s = 0; s < ou->nsegments; s++)
        FSDPCall(DeviceSumSquares_Private(ctx->dev, ou->unit->dtype,
                                          at_elem(ou, ou->unit->grad_shard, ou->segments[s].offset),
                                          ou->segments[s].numel));
    }
    FSDPCall(DeviceTakeReductions_Private(ctx->dev, NULL, &sumsq));
  } else if (ctx->replica_index == 0)
    for (int u = 0; u < opt->nunits; u++) {
      OptUnit *ou = &opt->units[u];
      for (int s = 0; s < ou->nsegments; s++) {
        int64_t off = ou->segments[s].offset, n = ou->segments[s].numel;
        if (ou->unit->dtype == FSDP_FLOAT64) {
          const double *g = (const double *)ou->unit->grad_shard + off;
          for (int64_t i = 0; i < n; i++) sumsq += g[i] * g[i];
        } else sumsq += sum_squares_f32(n, (const float *)ou->unit->grad_shard + off);
      }
    }
  FSDPCall(allreduce(ctx, &sumsq, MPI_DOUBLE, MPI_SUM));
  *norm = sqrt(sumsq);
  return FSDP_SUCCESS;
}

/* Scales the gradients so that their global norm `norm` is at most max_norm. */
static FSDPErrorCode clip_to(FSDPOptimizer opt, double max_norm, double norm)
{
  FSDPContext ctx = opt->ctx;
  double coef = max_norm / (norm + 1e-6);
  if (!(coef < 1.0) && !isnan(coef)) return FSDP_SUCCESS; /* NaN spreads, as in PyTorch */
  for (int u = 0; u < opt->nunits; u++) {
    OptUnit *ou = &opt->units[u];
    for (int s = 0; s < ou->nsegments; s++) {
      int64_t off = ou->segments[s].offset, n = ou->segments[s].numel;
      if (ctx->dev)
        FSDPCall(
            DeviceScale_Private(ctx->dev, ou->unit->dtype, at_elem(ou, ou->unit->grad_shard, off), n, coef, false));
      else if (ou->unit->dtype == FSDP_FLOAT64) {
        double *g = (double *)ou->unit->grad_shard + off;
        for (int64_t i = 0; i < n; i++) g[i] *= coef;
      } else {
        float *g = (float *)ou->unit->grad_shard + off;
        for (int64_t i = 0; i < n; i++) g[i] *= (float)coef;
      }
    }
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerClipGradNorm(FSDPOptimizer opt, double max_norm, double *total_norm)
{
  double norm;

  CHECK_SETUP(opt);
  CHECK_HYPER(max_norm >= 0 && isfinite(max_norm), "max_norm", max_norm);
  FSDPCollective(opt->ctx->comm);
  FSDPCall(FSDPContextFinishBackward(opt->ctx)); /* the gradient shards must be final */
  FSDPCall(unscale(opt));                        /* clipping sees true gradients */
  FSDPCall(global_grad_norm(opt, &norm));
  if (total_norm) *total_norm = norm;
  if (max_norm <= 0) return FSDP_SUCCESS;
  return clip_to(opt, max_norm, norm);
}

/* ------------------------------------------------------------------ the step */

/* torch.optim.SGD with dampening 0: d = g + wd p; buf = d on the first step,
   momentum buf + d after; d = d + momentum buf (nesterov) or buf; p -= lr d. */
#define DEFINE_SGD(T, suffix)                                                                                          \
  static void sgd_##suffix(const FSDPOptimizer o, double lr, double weight_decay, T *p, const T *g, T *buf, int64_t n) \
  {                                                                                                                    \
    const T wd = (T)weight_decay, mom = (T)o->momentum, rate = (T)lr;                                                  \
    for (int64_t i = 0; i < n; i++) {                                                                                  \
      T d = g[i];                                                                                                      \
      if (wd != 0) d += wd * p[i];                                                                                     \
      if (buf) {                                                                                                       \
        buf[i] = o->step == 0 ? d : mom * buf[i] + d;                                                                  \
        d = o->nesterov ? d + mom * buf[i] : buf[i];                                                                   \
      }                                                                                                                \
      p[i] -= rate * d;                                                                                                \
    }                                                                                                                  \
  }
DEFINE_SGD(double, f64)

/* torch.optim.AdamW: p *= 1 - lr wd; m = m + (1 - b1)(g - m); v = b2 v + (1 - b2) g^2;
   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
#define DEFINE_ADAMW(T, suffix)                                                                                        \
  static void adamw_##suffix(const FSDPOptimizer o, double lr, double weight_decay, T *p, const T *g, T *m, T *v,      \
                             int64_t n)                                                                                \
  {                                                                                                                    \
    double t = (double)(o->step + 1);                                                                                  \
    const T decay = (T)(1.0 - lr * weight_decay), b1 = (T)o->beta1, b2 = (T)o->beta2, eps = (T)o->eps;                 \
    const T step_size = (T)(lr / (1.0 - pow(o->beta1, t))), bc2_sqrt = (T)sqrt(1.0 - pow(o->beta2, t));                \
    for (int64_t i = 0; i < n; i++) {                                                                                  \
      p[i] *= decay;                                                                                                   \
      m[i] += (1 - b1) * (g[i] - m[i]);                                                                                \
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];                                                                       \
      p[i] -= step_size * m[i] / (sqrt(v[i]) / bc2_sqrt + eps);                                                        \
    }                                                                                                                  \
  }
DEFINE_ADAMW(double, f64)

/* fp32, the usual case, in float vector code (simd.h): one pass over the
   shard and its state, as PyTorch's fused and foreach updates; the update
   is PyTorch's, p + (-step_size) (m / (sqrt(v) / sqrt(bc2) + eps)), in float. */
FSDP_INLINE void adamw_f32_kernel_body(int64_t n, float *restrict p, const float *restrict g, float *restrict m,
                                       float *restrict v, const float *restrict k)
{
  const float decay = k[0], one_b1 = k[1], b2 = k[2], eps = k[3], step_size = k[4], bc2_sqrt = k[5], one_b2 = k[6];
  FSDP_SIMD_LOOP
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i], mi = m[i] + one_b1 * (gi - m[i]), vi = b2 * v[i] + one_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
  }
}
FSDP_SIMD_KERNEL(adamw_f32_kernel,
                 (int64_t n, float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                  const float *restrict k),
                 (n, p, g, m, v, k))

static void adamw_f32(const FSDPOptimizer o, double lr, double weight_decay, float *p, const float *g, float *m,
                      float *v, int64_t n)
{
  double t = (double)(o->step + 1);
  /* 1 - beta in double, then rounded, as PyTorch passes it: (1 - (float)0.999)
     would be 1.3e-5 too small, and every update 6e-6 too large. */
  const float k[7] = {(float)(1.0 - lr * weight_decay),
                      (float)(1.0 - o->beta1),
                      (float)o->beta2,
                      (float)o->eps,
                      (float)(lr / (1.0 - pow(o->beta1, t))),
                      (float)sqrt(1.0 - pow(o->beta2, t)),
                      (float)(1.0 - o->beta2)};
  adamw_f32_kernel(n, p, g, m, v, k);
}

/* k: weight decay, momentum, learning rate; the first step; nesterov. */
FSDP_INLINE void sgd_f32_kernel_body(int64_t n, float *restrict p, const float *restrict g, float *restrict buf,
                                     const float *restrict k, int first, int nesterov)
{
  const float wd = k[0], mom = k[1], rate = k[2];
  if (!buf) {
    FSDP_SIMD_LOOP
    for (int64_t i = 0; i < n; i++) p[i] -= rate * (wd != 0 ? g[i] + wd * p[i] : g[i]);
    return;
  }
  FSDP_SIMD_LOOP
  for (int64_t i = 0; i < n; i++) {
    float d = wd != 0 ? g[i] + wd * p[i] : g[i], b = first ? d : mom * buf[i] + d;
    buf[i] = b;
    p[i] -= rate * (nesterov ? d + mom * b : b);
  }
}
FSDP_SIMD_KERNEL(sgd_f32_kernel,
                 (int64_t n, float *restrict p, const float *restrict g, float *restrict buf, const float *restrict k,
                  int first, int nesterov),
                 (n, p, g, buf, k, first, nesterov))

static void sgd_f32(const FSDPOptimizer o, double lr, double weight_decay, float *p, const float *g, float *buf,
                    int64_t n)
{
  const float k[3] = {(float)weight_decay, (float)o->momentum, (float)lr};
  sgd_f32_kernel(n, p, g, buf, k, o->step == 0, o->nesterov);
}

/* The same update on a GPU: one kernel per segment, the bias corrections
   computed here as the host loops compute them. */
static FSDPErrorCode device_update(FSDPOptimizer o, OptUnit *ou, double lr, double weight_decay, int64_t off,
                                   int64_t packed, int64_t n)
{
  Device dev = o->ctx->dev;
  double t = (double)(o->step + 1);
  DeviceHyper h = {.lr = lr,
                   .weight_decay = weight_decay,
                   .momentum = o->momentum,
                   .beta1 = o->beta1,
                   .beta2 = o->beta2,
                   .eps = o->eps,
                   .step_size = lr / (1.0 - pow(o->beta1, t)),
                   .bc2_sqrt = sqrt(1.0 - pow(o->beta2, t)),
                   .nesterov = o->nesterov,
                   .first = o->step == 0};
  void *p = at_elem(ou, ou->unit->shard, off), *g = at_elem(ou, ou->unit->grad_shard, off);
  void *s0 = ou->state[0] ? at_elem(ou, ou->state[0], packed) : NULL;
  void *s1 = ou->state[1] ? at_elem(ou, ou->state[1], packed) : NULL;
  if (o->type == FSDP_OPTIMIZER_ADAMW) return DeviceAdamW_Private(dev, ou->unit->dtype, p, g, s0, s1, n, &h);
  return DeviceSGD_Private(dev, ou->unit->dtype, p, g, s0, n, &h);
}

static FSDPErrorCode step(FSDPOptimizer opt);

FSDPErrorCode FSDPOptimizerStep(FSDPOptimizer opt)
{
  FSDPErrorCode ierr;
  CHECK_SETUP(opt);
  FSDPCollective(opt->ctx->comm);
  if (opt->ev_step >= 0) (void)FSDPLogEventBegin(opt->ev_step);
  ierr = step(opt);
  if (opt->ev_step >= 0) (void)FSDPLogEventEnd(opt->ev_step, 0);
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

static FSDPErrorCode step(FSDPOptimizer opt)
{
  double lr;
  FSDPCheck(opt->trainable_changes == opt->ctx->trainable_changes, MPI_COMM_SELF, FSDP_ERR_STATE,
            "FSDPOptimizerStep: parameters were frozen or unfrozen after FSDPOptimizerSetUp: set trainability "
            "before it (a new optimizer picks up the change)");
  FSDPCall(FSDPContextFinishBackward(opt->ctx));
  FSDPCall(unscale(opt));
  if (opt->found_inf) { /* on every rank alike: they agreed in unscale */
    opt->last_norm = NAN;
    update_scale(opt);
    return FSDP_SUCCESS;
  }
  lr = current_lr(opt);
  opt->last_norm = NAN;
  if (opt->max_norm > 0 || (opt->ctx->check_finite && !opt->scaler)) { /* the scaler checked already */
    /* One norm serves clipping and the guard; it is global, so every rank stops alike. */
    FSDPCall(global_grad_norm(opt, &opt->last_norm));
    FSDPCheck(!opt->ctx->check_finite || isfinite(opt->last_norm), opt->ctx->comm, FSDP_ERR_NOT_FINITE,
              "FSDPOptimizerStep: step %lld: the global gradient norm is %g: non-finite gradients; nothing was updated "
              "(-fsdp_check_finite false trains on)",
              (long long)opt->step + 1, opt->last_norm);
    if (opt->max_norm > 0) FSDPCall(clip_to(opt, opt->max_norm, opt->last_norm));
  }
  for (int u = 0; u < opt->nunits; u++) {
    OptUnit *ou = &opt->units[u];
    int64_t packed = 0;
    bool f64 = ou->unit->dtype == FSDP_FLOAT64;
    for (int s = 0; s < ou->nsegments; s++) {
      const Segment *sg = &ou->segments[s];
      int64_t off = sg->offset, n = sg->numel;
      /* The segment's group's settings, or the optimizer's. */
      double wd = sg->group < 0 ? opt->weight_decay : opt->groups[sg->group].weight_decay;
      double rate = sg->group < 0 ? lr : lr * opt->groups[sg->group].lr_scale;
      if (opt->ctx->dev) FSDPCall(device_update(opt, ou, rate, wd, off, packed, n));
      else if (f64) {
        double *p = (double *)ou->unit->shard + off, *g = (double *)ou->unit->grad_shard + off;
        double *s0 = ou->state[0] ? (double *)ou->state[0] + packed : NULL;
        double *s1 = ou->state[1] ? (double *)ou->state[1] + packed : NULL;
        if (opt->type == FSDP_OPTIMIZER_ADAMW) adamw_f64(opt, rate, wd, p, g, s0, s1, n);
        else sgd_f64(opt, rate, wd, p, g, s0, n);
      } else {
        float *p = (float *)ou->unit->shard + off, *g = (float *)ou->unit->grad_shard + off;
        float *s0 = ou->state[0] ? (float *)ou->state[0] + packed : NULL;
        float *s1 = ou->state[1] ? (float *)ou->state[1] + packed : NULL;
        if (opt->type == FSDP_OPTIMIZER_ADAMW) adamw_f32(opt, rate, wd, p, g, s0, s1, n);
        else sgd_f32(opt, rate, wd, p, g, s0, n);
      }
      packed += n;
    }
  }
  opt->step++;
  update_scale(opt);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ queries, view, destroy */

FSDPErrorCode FSDPOptimizerGetStep(FSDPOptimizer opt, int64_t *step)
{
  CHECK_OPT(opt);
  if (step) *step = opt->step;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerGetLearningRate(FSDPOptimizer opt, double *lr)
{
  CHECK_OPT(opt);
  if (lr) *lr = current_lr(opt);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerGetGradNorm(FSDPOptimizer opt, double *norm)
{
  CHECK_OPT(opt);
  if (norm) *norm = opt->last_norm;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerGetStateSize(FSDPOptimizer opt, int64_t *numel)
{
  CHECK_OPT(opt);
  if (numel) *numel = opt->state_numel;
  return FSDP_SUCCESS;
}

static FSDPErrorCode optimizer_view(FSDPViewer viewer, void *arg)
{
  FSDPOptimizer o = arg;
  int64_t minmax[2] = {o->state_numel, -o->state_numel};

  FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, minmax, 2, MPI_INT64_T, MPI_MIN, o->ctx->comm));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "FSDPOptimizer %s\n", type_names[o->type]));
  FSDPCall(FSDPViewerASCIIPushTab(viewer));
  if (o->type == FSDP_OPTIMIZER_ADAMW)
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "lr %g, betas (%g, %g), eps %g, weight decay %g\n", o->lr, o->beta1,
                                   o->beta2, o->eps, o->weight_decay));
  else
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "lr %g, momentum %g%s, weight decay %g\n", o->lr, o->momentum,
                                   o->nesterov ? " (nesterov)" : "", o->weight_decay));
  if (o->schedule == FSDP_LR_COSINE)
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "schedule: %lld warmup steps, cosine decay to 0 at step %lld\n",
                                   (long long)o->warmup, (long long)o->total));
  else FSDPCall(FSDPViewerASCIIPrintf(viewer, "schedule: constant\n"));
  for (int g = 0; g < o->ngroups; g++) {
    int count = 0;
    for (int u = 0; u < o->ctx->nunits; u++)
      for (int i = 0; i < o->ctx->units[u]->nparams; i++) count += group_of(o, &o->ctx->units[u]->params[i]) == g;
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "parameter group '%s': weight decay %g, lr x%g (%d parameter%s)\n",
                                   o->groups[g].pattern, o->groups[g].weight_decay, o->groups[g].lr_scale, count,
                                   count == 1 ? "" : "s"));
  }
  if (o->max_norm > 0) FSDPCall(FSDPViewerASCIIPrintf(viewer, "gradient clipping: global norm %g\n", o->max_norm));
  if (o->scaler)
    FSDPCall(FSDPViewerASCIIPrintf(viewer,
                                   "gradient scaler: scale %g (x%g after %lld steps without inf/NaN, x%g on "
                                   "one), %lld steps skipped\n",
                                   o->scale, o->growth_factor, (long long)o->growth_interval, o->backoff_factor,
                                   (long long)o->skipped));
  if (o->setup)
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "state per rank: %lld to %lld elements (%d tensors per element)\n",
                                   (long long)minmax[0], (long long)-minmax[1], o->nstates));
  FSDPCall(FSDPViewerASCIIPopTab(viewer));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerView(FSDPOptimizer opt, FSDPViewer viewer)
{
  CHECK_OPT(opt);
  FSDPCall(FSDPViewerApply_Private(__func__, viewer, opt->ctx->comm, optimizer_view, opt));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPOptimizerDestroy(FSDPOptimizer *opt)
{
  FSDPOptimizer o;
  FSDPCheck(opt, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPOptimizerDestroy: opt must not be NULL");
  o = *opt;
  if (!o) return FSDP_SUCCESS;
  (void)DeviceEnter_Private(o->dev); /* its state is freed on its GPU, error or not */
  for (int u = 0; u < o->nunits; u++) {
    FSDPCall(FSDPFree(&o->units[u].segments));
    for (int s = 0; s < 2; s++)
      FSDPCall(DeviceFree_Private(o->dev, &o->units[u].state[s], o->units[u].state_bytes, FSDP_MEM_OPTIM_STATE));
  }
  FSDPCall(FSDPFree(&o->units));
  for (int g = 0; g < o->ngroups; g++) FSDPCall(FSDPFree(&o->groups[g].pattern));
  FSDPCall(FSDPFree(&o->groups));
  FSDPCall(FSDPFree(opt));
  return FSDP_SUCCESS;
}
