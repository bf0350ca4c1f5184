/* The layer library on a GPU against the host.  A host model and a CUDA
   model (same spec, seed and inputs, each on its own context) run side by
   side; per configuration (activation, LayerNorm, loss, fp32 with and
   without TF32, bf16 with fp32 accumulation):
   - the output and the loss's gradient after forward (per layer: each
     layer's output feeds the next, so the first to go wrong shows here),
   - the reduced gradient shard of every unit after backward,
   - the losses of a short SGD run, and the parameter shards at its end,
   must agree within the configuration's tolerance (normwise relative:
   max |device - host| <= tol max |host|).  fp32 without TF32: 1e-5 (cuBLAS
   and OpenBLAS sum in different orders, erf and exp differ by an ulp);
   TF32: 2e-2 (10-bit mantissas); bf16: 4e-2 (the device multiplies the
   activations in bf16 too, the host in fp32).  Then a checkpoint saved from
   GPU memory loads into a host context and back into a GPU context bit for
   bit, and bad labels are named.  Without a GPU: SKIP (77).
   mpitest: -n 2 */
#include <math.h>
#include <unistd.h>

#include "fsdp_nn.h"
#include "fsdptest.h"

#if FSDP_WITH_CUDA
#include <cuda_runtime.h>
#endif

static int rank, W;

/* Whether every rank can set up a CUDA context (they agree: SetUp is collective). */
static bool have_gpu(void)
{
  FSDPContext ctx;
  FlatParam unit;
  FSDPErrorCode code;
  int64_t n = 8;
  TEST_OK(FSDPContextCreate(MPI_COMM_WORLD, &ctx));
  TEST_OK(FSDPContextSetDevice(ctx, FSDP_DEVICE_CUDA));
  TEST_OK(FSDPContextAddUnit(ctx, "probe", &unit));
  TEST_OK(FlatParamAddParam(unit, "probe.w", 1, &n, NULL));
  code = FSDPContextSetUp(ctx);
  if (code) { /* only the absence of a GPU (or of CUDA) skips: any other failure fails */
    const char *msg;
    FSDPGetLastError(NULL, &msg, NULL);
    TEST_ASSERT((code == FSDP_ERR_CUDA && strstr(msg, "no CUDA device is visible")) ||
                    (code == FSDP_ERR_UNSUPPORTED && strstr(msg, "built without CUDA")),
                "SetUp of a CUDA context failed with %d: %s", (int)code, msg);
  }
  TEST_OK(FSDPContextDestroy(&ctx));
  return code == FSDP_SUCCESS;
}

#if FSDP_WITH_CUDA
enum { ROWS = 16, STEPS = 4 };

typedef struct {
  const char *spec;
  FSDPDataType pdtype;
  bool tf32;
  FSDPLossType loss;
  bool device_inputs; /* x and the target in device memory (else host memory, copied up by the model) */
  double tol;
  bool freeze; /* blocks.0.fc.weight frozen: its GEMM and casts are skipped */
} Config;

static void download(void *host, const void *dev, size_t bytes)
{
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
  TEST_ASSERT(e == cudaSuccess, "cudaMemcpy to the host: %s", cudaGetErrorString(e));
}

static void *upload(const void *host, size_t bytes)
{
  void *dev = NULL;
  cudaError_t e = cudaMalloc(&dev, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
  TEST_ASSERT(e == cudaSuccess, "cudaMalloc and cudaMemcpy to the device: %s", cudaGetErrorString(e));
  return dev;
}

/* max |dev - host| <= tol max |host|, over n floats (dev in device memory). */
static void compare(const char *what, const float *host, const float *dev, int64_t n, double tol, const char *config)
{
  float *copy = malloc((size_t)(n ? n : 1) * sizeof *copy);
  double diff = 0, scale = 0;
  int64_t worst = 0;
  download(copy, dev, (size_t)n * sizeof *copy);
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)copy[i] - host[i]);
    TEST_ASSERT(isfinite(copy[i]), "%s: %s element %lld is %g on the device", config, what, (long long)i, copy[i]);
    if (d > diff) diff = d, worst = i;
    if (fabs(host[i]) > scale) scale = fabs(host[i]);
  }
  TEST_ASSERT(diff <= tol * scale,
              "%s: %s differs by %.3g (tolerance %.3g x %.3g): element %lld device %.9g, host %.9g", config, what, diff,
              tol, scale, (long long)worst, n ? copy[worst] : 0.0f, n ? host[worst] : 0.0f);
  free(copy);
}

static FSDPContext make_context(FSDPDeviceType device, const Config *c)
{
  FSDPContext ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, W);
  TEST_OK(FSDPContextSetDevice(ctx, device));
  TEST_OK(FSDPContextSetMixedPrecision(ctx, c->pdtype, FSDP_FLOAT32));
  return ctx;
}

static FSDPModel make_model(FSDPContext ctx, const Config *c)
{
  FSDPModel m;
  TEST_OK(FSDPModelCreate(ctx, c->spec, &m));
  TEST_OK(FSDPModelSetSeed(m, 11));
  TEST_OK(FSDPModelSetTF32(m, c->tf32));
  TEST_OK(FSDPModelSetUp(m));
  if (c->freeze) {
    FlatParam unit;
    FSDPParamId id;
    TEST_OK(FSDPContextFindParam(ctx, "blocks.0.fc.weight", &unit, &id));
    TEST_OK(FlatParamSetTrainable(unit, id, false));
  }
  return m;
}

static FSDPOptimizer make_sgd(FSDPContext ctx)
{
  FSDPOptimizer opt;
  TEST_OK(FSDPOptimizerCreate(ctx, &opt));
  TEST_OK(FSDPOptimizerSetType(opt, FSDP_OPTIMIZER_SGD));
  TEST_OK(FSDPOptimizerSetLearningRate(opt, 0.05));
  TEST_OK(FSDPOptimizerSetMomentum(opt, 0.9, false));
  TEST_OK(FSDPOptimizerSetUp(opt));
  return opt;
}

/* Each unit's shard (grad: its gradient shard) on both contexts. */
static void compare_shards(FSDPContext host, FSDPContext dev, bool grad, double tol, const char *what,
                           const char *config)
{
  int nunits;
  TEST_OK(FSDPContextGetNumUnits(host, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam hu, du;
    void *hs, *ds;
    int64_t n;
    const char *name;
    char label[128];
    TEST_OK(FSDPContextGetUnit(host, u, &hu));
    TEST_OK(FSDPContextGetUnit(dev, u, &du));
    TEST_OK(FSDPContextSynchronize(dev));
    TEST_OK(FlatParamGetName(hu, &name));
    if (grad) {
      TEST_OK(FlatParamGetGradShard(hu, &hs, &n));
      TEST_OK(FlatParamGetGradShard(du, &ds, NULL));
    } else {
      TEST_OK(FlatParamGetShard(hu, &hs, &n));
      TEST_OK(FlatParamGetShard(du, &ds, NULL));
    }
    snprintf(label, sizeof label, "%s of unit %s", what, name);
    compare(label, hs, ds, n, tol, config);
  }
}

/* Rows of batch b for this rank: x [ROWS, in], targets [ROWS, out] or labels [ROWS]. */
static void batch(int b, int64_t in, int64_t out, float *x, float *t, int64_t *labels)
{
  for (int64_t i = 0; i < ROWS * in; i++) x[i] = 2 * test_value((uint64_t)(100 + 10 * b + rank), i);
  for (int64_t i = 0; i < ROWS * out; i++) t[i] = test_value((uint64_t)(200 + 10 * b + rank), i);
  for (int64_t i = 0; i < ROWS; i++) labels[i] = (i * 7 + b + rank) % out;
}

static void test_config(const Config *c)
{
  FSDPContext hctx = make_context(FSDP_DEVICE_HOST, c), dctx = make_context(FSDP_DEVICE_CUDA, c);
  FSDPModel hm = make_model(hctx, c), dm = make_model(dctx, c);
  FSDPOptimizer hopt, dopt;
  int64_t in, out, labels[ROWS];
  float *x, *t, *hy, *dy_out, *hdy, *ddy;
  void *dx = NULL, *dt = NULL;
  double hl, dl;
  char config[256];

  snprintf(config, sizeof config, "%s, %s%s, %s, inputs in %s memory", c->spec, FSDPDataTypeName(c->pdtype),
           c->pdtype == FSDP_FLOAT32 ? (c->tf32 ? " (TF32)" : " (no TF32)") : " with fp32 accumulation",
           c->loss == FSDP_LOSS_MSE ? "MSE" : "cross-entropy", c->device_inputs ? "device" : "host");
  TEST_OK(FSDPModelGetSizes(hm, &in, &out, NULL));
  x = malloc((size_t)(ROWS * in) * sizeof *x);
  t = malloc((size_t)(ROWS * out) * sizeof *t);
  hopt = make_sgd(hctx);
  dopt = make_sgd(dctx);
  compare_shards(hctx, dctx, false, 0, "the initial parameter shard", config);

  /* One step in detail: output, loss, its gradient, the gradient shards. */
  batch(0, in, out, x, t, labels);
  if (c->device_inputs) {
    dx = upload(x, (size_t)(ROWS * in) * sizeof *x);
    dt = c->loss == FSDP_LOSS_MSE ? upload(t, (size_t)(ROWS * out) * sizeof *t) : upload(labels, sizeof labels);
  }
  TEST_OK(FSDPContextZeroGrad(hctx));
  TEST_OK(FSDPContextZeroGrad(dctx));
  TEST_OK(FSDPModelForward(hm, ROWS, x, &hy));
  TEST_OK(FSDPModelForward(dm, ROWS, dx ? dx : x, &dy_out));
  compare("the output", hy, dy_out, ROWS * out, c->tol, config);
  TEST_OK(FSDPModelLoss(hm, c->loss, c->loss == FSDP_LOSS_MSE ? (void *)t : (void *)labels, 1.0, &hl, &hdy));
  TEST_OK(FSDPModelLoss(dm, c->loss, dt ? dt : c->loss == FSDP_LOSS_MSE ? (void *)t : (void *)labels, 1.0, &dl, &ddy));
  TEST_ASSERT(fabs(hl - dl) <= c->tol * fabs(hl), "%s: loss %.9g on the device, %.9g on the host", config, dl, hl);
  compare("the loss gradient", hdy, ddy, ROWS * out, c->tol, config);
  TEST_OK(FSDPModelBackward(hm, hdy));
  TEST_OK(FSDPModelBackward(dm, ddy));
  TEST_OK(FSDPContextFinishBackward(hctx));
  TEST_OK(FSDPContextFinishBackward(dctx));
  compare_shards(hctx, dctx, true, c->tol, "the gradient shard", config);
  TEST_OK(FSDPOptimizerStep(hopt));
  TEST_OK(FSDPOptimizerStep(dopt));

  /* A short run: the losses step by step, the parameters at the end. */
  for (int s = 1; s <= STEPS; s++) {
    batch(s, in, out, x, t, labels);
    TEST_OK(FSDPContextZeroGrad(hctx));
    TEST_OK(FSDPContextZeroGrad(dctx));
    TEST_OK(FSDPModelForward(hm, ROWS, x, &hy));
    TEST_OK(FSDPModelForward(dm, ROWS, x, &dy_out));
    TEST_OK(FSDPModelLoss(hm, c->loss, c->loss == FSDP_LOSS_MSE ? (void *)t : (void *)labels, 1.0, &hl, &hdy));
    TEST_OK(FSDPModelLoss(dm, c->loss, c->loss == FSDP_LOSS_MSE ? (void *)t : (void *)labels, 1.0, &dl, &ddy));
    TEST_ASSERT(fabs(hl - dl) <= c->tol * fabs(hl), "%s: step %d: loss %.9g on the device, %.9g on the host", config, s,
                dl, hl);
    TEST_OK(FSDPModelBackward(hm, hdy));
    TEST_OK(FSDPModelBackward(dm, ddy));
    TEST_OK(FSDPOptimizerStep(hopt));
    TEST_OK(FSDPOptimizerStep(dopt));
  }
  compare_shards(hctx, dctx, false, c->tol, "the trained parameter shard", config);

  /* A batch larger than any before: the GPU buffers grow. */
  {
    float *x2 = malloc((size_t)(2 * ROWS * in) * sizeof *x2);
    for (int64_t i = 0; i < 2 * ROWS * in; i++) x2[i] = test_value(300, i);
    TEST_OK(FSDPModelForward(hm, 2 * ROWS, x2, &hy));
    TEST_OK(FSDPModelForward(dm, 2 * ROWS, x2, &dy_out));
    compare("the output of a larger batch", hy, dy_out, 2 * ROWS * out, c->tol, config);
    free(x2);
  }
  if (dx) (void)cudaFree(dx);
  if (dt) (void)cudaFree(dt);
  free(x);
  free(t);
  TEST_OK(FSDPOptimizerDestroy(&hopt));
  TEST_OK(FSDPOptimizerDestroy(&dopt));
  TEST_OK(FSDPModelDestroy(&hm));
  TEST_OK(FSDPModelDestroy(&dm));
  TEST_OK(FSDPContextDestroy(&hctx));
  TEST_OK(FSDPContextDestroy(&dctx));
}

/* A label outside [0, out) is named, from host labels (checked before the
   copy) and from device labels (found by the kernel). */
static void test_bad_labels(void)
{
  Config c = {
      "mlp:in=4,hidden=8,depth=1,out=5,act=relu", FSDP_FLOAT32, false, FSDP_LOSS_CROSS_ENTROPY, false, 0, false};
  FSDPContext ctx = make_context(FSDP_DEVICE_CUDA, &c);
  FSDPModel m = make_model(ctx, &c);
  float x[ROWS * 4], t[ROWS * 5], *y, *dy;
  int64_t labels[ROWS];
  double loss;
  void *dlabels;

  batch(0, 4, 5, x, t, labels);
  labels[3] = 9;
  TEST_OK(FSDPModelForward(m, ROWS, x, &y));
  TEST_CODE(FSDP_ERR_ARG, FSDPModelLoss(m, FSDP_LOSS_CROSS_ENTROPY, labels, 1.0, &loss, &dy));
  TEST_MESSAGE_HAS("label 9 of row 3 is not in [0, 5)");
  dlabels = upload(labels, sizeof labels);
  TEST_CODE(FSDP_ERR_ARG, FSDPModelLoss(m, FSDP_LOSS_CROSS_ENTROPY, dlabels, 1.0, &loss, &dy));
  TEST_MESSAGE_HAS("label 9 of row 3 is not in [0, 5)");
  labels[3] = 4; /* and a good set of labels afterwards works: the kernel's flag was reset */
  (void)cudaMemcpy(dlabels, labels, sizeof labels, cudaMemcpyHostToDevice);
  TEST_OK(FSDPModelLoss(m, FSDP_LOSS_CROSS_ENTROPY, dlabels, 1.0, &loss, &dy));
  TEST_ASSERT(loss > 0 && isfinite(loss), "cross-entropy %g after a bad label", loss);
  (void)cudaFree(dlabels);
  TEST_OK(FSDPModelDestroy(&m));
  TEST_OK(FSDPContextDestroy(&ctx));
}

/* Each unit's parameter shard, bit for bit (the momentum shows in the step after). */
static void same_shards(FSDPContext a, FSDPContext b, const char *what)
{
  int nunits;
  TEST_OK(FSDPContextGetNumUnits(a, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam ua, ub;
    void *sa, *sb;
    int64_t n;
    FSDPDeviceType da, db;
    float *ha, *hb;
    TEST_OK(FSDPContextGetUnit(a, u, &ua));
    TEST_OK(FSDPContextGetUnit(b, u, &ub));
    TEST_OK(FlatParamGetShard(ua, &sa, &n));
    TEST_OK(FlatParamGetShard(ub, &sb, NULL));
    TEST_OK(FSDPContextGetDevice(a, &da));
    TEST_OK(FSDPContextGetDevice(b, &db));
    ha = malloc((size_t)(n ? n : 1) * sizeof *ha);
    hb = malloc((size_t)(n ? n : 1) * sizeof *hb);
    if (da == FSDP_DEVICE_CUDA) download(ha, sa, (size_t)n * sizeof *ha);
    else memcpy(ha, sa, (size_t)n * sizeof *ha);
    if (db == FSDP_DEVICE_CUDA) download(hb, sb, (size_t)n * sizeof *hb);
    else memcpy(hb, sb, (size_t)n * sizeof *hb);
    TEST_ASSERT(!memcmp(ha, hb, (size_t)n * sizeof *ha), "%s: the shards of unit %d differ", what, u);
    free(ha);
    free(hb);
  }
}

/* A checkpoint of a GPU context (parameters and SGD momentum) loads into a
   host context and into another GPU context; the next step then agrees too. */
static void test_checkpoint(void)
{
  Config c = {
      "mlp:in=8,hidden=32,depth=2,out=3,act=relu,norm=layernorm", FSDP_FLOAT32, false, FSDP_LOSS_MSE, false, 0, false};
  FSDPContext dctx = make_context(FSDP_DEVICE_CUDA, &c), hctx = make_context(FSDP_DEVICE_HOST, &c),
              d2ctx = make_context(FSDP_DEVICE_CUDA, &c);
  FSDPModel dm = make_model(dctx, &c), hm = make_model(hctx, &c), d2m = make_model(d2ctx, &c);
  FSDPOptimizer dopt = make_sgd(dctx), hopt = make_sgd(hctx), d2opt = make_sgd(d2ctx);
  float x[ROWS * 8], t[ROWS * 3], *y, *dy;
  int64_t labels[ROWS];
  double loss;
  char dir[256], path[300];
  FSDPErrorCode code;

  /* Two steps on the GPU: the parameters and the momentum move off their initial values. */
  for (int s = 0; s < 2; s++) {
    batch(s, 8, 3, x, t, labels);
    TEST_OK(FSDPContextZeroGrad(dctx));
    TEST_OK(FSDPModelForward(dm, ROWS, x, &y));
    TEST_OK(FSDPModelLoss(dm, FSDP_LOSS_MSE, t, 1.0, &loss, &dy));
    TEST_OK(FSDPModelBackward(dm, dy));
    TEST_OK(FSDPOptimizerStep(dopt));
  }
  snprintf(dir, sizeof dir, "%s/fsdp-test-nn-device-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (rank == 0) TEST_ASSERT(mkdtemp(dir), "mkdtemp %s", dir);
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  snprintf(path, sizeof path, "%s/gpu.h5", dir);
  code = FSDPContextSave(dctx, dopt, path);
  if (code == FSDP_ERR_UNSUPPORTED) {
    if (rank == 0) printf("test_nn_device: no HDF5 in this build: the checkpoint round trip is skipped\n");
  } else {
    TEST_OK(code);
    TEST_OK(FSDPContextLoad(hctx, hopt, path));
    TEST_OK(FSDPContextLoad(d2ctx, d2opt, path));
    same_shards(dctx, hctx, "GPU saved, host loaded");
    same_shards(dctx, d2ctx, "GPU saved, GPU loaded");
    /* The momentum came back too: one more step keeps the two GPU contexts identical. */
    batch(2, 8, 3, x, t, labels);
    for (int k = 0; k < 2; k++) {
      FSDPContext ctx = k ? d2ctx : dctx;
      FSDPModel m = k ? d2m : dm;
      TEST_OK(FSDPContextZeroGrad(ctx));
      TEST_OK(FSDPModelForward(m, ROWS, x, &y));
      TEST_OK(FSDPModelLoss(m, FSDP_LOSS_MSE, t, 1.0, &loss, &dy));
      TEST_OK(FSDPModelBackward(m, dy));
      TEST_OK(FSDPOptimizerStep(k ? d2opt : dopt));
    }
    same_shards(dctx, d2ctx, "a step after the GPU load");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    unlink(path);
    rmdir(dir);
  }
  TEST_OK(FSDPOptimizerDestroy(&dopt));
  TEST_OK(FSDPOptimizerDestroy(&hopt));
  TEST_OK(FSDPOptimizerDestroy(&d2opt));
  TEST_OK(FSDPModelDestroy(&dm));
  TEST_OK(FSDPModelDestroy(&hm));
  TEST_OK(FSDPModelDestroy(&d2m));
  TEST_OK(FSDPContextDestroy(&dctx));
  TEST_OK(FSDPContextDestroy(&hctx));
  TEST_OK(FSDPContextDestroy(&d2ctx));
}
#endif

int main(int argc, char **argv)
{
  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  if (!have_gpu()) {
    if (rank == 0) printf("test_nn_device: no GPU visible: skipped\n");
    TEST_OK(FSDPFinalize());
    return 77;
  }
#if FSDP_WITH_CUDA
  {
    static const Config configs[] = {
        {"mlp:in=24,hidden=64,depth=2,out=5,act=gelu,norm=layernorm", FSDP_FLOAT32, false, FSDP_LOSS_MSE, false, 1e-5,
         false},
        {"mlp:in=24,hidden=64,depth=2,out=5,act=relu", FSDP_FLOAT32, false, FSDP_LOSS_CROSS_ENTROPY, true, 1e-5, true},
        {"mlp:in=24,hidden=64,depth=2,out=5,act=tanh,norm=layernorm", FSDP_FLOAT32, false, FSDP_LOSS_CROSS_ENTROPY,
         false, 1e-5, false},
        {"mlp:in=24,hidden=64,depth=2,out=5,act=gelu,norm=layernorm", FSDP_FLOAT32, true, FSDP_LOSS_MSE, true, 2e-2,
         false},
        {"mlp:in=24,hidden=64,depth=2,out=5,act=gelu,norm=layernorm", FSDP_BFLOAT16, false, FSDP_LOSS_CROSS_ENTROPY,
         false, 4e-2, true},
        {"mlp:in=24,hidden=64,depth=2,out=5,act=relu", FSDP_FLOAT16, false, FSDP_LOSS_MSE, true, 4e-2, false},
    };
    for (size_t k = 0; k < sizeof configs / sizeof configs[0]; k++) test_config(&configs[k]);
    test_bad_labels();
    test_checkpoint();
  }
#endif
  TEST_OK(FSDPFinalize());
  if (rank == 0) printf("test_nn_device: all passed\n");
  return 0;
}
