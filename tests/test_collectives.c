/* Which calls are collective is true, not just written: run by
   tests/collectives.sh, which hands over each public function's @collective
   line from the headers as "collective NAME" or "local NAME" (-list FILE).
   For each, both ranks build the kit its case needs on a fresh duplicate of
   the world, then rank 0 alone makes the call, under -fsdp_debug_collectives:
   a collective call must return FSDP_ERR_TIMEOUT or FSDP_ERR_STATE with a
   message naming the call (not hang, not succeed), and a call that is not
   collective must succeed.  Last, the ranks make two different collective
   calls, and each must be told so.  One line per function on stdout: "collective
   NAME: ok ...", "local NAME: ok", "exempt NAME: why", "unsupported NAME:
   ...", or "... FAIL ..."; the script judges them.  The kits of collective
   cases are left as they are (their checks stay pending), so this program is
   not run under valgrind.  It ends with MPI_Finalize, not _exit: Hydra kills
   the other ranks of a job when one exits without finalizing, and a rank
   still on its way out was reported as a failure (CI, 2026-11-28).
   Run: mpiexec -n 2 test_collectives -list FILE -dir DIR -fsdp_debug_collectives
        -fsdp_collective_timeout 1 */
#include <signal.h>
#include <unistd.h>

#include "collectivetest.h"
#if FSDP_WITH_CUDA
#include "fsdp_cuda.h"
#endif

#define MODEL_SPEC "mlp:in=4,hidden=8,depth=2,out=2"

/* ------------------------------------------------------------------ the calls documented collective */
#define COLLECTIVE_CASES(X)                                                                                            \
  X(FSDPViewerASCIIOpen, 0, (void)0, return FSDPViewerASCIIOpen(k->comm, "/dev/null", &k->viewer);)                    \
  X(FSDPViewerDestroy, KIT_VIEWER, (void)0, return FSDPViewerDestroy(&k->viewer);)                                     \
  X(FSDPViewerFlush, KIT_VIEWER, (void)0, return FSDPViewerFlush(k->viewer);)                                          \
  X(FSDPConfigView, KIT_VIEWER, (void)0, return FSDPConfigView(k->viewer);)                                            \
  X(FSDPOptionsLeft, KIT_VIEWER, (void)0, return FSDPOptionsLeft(k->viewer, &k->i);)                                   \
  X(FSDPOptionsView, KIT_VIEWER, (void)0, return FSDPOptionsView(k->viewer);)                                          \
  X(FSDPLogView, KIT_VIEWER, (void)0, return FSDPLogView(k->viewer);)                                                  \
  X(ShardGroupCreate, 0, (void)0, return ShardGroupCreate(k->comm, &k->group);)                                        \
  X(ShardGroupSetUp, KIT_GROUP, (void)0, return ShardGroupSetUp(k->group);)                                            \
  X(ShardGroupView, KIT_GROUP | KIT_VIEWER, FSDPCall(ShardGroupSetUp(k->group)),                                       \
    return ShardGroupView(k->group, k->viewer);)                                                                       \
  X(ShardGroupDestroy, KIT_GROUP, (void)0, return ShardGroupDestroy(&k->group);)                                       \
  X(FSDPContextCreate, 0, (void)0, return FSDPContextCreate(k->comm, &k->ctx);)                                        \
  X(FSDPContextSetUp, KIT_CTX, (void)0, return FSDPContextSetUp(k->ctx);)                                              \
  X(FSDPContextFinishBackward, KIT_SETUP, (void)0, return FSDPContextFinishBackward(k->ctx);)                          \
  X(FSDPContextBroadcastParams, KIT_SETUP, (void)0, return FSDPContextBroadcastParams(k->ctx);)                        \
  X(FSDPContextSave, KIT_SETUP, (void)0, return FSDPContextSave(k->ctx, NULL, k->path);)                               \
  X(FSDPContextLoad, KIT_SETUP, (void)FSDPContextSave(k->ctx, NULL, k->path),                                          \
    return FSDPContextLoad(k->ctx, NULL, k->path);)                                                                    \
  X(FSDPContextView, KIT_SETUP | KIT_VIEWER, (void)0, return FSDPContextView(k->ctx, k->viewer);)                      \
  X(FSDPContextDestroy, KIT_SETUP, (void)0, return FSDPContextDestroy(&k->ctx);)                                       \
  X(FlatParamUnshard, KIT_SETUP, (void)0, return FlatParamUnshard(k->unit[0]);)                                        \
  X(FlatParamReshard, KIT_SETUP, FSDPCall(FlatParamUnshard(k->unit[0])), return FlatParamReshard(k->unit[0]);)         \
  X(FlatParamReduceGrad, KIT_SETUP, FSDPCall(FlatParamUnshard(k->unit[0])), return FlatParamReduceGrad(k->unit[0]);)   \
  X(FSDPOptimizerSetUp, KIT_OPT_NEW, (void)0, return FSDPOptimizerSetUp(k->opt);)                                      \
  X(FSDPOptimizerStep, KIT_OPT, (void)0, return FSDPOptimizerStep(k->opt);)                                            \
  X(FSDPOptimizerClipGradNorm, KIT_OPT, (void)0, return FSDPOptimizerClipGradNorm(k->opt, 1.0, &k->d);)                \
  X(FSDPOptimizerView, KIT_OPT | KIT_VIEWER, (void)0, return FSDPOptimizerView(k->opt, k->viewer);)                    \
  X(FSDPModelSetUp, KIT_MODEL, (void)0, return FSDPModelSetUp(k->model);)                                              \
  X(FSDPModelForward, KIT_MODEL_UP, (void)0, return FSDPModelForward(k->model, 2, k->x, &k->f);)                       \
  X(FSDPModelBackward, KIT_MODEL_UP, FSDPCall(FSDPModelForward(k->model, 2, k->x, &k->f)),                             \
    return FSDPModelBackward(k->model, k->y);)                                                                         \
  X(FSDPModelView, KIT_MODEL_UP | KIT_VIEWER, (void)0, return FSDPModelView(k->model, k->viewer);)                     \
  X(FSDPPlanCreate, 0, (void)0, return FSDPPlanCreate(k->comm, &k->planner);)                                          \
  X(FSDPPlanProbe, KIT_PLANNER, (void)0, return FSDPPlanProbe(k->planner);)                                            \
  X(FSDPPlanView, KIT_PLANNER | KIT_VIEWER, (void)0, return FSDPPlanView(k->planner, k->viewer);)

/* Calls this program cannot make on one rank, and why. */
static const char *const exempt[][2] = {
    {"FSDPInitialize", "MPI starts in it (MPI_Init_thread), before any check can run"},
    {"FSDPFinalize", "MPI ends in it: nothing runs after it to report (its check runs as every other's)"},
    {"FSDPErrorAbort", "it ends the job"},
};

#include "collective_cases_sys.h"
#include "collective_cases_core.h"
#include "collective_cases_nn.h"

#define ALL_CASES(X) COLLECTIVE_CASES(X) SYS_CASES(X) CORE_CASES(X) NN_CASES(X)

#define DEFINE_CASE(fn, needs, prep, ...)                                                                              \
  static FSDPErrorCode prep_##fn(Kit *k)                                                                               \
  {                                                                                                                    \
    (void)k;                                                                                                           \
    prep;                                                                                                              \
    return FSDP_SUCCESS;                                                                                               \
  }                                                                                                                    \
  static FSDPErrorCode call_##fn(Kit *k)                                                                               \
  {                                                                                                                    \
    (void)k;                                                                                                           \
    __VA_ARGS__                                                                                                        \
  }
ALL_CASES(DEFINE_CASE)

typedef struct {
  const char *name;
  unsigned needs;
  FSDPErrorCode (*prep)(Kit *);
  FSDPErrorCode (*call)(Kit *);
} Case;

#define TABLE_CASE(fn, needs, prep, ...) {#fn, needs, prep_##fn, call_##fn},
static const Case cases[] = {ALL_CASES(TABLE_CASE)};

static const char *current = "";

static void hung(int sig)
{
  char msg[256];
  int n = snprintf(msg, sizeof msg, "%s: FAIL: still in the call after 60 s (a hang)\n", current);
  (void)sig;
  if (write(STDOUT_FILENO, msg, (size_t)n) < 0) _exit(4);
  _exit(3);
}

static void build(Kit *k, unsigned needs, const char *dir, int index)
{
  memset(k, 0, sizeof *k);
  if (needs & (KIT_OPT | KIT_OPT_NEW)) needs |= KIT_SETUP;
  if (needs & KIT_SETUP) needs |= KIT_CTX;
  if (needs & KIT_MODEL_UP) needs |= KIT_MODEL;
  TEST_ASSERT(MPI_Comm_dup(MPI_COMM_WORLD, &k->comm) == MPI_SUCCESS, "MPI_Comm_dup");
  snprintf(k->path, sizeof k->path, "%s/checkpoint-%d.h5", dir, index);
  /* Each collective step starts together, so that a rank the machine
     deschedules is not taken for one that skipped the call (1 s here). */
  MPI_Barrier(k->comm);
  if (needs & KIT_GROUP) TEST_OK(ShardGroupCreate(k->comm, &k->group));
  if (needs & KIT_CTX) {
    TEST_OK(FSDPContextCreate(k->comm, &k->ctx));
    /* No communication thread: the kits of collective cases are never destroyed. */
    TEST_OK(FSDPContextSetCommEngine(k->ctx, FSDP_COMM_ENGINE_SYNC));
    TEST_OK(FSDPContextAddUnit(k->ctx, "a", &k->unit[0]));
    TEST_OK(FlatParamAddParam(k->unit[0], "a.w", 2, (int64_t[]){4, 3}, NULL));
    TEST_OK(FlatParamAddParam(k->unit[0], "a.b", 1, (int64_t[]){4}, NULL));
    TEST_OK(FSDPContextAddUnit(k->ctx, "b", &k->unit[1]));
    TEST_OK(FlatParamAddParam(k->unit[1], "b.w", 2, (int64_t[]){2, 4}, NULL));
    TEST_OK(FSDPContextSetUnitInit(k->ctx, kit_fill_unit, NULL));
  }
  MPI_Barrier(k->comm);
  if (needs & KIT_SETUP) TEST_OK(FSDPContextSetUp(k->ctx));
  MPI_Barrier(k->comm);
  if (needs & (KIT_OPT | KIT_OPT_NEW)) TEST_OK(FSDPOptimizerCreate(k->ctx, &k->opt));
  if (needs & KIT_OPT) TEST_OK(FSDPOptimizerSetUp(k->opt));
  MPI_Barrier(k->comm);
  if (needs & KIT_MODEL) {
    TEST_OK(FSDPContextCreate(k->comm, &k->mctx));
    TEST_OK(FSDPContextSetCommEngine(k->mctx, FSDP_COMM_ENGINE_SYNC));
    TEST_OK(FSDPModelCreate(k->mctx, MODEL_SPEC, &k->model));
  }
  MPI_Barrier(k->comm);
  if (needs & KIT_MODEL_UP) TEST_OK(FSDPModelSetUp(k->model));
  MPI_Barrier(k->comm);
  if (needs & KIT_PLANNER) {
    TEST_OK(FSDPPlanCreate(k->comm, &k->planner));
    TEST_OK(FSDPPlanSetModel(k->planner, MODEL_SPEC));
    TEST_OK(FSDPPlanSetJob(k->planner, 1, 2));
    TEST_OK(FSDPPlanSetBatch(k->planner, 4));
    TEST_OK(FSDPPlanSetUp(k->planner));
  }
  MPI_Barrier(k->comm);
  if (needs & KIT_VIEWER) TEST_OK(FSDPViewerASCIIOpen(k->comm, "/dev/null", &k->viewer));
}

/* After a call that is not collective: every rank takes the kit down again. */
static void destroy(Kit *k)
{
  (void)FSDPViewerDestroy(&k->viewer);
  (void)FSDPPlanDestroy(&k->planner);
  (void)FSDPModelDestroy(&k->model);
  (void)FSDPContextDestroy(&k->mctx);
  (void)FSDPOptimizerDestroy(&k->opt);
  (void)FSDPContextDestroy(&k->ctx);
  (void)ShardGroupDestroy(&k->group);
  MPI_Comm_free(&k->comm);
}

static const Case *find(const char *name)
{
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!strcmp(cases[i].name, name)) return &cases[i];
  return NULL;
}

int main(int argc, char **argv)
{
  char list[4096] = "", dir[2048] = ".", kind[32], name[128];
  int rank, size, index = 0;
  FILE *fp;

  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  TEST_ASSERT(size == 2, "run on 2 ranks, not %d", size);
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "-list")) snprintf(list, sizeof list, "%s", argv[i + 1]);
    if (!strcmp(argv[i], "-dir")) snprintf(dir, sizeof dir, "%s", argv[i + 1]);
  }
  TEST_ASSERT(list[0], "-list FILE is required");
  TEST_ASSERT((fp = fopen(list, "r")), "cannot open %s", list);
  /* The errors expected here are reported below, one line each. */
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  signal(SIGALRM, hung);
  while (fscanf(fp, "%31s %127s", kind, name) == 2) {
    const Case *c = find(name);
    bool collective = !strcmp(kind, "collective");
    bool skip = false;
    Kit k;
    FSDPErrorCode code;
    const char *msg = "";

    for (size_t i = 0; i < sizeof exempt / sizeof exempt[0]; i++)
      if (!strcmp(exempt[i][0], name)) {
        if (rank == 0) printf("exempt %s: %s\n", name, exempt[i][1]);
        skip = true;
      }
    if (skip) continue;
    if (!c) {
      if (rank == 0) printf("%s %s: FAIL: no case for it in tests/test_collectives.c\n", kind, name);
      continue;
    }
    index++;
    current = name;
    build(&k, c->needs, dir, index);
    MPI_Barrier(k.comm);
    code = c->prep(&k);
    if (code) {
      FSDPGetLastError(NULL, &msg, NULL);
      TEST_ASSERT(false, "%s: the preparation failed on rank %d: %s", name, rank, msg);
    }
    if (rank == 0) {
      alarm(60);
      code = c->call(&k);
      alarm(0);
      if (code) FSDPGetLastError(NULL, &msg, NULL);
      if (code == FSDP_ERR_UNSUPPORTED) printf("unsupported %s: %s\n", name, msg);
      else if (collective && (code == FSDP_ERR_TIMEOUT || code == FSDP_ERR_STATE) && strstr(msg, name) &&
               strstr(msg, "-fsdp_debug_collectives"))
        printf("collective %s: ok (%s: %.160s)\n", name, FSDPGetErrorString(code), msg);
      else if (collective)
        printf("collective %s: FAIL: called on rank 0 alone it returned %s (%s), not a named error\n", name,
               FSDPGetErrorString(code), code ? msg : "success");
      else if (code == FSDP_SUCCESS) printf("local %s: ok\n", name);
      else printf("local %s: FAIL: called on rank 0 alone it returned %s: %s\n", name, FSDPGetErrorString(code), msg);
      fflush(stdout);
    }
    if (!collective) {
      MPI_Barrier(MPI_COMM_WORLD);
      destroy(&k);
    }
  }
  fclose(fp);
  {
    /* Two different collective calls at the same point: each rank is told, naming its own call. */
    Kit k;
    FSDPErrorCode code;
    const char *msg = "", *mine = rank == 0 ? "FSDPContextBroadcastParams" : "FSDPContextFinishBackward";
    current = "mismatch";
    build(&k, KIT_SETUP, dir, ++index);
    alarm(60);
    code = rank == 0 ? FSDPContextBroadcastParams(k.ctx) : FSDPContextFinishBackward(k.ctx);
    alarm(0);
    if (code) FSDPGetLastError(NULL, &msg, NULL);
    if (code == FSDP_ERR_STATE && strstr(msg, "collective mismatch") && strstr(msg, mine))
      printf("mismatch %s on rank %d: ok (%.160s)\n", mine, rank, msg);
    else
      printf("mismatch %s on rank %d: FAIL: returned %s (%s), not a mismatch naming it\n", mine, rank,
             FSDPGetErrorString(code), code ? msg : "success");
    fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("done: %d cases\n", index);
  fflush(stdout);
  /* MPI_Finalize does not wait for the checks left pending above; UCX may warn that their requests were never freed. */
  MPI_Finalize();
  return 0;
}
