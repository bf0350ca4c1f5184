/* A 3-unit toy model (tanh MLP, MSE loss, hand-written forward and
   backward, SGD on shards) trains the same at W ranks, under every sharding
   strategy, as at W = 1: each rank also trains a one-rank copy on
   MPI_COMM_SELF over the whole batch and the two are compared step by step.
   Also counts the all-gathers per step: SHARD_GRAD_OP keeps parameters from
   forward to backward, FULL_SHARD gathers twice, NO_SHARD never.
   mpitest: -n 4
   mpitest: -n 2 */
#include <math.h>

#include "fsdptest.h"

enum { IN = 3, HID = 6, BATCH = 8, STEPS = 12, NUNITS = 3 };
static const int fan_in[NUNITS] = {IN, HID, HID}, fan_out[NUNITS] = {HID, HID, 1};
static const char *const unit_names[NUNITS] = {"l0", "l1", "head"};
#define LR 0.1f

typedef struct {
  FSDPContext ctx;
  FlatParam unit[NUNITS];
} Model;

static FSDPErrorCode init_unit(FlatParam unit, void *user)
{
  float *w, *b;
  int64_t nw, nb;
  const char *name;
  (void)user;
  FSDPCall(FlatParamGetName(unit, &name));
  FSDPCall(FlatParamGetParamInfo(unit, 0, NULL, NULL, NULL, &nw));
  FSDPCall(FlatParamGetParamInfo(unit, 1, NULL, NULL, NULL, &nb));
  FSDPCall(FlatParamGetParam(unit, 0, (void **)&w));
  FSDPCall(FlatParamGetParam(unit, 1, (void **)&b));
  for (int64_t i = 0; i < nw; i++) w[i] = 0.8f * test_value((uint64_t)name[1], i);
  for (int64_t i = 0; i < nb; i++) b[i] = 0.1f * test_value((uint64_t)name[1] + 50, i);
  return FSDP_SUCCESS;
}

static void model_create(MPI_Comm comm, FSDPShardingStrategy strategy, int factor, Model *m)
{
  m->ctx = test_context(comm, strategy, factor);
  for (int u = 0; u < NUNITS; u++) {
    char name[32];
    TEST_OK(FSDPContextAddUnit(m->ctx, unit_names[u], &m->unit[u]));
    snprintf(name, sizeof name, "%s.weight", unit_names[u]);
    TEST_OK(FlatParamAddParam(m->unit[u], name, 2, (int64_t[]){fan_out[u], fan_in[u]}, NULL));
    snprintf(name, sizeof name, "%s.bias", unit_names[u]);
    TEST_OK(FlatParamAddParam(m->unit[u], name, 1, (int64_t[]){fan_out[u]}, NULL));
  }
  TEST_OK(FSDPContextSetUnitInit(m->ctx, init_unit, NULL));
  TEST_OK(FSDPContextSetUp(m->ctx));
}

static void sample(int i, float *x, float *t)
{
  for (int k = 0; k < IN; k++) x[k] = test_value(7, i * IN + k);
  *t = sinf(x[0]) + 0.5f * x[1] * x[2];
}

/* One step over samples [first, first + n) with the loss averaged over them;
   returns that loss.  Gradients are averaged over the context's ranks. */
static double train_step(Model *m, int first, int n)
{
  float act[NUNITS + 1][BATCH][HID], t[BATCH], delta[BATCH][HID], next[BATCH][HID];
  double loss = 0;

  for (int s = 0; s < n; s++) sample(first + s, act[0][s], &t[s]);
  for (int u = 0; u < NUNITS; u++) { /* forward */
    float *w, *b;
    TEST_OK(FlatParamUnshard(m->unit[u]));
    TEST_OK(FlatParamGetParam(m->unit[u], 0, (void **)&w));
    TEST_OK(FlatParamGetParam(m->unit[u], 1, (void **)&b));
    for (int s = 0; s < n; s++)
      for (int o = 0; o < fan_out[u]; o++) {
        float z = b[o];
        for (int i = 0; i < fan_in[u]; i++) z += w[o * fan_in[u] + i] * act[u][s][i];
        act[u + 1][s][o] = u < NUNITS - 1 ? tanhf(z) : z;
      }
    TEST_OK(FlatParamReshard(m->unit[u]));
  }
  for (int s = 0; s < n; s++) {
    float d = act[NUNITS][s][0] - t[s];
    loss += (double)d * d / n;
    delta[s][0] = 2.0f * d / (float)n; /* dL/dy */
  }
  for (int u = NUNITS - 1; u >= 0; u--) { /* backward */
    float *w, *b, *gw, *gb;
    TEST_OK(FlatParamUnshard(m->unit[u]));
    TEST_OK(FlatParamGetParam(m->unit[u], 0, (void **)&w));
    TEST_OK(FlatParamGetParam(m->unit[u], 1, (void **)&b));
    TEST_OK(FlatParamGetGrad(m->unit[u], 0, (void **)&gw));
    TEST_OK(FlatParamGetGrad(m->unit[u], 1, (void **)&gb));
    (void)b;
    for (int s = 0; s < n; s++) {
      for (int o = 0; o < fan_out[u]; o++) {
        gb[o] += delta[s][o];
        for (int i = 0; i < fan_in[u]; i++) gw[o * fan_in[u] + i] += delta[s][o] * act[u][s][i];
      }
      for (int i = 0; i < fan_in[u]; i++) { /* through the layer, then through tanh of the layer below */
        float d = 0;
        for (int o = 0; o < fan_out[u]; o++) d += w[o * fan_in[u] + i] * delta[s][o];
        next[s][i] = u > 0 ? d * (1.0f - act[u][s][i] * act[u][s][i]) : d;
      }
    }
    memcpy(delta, next, sizeof delta);
    TEST_OK(FlatParamReduceGrad(m->unit[u]));
  }
  TEST_OK(FSDPContextFinishBackward(m->ctx));
  for (int u = 0; u < NUNITS; u++) { /* SGD on the shards */
    float *p, *g;
    int64_t sn;
    TEST_OK(FlatParamGetShard(m->unit[u], (void **)&p, &sn));
    TEST_OK(FlatParamGetGradShard(m->unit[u], (void **)&g, NULL));
    for (int64_t k = 0; k < sn; k++) p[k] -= LR * g[k];
  }
  TEST_OK(FSDPContextZeroGrad(m->ctx));
  return loss;
}

static int64_t allgathers(void)
{
  FSDPLogEvent ev;
  FSDPLogEventInfo info;
  TEST_OK(FSDPLogEventRegister("AllGather", &ev));
  TEST_OK(FSDPLogEventGetInfo(ev, &info));
  return info.count;
}

static void run(FSDPShardingStrategy strategy, int factor)
{
  int W, rank, F;
  Model dist, ref;
  ShardGroup group;
  double first_loss = 0, last_loss = 0;

  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  model_create(MPI_COMM_WORLD, strategy, factor, &dist);
  model_create(MPI_COMM_SELF, FSDP_FULL_SHARD, 1, &ref);
  TEST_OK(FSDPContextGetShardGroup(dist.ctx, &group));
  TEST_OK(ShardGroupGetShardComm(group, NULL, NULL, &F));
  for (int step = 0; step < STEPS; step++) {
    int64_t before = allgathers(), gathered;
    double loss = train_step(&dist, rank * (BATCH / W), BATCH / W), want;
    gathered = allgathers() - before;
    MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    loss /= W;
    want = train_step(&ref, 0, BATCH);
    TEST_ASSERT(fabs(loss - want) <= 1e-5 * want + 1e-7, "%s, F = %d, step %d: loss %.8g at W = %d, %.8g at W = 1",
                FSDPShardingStrategyName(strategy), F, step, loss, W, want);
    int64_t expect = F == 1 ? 0 : strategy == FSDP_FULL_SHARD || strategy == FSDP_HYBRID_SHARD ? 2 * NUNITS : NUNITS;
    TEST_ASSERT(gathered == expect, "%s, F = %d: %lld all-gathers in one step, expected %lld",
                FSDPShardingStrategyName(strategy), F, (long long)gathered, (long long)expect);
    if (step == 0) first_loss = want;
    last_loss = want;
  }
  TEST_ASSERT(last_loss < 0.8 * first_loss, "the toy model does not train: loss %g -> %g", first_loss, last_loss);
  for (int u = 0; u < NUNITS; u++) { /* the final parameters, element by element */
    TEST_OK(FlatParamUnshard(dist.unit[u]));
    TEST_OK(FlatParamUnshard(ref.unit[u]));
    for (int p = 0; p < 2; p++) {
      float *a, *b;
      int64_t n;
      TEST_OK(FlatParamGetParamInfo(dist.unit[u], p, NULL, NULL, NULL, &n));
      TEST_OK(FlatParamGetParam(dist.unit[u], p, (void **)&a));
      TEST_OK(FlatParamGetParam(ref.unit[u], p, (void **)&b));
      for (int64_t i = 0; i < n; i++)
        TEST_ASSERT(fabsf(a[i] - b[i]) <= 1e-5f, "%s: %s parameter %d element %lld: %.8g at W = %d, %.8g at W = 1",
                    FSDPShardingStrategyName(strategy), unit_names[u], p, (long long)i, a[i], W, b[i]);
    }
    TEST_OK(FlatParamReshard(dist.unit[u]));
    TEST_OK(FlatParamReshard(ref.unit[u]));
  }
  TEST_OK(FSDPContextDestroy(&dist.ctx));
  TEST_OK(FSDPContextDestroy(&ref.ctx));
}

int main(int argc, char **argv)
{
  int W;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  TEST_ASSERT(BATCH % W == 0, "run on a W that divides %d", BATCH);
  TEST_OK(FSDPLogSetActive(true));
  for (int s = 0; s < TEST_NUM_STRATEGIES; s++) run(test_strategies[s], W / 2);
  if (test_rank() == 0) printf("test_fsdp_toy: W = %d, every strategy trains as at W = 1\n", W);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
