/* collective_cases_nn.h: the cases of tests/test_collectives.c for the
   optimizer, the layer library (fsdp_nn.h) and fsdp_cuda.h's calls, all
   documented not collective: rank 0 alone makes each call, which must
   succeed (collectivetest.h describes the X-macro form). */
#ifndef FSDP_COLLECTIVE_CASES_NN_H
#define FSDP_COLLECTIVE_CASES_NN_H

#include "collectivetest.h"
#if FSDP_WITH_CUDA
#include "fsdp_cuda.h"
#endif

/* Buffers of 64 floats for the kernels' outputs beyond k->x and k->y. */
static float *nn_scratch(int which)
{
  static float buf[5][64];
  return buf[which];
}

/* fsdp_cuda.h's calls, on a host context (no GPU needed): a NULL stream before SetUp, the stream after. */
#if FSDP_WITH_CUDA
#define NN_CUDA_CASES(X)                                                                                               \
  X(FSDPContextSetCUDAStream, KIT_CTX, (void)0, return FSDPContextSetCUDAStream(k->ctx, (cudaStream_t)0);)             \
  X(FSDPContextGetCUDAStream, KIT_SETUP, (void)0, cudaStream_t stream;                                                 \
    return FSDPContextGetCUDAStream(k->ctx, &stream, &k->i);)                                                          \
  X(FSDPContextSetMPICUDAAware, KIT_CTX, (void)0, return FSDPContextSetMPICUDAAware(k->ctx, false);)
#else
#define NN_CUDA_CASES(X)
#endif

/* ------------------------------------------------------------------ the calls of the optimizer and the layers */
#define NN_CASES(X)                                                                                                    \
  X(FSDPPlanSetModel, KIT_PLANNER, (void)0, return FSDPPlanSetModel(k->planner, "mlp:in=4,hidden=8,depth=3,out=2");)   \
  X(FSDPPlanSetJob, KIT_PLANNER, (void)0, return FSDPPlanSetJob(k->planner, 2, 4);)                                    \
  X(FSDPPlanSetTopology, KIT_PLANNER, (void)0, return FSDPPlanSetTopology(k->planner, "pack:1 core:4 pu:1");)          \
  X(FSDPPlanSetBatch, KIT_PLANNER, (void)0, return FSDPPlanSetBatch(k->planner, 16);)                                  \
  X(FSDPPlanSetMemoryBudget, KIT_PLANNER, (void)0, return FSDPPlanSetMemoryBudget(k->planner, 1 << 20);)               \
  X(FSDPPlanSetOptimizer, KIT_PLANNER, (void)0, return FSDPPlanSetOptimizer(k->planner, FSDP_OPTIMIZER_SGD, 0.9);)     \
  X(FSDPPlanSetRates, KIT_PLANNER, (void)0, return FSDPPlanSetRates(k->planner, 1e10, 1e9, 1e8, 1e-6);)                \
  X(FSDPPlanGetRates, KIT_PLANNER, (void)0, return FSDPPlanGetRates(k->planner, &k->d, &k->e, NULL, NULL);)            \
  X(FSDPPlanSetFromOptions, KIT_PLANNER, (void)0, return FSDPPlanSetFromOptions(k->planner);)                          \
  X(FSDPPlanSetUp, KIT_PLANNER, (void)0, return FSDPPlanSetUp(k->planner);)                                            \
  X(FSDPPlanGetNumCandidates, KIT_PLANNER, (void)0, return FSDPPlanGetNumCandidates(k->planner, &k->n);)               \
  X(FSDPPlanGetCandidate, KIT_PLANNER, (void)0, return FSDPPlanGetCandidate(k->planner, 0, &k->cand);)                 \
  X(FSDPPlanGetChoice, KIT_PLANNER, (void)0, return FSDPPlanGetChoice(k->planner, &k->i, k->buf, sizeof k->buf);)      \
  X(FSDPPlanDestroy, KIT_PLANNER, (void)0, return FSDPPlanDestroy(&k->planner);)                                       \
  X(FSDPOptimizerTypeName, 0, (void)0, k->s = FSDPOptimizerTypeName(FSDP_OPTIMIZER_SGD); return FSDP_SUCCESS;)         \
  X(FSDPLRScheduleName, 0, (void)0, k->s = FSDPLRScheduleName(FSDP_LR_COSINE); return FSDP_SUCCESS;)                   \
  X(FSDPOptimizerCreate, KIT_CTX, (void)0, return FSDPOptimizerCreate(k->ctx, &k->opt);)                               \
  X(FSDPOptimizerSetType, KIT_OPT_NEW, (void)0, return FSDPOptimizerSetType(k->opt, FSDP_OPTIMIZER_SGD);)              \
  X(FSDPOptimizerSetLearningRate, KIT_OPT, (void)0, return FSDPOptimizerSetLearningRate(k->opt, 0.01);)                \
  X(FSDPOptimizerSetWeightDecay, KIT_OPT, (void)0, return FSDPOptimizerSetWeightDecay(k->opt, 0.1);)                   \
  X(FSDPOptimizerSetMomentum, KIT_OPT_NEW, (void)0, return FSDPOptimizerSetMomentum(k->opt, 0.9, true);)               \
  X(FSDPOptimizerSetBetas, KIT_OPT, (void)0, return FSDPOptimizerSetBetas(k->opt, 0.8, 0.99);)                         \
  X(FSDPOptimizerSetEps, KIT_OPT, (void)0, return FSDPOptimizerSetEps(k->opt, 1e-6);)                                  \
  X(FSDPOptimizerSetSchedule, KIT_OPT, (void)0, return FSDPOptimizerSetSchedule(k->opt, FSDP_LR_COSINE, 2, 10);)       \
  X(FSDPOptimizerSetClipGradNorm, KIT_OPT, (void)0, return FSDPOptimizerSetClipGradNorm(k->opt, 1.0);)                 \
  X(FSDPOptimizerAddParamGroup, KIT_OPT_NEW, (void)0, return FSDPOptimizerAddParamGroup(k->opt, "*.b", 0.0, 1.0);)     \
  X(FSDPOptimizerGetParamSettings, KIT_OPT, (void)0,                                                                   \
    return FSDPOptimizerGetParamSettings(k->opt, "a.w", &k->d, &k->e);)                                                \
  X(FSDPOptimizerSetFromOptions, KIT_OPT_NEW, (void)0, return FSDPOptimizerSetFromOptions(k->opt);)                    \
  X(FSDPOptimizerSetGradScaler, KIT_OPT_NEW, (void)0, return FSDPOptimizerSetGradScaler(k->opt, true);)                \
  X(FSDPOptimizerGetGradScaler, KIT_OPT, (void)0, return FSDPOptimizerGetGradScaler(k->opt, &k->b);)                   \
  X(FSDPOptimizerSetGradScalerParams, KIT_OPT_NEW, (void)0,                                                            \
    return FSDPOptimizerSetGradScalerParams(k->opt, 1024.0, 2.0, 0.5, 100);)                                           \
  X(FSDPOptimizerGetGradScale, KIT_OPT, (void)0, return FSDPOptimizerGetGradScale(k->opt, &k->d, &k->l[0]);)           \
  X(FSDPOptimizerGetStep, KIT_OPT, (void)0, return FSDPOptimizerGetStep(k->opt, &k->l[0]);)                            \
  X(FSDPOptimizerGetLearningRate, KIT_OPT, (void)0, return FSDPOptimizerGetLearningRate(k->opt, &k->d);)               \
  X(FSDPOptimizerGetGradNorm, KIT_OPT, (void)0, return FSDPOptimizerGetGradNorm(k->opt, &k->d);)                       \
  X(FSDPOptimizerGetStateSize, KIT_OPT, (void)0, return FSDPOptimizerGetStateSize(k->opt, &k->l[0]);)                  \
  X(FSDPOptimizerDestroy, KIT_OPT, (void)0, return FSDPOptimizerDestroy(&k->opt);)                                     \
  X(FSDPRandomUniform, 0, (void)0, return FSDPRandomUniform(1, "a.w", 0, 8, -1.0, 1.0, k->x);)                         \
  X(FSDPActivationName, 0, (void)0, k->s = FSDPActivationName(FSDP_ACT_GELU); return FSDP_SUCCESS;)                    \
  X(FSDPLinearForward, 0, (void)0, return FSDPLinearForward(2, 4, 2, k->x, k->y, NULL, nn_scratch(0));)                \
  X(FSDPLinearBackward, 0, (void)0,                                                                                    \
    return FSDPLinearBackward(2, 4, 2, k->x, k->y, nn_scratch(0), nn_scratch(1), nn_scratch(2), nn_scratch(3));)       \
  X(FSDPActivationForward, 0, (void)0, return FSDPActivationForward(FSDP_ACT_GELU, 8, k->x, k->y);)                    \
  X(FSDPActivationBackward, 0, (void)0, return FSDPActivationBackward(FSDP_ACT_TANH, 8, k->x, k->y, nn_scratch(0));)   \
  X(FSDPLayerNormForward, 0, (void)0,                                                                                  \
    return FSDPLayerNormForward(2, 4, k->x, NULL, NULL, k->y, nn_scratch(0), nn_scratch(1));)                          \
  X(FSDPLayerNormBackward, 0, (void)0,                                                                                 \
    FSDPCall(FSDPLayerNormForward(2, 4, k->x, NULL, NULL, k->y, nn_scratch(0), nn_scratch(1)));                        \
    return FSDPLayerNormBackward(2, 4, k->x, NULL, nn_scratch(0), nn_scratch(1), k->y, nn_scratch(2), nn_scratch(3),   \
                                 nn_scratch(4));)                                                                      \
  X(FSDPMSELoss, 0, (void)0, return FSDPMSELoss(2, 4, k->x, k->y, &k->d, nn_scratch(0));)                              \
  X(FSDPCrossEntropyLoss, 0, (void)0, return FSDPCrossEntropyLoss(2, 4, k->x, k->l, &k->d, nn_scratch(0));)            \
  X(FSDPModelCreate, KIT_CTX, (void)0, return FSDPModelCreate(k->ctx, "mlp:in=4,hidden=8,depth=2,out=2", &k->model);)  \
  X(FSDPModelSetWrapPolicy, KIT_MODEL, (void)0, return FSDPModelSetWrapPolicy(k->model, FSDP_WRAP_MODEL, 0);)          \
  X(FSDPModelSetSeed, KIT_MODEL, (void)0, return FSDPModelSetSeed(k->model, 7);)                                       \
  X(FSDPModelSetFromOptions, KIT_MODEL, (void)0, return FSDPModelSetFromOptions(k->model);)                            \
  X(FSDPModelGetSizes, KIT_MODEL, (void)0, return FSDPModelGetSizes(k->model, &k->l[0], &k->l[1], &k->l[2]);)          \
  X(FSDPModelGetSampleShape, KIT_MODEL, (void)0, return FSDPModelGetSampleShape(k->model, true, &k->i, k->l);)         \
  X(FSDPModelGetTokens, KIT_MODEL, (void)0, return FSDPModelGetTokens(k->model, &k->l[0], &k->l[1]);)                  \
  X(FSDPModelSetActivationCheckpointing, KIT_MODEL_UP, (void)0,                                                        \
    return FSDPModelSetActivationCheckpointing(k->model, true);)                                                       \
  X(FSDPModelGetActivationCheckpointing, KIT_MODEL, (void)0,                                                           \
    return FSDPModelGetActivationCheckpointing(k->model, &k->b);)                                                      \
  X(FSDPModelGetActivationBytes, KIT_MODEL, (void)0, size_t bytes;                                                     \
    return FSDPModelGetActivationBytes(k->model, 2, true, &bytes);)                                                    \
  X(FSDPModelGetContext, KIT_MODEL, (void)0, FSDPContext ctx; return FSDPModelGetContext(k->model, &ctx);)             \
  X(FSDPModelSetTF32, KIT_MODEL_UP, (void)0, return FSDPModelSetTF32(k->model, false);)                                \
  X(FSDPModelLoss, KIT_MODEL_UP, FSDPCall(FSDPModelForward(k->model, 2, k->x, &k->f)),                                 \
    return FSDPModelLoss(k->model, FSDP_LOSS_MSE, k->y, 1.0, &k->d, &k->f);)                                           \
  X(FSDPModelDestroy, KIT_MODEL_UP, (void)0, return FSDPModelDestroy(&k->model);)                                      \
  NN_CUDA_CASES(X)

#endif
