/* The calls of shard groups, contexts and units that the headers document as
   not collective: each made on rank 0 alone must succeed
   (tests/test_collectives.c).  Setters that work only before SetUp get a
   context that is not set up (KIT_CTX); the rest run on a set-up context,
   where a call that communicated would hang or be caught. */
#ifndef FSDP_COLLECTIVE_CASES_CORE_H
#define FSDP_COLLECTIVE_CASES_CORE_H

/* The kit's values (kit_fill_unit's), written by a shard initializer (the kit's units are fp32). */
static FSDPErrorCode core_shard_init(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values,
                                     void *user)
{
  float *v = values;
  (void)unit, (void)id, (void)user;
  for (int64_t i = begin; i < end; i++) v[i - begin] = 0.01f * (float)(i + 1);
  return FSDP_SUCCESS;
}

/* A request of this rank's alone: a barrier on MPI_COMM_SELF needs no other rank. */
static FSDPErrorCode core_wait_alone(Kit *k)
{
  MPI_Request req;
  if (MPI_Ibarrier(MPI_COMM_SELF, &req) != MPI_SUCCESS) return FSDP_ERR_MPI;
  FSDPCall(FSDPContextWait(k->ctx, &req));
  return req == MPI_REQUEST_NULL ? FSDP_SUCCESS : FSDP_ERR_INTERNAL;
}

#define CORE_CASES(X)                                                                                                  \
  X(ShardGroupSetShardingFactor, KIT_GROUP, (void)0, return ShardGroupSetShardingFactor(k->group, 2);)                 \
  X(ShardGroupSetShardDomain, KIT_GROUP, (void)0, return ShardGroupSetShardDomain(k->group, FSDP_SHARD_DOMAIN_NODE);)  \
  X(ShardGroupSetBind, KIT_GROUP, (void)0, return ShardGroupSetBind(k->group, FSDP_BIND_NONE);)                        \
  X(ShardGroupSetFromOptions, KIT_GROUP, (void)0, return ShardGroupSetFromOptions(k->group);)                          \
  X(ShardGroupGetComm, KIT_GROUP, FSDPCall(ShardGroupSetUp(k->group)), return ShardGroupGetComm(k->group, &k->c);)     \
  X(ShardGroupGetShardComm, KIT_GROUP, FSDPCall(ShardGroupSetUp(k->group)),                                            \
    return ShardGroupGetShardComm(k->group, &k->c, &k->i, &k->j);)                                                     \
  X(ShardGroupGetReplicateComm, KIT_GROUP, FSDPCall(ShardGroupSetUp(k->group)),                                        \
    return ShardGroupGetReplicateComm(k->group, &k->c, &k->i, &k->j);)                                                 \
  X(ShardGroupGetNode, KIT_GROUP, FSDPCall(ShardGroupSetUp(k->group)),                                                 \
    return ShardGroupGetNode(k->group, &k->i, &k->j);)                                                                 \
  X(ShardGroupGetLocalRank, KIT_GROUP, FSDPCall(ShardGroupSetUp(k->group)),                                            \
    return ShardGroupGetLocalRank(k->group, &k->i, &k->j);)                                                            \
  X(ShardGroupGetDevice, KIT_GROUP, FSDPCall(ShardGroupSetUp(k->group)),                                               \
    return ShardGroupGetDevice(k->group, &k->i, &k->j);)                                                               \
  X(ShardGroupGetDevicePCIBusId, KIT_GROUP, FSDPCall(ShardGroupSetUp(k->group)),                                       \
    return ShardGroupGetDevicePCIBusId(k->group, &k->s);)                                                              \
  X(FSDPShardingStrategyName, 0, (void)0,                                                                              \
    return FSDPShardingStrategyName(FSDP_HYBRID_SHARD) ? FSDP_SUCCESS : FSDP_ERR_USER;)                                \
  X(FSDPContextSetShardingStrategy, KIT_CTX, (void)0, return FSDPContextSetShardingStrategy(k->ctx, FSDP_FULL_SHARD);) \
  X(FSDPContextGetShardGroup, KIT_SETUP, (void)0, ShardGroup g; return FSDPContextGetShardGroup(k->ctx, &g);)          \
  X(FSDPContextSetUnitInit, KIT_CTX, (void)0, return FSDPContextSetUnitInit(k->ctx, kit_fill_unit, NULL);)             \
  X(FSDPContextSetShardInit, KIT_CTX, FSDPCall(FSDPContextSetUnitInit(k->ctx, NULL, NULL)),                            \
    return FSDPContextSetShardInit(k->ctx, core_shard_init, NULL);)                                                    \
  X(FSDPContextSetSyncParams, KIT_CTX, (void)0, return FSDPContextSetSyncParams(k->ctx, false);)                       \
  X(FSDPContextSetMixedPrecision, KIT_CTX, (void)0,                                                                    \
    return FSDPContextSetMixedPrecision(k->ctx, FSDP_FLOAT32, FSDP_FLOAT32);)                                          \
  X(FSDPContextSetCommEngine, KIT_CTX, (void)0, return FSDPContextSetCommEngine(k->ctx, FSDP_COMM_ENGINE_SYNC);)       \
  X(FSDPContextSetBackwardPrefetch, KIT_CTX, (void)0,                                                                  \
    return FSDPContextSetBackwardPrefetch(k->ctx, FSDP_BACKWARD_PREFETCH_PRE);)                                        \
  X(FSDPContextSetForwardPrefetch, KIT_CTX, (void)0, return FSDPContextSetForwardPrefetch(k->ctx, false);)             \
  X(FSDPContextSetLimitAllGathers, KIT_CTX, (void)0, return FSDPContextSetLimitAllGathers(k->ctx, 2);)                 \
  X(FSDPContextSetCollectiveTimeout, KIT_CTX, (void)0, return FSDPContextSetCollectiveTimeout(k->ctx, 600);)           \
  X(FSDPContextSetSignalGrace, KIT_CTX, (void)0, return FSDPContextSetSignalGrace(k->ctx, 5);)                         \
  X(FSDPContextSetDebugCollectives, KIT_CTX, (void)0, return FSDPContextSetDebugCollectives(k->ctx, true);)            \
  X(FSDPContextSetWaitMode, KIT_CTX, (void)0, return FSDPContextSetWaitMode(k->ctx, FSDP_WAIT_AUTO);)                  \
  X(FSDPContextGetWaitMode, KIT_SETUP, (void)0, FSDPWaitMode mode;                                                     \
    return FSDPContextGetWaitMode(k->ctx, &mode, &k->i, &k->j);)                                                       \
  X(FSDPContextWait, KIT_SETUP, (void)0, return core_wait_alone(k);)                                                   \
  X(FSDPContextSetShmReduce, KIT_CTX, (void)0, return FSDPContextSetShmReduce(k->ctx, true);)                          \
  X(FSDPContextSetShmViews, KIT_CTX, (void)0, return FSDPContextSetShmViews(k->ctx, true);)                            \
  X(FSDPContextGetShmViews, KIT_SETUP, (void)0, return FSDPContextGetShmViews(k->ctx, &k->b);)                         \
  X(FSDPContextSetDevice, KIT_CTX, (void)0, return FSDPContextSetDevice(k->ctx, FSDP_DEVICE_HOST);)                    \
  X(FSDPContextSetReplicateEngine, KIT_CTX, (void)0,                                                                   \
    return FSDPContextSetReplicateEngine(k->ctx, FSDP_REPLICATE_ENGINE_MPI);)                                          \
  X(FSDPContextSetCheckpointKeep, KIT_SETUP, (void)0, return FSDPContextSetCheckpointKeep(k->ctx, 1);)                 \
  X(FSDPContextSetCheckpointIO, KIT_SETUP, (void)0,                                                                    \
    return FSDPContextSetCheckpointIO(k->ctx, FSDP_CHECKPOINT_IO_AUTO);)                                               \
  X(FSDPContextSetCheckpointStrict, KIT_SETUP, (void)0, return FSDPContextSetCheckpointStrict(k->ctx, true);)          \
  X(FSDPContextSetCheckFinite, KIT_SETUP, (void)0, return FSDPContextSetCheckFinite(k->ctx, true);)                    \
  X(FSDPContextSetMemoryLimit, KIT_CTX, (void)0, return FSDPContextSetMemoryLimit(k->ctx, FSDP_MEMORY_LIMIT_AUTO);)    \
  X(FSDPContextSetFromOptions, KIT_CTX, (void)0, return FSDPContextSetFromOptions(k->ctx);)                            \
  X(FSDPContextAddUnit, KIT_CTX, (void)0, FlatParam u; return FSDPContextAddUnit(k->ctx, "c", &u);)                    \
  X(FSDPContextBeginForward, KIT_SETUP, (void)0, return FSDPContextBeginForward(k->ctx);)                              \
  X(FSDPContextBeginBackward, KIT_SETUP, (void)0, return FSDPContextBeginBackward(k->ctx);)                            \
  X(FSDPContextZeroGrad, KIT_SETUP, (void)0, return FSDPContextZeroGrad(k->ctx);)                                      \
  X(FSDPContextSetGradSync, KIT_SETUP, (void)0, return FSDPContextSetGradSync(k->ctx, true);)                          \
  X(FSDPContextSetReplicateGradSync, KIT_SETUP, (void)0, return FSDPContextSetReplicateGradSync(k->ctx, true);)        \
  X(FSDPContextSynchronize, KIT_SETUP, (void)0, return FSDPContextSynchronize(k->ctx);)                                \
  X(FSDPContextSetTrainingState, KIT_SETUP, (void)0, k->state.step = 3; k->state.data_cursor = 7;                      \
    return FSDPContextSetTrainingState(k->ctx, &k->state);)                                                            \
  X(FSDPContextGetTrainingState, KIT_SETUP, (void)0, return FSDPContextGetTrainingState(k->ctx, &k->state);)           \
  X(FSDPContextGetShardingStrategy, KIT_SETUP, (void)0, FSDPShardingStrategy strategy;                                 \
    return FSDPContextGetShardingStrategy(k->ctx, &strategy);)                                                         \
  X(FSDPContextGetComm, KIT_SETUP, (void)0, return FSDPContextGetComm(k->ctx, &k->c);)                                 \
  X(FSDPContextGetNumUnits, KIT_SETUP, (void)0, return FSDPContextGetNumUnits(k->ctx, &k->i);)                         \
  X(FSDPContextGetUnit, KIT_SETUP, (void)0, FlatParam u; return FSDPContextGetUnit(k->ctx, 1, &u);)                    \
  X(FSDPContextFindParam, KIT_SETUP, (void)0, FlatParam u; FSDPCall(FSDPContextFindParam(k->ctx, "a.w", &u, &k->i));   \
    FSDPCall(FSDPContextFindParam(k->ctx, "a.b", &u, &k->i)); return FSDPContextFindParam(k->ctx, "b.w", &u, &k->i);)  \
  X(FSDPContextGetSizes, KIT_SETUP, (void)0, return FSDPContextGetSizes(k->ctx, &k->l[0], &k->l[1], &k->l[2]);)        \
  X(FSDPContextGetDevice, KIT_SETUP, (void)0, FSDPDeviceType device; return FSDPContextGetDevice(k->ctx, &device);)    \
  X(FSDPContextGetMixedPrecision, KIT_SETUP, (void)0, return FSDPContextGetMixedPrecision(k->ctx, &k->dt, &k->dt2);)   \
  X(FSDPContextGetCheckpointKeep, KIT_SETUP, (void)0, return FSDPContextGetCheckpointKeep(k->ctx, &k->i);)             \
  X(FSDPContextGetCheckFinite, KIT_SETUP, (void)0, return FSDPContextGetCheckFinite(k->ctx, &k->b);)                   \
  X(FSDPContextGetMemoryPlan, KIT_SETUP, (void)0, return FSDPContextGetMemoryPlan(k->ctx, &k->plan);)                  \
  X(FSDPContextGetCommStats, KIT_SETUP, (void)0, return FSDPContextGetCommStats(k->ctx, &k->stats);)                   \
  X(FlatParamStateName, 0, (void)0,                                                                                    \
    return FlatParamStateName(FSDP_FLATPARAM_UNSHARDED) ? FSDP_SUCCESS : FSDP_ERR_USER;)                               \
  X(FlatParamSetDataType, KIT_CTX, (void)0, return FlatParamSetDataType(k->unit[1], FSDP_FLOAT64);)                    \
  X(FlatParamAddParam, KIT_CTX, (void)0, k->l[0] = 2; return FlatParamAddParam(k->unit[1], "b.b", 1, k->l, &k->i);)    \
  X(FlatParamSetTrainable, KIT_SETUP, (void)0, return FlatParamSetTrainable(k->unit[0], 1, false);)                    \
  X(FlatParamGetTrainable, KIT_SETUP, (void)0, return FlatParamGetTrainable(k->unit[0], 1, &k->b);)                    \
  X(FlatParamGetParam, KIT_SETUP, FSDPCall(FlatParamUnshard(k->unit[0])),                                              \
    return FlatParamGetParam(k->unit[0], 0, &k->p);)                                                                   \
  X(FlatParamGetGrad, KIT_SETUP, FSDPCall(FlatParamUnshard(k->unit[0])),                                               \
    return FlatParamGetGrad(k->unit[0], 0, &k->p);)                                                                    \
  X(FlatParamGetShard, KIT_SETUP, (void)0, return FlatParamGetShard(k->unit[0], &k->p, &k->l[0]);)                     \
  X(FlatParamGetGradShard, KIT_SETUP, (void)0, return FlatParamGetGradShard(k->unit[0], &k->p, &k->l[0]);)             \
  X(FlatParamGetShardRange, KIT_SETUP, (void)0,                                                                        \
    return FlatParamGetShardRange(k->unit[0], 0, &k->l[0], &k->l[1], &k->l[2]);)                                       \
  X(FlatParamGetName, KIT_SETUP, (void)0, return FlatParamGetName(k->unit[0], &k->s);)                                 \
  X(FlatParamGetState, KIT_SETUP, (void)0, FlatParamState state; return FlatParamGetState(k->unit[0], &state);)        \
  X(FlatParamGetDataType, KIT_SETUP, (void)0, return FlatParamGetDataType(k->unit[0], &k->dt);)                        \
  X(FlatParamGetViewDataType, KIT_SETUP, (void)0, return FlatParamGetViewDataType(k->unit[0], &k->dt);)                \
  X(FlatParamGetNumParams, KIT_SETUP, (void)0, return FlatParamGetNumParams(k->unit[0], &k->i);)                       \
  X(FlatParamGetParamInfo, KIT_SETUP, (void)0, const int64_t *shape;                                                   \
    return FlatParamGetParamInfo(k->unit[0], 0, &k->s, &k->i, &shape, &k->l[0]);)                                      \
  X(FlatParamGetSizes, KIT_SETUP, (void)0, return FlatParamGetSizes(k->unit[0], &k->l[0], &k->l[1], &k->l[2]);)

#endif
