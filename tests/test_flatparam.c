/* FlatParam layout and the collectives over it, for the world size this runs
   on: random sets of parameter shapes (scalars, empty tensors, sizes F does
   not divide), every sharding strategy and every F that divides W.  Checks
   the layout against doc/flatparam.md, that unsharding reproduces every
   parameter bit for bit, and that reducing gradients leaves each rank the
   average over all W ranks on exactly its shard, padding zero.  With the
   units as views of the node's shards (-fsdp_shm_views), a rank that writes
   its shard right after a pass, as a program may, reaches its peers' views
   only once every one of them is done reading (test_views).
   mpitest: -n 1
   mpitest: -n 2
   mpitest: -n 3
   mpitest: -n 4 */
#include <math.h>
#include <time.h>

#include "fsdptest.h"

#define MAX_UNITS 3
#define MAX_PARAMS 4
#define NSETS 3

typedef struct {
  int nunits, nparams[MAX_UNITS];
  int ndim[MAX_UNITS][MAX_PARAMS];
  int64_t shape[MAX_UNITS][MAX_PARAMS][3];
  int64_t numel[MAX_UNITS][MAX_PARAMS];
} Model;

/* Set 0 always has a scalar and an empty tensor; the others are random. */
static void make_model(int set, Model *m)
{
  uint64_t state = 1000 + (uint64_t)set;
  m->nunits = 1 + test_rand(&state, MAX_UNITS);
  for (int u = 0; u < m->nunits; u++) {
    m->nparams[u] = 1 + test_rand(&state, MAX_PARAMS);
    for (int p = 0; p < m->nparams[u]; p++) {
      m->ndim[u][p] = test_rand(&state, 4);
      m->numel[u][p] = 1;
      for (int d = 0; d < m->ndim[u][p]; d++) {
        m->shape[u][p][d] = test_rand(&state, 8) == 0 ? 0 : 1 + test_rand(&state, 7);
        m->numel[u][p] *= m->shape[u][p][d];
      }
    }
  }
  if (set == 0) {
    m->ndim[0][0] = 0; /* a scalar */
    m->numel[0][0] = 1;
    m->ndim[m->nunits - 1][m->nparams[m->nunits - 1] - 1] = 2; /* an empty matrix, last */
    m->shape[m->nunits - 1][m->nparams[m->nunits - 1] - 1][0] = 3;
    m->shape[m->nunits - 1][m->nparams[m->nunits - 1] - 1][1] = 0;
    m->numel[m->nunits - 1][m->nparams[m->nunits - 1] - 1] = 0;
  }
}

static uint64_t param_key(int set, int u, int p) { return (uint64_t)(set * 100 + u * 10 + p); }

typedef struct {
  int set;
} InitCtx;

/* Every rank fills the whole unit with the same values. */
static FSDPErrorCode init_unit(FlatParam unit, void *user)
{
  InitCtx *ic = user;
  int n, u;
  const char *name;
  FSDPCall(FlatParamGetName(unit, &name));
  u = name[1] - '0';
  FSDPCall(FlatParamGetNumParams(unit, &n));
  for (int p = 0; p < n; p++) {
    float *x;
    int64_t numel;
    FSDPCall(FlatParamGetParamInfo(unit, p, NULL, NULL, NULL, &numel));
    FSDPCall(FlatParamGetParam(unit, p, (void **)&x));
    for (int64_t e = 0; e < numel; e++) x[e] = test_value(param_key(ic->set, u, p), e);
  }
  return FSDP_SUCCESS;
}

/* Gradient of parameter (u, p) on world rank r: small integers, so that any
   summation order gives the same sum, and the average is exact arithmetic. */
static float int_grad(int r, int u, int p, int64_t e) { return (float)((r + 1) * (e + 7 * p + 3 * u) % 13 - 6); }

static void run_case(const Model *m, int set, FSDPShardingStrategy strategy, int factor)
{
  int W, F, index, R, rank;
  MPI_Comm shard_comm;
  ShardGroup group;
  FlatParam units[MAX_UNITS];
  InitCtx ic = {set};
  FSDPContext ctx;
  char name[32];

  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ctx = test_context(MPI_COMM_WORLD, strategy, factor);
  for (int u = 0; u < m->nunits; u++) {
    snprintf(name, sizeof name, "u%d", u);
    TEST_OK(FSDPContextAddUnit(ctx, name, &units[u]));
    for (int p = 0; p < m->nparams[u]; p++) {
      FSDPParamId id;
      snprintf(name, sizeof name, "u%d.p%d", u, p);
      TEST_OK(FlatParamAddParam(units[u], name, m->ndim[u][p], m->shape[u][p], &id));
      TEST_ASSERT(id == p, "parameter %s has id %d", name, id);
    }
  }
  TEST_OK(FSDPContextSetUnitInit(ctx, init_unit, &ic));
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FSDPContextGetShardGroup(ctx, &group));
  TEST_OK(ShardGroupGetShardComm(group, &shard_comm, &index, &F));
  TEST_OK(ShardGroupGetReplicateComm(group, NULL, NULL, &R));
  TEST_ASSERT(F == (strategy == FSDP_NO_SHARD  ? 1
                    : test_is_hybrid(strategy) ? factor
                                               : W),
              "strategy %s gave F = %d", FSDPShardingStrategyName(strategy), F);
  TEST_ASSERT(F * R == W, "F = %d, R = %d, W = %d", F, R, W);

  /* Layout and the shard's contents. */
  for (int u = 0; u < m->nunits; u++) {
    int64_t numel, padded, sn, total = 0, first, covered = 0;
    float *shard, *gshard;
    TEST_OK(FlatParamGetSizes(units[u], &numel, &padded, &sn));
    for (int p = 0; p < m->nparams[u]; p++) total += m->numel[u][p];
    TEST_ASSERT(numel == total && padded % F == 0 && padded >= numel && padded - numel < F && sn * F == padded,
                "unit %d: numel %lld padded %lld shard %lld with F = %d", u, (long long)numel, (long long)padded,
                (long long)sn, F);
    TEST_OK(FlatParamGetShard(units[u], (void **)&shard, NULL));
    TEST_OK(FlatParamGetGradShard(units[u], (void **)&gshard, NULL));
    first = index * sn;
    char *mine = calloc((size_t)sn + 1, 1);
    for (int p = 0, off = 0; p < m->nparams[u]; off += (int)m->numel[u][p], p++) {
      int64_t b, e, o, lo = off > first ? off : first;
      int64_t hi = off + m->numel[u][p] < first + sn ? off + m->numel[u][p] : first + sn;
      TEST_OK(FlatParamGetShardRange(units[u], p, &b, &e, &o));
      if (lo >= hi) {
        TEST_ASSERT(b == e, "u%d.p%d: range [%lld, %lld) but none of it is in shard %d", u, p, (long long)b,
                    (long long)e, index);
        continue;
      }
      TEST_ASSERT(b == lo - off && e == hi - off && o == lo - first,
                  "u%d.p%d on shard %d: range [%lld, %lld) at %lld, expected [%lld, %lld) at %lld", u, p, index,
                  (long long)b, (long long)e, (long long)o, (long long)(lo - off), (long long)(hi - off),
                  (long long)(lo - first));
      for (int64_t k = 0; k < e - b; k++) {
        float want = test_value(param_key(set, u, p), b + k);
        TEST_ASSERT(memcmp(&shard[o + k], &want, sizeof want) == 0, "u%d.p%d element %lld: shard has %g, not %g", u, p,
                    (long long)(b + k), shard[o + k], want);
        mine[o + k] = 1;
      }
      covered += e - b;
    }
    for (int64_t k = 0; k < sn; k++)
      if (!mine[k])
        TEST_ASSERT(shard[k] == 0.0f, "unit %d: padding element %lld of shard %d is %g", u, (long long)k, index,
                    shard[k]);
    free(mine);
    MPI_Allreduce(MPI_IN_PLACE, &covered, 1, MPI_INT64_T, MPI_SUM, shard_comm);
    TEST_ASSERT(covered == numel, "unit %d: the shards hold %lld of its %lld elements", u, (long long)covered,
                (long long)numel);
  }

  /* Two steps: forward (unshard, check, reshard), backward (unshard, gradients, reduce). */
  for (int step = 0; step < 2; step++) {
    for (int u = 0; u < m->nunits; u++) {
      TEST_OK(FlatParamUnshard(units[u]));
      for (int p = 0; p < m->nparams[u]; p++) {
        float *x;
        TEST_OK(FlatParamGetParam(units[u], p, (void **)&x));
        for (int64_t e = 0; e < m->numel[u][p]; e++) {
          float want = test_value(param_key(set, u, p), e);
          TEST_ASSERT(memcmp(&x[e], &want, sizeof want) == 0, "u%d.p%d element %lld unsharded as %g, not %g", u, p,
                      (long long)e, x[e], want);
        }
      }
      TEST_OK(FlatParamReshard(units[u]));
    }
    for (int u = m->nunits - 1; u >= 0; u--) {
      TEST_OK(FlatParamUnshard(units[u]));
      for (int p = 0; p < m->nparams[u]; p++) {
        float *g;
        TEST_OK(FlatParamGetGrad(units[u], p, (void **)&g));
        for (int64_t e = 0; e < m->numel[u][p]; e++) {
          TEST_ASSERT(g[e] == 0.0f, "u%d.p%d: the gradient starts at %g, not 0", u, p, g[e]);
          g[e] +=
              step == 0 ? int_grad(rank, u, p, e) : test_value(param_key(set, u, p) + 1000 * (uint64_t)(rank + 1), e);
        }
      }
      TEST_OK(FlatParamReduceGrad(units[u]));
    }
    TEST_OK(FSDPContextFinishBackward(ctx));
    for (int u = 0; u < m->nunits; u++) {
      float *gshard;
      int64_t sn;
      FlatParamState state;
      TEST_OK(FlatParamGetState(units[u], &state));
      TEST_ASSERT(state == FSDP_FLATPARAM_SHARDED, "unit %d is %s after FinishBackward", u, FlatParamStateName(state));
      TEST_OK(FlatParamGetGradShard(units[u], (void **)&gshard, &sn));
      char *mine = calloc((size_t)sn + 1, 1);
      for (int p = 0; p < m->nparams[u]; p++) {
        int64_t b, e, o;
        TEST_OK(FlatParamGetShardRange(units[u], p, &b, &e, &o));
        for (int64_t k = 0; k < e - b; k++) {
          mine[o + k] = 1;
          if (step == 0) { /* exact: integer sums, one division */
            float sum = 0;
            for (int r = 0; r < W; r++) sum += int_grad(r, u, p, b + k);
            float want = sum / (float)W;
            TEST_ASSERT(memcmp(&gshard[o + k], &want, sizeof want) == 0,
                        "%s F=%d: u%d.p%d element %lld: gradient %.9g, the average is %.9g",
                        FSDPShardingStrategyName(strategy), F, u, p, (long long)(b + k), gshard[o + k], want);
          } else { /* fp32 sums in MPI's order: within 2 W ulps of the magnitude summed */
            double sum = 0, mag = 0;
            for (int r = 0; r < W; r++) {
              float g = test_value(param_key(set, u, p) + 1000 * (uint64_t)(r + 1), b + k);
              sum += g;
              mag += fabs(g);
            }
            TEST_ASSERT(fabs(gshard[o + k] - sum / W) <= 2.0 * W * 0x1.0p-24 * mag / W + 1e-30,
                        "%s F=%d: u%d.p%d element %lld: gradient %.9g, the average is %.9g",
                        FSDPShardingStrategyName(strategy), F, u, p, (long long)(b + k), gshard[o + k], sum / W);
          }
        }
      }
      for (int64_t k = 0; k < sn; k++)
        if (!mine[k])
          TEST_ASSERT(gshard[k] == 0.0f, "unit %d: padding gradient %lld is %g", u, (long long)k, gshard[k]);
      free(mine);
    }
    TEST_OK(FSDPContextZeroGrad(ctx));
  }
  TEST_OK(FSDPContextDestroy(&ctx));
  TEST_ASSERT(ctx == NULL, "FSDPContextDestroy left the handle set");
}

/* Passes over one unit, each rank stamping its shard with the pass number
   right after each pass, with no collective between: one rank reads the
   view slowly each pass, and must see the whole unit as the pass began.
   Without the views' release counters the fast rank's next gather would
   copy its new shard into the view under the slow reader. */
static void test_views(void)
{
  enum { N = 4096, PASSES = 4 };
  int W, rank;
  FSDPContext ctx;
  FlatParam unit;
  bool views;
  float *shard, *x, *first = NULL;
  int64_t sn;

  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ctx = test_context(MPI_COMM_WORLD, FSDP_FULL_SHARD, 1);
  TEST_OK(FSDPContextAddUnit(ctx, "v", &unit));
  TEST_OK(FlatParamAddParam(unit, "v.w", 1, (int64_t[]){N}, NULL));
  TEST_OK(FSDPContextSetUp(ctx));
  TEST_OK(FSDPContextGetShmViews(ctx, &views));
  if (!views) { /* W = 1, or the shard group spans nodes */
    TEST_OK(FSDPContextDestroy(&ctx));
    return;
  }
  TEST_OK(FlatParamGetShard(unit, (void **)&shard, &sn));
  for (int64_t k = 0; k < sn; k++) shard[k] = 0;
  for (int pass = 0; pass < PASSES; pass++) {
    TEST_OK(FSDPContextBeginForward(ctx));
    TEST_OK(FlatParamUnshard(unit));
    TEST_OK(FlatParamGetParam(unit, 0, (void **)&x));
    if (!first) first = x;
    TEST_ASSERT(x == first, "pass %d: the view moved", pass);
    if (rank == pass % W) nanosleep(&(struct timespec){0, 30000000}, NULL); /* a slow reader */
    for (int64_t e = 0; e < N; e++)
      TEST_ASSERT(x[e] == (float)pass, "pass %d, rank %d: element %lld of the view is %g", pass, rank, (long long)e,
                  x[e]);
    TEST_OK(FlatParamReshard(unit));
    for (int64_t k = 0; k < sn; k++) shard[k] = (float)(pass + 1);
  }
  {
    FSDPCommStats st;
    TEST_OK(FSDPContextGetCommStats(ctx, &st));
    TEST_ASSERT(st.params_in_use == 0 && st.buffer_growths == 0,
                "views took %d parameter buffers, %lld beyond the plan", st.params_in_use,
                (long long)st.buffer_growths);
  }
  TEST_OK(FSDPContextDestroy(&ctx));
}

int main(int argc, char **argv)
{
  int W, ncases = 0;
  FSDPCallAbort(MPI_COMM_WORLD, FSDPInitialize(&argc, &argv));
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  for (int set = 0; set < NSETS; set++) {
    Model m;
    make_model(set, &m);
    for (int s = 0; s < TEST_NUM_STRATEGIES; s++)
      for (int F = 1; F <= W; F++) {
        if (W % F || (!test_is_hybrid(test_strategies[s]) && F > 1)) continue;
        run_case(&m, set, test_strategies[s], F);
        ncases++;
      }
  }
  test_views();
  if (test_rank() == 0) printf("test_flatparam: W = %d, %d cases passed, views checked\n", W, ncases);
  FSDPCallAbort(MPI_COMM_WORLD, FSDPFinalize());
  return 0;
}
