/* optimimpl.h: FSDPOptimizer internals, shared by optimizer.c and the
   checkpoint code that saves and restores the state. */
#ifndef FSDP_OPTIMIMPL_H
#define FSDP_OPTIMIMPL_H

#include "../core/coreimpl.h"

typedef struct {
  int64_t offset, numel; /* in the shard */
  int group;             /* the parameter group its parameters are in; -1: none (the optimizer's settings) */
} Segment;

/* A parameter group (FSDPOptimizerAddParamGroup): the parameters `pattern`
   selects take this weight decay and this multiple of the learning rate. */
typedef struct {
  char *pattern;
  double weight_decay, lr_scale;
} ParamGroup;

typedef struct {
  FlatParam unit;
  Segment *segments;
  int nsegments, capacity;
  int64_t numel;      /* trainable elements in the shard */
  void *state[2];     /* SGD: momentum_buffer; AdamW: exp_avg, exp_avg_sq; packed over the segments */
  size_t state_bytes; /* of each */
} OptUnit;

struct FSDPOptimizer_s {
  FSDPContext ctx;
  FSDPLogEvent ev_step; /* "OptimizerStep" */
  FSDPOptimizerType type;
  double lr, weight_decay, momentum, beta1, beta2, eps, max_norm;
  bool nesterov, weight_decay_set;
  FSDPLRSchedule schedule;
  int64_t warmup, total;
  int64_t step;
  double last_norm;
  /* the gradient scaler (FSDPOptimizerSetGradScaler) */
  bool scaler;
  double init_scale, growth_factor, backoff_factor, scale;
  int64_t growth_interval, growth_tracker, skipped;
  bool unscaled;  /* the gradients were unscaled since the last step (PyTorch's per-optimizer state) */
  bool found_inf; /* whether the ranks found an inf or NaN in them */
  bool setup;
  int64_t trainable_changes; /* the context's count at SetUp */
  OptUnit *units;
  int nunits;
  ParamGroup *groups; /* in the order added: a parameter is in the last one that selects it */
  int ngroups, groups_capacity;
  bool no_decay_read; /* -fsdp_no_decay's groups were added */
  Device dev;         /* the context's at SetUp: the state is freed there, even after the context */
  int nstates;
  int64_t state_numel;
};

/* The names of state tensor s of an optimizer of this type, as
   torch.optim's state_dict calls them. */
const char *FSDPOptimizerStateName_Private(FSDPOptimizer opt, int s);
/* State tensors per parameter shard: AdamW's two moments, SGD's momentum buffer (when it has momentum). */
int FSDPOptimizerStateCount_Private(FSDPOptimizerType type, double momentum);
/* The optimizer's parameter groups as text in memory of its own (*text, to
   be freed): "PATTERN: weight decay W, lr xS; ..." ("" when it has none), the
   numbers as short as reads back exactly; what a checkpoint records, and a
   load compares. */
FSDPErrorCode FSDPOptimizerDescribeGroups_Private(FSDPOptimizer opt, char **text);

#endif
