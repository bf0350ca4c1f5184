/* fsdptest.h: what the FSDPContext tests share: reproducible values and a
   context made for a given strategy and sharding factor. */
#ifndef FSDP_FSDPTEST_H
#define FSDP_FSDPTEST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "testutil.h"

/* splitmix64: the same stream on every rank, whatever W is. */
static inline uint64_t test_mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* A value in [-1, 1) that depends only on (key, i). */
static inline float test_value(uint64_t key, int64_t i)
{
  return (float)((double)(test_mix(test_mix(key) ^ (uint64_t)i) >> 11) * 0x1.0p-52 - 1.0);
}

/* A small random integer in [0, n). */
static inline int test_rand(uint64_t *state, int n)
{
  *state = test_mix(*state);
  return (int)(*state % (uint64_t)n);
}

static const FSDPShardingStrategy test_strategies[] = {FSDP_FULL_SHARD, FSDP_SHARD_GRAD_OP, FSDP_NO_SHARD,
                                                       FSDP_HYBRID_SHARD, FSDP_HYBRID_SHARD_ZERO2};
#define TEST_NUM_STRATEGIES 5

static inline bool test_is_hybrid(FSDPShardingStrategy s)
{
  return s == FSDP_HYBRID_SHARD || s == FSDP_HYBRID_SHARD_ZERO2;
}

/* Whether the MPI is MPICH, whose default collective algorithms the planner models. */
static inline bool test_mpi_is_mpich(void)
{
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  return !MPI_Get_library_version(lib, &len) && !strncmp(lib, "MPICH", 5);
}

/* A context on comm with `strategy`; hybrid ones get F = factor. */
static inline FSDPContext test_context(MPI_Comm comm, FSDPShardingStrategy strategy, int factor)
{
  FSDPContext ctx;
  ShardGroup group;
  TEST_OK(FSDPContextCreate(comm, &ctx));
  TEST_OK(FSDPContextSetShardingStrategy(ctx, strategy));
  TEST_OK(FSDPContextSetFromOptions(ctx));
  if (test_is_hybrid(strategy)) {
    TEST_OK(FSDPContextGetShardGroup(ctx, &group));
    TEST_OK(ShardGroupSetShardingFactor(group, factor));
  }
  return ctx;
}

/* The gradient shards of ctx's units, from one backward pass done before,
   against central differences of loss(user) with step h: about `samples`
   elements of each parameter, each perturbed by every rank holding it (so a
   collective loss sees the change everywhere).  A frozen parameter
   (frozen_unit, frozen_id; NULL for none) must have no gradient at all. */
static inline void test_fd_gradients(FSDPContext ctx, double h, int64_t samples, double (*loss)(void *), void *user,
                                     FlatParam frozen_unit, FSDPParamId frozen_id, const char *what)
{
  int nunits;
  TEST_OK(FSDPContextGetNumUnits(ctx, &nunits));
  for (int u = 0; u < nunits; u++) {
    FlatParam unit;
    float *p, *g;
    int nparams;
    TEST_OK(FSDPContextGetUnit(ctx, u, &unit));
    TEST_OK(FlatParamGetShard(unit, (void **)&p, NULL));
    TEST_OK(FlatParamGetGradShard(unit, (void **)&g, NULL));
    TEST_OK(FlatParamGetNumParams(unit, &nparams));
    for (int i = 0; i < nparams; i++) {
      const char *name;
      int64_t numel, begin, end, offset, stride;
      bool frozen = unit == frozen_unit && i == frozen_id;
      TEST_OK(FlatParamGetParamInfo(unit, i, &name, NULL, NULL, &numel));
      TEST_OK(FlatParamGetShardRange(unit, i, &begin, &end, &offset));
      stride = numel > samples ? numel / samples : 1;
      /* Offset by the parameter's index: different elements of same-shaped parameters. */
      for (int64_t e = i % stride; e < numel; e += stride) {
        bool mine = begin <= e && e < end;
        float *v = mine ? &p[offset + e - begin] : NULL, keep = mine ? *v : 0;
        double up, down, an = mine ? g[offset + e - begin] : 0;
        if (frozen) { /* no gradient at all, though the loss depends on it */
          TEST_ASSERT(an == 0, "frozen %s[%lld] has gradient %g", name, (long long)e, an);
          continue;
        }
        if (mine) *v = keep + (float)h;
        up = loss(user);
        if (mine) *v = keep - (float)h;
        down = loss(user);
        if (mine) *v = keep;
        if (mine) {
          double fd = (up - down) / (2 * h), scale = fabs(an) > 1e-2 ? fabs(an) : 1e-2;
          TEST_ASSERT(fabs(fd - an) <= 3e-3 * scale + 3e-4, "%s %s[%lld]: finite difference %.7g, gradient %.7g", what,
                      name, (long long)e, fd, an);
        }
      }
    }
  }
}

#endif
