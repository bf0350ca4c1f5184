/* collectivetest.h: the kit and the case tables of tests/test_collectives.c.

   A case makes one public call on rank 0 alone, with rank 1 elsewhere.
   Both ranks first build the kit the case needs (on a fresh duplicate of
   the world) and run its preparation; then rank 0 makes the call.  The
   headers' @collective line decides what must happen (tests/collectives.sh
   hands it over): a collective call must return a named error under
   -fsdp_debug_collectives, a call that is not collective must succeed.

   A case is one line of an X-macro list:
     X(FUNCTION, NEEDS, PREP, BODY...)
   NEEDS: the kit (KIT_* flags, or'ed); PREP: a statement both ranks run
   after building the kit (`(void)0` for none); BODY: statements ending in
   `return CALL;` with the case's call, which may use the kit's objects and
   its scratch space (k->i, k->d, ...). */
#ifndef FSDP_COLLECTIVETEST_H
#define FSDP_COLLECTIVETEST_H

#include "fsdp.h"
#include "fsdp_nn.h"
#include "testutil.h"

enum {
  KIT_GROUP = 1 << 0,    /* k->group: a ShardGroup on k->comm, not set up */
  KIT_CTX = 1 << 1,      /* k->ctx: a context with units "a" (a.w [4, 3], a.b [4]) and "b" (b.w [2, 4]), not set up */
  KIT_SETUP = 1 << 2,    /* k->ctx set up (implies KIT_CTX); k->unit[0], k->unit[1] its units */
  KIT_OPT = 1 << 3,      /* k->opt: an AdamW optimizer of k->ctx, set up (implies KIT_SETUP) */
  KIT_MODEL = 1 << 4,    /* k->model: "mlp:in=4,hidden=8,depth=2,out=2" on its own context k->mctx, not set up */
  KIT_MODEL_UP = 1 << 5, /* k->model set up (implies KIT_MODEL) */
  KIT_VIEWER = 1 << 6,   /* k->viewer: an ASCII viewer on k->comm writing to /dev/null */
  KIT_OPT_NEW = 1 << 7,  /* k->opt: an optimizer of k->ctx (set up), created but not set up */
  KIT_PLANNER = 1 << 8,  /* k->planner: an FSDPPlan on k->comm for the kit's MLP, 1 node x 2 ranks, batch 4, set up */
};

typedef struct {
  MPI_Comm comm; /* a fresh duplicate of MPI_COMM_WORLD for each case */
  ShardGroup group;
  FSDPContext ctx, mctx;
  FlatParam unit[2];
  FSDPOptimizer opt;
  FSDPModel model;
  FSDPViewer viewer;
  char path[256]; /* a checkpoint file name for this case, in the test's folder */
  /* Scratch space for the outputs of the calls. */
  int i, j, n;
  int64_t l[4];
  double d, e;
  bool b;
  void *p;
  float *f;
  const char *s;
  char buf[256];
  float x[64], y[64];
  MPI_Comm c;
  FSDPTrainingState state;
  FSDPMemoryPlan plan;
  FSDPCommStats stats;
  FSDPMemoryStats mem;
  FSDPDataType dt, dt2;
  FSDPLogEvent event;
  FSDPPlan planner;
  FSDPPlanCandidate cand;
} Kit;

/* The kit's unit initializer: 0.01, 0.02, ... in each parameter. */
static inline FSDPErrorCode kit_fill_unit(FlatParam unit, void *user)
{
  int n;
  (void)user;
  FSDPCall(FlatParamGetNumParams(unit, &n));
  for (int id = 0; id < n; id++) {
    float *w;
    int64_t numel;
    FSDPCall(FlatParamGetParamInfo(unit, id, NULL, NULL, NULL, &numel));
    FSDPCall(FlatParamGetParam(unit, id, (void **)&w));
    for (int64_t i = 0; i < numel; i++) w[i] = 0.01f * (float)(i + 1);
  }
  return FSDP_SUCCESS;
}

#endif
