/* fortran_peek.c: what the Fortran tests ask C about, through bind(C): the
   C values of the enums the module restates, and elements of parameter and
   gradient views read the C way (row-major [i0][i1]...), so that the tests
   compare each Fortran view element with the C element it must map to. */
#include <string.h>

#include "fsdp_nn.h"

#define ENUM(name)                                                                                                     \
  {                                                                                                                    \
#name, name                                                                                                        \
  }
static const struct {
  const char *name;
  int value;
} enums[] = {
    ENUM(FSDP_SUCCESS),
    ENUM(FSDP_ERR_ARG),
    ENUM(FSDP_ERR_STATE),
    ENUM(FSDP_ERR_MEM),
    ENUM(FSDP_ERR_MPI),
    ENUM(FSDP_ERR_HWLOC),
    ENUM(FSDP_ERR_HDF5),
    ENUM(FSDP_ERR_CUDA),
    ENUM(FSDP_ERR_NCCL),
    ENUM(FSDP_ERR_IO),
    ENUM(FSDP_ERR_OPTION),
    ENUM(FSDP_ERR_UNSUPPORTED),
    ENUM(FSDP_ERR_TIMEOUT),
    ENUM(FSDP_ERR_CORRUPT),
    ENUM(FSDP_ERR_USER),
    ENUM(FSDP_ERR_INTERNAL),
    ENUM(FSDP_ERR_NOT_FINITE),
    ENUM(FSDP_ERRORS_PRINT),
    ENUM(FSDP_ERRORS_RETURN),
    ENUM(FSDP_ERRORS_ARE_FATAL),
    ENUM(FSDP_FLOAT32),
    ENUM(FSDP_FLOAT64),
    ENUM(FSDP_BFLOAT16),
    ENUM(FSDP_FLOAT16),
    ENUM(FSDP_SHARD_DOMAIN_NODE),
    ENUM(FSDP_SHARD_DOMAIN_PACKAGE),
    ENUM(FSDP_SHARD_DOMAIN_NUMA),
    ENUM(FSDP_SHARD_DOMAIN_WORLD),
    ENUM(FSDP_FULL_SHARD),
    ENUM(FSDP_SHARD_GRAD_OP),
    ENUM(FSDP_NO_SHARD),
    ENUM(FSDP_HYBRID_SHARD),
    ENUM(FSDP_HYBRID_SHARD_ZERO2),
    ENUM(FSDP_COMM_ENGINE_THREAD),
    ENUM(FSDP_COMM_ENGINE_NONBLOCKING),
    ENUM(FSDP_COMM_ENGINE_SYNC),
    ENUM(FSDP_BACKWARD_PREFETCH_PRE),
    ENUM(FSDP_BACKWARD_PREFETCH_POST),
    ENUM(FSDP_BACKWARD_PREFETCH_NONE),
    ENUM(FSDP_DEVICE_HOST),
    ENUM(FSDP_DEVICE_CUDA),
    ENUM(FSDP_FLATPARAM_SHARDED),
    ENUM(FSDP_FLATPARAM_GATHERING),
    ENUM(FSDP_FLATPARAM_UNSHARDED),
    ENUM(FSDP_FLATPARAM_REDUCING),
    ENUM(FSDP_OPTIMIZER_SGD),
    ENUM(FSDP_OPTIMIZER_ADAMW),
    ENUM(FSDP_LR_CONSTANT),
    ENUM(FSDP_LR_COSINE),
    ENUM(FSDP_WRAP_BLOCK),
    ENUM(FSDP_WRAP_MODEL),
    ENUM(FSDP_WRAP_SIZE),
    ENUM(FSDP_ACT_RELU),
    ENUM(FSDP_ACT_TANH),
    ENUM(FSDP_ACT_GELU),
    ENUM(FSDP_ACT_IDENTITY),
    ENUM(FSDP_WAIT_AUTO),
    ENUM(FSDP_WAIT_POLL),
    ENUM(FSDP_WAIT_SLEEP),
    ENUM(FSDP_SIMD_GENERIC),
    ENUM(FSDP_SIMD_AVX2),
    ENUM(FSDP_SIMD_AVX512),
    ENUM(FSDP_MEM_PARAMS),
    ENUM(FSDP_MEM_GRADS),
    ENUM(FSDP_MEM_OPTIM_STATE),
    ENUM(FSDP_MEM_UNSHARDED),
    ENUM(FSDP_MEM_COMM_STAGING),
    ENUM(FSDP_MEM_OTHER),
};

/* The size of C's FSDPPlanCandidate, which type(fsdp_plan_candidate) must match. */
size_t fsdpt_plan_candidate_size(void) { return sizeof(FSDPPlanCandidate); }

/* The C value of the enum constant `name`, or -1000 when this table lacks it. */
int fsdpt_enum(const char *name)
{
  for (size_t i = 0; i < sizeof enums / sizeof enums[0]; i++)
    if (!strcmp(enums[i].name, name)) return enums[i].value;
  return -1000;
}

/* Element index[0..ndim) of parameter id (grad: of its gradient view), read
   the C way; -1e30 when the view cannot be had. */
static float element(FlatParam *unit, int id, const int64_t *index, int grad)
{
  const int64_t *shape;
  int ndim;
  int64_t offset = 0;
  float *values;

  if (FlatParamGetParamInfo(*unit, id, NULL, &ndim, &shape, NULL)) return -1e30f;
  if ((grad ? FlatParamGetGrad(*unit, id, (void **)&values) : FlatParamGetParam(*unit, id, (void **)&values)))
    return -1e30f;
  for (int d = 0; d < ndim; d++) offset = offset * shape[d] + index[d];
  return values[offset];
}

/* unit by reference: a type(fsdp_flatparam) */
float fsdpt_param_element(FlatParam *unit, int id, const int64_t *index) { return element(unit, id, index, 0); }
float fsdpt_grad_element(FlatParam *unit, int id, const int64_t *index) { return element(unit, id, index, 1); }
