/* The floating-point environment: every public call of a typical program
   leaves it as it found it.  After each call no exception flag but
   FE_INEXACT is raised (libxml2, which hwloc's XML export starts, computes
   0/0; MPI, HDF5 and OpenBLAS start up too), the traps and the rounding mode
   are the caller's, and a flag the caller raised before a call is still
   raised after it.  With -trap the program runs as one built with gfortran's
   -ffpe-trap=invalid,zero,overflow: a SIGFPE names the call it came from.
   The calls: FSDPInitialize, a context with hwloc's topology of this machine
   (and one read from an XML file), an MLP model and AdamW with clipping,
   training steps, a checkpoint saved and loaded, errors (a bad argument, a
   missing checkpoint), views and -fsdp_log_view, destroys, FSDPFinalize;
   and where an inf or a NaN is expected (see expected_nonfinite).
   mpitest: -n 1
   mpitest: -n 2 -fsdp_log_view
   mpitest: -n 1 -trap
   mpitest: -n 2 -trap -fsdp_log_view -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 1 */
#define _GNU_SOURCE /* feenableexcept */
#include <fenv.h>
#include <signal.h>
#include <sys/stat.h>

#include "fsdp_config.h"
#include "fsdp_nn.h"
#include "fsdptest.h"

#define SPEC "mlp:in=5,hidden=16,depth=2,out=3,act=gelu,norm=layernorm"
#define TRAPS (FE_INVALID | FE_DIVBYZERO | FE_OVERFLOW)
#define FLAGS (FE_ALL_EXCEPT & ~FE_INEXACT)
enum { IN = 5, OUT = 3, BATCH = 8, STEPS = 3 };

static int traps;                         /* the traps this program runs with */
static bool flags_seen;                   /* false under valgrind, which keeps no exception flags */
static const char *volatile current = ""; /* the call under way, for the SIGFPE handler */

static void on_sigfpe(int signo)
{
  char line[512];
  int len = snprintf(line, sizeof line, "test_fpenv: test failed: SIGFPE (a trapped floating-point exception) in %s\n",
                     current);
  (void)signo;
  if (len > 0) (void)!write(2, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
  _exit(1);
}

static void flag_names(int flags, char *text, size_t len)
{
  snprintf(text, len, "%s%s%s%s", flags & FE_INVALID ? " FE_INVALID" : "", flags & FE_DIVBYZERO ? " FE_DIVBYZERO" : "",
           flags & FE_OVERFLOW ? " FE_OVERFLOW" : "", flags & FE_UNDERFLOW ? " FE_UNDERFLOW" : "");
}

/* The environment after `what`: the caller's traps and rounding, and no flag
   but `kept` (the caller's own, raised before the call). */
static void check_env(const char *what, int kept)
{
  int flags = fetestexcept(FLAGS), enabled = fegetexcept();
  char names[128], want[128];
  flag_names(flags, names, sizeof names);
  flag_names(kept, want, sizeof want);
  TEST_ASSERT(flags == kept, "%s left the floating-point exception flags%s raised (expected%s)", what, names,
              kept ? want : " none");
  TEST_ASSERT(enabled == traps, "%s left the traps 0x%x enabled, the caller's were 0x%x", what, enabled, traps);
  TEST_ASSERT(fegetround() == FE_TONEAREST, "%s changed the rounding mode", what);
}

/* Run one call with the flags clear, expect `code` (FSDP_SUCCESS, or -1 for
   any error), and check what it left. */
#define STEP_CODE(code, ...)                                                                                           \
  do {                                                                                                                 \
    FSDPErrorCode step_got_;                                                                                           \
    feclearexcept(FE_ALL_EXCEPT);                                                                                      \
    current = #__VA_ARGS__;                                                                                            \
    step_got_ = (__VA_ARGS__);                                                                                         \
    current = "the test itself";                                                                                       \
    TEST_ASSERT((code) < 0 ? step_got_ != FSDP_SUCCESS : step_got_ == (code), "%s returned %d (%s)", #__VA_ARGS__,     \
                (int)step_got_, FSDPGetErrorString(step_got_));                                                        \
    check_env(#__VA_ARGS__, 0);                                                                                        \
  } while (0)
#define STEP(...) STEP_CODE(FSDP_SUCCESS, __VA_ARGS__)

/* Where the library expects an inf or a NaN and looks for it, the caller's
   traps do not fire and no flag is left: option values out of range, the
   gradient guard (-fsdp_check_finite) and fp16 training whose gradient
   scaler's scale overflows the reduction (fp16's range ends at 65504). */
static void expected_nonfinite(FSDPContext ctx, FSDPModel model, FSDPOptimizer opt, const float *x, const float *t)
{
  FSDPContext c16;
  FSDPModel m16;
  FSDPOptimizer o16;
  FlatParam unit;
  float *g, *y, *dy;
  double v, loss, scale;
  int64_t n, skipped;

  STEP(FSDPOptionsSetValue("-fsdp_fpenv_real", "1e999"));
  STEP_CODE(FSDP_ERR_OPTION, FSDPOptionsGetReal("-fsdp_fpenv_real", "a real too large for a double", 1, &v, NULL));
  STEP(FSDPOptionsSetValue("-fsdp_fpenv_real", "1e-320"));
  STEP(FSDPOptionsGetReal("-fsdp_fpenv_real", "a subnormal double", 1, &v, NULL));
  STEP(FSDPOptionsClearValue("-fsdp_fpenv_real"));

  /* An inf, then a NaN, in a gradient: the step refuses it. */
  for (int k = 0; k < 2; k++) {
    STEP(FSDPContextZeroGrad(ctx));
    STEP(FSDPModelForward(model, BATCH, x, &y));
    STEP(FSDPModelLoss(model, FSDP_LOSS_MSE, t, 1.0, &loss, &dy));
    STEP(FSDPModelBackward(model, dy));
    STEP(FSDPContextFinishBackward(ctx));
    STEP(FSDPContextGetUnit(ctx, 0, &unit));
    STEP(FlatParamGetGradShard(unit, (void **)&g, &n));
    if (n > 0) g[0] = k ? NAN : -INFINITY;
    STEP_CODE(FSDP_ERR_NOT_FINITE, FSDPOptimizerStep(opt));
  }
  STEP(FSDPContextZeroGrad(ctx));

  STEP(FSDPContextCreate(MPI_COMM_WORLD, &c16));
  STEP(FSDPContextSetMixedPrecision(c16, FSDP_FLOAT16, FSDP_FLOAT16));
  STEP(FSDPModelCreate(c16, SPEC, &m16));
  STEP(FSDPModelSetUp(m16));
  STEP(FSDPOptimizerCreate(c16, &o16));
  STEP(FSDPOptimizerSetGradScaler(o16, true));
  STEP(FSDPOptimizerSetGradScalerParams(o16, 0x1p40, 2, 0.5, 2000));
  STEP(FSDPOptimizerSetUp(o16));
  STEP(FSDPOptimizerGetGradScale(o16, &scale, NULL));
  STEP(FSDPContextZeroGrad(c16));
  STEP(FSDPModelForward(m16, BATCH, x, &y));
  STEP(FSDPModelLoss(m16, FSDP_LOSS_MSE, t, scale, &loss, &dy));
  STEP(FSDPModelBackward(m16, dy));
  STEP(FSDPOptimizerStep(o16));
  STEP(FSDPOptimizerGetGradScale(o16, &scale, &skipped));
  TEST_ASSERT(skipped == 1 && scale == 0x1p39, "the scaler skipped %lld steps and its scale is %g after an overflow",
              (long long)skipped, scale);
  STEP(FSDPOptimizerDestroy(&o16));
  STEP(FSDPModelDestroy(&m16));
  STEP(FSDPContextDestroy(&c16));
}

/* A context on this machine's topology (or `topology`, an XML file) with
   one small unit, set up and destroyed. */
#if FSDP_HAVE_HWLOC /* an XML topology is hwloc's */
static void xml_topology(const char *topology)
{
  FSDPContext ctx;
  FlatParam unit;
  FSDPParamId id;
  STEP(FSDPOptionsSetValue("-fsdp_topology", topology));
  STEP(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  STEP(FSDPContextSetFromOptions(ctx));
  STEP(FSDPContextAddUnit(ctx, "u", &unit));
  STEP(FlatParamAddParam(unit, "w", 1, (int64_t[]){10}, &id));
  /* The caller's own flag survives a call that holds the environment. */
  feclearexcept(FE_ALL_EXCEPT);
  feraiseexcept(FE_UNDERFLOW);
  current = "FSDPContextSetUp (with the caller's FE_UNDERFLOW raised)";
  TEST_OK(FSDPContextSetUp(ctx));
  check_env(current, flags_seen ? FE_UNDERFLOW : 0);
  current = "the test itself";
  STEP(FSDPContextDestroy(&ctx));
  STEP(FSDPOptionsClearValue("-fsdp_topology"));
}
#endif

int main(int argc, char **argv)
{
  FSDPContext ctx;
  FSDPModel model;
  FSDPOptimizer opt;
  FSDPViewer viewer;
  FlatParam unit;
  float x[BATCH * IN], t[BATCH * OUT], *y, *dy;
  double loss;
  char dir[256] = "", path[320], missing[320], viewpath[320], topology[1024];
  const char *srcdir = getenv("srcdir");
  int rank;

  /* Before main, the constructors of libfsdp and of what it links (OpenBLAS, MPI, HDF5, hwloc). */
  check_env("the libraries' constructors (before main)", 0);
  feraiseexcept(FE_UNDERFLOW);
  flags_seen = fetestexcept(FE_UNDERFLOW) != 0;
  feclearexcept(FE_ALL_EXCEPT);
  if (!flags_seen) printf("test_fpenv: this CPU (an emulator: valgrind?) keeps no exception flags: checking less\n");
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-trap")) traps = TRAPS;
  if (traps) {
    signal(SIGFPE, on_sigfpe);
    TEST_ASSERT(feenableexcept(traps) != -1, "feenableexcept cannot trap FE_INVALID, FE_DIVBYZERO, FE_OVERFLOW here");
    if (fegetexcept() != traps) { /* valgrind: exceptions stay masked */
      printf("test_fpenv: this CPU (an emulator: valgrind?) does not trap: checking less\n");
      traps = fegetexcept();
    }
  }

  STEP(FSDPInitialize(&argc, &argv));
  rank = test_rank();
  if (rank == 0) {
    snprintf(dir, sizeof dir, "%s/fsdp-test-fpenv-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    TEST_ASSERT(mkdtemp(dir), "cannot create %s", dir);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  snprintf(path, sizeof path, "%s/model.h5", dir);
  snprintf(missing, sizeof missing, "%s/missing.h5", dir);
  snprintf(viewpath, sizeof viewpath, "%s/view.txt", dir);
  snprintf(topology, sizeof topology, "%s/tests/topologies/2socket-2gpu.xml", srcdir ? srcdir : ".");
  for (int i = 0; i < BATCH * IN; i++) x[i] = test_value(1 + (uint64_t)rank, i);
  for (int i = 0; i < BATCH * OUT; i++) t[i] = test_value(100 + (uint64_t)rank, i);

  STEP(FSDPViewerASCIIOpen(MPI_COMM_WORLD, viewpath, &viewer));
  STEP(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  STEP(FSDPContextSetFromOptions(ctx));
  STEP(FSDPModelCreate(ctx, SPEC, &model));
  STEP(FSDPModelSetFromOptions(model));
  /* hwloc's topology of this machine, exported to XML and read back on every rank. */
  STEP(FSDPModelSetUp(model));
  STEP(FSDPOptimizerCreate(ctx, &opt));
  STEP(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_ADAMW));
  STEP(FSDPOptimizerSetLearningRate(opt, 1e-2));
  STEP(FSDPOptimizerSetClipGradNorm(opt, 1.0));
  STEP(FSDPOptimizerSetFromOptions(opt));
  STEP(FSDPOptimizerSetUp(opt));
  for (int s = 0; s < STEPS; s++) {
    STEP(FSDPContextZeroGrad(ctx));
    STEP(FSDPModelForward(model, BATCH, x, &y));
    STEP(FSDPModelLoss(model, FSDP_LOSS_MSE, t, 1.0, &loss, &dy));
    STEP(FSDPModelBackward(model, dy));
    STEP(FSDPOptimizerStep(opt));
  }
  TEST_ASSERT(isfinite(loss), "the loss is %g", loss);
#ifdef FSDP_HAVE_HDF5
  STEP(FSDPContextSave(ctx, opt, path));
  STEP(FSDPContextLoad(ctx, opt, path));
  /* A failed load: HDF5's error stack, the library's message and traceback. */
  STEP_CODE(-1, FSDPContextLoad(ctx, opt, missing));
#endif
  expected_nonfinite(ctx, model, opt, x, t);
  STEP_CODE(FSDP_ERR_ARG, FSDPContextGetUnit(ctx, 99, &unit));
  STEP_CODE(FSDP_ERR_ARG, FSDPModelForward(model, -1, x, &y));
  STEP(FSDPContextView(ctx, viewer));
  STEP(FSDPModelView(model, viewer));
  STEP(FSDPOptimizerView(opt, viewer));
  STEP(FSDPLogView(viewer));

  STEP(FSDPOptimizerDestroy(&opt));
  STEP(FSDPModelDestroy(&model));
  STEP(FSDPContextDestroy(&ctx));
  STEP(FSDPViewerDestroy(&viewer));
#if FSDP_HAVE_HWLOC /* an XML topology is hwloc's */
  xml_topology(topology);
#endif

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    unlink(path);
    unlink(viewpath);
    TEST_ASSERT(rmdir(dir) == 0, "cannot remove %s", dir);
  }
  STEP(FSDPFinalize());
  if (rank == 0) printf("test_fpenv: all passed\n");
  return 0;
}
