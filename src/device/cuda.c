/* A context's GPU (deviceimpl.h): device choice, streams, events, NCCL
   communicators, pinned staging (doc/cuda.md).  Built without CUDA, only
   DeviceCreate_Private exists, and it says so. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "deviceimpl.h"

#ifndef FSDP_HAVE_CUDA

FSDPErrorCode DeviceCreate_Private(const char *busid, int local_rank, void *stream, Device *dev)
{
  (void)busid;
  (void)local_rank;
  (void)stream;
  *dev = NULL;
  FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_UNSUPPORTED,
            "-fsdp_device cuda: this libfsdp was built without CUDA (configure --with-cuda and --with-nccl)");
}
FSDPErrorCode DeviceDestroy_Private(Device *dev)
{
  *dev = NULL;
  return FSDP_SUCCESS;
}
FSDPErrorCode DeviceEnter_Private(Device dev)
{
  (void)dev;
  return FSDP_SUCCESS;
}
const char *DeviceDescribe_Private(Device dev)
{
  (void)dev;
  return "the host";
}
void *DeviceStream_Private(Device dev)
{
  (void)dev;
  return NULL;
}
int DeviceOrdinal_Private(Device dev)
{
  (void)dev;
  return -1;
}
void *DeviceNCCL_Private(Device dev, bool shard)
{
  (void)dev;
  (void)shard;
  return NULL;
}

/* Without CUDA no Device exists (DeviceCreate_Private fails), so nothing
   calls these; they are here for the linker. */
#define UNREACHABLE(name)                                                                                          FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "%s in a libfsdp built without CUDA", name)
FSDPErrorCode DeviceSetUpComm_Private(Device dev, MPI_Comm comm, MPI_Comm shard_comm, MPI_Comm replicate_comm,
                                      bool replicate_nccl, double timeout, char *why, size_t len)
{
  (void)dev, (void)comm, (void)shard_comm, (void)replicate_comm, (void)replicate_nccl, (void)timeout, (void)why;
  (void)len;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceReservePinned_Private(Device dev, size_t bytes)
{
  (void)dev, (void)bytes;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceScale_Private(Device dev, FSDPDataType dtype, void *x, int64_t n, double factor, bool check)
{
  (void)dev, (void)dtype, (void)x, (void)n, (void)factor, (void)check;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceSumSquares_Private(Device dev, FSDPDataType dtype, const void *x, int64_t n)
{
  (void)dev, (void)dtype, (void)x, (void)n;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceTakeReductions_Private(Device dev, bool *nonfinite, double *sumsq)
{
  (void)dev, (void)nonfinite, (void)sumsq;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceSGD_Private(Device dev, FSDPDataType dtype, void *p, const void *g, void *buf, int64_t n,
                                const DeviceHyper *h)
{
  (void)dev, (void)dtype, (void)p, (void)g, (void)buf, (void)n, (void)h;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceAdamW_Private(Device dev, FSDPDataType dtype, void *p, const void *g, void *m, void *v, int64_t n,
                                  const DeviceHyper *h)
{
  (void)dev, (void)dtype, (void)p, (void)g, (void)m, (void)v, (void)n, (void)h;
  UNREACHABLE(__func__);
}

bool DeviceHolds_Private(Device dev, const void *p)
{
  (void)dev, (void)p;
  return false;
}
FSDPErrorCode DeviceSynchronize_Private(Device dev)
{
  (void)dev;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceGemm_Private(Device dev, FSDPDataType ab, bool tf32, bool ta, bool tb, int64_t m, int64_t n,
                                 int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                                 float beta, float *c, int64_t ldc)
{
  (void)dev, (void)ab, (void)tf32, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
  (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceAddBias_Private(Device dev, int64_t n, int64_t out, const float *bias, float *y)
{
  (void)dev, (void)n, (void)out, (void)bias, (void)y;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceBiasGrad_Private(Device dev, int64_t n, int64_t out, const float *dy, float *dbias)
{
  (void)dev, (void)n, (void)out, (void)dy, (void)dbias;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceActivation_Private(Device dev, int act, bool backward, int64_t n, const float *x, const float *dy,
                                       float *out)
{
  (void)dev, (void)act, (void)backward, (void)n, (void)x, (void)dy, (void)out;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceLayerNormForward_Private(Device dev, int64_t n, int64_t h, const float *x, const float *weight,
                                             const float *bias, float *y, float *mean, float *rstd)
{
  (void)dev, (void)n, (void)h, (void)x, (void)weight, (void)bias, (void)y, (void)mean, (void)rstd;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceLayerNormBackward_Private(Device dev, int64_t n, int64_t h, const float *x, const float *weight,
                                              const float *mean, const float *rstd, const float *dy, float *dx,
                                              float *dweight, float *dbias)
{
  (void)dev, (void)n, (void)h, (void)x, (void)weight, (void)mean, (void)rstd, (void)dy, (void)dx, (void)dweight;
  (void)dbias;
  UNREACHABLE(__func__);
}
FSDPErrorCode DeviceLoss_Private(Device dev, bool cross_entropy, int64_t n, int64_t m, const float *y,
                                 const void *target, double scale, double *sum, int64_t *bad_row, float *dy)
{
  (void)dev, (void)cross_entropy, (void)n, (void)m, (void)y, (void)target, (void)scale, (void)sum, (void)bad_row;
  (void)dy;
  UNREACHABLE(__func__);
}

#else

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels.h"
#ifdef FSDP_HAVE_NCCL
#include <nccl.h>
#endif

struct Device_s {
  int ordinal;
  char busid[32], desc[sizeof((struct cudaDeviceProp *)0)->name + 64];
  cudaStream_t compute, comm;
  bool own_compute;
  cublasHandle_t blas; /* the layer library's GEMMs, on the compute stream; made at the first */
#ifdef FSDP_HAVE_NCCL
  ncclComm_t nccl_shard, nccl_replicate;
#endif
  void *pinned;
  size_t pinned_bytes;
  /* the optimizer's reductions: a flag (int) and a sum (double), in device memory */
  struct Scratch {
    double sum;
    int flag;
    unsigned long long bad_row; /* a loss's bad label: its row + 1 (the last such row), or 0 */
  } *scratch;
};

#ifdef FSDP_HAVE_NCCL
#define CHECK_NCCL(call, what)                                                                                   \
  do {                                                                                                           \
    ncclResult_t r_ = (call);                                                                                    \
    FSDPCheck(r_ == ncclSuccess, MPI_COMM_SELF, FSDP_ERR_NCCL, "%s: %s", what, ncclGetErrorString(r_));         \
  } while (0)
#endif

FSDPErrorCode DeviceCreate_Private(const char *busid, int local_rank, void *stream, Device *dev)
{
  Device d;
  int n = 0, ordinal = -1;
  cudaError_t e;
  struct cudaDeviceProp prop;

  *dev = NULL;
  e = cudaGetDeviceCount(&n);
  FSDPCheck(e == cudaSuccess && n > 0, MPI_COMM_SELF, FSDP_ERR_CUDA,
            "-fsdp_device cuda: no CUDA device is visible to this process (cudaGetDeviceCount: %s%s%s): run on a "
            "node with a GPU, check CUDA_VISIBLE_DEVICES, or use -fsdp_device host",
            e == cudaSuccess ? "0 devices" : cudaGetErrorString(e), e == cudaSuccess ? "" : ", ",
            e == cudaSuccess ? "" : cudaGetErrorName(e));
  /* hwloc's choice when CUDA sees it (CUDA_VISIBLE_DEVICES may hide it). */
  if (busid && cudaDeviceGetByPCIBusId(&ordinal, busid) != cudaSuccess) {
    (void)cudaGetLastError();
    ordinal = -1;
  }
  if (ordinal < 0) ordinal = local_rank % n;
  CHECK_CUDA(cudaSetDevice(ordinal), "cudaSetDevice");
  CHECK_CUDA(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  FSDPCall(FSDPCalloc(1, sizeof *d, FSDP_MEM_OTHER, &d));
  d->ordinal = ordinal;
  if (cudaDeviceGetPCIBusId(d->busid, (int)sizeof d->busid, ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(d->busid, sizeof d->busid, "?");
  }
  snprintf(d->desc, sizeof d->desc, "GPU %d (%s, %s)", ordinal, d->busid, prop.name);
  /* A stream of its own synchronizes with the legacy default stream, so
     that kernels launched without a stream are ordered with the runtime's. */
  if (stream) d->compute = (cudaStream_t)stream;
  else {
    e = cudaStreamCreate(&d->compute);
    d->own_compute = e == cudaSuccess;
  }
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&d->comm, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMalloc((void **)&d->scratch, sizeof *d->scratch);
  if (e == cudaSuccess) e = cudaMemset(d->scratch, 0, sizeof *d->scratch);
  if (e != cudaSuccess) {
    (void)DeviceDestroy_Private(&d);
    CHECK_CUDA(e, "creating the device's streams and scratch");
  }
  *dev = d;
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceEnter_Private(Device d)
{
  int current = -1;
  cudaError_t e;
  if (!d) return FSDP_SUCCESS;
  if (cudaGetDevice(&current) != cudaSuccess || current != d->ordinal)
    CHECK_CUDA(cudaSetDevice(d->ordinal), "cudaSetDevice to the context's GPU");
  /* The thread's last error may be the caller's unread launch error, or
     another GPU's: not this GPU's business.  A fault already seen on this
     GPU is returned by any call on it, such as a query of the stream. */
  (void)cudaGetLastError();
  e = cudaStreamQuery(d->compute);
  if (e == cudaErrorNotReady) (void)cudaGetLastError(); /* not an error: nothing must read it as one */
  else
    FSDPCheck(e == cudaSuccess, MPI_COMM_SELF, FSDP_ERR_CUDA,
              "the query of the compute stream on %s failed before any work of this call: %s (%s). Either "
              "earlier work faulted on the GPU (a kernel of the caller's or of libfsdp's), which leaves it unusable "
              "for the process, or the stream given to FSDPContextSetCUDAStream is no longer usable (destroyed, "
              "or being captured into a CUDA graph)",
              d->desc, cudaGetErrorString(e), cudaGetErrorName(e));
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceDestroy_Private(Device *dev)
{
  Device d = *dev;
  if (!d) return FSDP_SUCCESS;
  (void)DeviceEnter_Private(d); /* what is freed belongs to this GPU, error or not */
  if (d->comm) (void)cudaStreamSynchronize(d->comm);
  if (d->compute) (void)cudaStreamSynchronize(d->compute);
#ifdef FSDP_HAVE_NCCL
  if (d->nccl_shard) (void)ncclCommDestroy(d->nccl_shard);
  if (d->nccl_replicate) (void)ncclCommDestroy(d->nccl_replicate);
#endif
  if (d->pinned) {
    (void)cudaFreeHost(d->pinned);
    FSDPDeviceMemoryCount_Private(FSDP_MEM_COMM_STAGING, d->pinned_bytes, true);
  }
  if (d->blas) (void)cublasDestroy(d->blas);
  if (d->scratch) (void)cudaFree(d->scratch);
  if (d->comm) (void)cudaStreamDestroy(d->comm);
  if (d->own_compute) (void)cudaStreamDestroy(d->compute);
  FSDPCall(FSDPFree(dev));
  return FSDP_SUCCESS;
}

const char *DeviceDescribe_Private(Device dev) { return dev ? dev->desc : "the host"; }
int DeviceOrdinal_Private(Device dev) { return dev ? dev->ordinal : -1; }
void *DeviceStream_Private(Device dev) { return dev ? (void *)dev->compute : NULL; }

#ifdef FSDP_HAVE_NCCL
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
  snprintf(mine + MPI_MAX_PROCESSOR_NAME, 32, "%s", d->busid);
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
   NCCL's blocking init has no way out: a thread watches the call and aborts
   the job once it has run `timeout` seconds.  It calls MPI_Abort while the
   rank's own thread is inside NCCL, never MPI: with MPI_THREAD_MULTIPLE (what
   FSDPInitialize asks for) that is MPI's rule; below it, it is outside the
   standard but what MPICH and Open MPI do. */
typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t finished;
  bool done;
  double timeout;
  MPI_Comm abort_comm;
  const char *group;
} InitWatch;

static void *watch_init(void *arg)
{
  InitWatch *w = arg;
  struct timespec until, now;
  double wait = w->timeout < 1e8 ? w->timeout : 1e8; /* ~3 years: time_t cannot overflow */
  bool overdue;
  clock_gettime(CLOCK_MONOTONIC, &until); /* the condition's clock: a step of the wall clock changes nothing */
  until.tv_sec += (time_t)wait;
  until.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&w->lock);
  while (!w->done) {
    int rc = pthread_cond_timedwait(&w->finished, &w->lock, &until);
    if (rc && rc != EINTR) break; /* ETIMEDOUT, or a wait that cannot work: no watch rather than a spin */
  }
  overdue = !w->done && clock_gettime(CLOCK_MONOTONIC, &now) == 0 &&
            (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec));
  pthread_mutex_unlock(&w->lock);
  if (overdue) {
    int rank = -1;
    MPI_Comm_rank(w->abort_comm, &rank);
    fprintf(stderr,
            "[%d] libfsdp watchdog: ncclCommInitRank of the %s group has not completed after %g s "
            "(-fsdp_collective_timeout) in FSDPContextSetUp; another rank of the group failed before or inside it "
            "(see its message), or never called it. Aborting the job.\n",
            rank, w->group, w->timeout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, FSDP_ERR_TIMEOUT); /* another communicator would end this process alone */
  }
  return NULL;
}

/* The unique id travels with rank 0's status, so that a failure there
   stops every rank instead of leaving them in the broadcast. */
static FSDPErrorCode nccl_comm(MPI_Comm comm, const char *group, double timeout, MPI_Comm abort_comm, ncclComm_t *nccl)
{
  struct {
    ncclUniqueId id;
    int status;
  } root;
  InitWatch w = {.done = false, .timeout = timeout, .abort_comm = abort_comm, .group = group};
  pthread_t watcher;
  bool watching = false;
  ncclResult_t r;
  int rank, size;
  FSDPCallMPI(MPI_Comm_rank(comm, &rank));
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  memset(&root, 0, sizeof root);
  if (rank == 0) root.status = (int)ncclGetUniqueId(&root.id);
  FSDPCallMPI(MPI_Bcast(&root, (int)sizeof root, MPI_BYTE, 0, comm));
  FSDPCheck(root.status == ncclSuccess, MPI_COMM_SELF, FSDP_ERR_NCCL, "ncclGetUniqueId on rank 0 of the %s group: %s",
            group, ncclGetErrorString((ncclResult_t)root.status));
  if (timeout > 0) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.finished, &attr);
    pthread_condattr_destroy(&attr);
    watching = pthread_create(&watcher, NULL, watch_init, &w) == 0;
    if (!watching) {
      pthread_cond_destroy(&w.finished);
      pthread_mutex_destroy(&w.lock);
    }
  }
  r = ncclCommInitRank(nccl, size, root.id, rank);
  if (watching) {
    pthread_mutex_lock(&w.lock);
    w.done = true;
    pthread_cond_signal(&w.finished);
    pthread_mutex_unlock(&w.lock);
    pthread_join(watcher, NULL);
    pthread_cond_destroy(&w.finished);
    pthread_mutex_destroy(&w.lock);
  }
  FSDPCheck(r == ncclSuccess, MPI_COMM_SELF, FSDP_ERR_NCCL, "ncclCommInitRank of the %s group (rank %d of %d): %s",
            group, rank, size, ncclGetErrorString(r));
  return FSDP_SUCCESS;
}
#endif

FSDPErrorCode DeviceSetUpComm_Private(Device d, MPI_Comm comm, MPI_Comm shard_comm, MPI_Comm replicate_comm,
                                      bool replicate_nccl, double timeout, char *why, size_t len)
{
  bool shared = false;
  int fsize, rsize;
  why[0] = '\0';
  FSDPCallMPI(MPI_Comm_size(shard_comm, &fsize));
  FSDPCallMPI(MPI_Comm_size(replicate_comm, &rsize));
#ifdef FSDP_HAVE_NCCL
  FSDPErrorCode ierr = FSDP_SUCCESS;
  if (fsize > 1) {
    ierr = shares_gpu(d, shard_comm, "shard", &shared, why, len);
    if (!ierr && !shared) ierr = nccl_comm(shard_comm, "shard", timeout, comm, &d->nccl_shard);
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
    if (!ierr && !flags[1] && !shared) ierr = nccl_comm(replicate_comm, "replicate", timeout, comm, &d->nccl_replicate);
  }
  if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
#else
  (void)comm;
  (void)replicate_nccl;
  (void)timeout;
  if (fsize > 1) snprintf(why, len, "this libfsdp was built without NCCL: collectives go through MPI with host staging");
  (void)shared;
  (void)d;
#endif
  return FSDP_SUCCESS;
}

void *DeviceNCCL_Private(Device d, bool shard)
{
#ifdef FSDP_HAVE_NCCL
  if (d) return shard ? (void *)d->nccl_shard : (void *)d->nccl_replicate;
#else
  (void)d;
  (void)shard;
#endif
  return NULL;
}

FSDPErrorCode DeviceReservePinned_Private(Device d, size_t bytes)
{
  if (bytes <= d->pinned_bytes) return FSDP_SUCCESS;
  if (d->pinned) {
    CHECK_CUDA(cudaFreeHost(d->pinned), "cudaFreeHost");
    FSDPDeviceMemoryCount_Private(FSDP_MEM_COMM_STAGING, d->pinned_bytes, true);
    d->pinned = NULL;
    d->pinned_bytes = 0;
  }
  {
    cudaError_t e = cudaMallocHost(&d->pinned, bytes);
    FSDPCheck(e == cudaSuccess, MPI_COMM_SELF, FSDP_ERR_MEM, "cudaMallocHost of %zu bytes of pinned staging: %s",
              bytes, cudaGetErrorString(e));
  }
  d->pinned_bytes = bytes;
  FSDPDeviceMemoryCount_Private(FSDP_MEM_COMM_STAGING, bytes, false);
  return FSDP_SUCCESS;
}

void *DevicePinned_Private(Device d) { return d->pinned; }

/* ------------------------------------------------------------------ the optimizer's passes */

FSDPErrorCode DeviceScale_Private(Device d, FSDPDataType dtype, void *x, int64_t n, double factor, bool check)
{
  CHECK_CUDA((cudaError_t)FSDPKernelScale((int)dtype, x, n, factor, check ? &d->scratch->flag : NULL, d->compute),
             "the scaling kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceSumSquares_Private(Device d, FSDPDataType dtype, const void *x, int64_t n)
{
  CHECK_CUDA((cudaError_t)FSDPKernelSumSquares((int)dtype, x, n, &d->scratch->sum, d->compute),
             "the sum-of-squares kernel");
  return FSDP_SUCCESS;
}

/* The scratch's values once the compute stream reaches this point; the scratch is then zero again. */
static FSDPErrorCode take_scratch(Device d, struct Scratch *got)
{
  CHECK_CUDA(cudaMemcpyAsync(got, d->scratch, sizeof *got, cudaMemcpyDeviceToHost, d->compute),
             "cudaMemcpyAsync of the device's reductions");
  CHECK_CUDA(cudaMemsetAsync(d->scratch, 0, sizeof *d->scratch, d->compute), "cudaMemsetAsync");
  CHECK_CUDA(cudaStreamSynchronize(d->compute), "cudaStreamSynchronize after the device's reductions");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceTakeReductions_Private(Device d, bool *nonfinite, double *sumsq)
{
  struct Scratch got;
  FSDPCall(take_scratch(d, &got));
  if (nonfinite) *nonfinite = got.flag != 0;
  if (sumsq) *sumsq = got.sum;
  return FSDP_SUCCESS;
}

static FSDPKernelHyper kernel_hyper(const DeviceHyper *h)
{
  FSDPKernelHyper k = {h->lr, h->weight_decay, h->momentum, h->beta1, h->beta2, h->eps, h->step_size, h->bc2_sqrt,
                       h->nesterov, h->first};
  return k;
}

FSDPErrorCode DeviceSGD_Private(Device d, FSDPDataType dtype, void *p, const void *g, void *buf, int64_t n,
                                const DeviceHyper *h)
{
  FSDPKernelHyper k = kernel_hyper(h);
  CHECK_CUDA((cudaError_t)FSDPKernelSGD((int)dtype, p, g, buf, n, &k, d->compute), "the SGD kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceAdamW_Private(Device d, FSDPDataType dtype, void *p, const void *g, void *m, void *v, int64_t n,
                                  const DeviceHyper *h)
{
  FSDPKernelHyper k = kernel_hyper(h);
  CHECK_CUDA((cudaError_t)FSDPKernelAdamW((int)dtype, p, g, m, v, n, &k, d->compute), "the AdamW kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceSynchronize_Private(Device d)
{
  CHECK_CUDA(cudaStreamSynchronize(d->compute), "cudaStreamSynchronize of the compute stream");
  CHECK_CUDA(cudaStreamSynchronize(d->comm), "cudaStreamSynchronize of the communication stream");
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ the layer library */

bool DeviceHolds_Private(Device d, const void *p)
{
  struct cudaPointerAttributes at;
  (void)d;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* not an error to keep: p is simply not CUDA's */
    return false;
  }
  return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
}

FSDPErrorCode DeviceGemm_Private(Device d, FSDPDataType ab, bool tf32, bool ta, bool tb, int64_t m, int64_t n,
                                 int64_t k, float alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                                 float beta, float *c, int64_t ldc)
{
  cudaDataType_t t = ab == FSDP_BFLOAT16 ? CUDA_R_16BF : ab == FSDP_FLOAT16 ? CUDA_R_16F : CUDA_R_32F;
  cublasComputeType_t compute = ab == FSDP_FLOAT32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  if (m == 0 || n == 0) return FSDP_SUCCESS;
  if (!d->blas) { /* cuBLAS's memory only for contexts that multiply */
    st = cublasCreate(&d->blas);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetStream(d->blas, d->compute);
    FSDPCheck(st == CUBLAS_STATUS_SUCCESS, MPI_COMM_SELF, FSDP_ERR_CUDA, "cublasCreate on %s: %s", d->desc,
              cublasGetStatusString(st));
  }
  FSDPCheck(k > 0 && m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX, MPI_COMM_SELF, FSDP_ERR_INTERNAL,
            "DeviceGemm: m %lld, n %lld, k %lld", (long long)m, (long long)n, (long long)k);
  /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands. */
  st = cublasGemmEx(d->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m, (int)k,
                    &alpha, b, t, (int)ldb, a, t, (int)lda, &beta, c, CUDA_R_32F, (int)ldc, compute, CUBLAS_GEMM_DEFAULT);
  FSDPCheck(st == CUBLAS_STATUS_SUCCESS, MPI_COMM_SELF, FSDP_ERR_CUDA,
            "cublasGemmEx (%s inputs, m %lld, n %lld, k %lld) on %s: %s", FSDPDataTypeName(ab), (long long)m,
            (long long)n, (long long)k, d->desc, cublasGetStatusString(st));
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceAddBias_Private(Device d, int64_t n, int64_t out, const float *bias, float *y)
{
  CHECK_CUDA((cudaError_t)FSDPKernelAddBias(n, out, bias, y, d->compute), "the bias kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceBiasGrad_Private(Device d, int64_t n, int64_t out, const float *dy, float *dbias)
{
  CHECK_CUDA((cudaError_t)FSDPKernelBiasGrad(n, out, dy, dbias, d->compute), "the bias gradient kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceActivation_Private(Device d, int act, bool backward, int64_t n, const float *x, const float *dy,
                                       float *out)
{
  CHECK_CUDA((cudaError_t)FSDPKernelActivation(act, backward, n, x, dy, out, d->compute), "the activation kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceLayerNormForward_Private(Device d, int64_t n, int64_t h, const float *x, const float *weight,
                                             const float *bias, float *y, float *mean, float *rstd)
{
  CHECK_CUDA((cudaError_t)FSDPKernelLayerNormForward(n, h, x, weight, bias, y, mean, rstd, d->compute),
             "the LayerNorm kernel");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceLayerNormBackward_Private(Device d, int64_t n, int64_t h, const float *x, const float *weight,
                                              const float *mean, const float *rstd, const float *dy, float *dx,
                                              float *dweight, float *dbias)
{
  CHECK_CUDA((cudaError_t)FSDPKernelLayerNormBackward(n, h, x, weight, mean, rstd, dy, dx, dweight, dbias, d->compute),
             "the LayerNorm backward kernels");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceLoss_Private(Device d, bool cross_entropy, int64_t n, int64_t m, const float *y,
                                 const void *target, double scale, double *sum, int64_t *bad_row, float *dy)
{
  struct Scratch got;
  if (cross_entropy)
    CHECK_CUDA((cudaError_t)FSDPKernelCrossEntropyLoss(n, m, y, (const int64_t *)target, scale, &d->scratch->sum,
                                                       &d->scratch->bad_row, dy, d->compute),
               "the cross-entropy kernel");
  else
    CHECK_CUDA((cudaError_t)FSDPKernelMSELoss(n * m, y, (const float *)target, scale, &d->scratch->sum, dy, d->compute),
               "the MSE kernel");
  FSDPCall(take_scratch(d, &got));
  *sum = got.sum;
  *bad_row = (int64_t)got.bad_row - 1;
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ the communication stream */

FSDPErrorCode DeviceEventCreate_Private(Device d, void **event)
{
  cudaEvent_t ev;
  (void)d;
  CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  *event = (void *)ev;
  return FSDP_SUCCESS;
}

void DeviceEventDestroy_Private(void *event)
{
  if (event) (void)cudaEventDestroy((cudaEvent_t)event);
}

FSDPErrorCode DeviceMarkReady_Private(Device d, void *ready)
{
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)ready, d->compute), "cudaEventRecord on the compute stream");
  return FSDP_SUCCESS;
}

#ifdef FSDP_HAVE_NCCL
static ncclDataType_t nccl_type(FSDPDataType t)
{
  switch (t) {
  case FSDP_FLOAT64: return ncclFloat64;
  case FSDP_BFLOAT16: return ncclBfloat16;
  case FSDP_FLOAT16: return ncclFloat16;
  default: return ncclFloat32;
  }
}
#endif

FSDPErrorCode DeviceLaunchNCCL_Private(Device d, const DeviceCollective *c, void *ready, void *done)
{
#ifdef FSDP_HAVE_NCCL
  ncclComm_t comm = (ncclComm_t)c->nccl;
  ncclDataType_t t = nccl_type(c->dtype);
  ncclResult_t r;
  CHECK_CUDA(cudaStreamWaitEvent(d->comm, (cudaEvent_t)ready, 0), "cudaStreamWaitEvent");
  switch (c->kind) {
  case 0: /* COMM_ALLGATHER; MPI_IN_PLACE: this rank's block of recv */
    if (c->send) r = ncclAllGather(c->send, c->recv, c->count, t, comm, d->comm);
    else {
      int rank;
      CHECK_NCCL(ncclCommUserRank(comm, &rank), "ncclCommUserRank");
      r = ncclAllGather((char *)c->recv + (size_t)rank * c->count * FSDPDataTypeSize(c->dtype), c->recv, c->count, t,
                        comm, d->comm);
    }
    break;
  case 1: r = ncclReduceScatter(c->send, c->recv, c->count, t, ncclSum, comm, d->comm); break;
  default: r = ncclAllReduce(c->send ? c->send : c->recv, c->recv, c->count, t, ncclSum, comm, d->comm); break;
  }
  CHECK_NCCL(r, "NCCL collective");
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)done, d->comm), "cudaEventRecord on the communication stream");
  return FSDP_SUCCESS;
#else
  (void)d;
  (void)c;
  (void)ready;
  (void)done;
  FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "a NCCL collective in a build without NCCL");
#endif
}

FSDPErrorCode DeviceCommCopy_Private(Device d, void *dst, const void *src, size_t bytes, void *ready, void *done)
{
  if (ready) CHECK_CUDA(cudaStreamWaitEvent(d->comm, (cudaEvent_t)ready, 0), "cudaStreamWaitEvent");
  if (bytes) CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, d->comm), "cudaMemcpyAsync (staging)");
  CHECK_CUDA(cudaEventRecord((cudaEvent_t)done, d->comm), "cudaEventRecord on the communication stream");
  return FSDP_SUCCESS;
}

FSDPErrorCode DeviceEventDone_Private(void *event, bool *done)
{
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  *done = e == cudaSuccess;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError(); /* not an error: the next launch's check must not read it as one */
    return FSDP_SUCCESS;
  }
  CHECK_CUDA(e, "cudaEventQuery");
  return FSDP_SUCCESS;
}

int DeviceEventPoll_Private(void *event)
{
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaSuccess) return 1;
  (void)cudaGetLastError();
  return e == cudaErrorNotReady ? 0 : -1;
}

FSDPErrorCode DeviceComputeWaits_Private(Device d, void *done)
{
  CHECK_CUDA(cudaStreamWaitEvent(d->compute, (cudaEvent_t)done, 0), "cudaStreamWaitEvent on the compute stream");
  return FSDP_SUCCESS;
}

bool DeviceCommFailed_Private(Device d, char *msg, size_t len)
{
#ifdef FSDP_HAVE_NCCL
  ncclComm_t comms[2] = {d->nccl_shard, d->nccl_replicate};
  const char *names[2] = {"shard", "replicate"};
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
#else
  (void)d;
  (void)msg;
  (void)len;
#endif
  return false;
}

void DeviceCommAbort_Private(Device d)
{
#ifdef FSDP_HAVE_NCCL
  if (d->nccl_shard) (void)ncclCommAbort(d->nccl_shard);
  if (d->nccl_replicate) (void)ncclCommAbort(d->nccl_replicate);
  d->nccl_shard = d->nccl_replicate = NULL;
#else
  (void)d;
#endif
}

#endif /* FSDP_HAVE_CUDA */
