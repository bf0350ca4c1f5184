/* fsdptest.h: what the FSDPContext tests share: reproducible values and a
   context made for a given strategy and sharding factor. */
#ifndef FSDP_FSDPTEST_H
#define FSDP_FSDPTEST_H

#include <stdint.h>

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

#endif
