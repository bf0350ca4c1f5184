/* NCCL on a context's GPU (doc/cuda.md): the communicators of the shard
   and replicate groups, their set-up under a watchdog, the collectives on
   the device's communication stream, and their failure and abort.  A build
   without NCCL keeps the calls: every group then goes through MPI. */
#include <stdio.h>
#include <string.h>

#include "engine.h"

#ifdef FSDP_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

struct CommNCCL_s {
  ncclComm_t shard, replicate;
};

#define CHECK_NCCL(call, what)                                                                                         \
  do {                                                                                                                 \
    ncclResult_t r_ = (call);                                                                                          \
    FSDPCheck(r_ == ncclSuccess, MPI_COMM_SELF, FSDP_ERR_NCCL, "%s: %s", what, ncclGetErrorString(r_));                \
  } while (0)

/* Whether two ranks of comm use the same GPU (same node name, same bus id);
   if so, which, in why. */
static FSDPErrorCode shares_gpu(Device d, MPI_Comm comm, const char *group, bool *shared, char *why, size_t len)
{
  enum { KEY = MPI_MAX_PROCESSOR_NAME + 32 };
  char *keys;
  int size, namelen = 0;
  char mine[KEY];

  memset(mine, 0, sizeof mine);
  FSDPCallMPI(MPI_Get_processor_name(mine, &namelen));
  snprintf(mine + MPI_MAX_PROCESSOR_NAME, 32, "%s", DeviceBusId_Private(d));
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  FSDPCall(FSDPMalloc((size_t)size * KEY, FSDP_MEM_OTHER, &keys));
  FSDPCallMPI(MPI_Allgather(mine, KEY, MPI_CHAR, keys, KEY, MPI_CHAR, comm));
  *shared = false;
  for (int a = 0; a < size && !*shared; a++)
    for (int b = a + 1; b < size && !*shared; b++)
      if (!memcmp(keys + (size_t)a * KEY, keys + (size_t)b * KEY, KEY)) {
        *shared = true;
        snprintf(why, len,
                 "ranks %d and %d of the %s group both use GPU %s on %s, and NCCL refuses a GPU twice in one "
                 "communicator: the %s group's collectives go through MPI with host staging (slower; give each rank "
                 "its own GPU)",
                 a, b, group, keys + (size_t)a * KEY + MPI_MAX_PROCESSOR_NAME, keys + (size_t)a * KEY, group);
      }
  FSDPCall(FSDPFree(&keys));
  return FSDP_SUCCESS;
}

/* A rank whose ncclCommInitRank fails leaves its peers inside theirs, and
   NCCL's blocking init has no way out: a watch (src/sys/watch.c) aborts the
   job once the call has run `timeout` seconds. */

/* The unique id travels with rank 0's status, so that a failure there
   stops every rank instead of leaving them in the broadcast. */
static FSDPErrorCode init_comm(MPI_Comm comm, const char *group, double timeout, ncclComm_t *nccl)
{
  struct {
    ncclUniqueId id;
    int status;
  } root;
  FSDPWatch watch = NULL;
  ncclResult_t r;
  int rank, size;
  FSDPCallMPI(MPI_Comm_rank(comm, &rank));
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  memset(&root, 0, sizeof root);
  if (rank == 0) root.status = (int)ncclGetUniqueId(&root.id);
  FSDPCallMPI(MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, comm));
  FSDPCheck(root.status == ncclSuccess, MPI_COMM_SELF, FSDP_ERR_NCCL, "ncclGetUniqueId on rank 0 of the %s group: %s",
            group, ncclGetErrorString((ncclResult_t)root.status));
  FSDPCall(FSDPWatchStart_Private(timeout, FSDP_ERR_TIMEOUT, &watch,
                                  "ncclCommInitRank of the %s group has not completed after %g s "
                                  "(-fsdp_collective_timeout) in FSDPContextSetUp; another rank of the group failed "
                                  "before or inside it (see its message), or never called it",
                                  group, timeout));
  r = ncclCommInitRank(nccl, size, root.id, rank);
  FSDPCall(FSDPWatchStop_Private(&watch));
  FSDPCheck(r == ncclSuccess, MPI_COMM_SELF, FSDP_ERR_NCCL, "ncclCommInitRank of the %s group (rank %d of %d): %s",
            group, rank, size, ncclGetErrorString(r));
  return FSDP_SUCCESS;
}

FSDPErrorCode CommNCCLSetUp(Device d, MPI_Comm comm, MPI_Comm shard_comm, MPI_Comm replicate_comm, bool replicate_nccl,
                            double timeout, char *why, size_t len, CommNCCL *nccl)
{
  FSDPErrorCode ierr = FSDP_SUCCESS;
  bool shared = false;
  int fsize, rsize;
  CommNCCL n;

  why[0] = '\0';
  *nccl = NULL;
  FSDPCallMPI(MPI_Comm_size(shard_comm, &fsize));
  FSDPCallMPI(MPI_Comm_size(replicate_comm, &rsize));
  FSDPCall(FSDPCalloc(1, sizeof *n, FSDP_MEM_OTHER, &n));
  *nccl = n; /* the caller destroys it, error or not */
  if (fsize > 1) {
    ierr = shares_gpu(d, shard_comm, "shard", &shared, why, len);
    if (!ierr && !shared) ierr = init_comm(shard_comm, "shard", timeout, &n->shard);
  }
  if (replicate_nccl && rsize > 1) {
    /* A replicate group spans shard groups: all of them decide together.
       Any shard group on MPI keeps the replicas on MPI: a NCCL all-reduce
       chained after an MPI reduce-scatter would not wait for it.  A shard
       group whose set-up failed stops every rank here, so that none waits in
       this reduction while the failed ones wait in SetUp's agreement. */
    int flags[2] = {ierr != FSDP_SUCCESS, shared}; /* failed, shares a GPU */
    FSDPCallMPI(MPI_Allreduce(MPI_IN_PLACE, flags, 2, MPI_INT, MPI_LOR, comm));
    if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
    FSDPCheck(!flags[0], MPI_COMM_SELF, FSDP_ERR_NCCL,
              "the shard group's NCCL set-up failed on another rank (see its message)");
    if (!flags[1]) ierr = shares_gpu(d, replicate_comm, "replicate", &shared, why, len);
    if (!ierr && !flags[1] && !shared) ierr = init_comm(replicate_comm, "replicate", timeout, &n->replicate);
  }
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
  return FSDP_SUCCESS;
}

void *CommNCCLGet(CommNCCL nccl, bool shard)
{
  if (!nccl) return NULL;
  return shard ? (void *)nccl->shard : (void *)nccl->replicate;
}

FSDPErrorCode CommNCCLDestroy(CommNCCL *nccl)
{
  CommNCCL n = *nccl;
  if (!n) return FSDP_SUCCESS;
  if (n->shard) (void)ncclCommDestroy(n->shard);
  if (n->replicate) (void)ncclCommDestroy(n->replicate);
  FSDPCall(FSDPFree(nccl));
  return FSDP_SUCCESS;
}

static ncclDataType_t nccl_type(FSDPDataType t)
{
  switch (t) {
  case FSDP_FLOAT64: return ncclFloat64;
  case FSDP_BFLOAT16: return ncclBfloat16;
  case FSDP_FLOAT16: return ncclFloat16;
  default: return ncclFloat32;
  }
}

FSDPErrorCode CommNCCLLaunch(CommNCCL nccl, Device d, const CommOp *op, void *ready, void *done)
{
  ncclComm_t comm = (ncclComm_t)op->nccl;
  ncclDataType_t t = nccl_type(op->dtype);
  cudaStream_t stream = (cudaStream_t)DeviceCommStream_Private(d);
  const void *send = op->send == MPI_IN_PLACE ? NULL : op->send;
  size_t count = (size_t)op->count;
  ncclResult_t r;
  (void)nccl;
  CHECK_CUDA(cudaStreamWaitEvent(stream, (cudaEvent_t)ready, 0), "cudaStreamWaitEvent");
  switch (op->kind) {
  case COMM_ALLGATHER: /* MPI_IN_PLACE: this rank's block of recv */
    if (send) r = ncclAllGather(send, op->recv, count, t, comm, stream);
    else {
      int rank;
      CHECK_NCCL(ncclCommUserRank(comm, &rank), "ncclCommUserRank");
      r = ncclAllGather((char *)op->recv + (size_t)rank * count * FSDPDataTypeSize(op->dtype), op->recv, count, t, comm,
                        stream);
    }
    break;
  case COMM_REDUCE_SCATTER: r = ncclReduceScatter(send, op->recv, count, t, ncclSum, comm, stream); break;
  default: r = ncclAllReduce(send ? send : op->recv, op->recv, count, t, ncclSum, comm, stream); break;
  }
  CHECK_NCCL(r, "NCCL collective");
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)done, stream), "cudaEventRecord on the communication stream");
  return FSDP_SUCCESS;
}

bool CommNCCLFailed(CommNCCL nccl, char *msg, size_t len)
{
  const char *names[2] = {"shard", "replicate"};
  if (!nccl) return false;
  ncclComm_t comms[2] = {nccl->shard, nccl->replicate};
  for (int k = 0; k < 2; k++) {
    ncclResult_t r = ncclSuccess;
    if (!comms[k]) continue;
    if (ncclCommGetAsyncError(comms[k], &r) != ncclSuccess) continue;
    if (r != ncclSuccess && r != ncclInProgress) {
      snprintf(msg, len, "NCCL reports an asynchronous error on the %s group's communicator: %s (%s)", names[k],
               ncclGetErrorString(r), ncclGetLastError(comms[k]));
      return true;
    }
  }
  return false;
}

void CommNCCLAbort(CommNCCL nccl)
{
  if (!nccl) return;
  if (nccl->shard) (void)ncclCommAbort(nccl->shard);
  if (nccl->replicate) (void)ncclCommAbort(nccl->replicate);
  nccl->shard = nccl->replicate = NULL;
}

#else /* without NCCL: no communicators, every group on MPI */

FSDPErrorCode CommNCCLSetUp(Device d, MPI_Comm comm, MPI_Comm shard_comm, MPI_Comm replicate_comm, bool replicate_nccl,
                            double timeout, char *why, size_t len, CommNCCL *nccl)
{
  int fsize;
  (void)d;
  (void)comm;
  (void)replicate_comm;
  (void)replicate_nccl;
  (void)timeout;
  why[0] = '\0';
  *nccl = NULL;
  FSDPCallMPI(MPI_Comm_size(shard_comm, &fsize));
  if (fsize > 1)
    snprintf(why, len, "this libfsdp was built without NCCL: collectives go through MPI with host staging");
  return FSDP_SUCCESS;
}

void *CommNCCLGet(CommNCCL nccl, bool shard)
{
  (void)nccl;
  (void)shard;
  return NULL;
}

FSDPErrorCode CommNCCLDestroy(CommNCCL *nccl)
{
  *nccl = NULL;
  return FSDP_SUCCESS;
}

FSDPErrorCode CommNCCLLaunch(CommNCCL nccl, Device d, const CommOp *op, void *ready, void *done)
{
  (void)nccl;
  (void)d;
  (void)op;
  (void)ready;
  (void)done;
  FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "a NCCL collective in a build without NCCL");
}

bool CommNCCLFailed(CommNCCL nccl, char *msg, size_t len)
{
  (void)nccl;
  (void)msg;
  (void)len;
  return false;
}

void CommNCCLAbort(CommNCCL nccl) { (void)nccl; }

#endif /* FSDP_HAVE_NCCL */
