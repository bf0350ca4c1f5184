/* The shard group's fp32 reduce-scatter and all-gather through node shared
   memory (doc/overlap.md, "Collectives in shared memory").  When every rank
   of the group shares a node, the context's unsharded gradient buffers and
   its parameter shards (or, with views, its units' parameters) live in one
   MPI shared-memory window.  For a
   reduce-scatter a rank posts where its gradient starts in its segment and
   reads block r of every rank's gradient in place: one pass that reads the
   F blocks and writes the result, instead of MPI's copies into its own
   buffers and its reduction pass over them.  For an all-gather it posts its
   shard and copies every rank's shard from where it lies.

   An all-gather into a view (op->epoch > 0: a unit's parameters kept whole in
   the window, read by every rank of the group in place) copies only this
   rank's shard, into its place in the view, and then waits for every rank
   to have done so: no rank copies anything else.  Before that copy it waits
   until every rank has released the view's previous gather (`released`, a
   counter per view and rank): a peer may still be computing with it, and
   what this rank writes into its shard meanwhile, from its optimizer or
   its own code, reaches the view only here.

   Each rank has a cache line of flags in the window: `arrived` (the last
   operation whose buffer it posted, and `offset`, where that buffer is) and
   `done` (the last operation whose block it has summed).  An operation
   completes on a rank once every rank is done with it: only then may the
   rank write its gradient buffer again.  Operations on one CommShm run one
   at a time, in the same order on every rank; a buffer outside the window
   (a pool grown beyond the plan) makes every rank run that one through MPI,
   on a communicator of its own (engine.h).
   A peer's shard stays as posted until the all-gather completes everywhere,
   so a rank's optimizer step, which comes after its all-gathers, cannot
   change a shard a peer is still copying. */
#include <stdatomic.h>
#include <string.h>

#include "engine.h"
#include "simd.h"

typedef struct {
  _Atomic uint64_t arrived;
  _Atomic int64_t offset; /* of the posted buffer in the rank's segment; -1: not in it */
  _Atomic uint64_t done;  /* the last operation whose blocks this rank has read */
} ShmFlags;

#define FLAGS_BYTES 128         /* a cache line, or two adjacent, of its own */
#define FSDP_SHM_MAX_RANKS 1024 /* a node's ranks in one group, at most (more: MPI) */
_Static_assert(sizeof(ShmFlags) <= FLAGS_BYTES, "the flags fit their line");

struct CommShm_s {
  MPI_Win win;
  _Atomic uint64_t **released; /* [size][nviews]: the last gather of each view the rank is done reading */
  MPI_Comm fallback_comm;      /* the MPI fallbacks' own duplicate of the group's communicator */
  int rank, size;
  size_t bytes;              /* of this rank's data segment */
  char **segment;            /* [size], as mapped in this process */
  ShmFlags **flags;          /* [size] */
  _Atomic uint64_t seq;      /* operations started here (read by other threads) */
  _Atomic int64_t fallbacks; /* of those, the ones run through MPI (read by other threads) */
};

/* Frees what CommShmCreate allocated on this rank; the window is freed by
   the caller, collectively. */
static void free_local(CommShm *s)
{
  if (!*s) return;
  (void)FSDPFree(&(*s)->segment);
  (void)FSDPFree(&(*s)->flags);
  (void)FSDPFree(&(*s)->released);
  (void)FSDPFree(s);
}

FSDPErrorCode CommShmCreate(MPI_Comm comm, bool want, size_t bytes, int nviews, CommShm *shm)
{
  MPI_Comm node;
  int size, node_size, go[2], err = MPI_SUCCESS;
  MPI_Info info;
  CommShm s = NULL;
  char *base;
  FSDPErrorCode ierr;
  _Atomic uint64_t probe;
  size_t vbytes = ((size_t)(nviews > 0 ? nviews : 0) * sizeof probe + FLAGS_BYTES - 1) / FLAGS_BYTES * FLAGS_BYTES;

  *shm = NULL;
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  FSDPCallMPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  FSDPCallMPI(MPI_Comm_size(node, &node_size));
  FSDPCallMPI(MPI_Comm_free(&node));
  /* What this rank allocates comes first: every rank then agrees, in one
     collective, on whether all want a window and could prepare for it. */
  ierr = FSDPCalloc(1, sizeof *s, FSDP_MEM_OTHER, &s);
  if (!ierr) ierr = FSDPCalloc((size_t)size, sizeof *s->segment, FSDP_MEM_OTHER, &s->segment);
  if (!ierr) ierr = FSDPCalloc((size_t)size, sizeof *s->flags, FSDP_MEM_OTHER, &s->flags);
  if (!ierr) ierr = FSDPCalloc((size_t)size, sizeof *s->released, FSDP_MEM_OTHER, &s->released);
  /* The flags are shared between processes: only lock-free atomics are address-free. */
  go[0] = want && size > 1 && size <= FSDP_SHM_MAX_RANKS && node_size == size && atomic_is_lock_free(&probe);
  go[1] = ierr == FSDP_SUCCESS;
  err = MPI_Allreduce(MPI_IN_PLACE, go, 2, MPI_INT, MPI_LAND, comm);
  if (ierr || err || !go[0] || !go[1]) {
    free_local(&s);
    if (ierr) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
    FSDPCallMPI(err);
    FSDPCheck(go[1], MPI_COMM_SELF, FSDP_ERR_MEM,
              "another rank of the shard group could not allocate for the shared-memory window");
    return FSDP_SUCCESS;
  }
  FSDPCallMPI(MPI_Comm_rank(comm, &s->rank));
  s->size = size;
  s->bytes = bytes;
  s->win = MPI_WIN_NULL;
  s->fallback_comm = MPI_COMM_NULL;
  err = MPI_Comm_dup(comm, &s->fallback_comm);
  if (!err) err = MPI_Comm_set_errhandler(s->fallback_comm, MPI_ERRORS_RETURN);
  if (err) {
    if (s->fallback_comm != MPI_COMM_NULL) MPI_Comm_free(&s->fallback_comm);
    free_local(&s);
    FSDPCallMPI(err);
  }
  /* Each rank's segment in memory near it (first touch), not one block. */
  FSDPCallMPI(MPI_Info_create(&info));
  FSDPCallMPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
  err = MPI_Win_allocate_shared((MPI_Aint)(FLAGS_BYTES + vbytes + bytes), 1, info, comm, &base, &s->win);
  MPI_Info_free(&info);
  if (err) {
    MPI_Comm_free(&s->fallback_comm);
    free_local(&s);
    FSDPCallMPI(err);
  }
  for (int q = 0; q < size && !err; q++) {
    MPI_Aint qbytes;
    int unit;
    char *qbase = NULL;
    err = MPI_Win_shared_query(s->win, q, &qbytes, &unit, &qbase);
    s->flags[q] = (ShmFlags *)qbase;
    s->released[q] = (_Atomic uint64_t *)(qbase + FLAGS_BYTES);
    s->segment[q] = qbase + FLAGS_BYTES + vbytes;
  }
  if (!err) {
    atomic_store(&s->flags[s->rank]->arrived, 0);
    atomic_store(&s->flags[s->rank]->offset, -1);
    atomic_store(&s->flags[s->rank]->done, 0);
    for (int v = 0; v < nviews; v++) atomic_store(&s->released[s->rank][v], 0);
  }
  /* Agreed, and nobody reads a peer's flags before the peer has zeroed them. */
  go[0] = err == MPI_SUCCESS;
  {
    int e = MPI_Allreduce(MPI_IN_PLACE, go, 1, MPI_INT, MPI_LAND, comm);
    if (!go[0] || e) {
      (void)CommShmDestroy(&s);
      FSDPCallMPI(err ? err : e);
      FSDPCheck(0, MPI_COMM_SELF, FSDP_ERR_MPI,
                "another rank of the shard group could not map the shared-memory window");
    }
  }
  *shm = s;
  return FSDP_SUCCESS;
}

void *CommShmSegment(CommShm shm, int rank) { return shm->segment[rank]; }

FSDPErrorCode CommShmDestroy(CommShm *shm)
{
  CommShm s = *shm;
  if (!s) return FSDP_SUCCESS;
  if (s->win != MPI_WIN_NULL) FSDPCallMPI(MPI_Win_free(&s->win));
  if (s->fallback_comm != MPI_COMM_NULL) FSDPCallMPI(MPI_Comm_free(&s->fallback_comm));
  FSDPCall(FSDPFree(&s->segment));
  FSDPCall(FSDPFree(&s->flags));
  FSDPCall(FSDPFree(&s->released));
  FSDPCall(FSDPFree(shm));
  return FSDP_SUCCESS;
}

void CommShmRelease(CommShm shm, int view, uint64_t epoch)
{
  atomic_store_explicit(&shm->released[shm->rank][view], epoch, memory_order_release);
}

void CommShmGetCounts(CommShm shm, int64_t *ops, int64_t *fallbacks)
{
  *ops = (int64_t)atomic_load(&shm->seq);
  *fallbacks = atomic_load(&shm->fallbacks);
}

/* out[j] = a[j] + b[j], and out[j] += a[j]: the sum in rank order. */
FSDP_INLINE void sum2_body(int64_t n, const float *restrict a, const float *restrict b, float *restrict out)
{
  FSDP_SIMD_LOOP
  for (int64_t j = 0; j < n; j++) out[j] = a[j] + b[j];
}
FSDP_SIMD_KERNEL(sum2, (int64_t n, const float *restrict a, const float *restrict b, float *restrict out),
                 (n, a, b, out))
FSDP_INLINE void add_body(int64_t n, const float *restrict a, float *restrict out)
{
  FSDP_SIMD_LOOP
  for (int64_t j = 0; j < n; j++) out[j] += a[j];
}
FSDP_SIMD_KERNEL(add, (int64_t n, const float *restrict a, float *restrict out), (n, a, out))

/* out = block `rank` of every rank's posted buffer, summed in rank order,
   a chunk at a time so that the partial sums stay in cache.  Each chunk read
   is then zeroed while it is in cache: once every rank has summed, every
   posted gradient buffer holds zeros, and its owner need not zero it again
   before its next use (a pass over the buffer saved). */
#define CHUNK 4096
static void sum_blocks(CommShm s, const CommOp *op)
{
  float *out = op->recv;
  int64_t count = op->count;
  for (int64_t j0 = 0; j0 < count; j0 += CHUNK) {
    int64_t m = count - j0 < CHUNK ? count - j0 : CHUNK;
    float *src[FSDP_SHM_MAX_RANKS];
    for (int q = 0; q < s->size; q++)
      src[q] = (float *)(s->segment[q] + atomic_load_explicit(&s->flags[q]->offset, memory_order_relaxed)) +
               (int64_t)s->rank * count + j0;
    sum2(m, src[0], src[1], out + j0);
    for (int q = 2; q < s->size; q++) add(m, src[q], out + j0);
    for (int q = 0; q < s->size; q++) memset(src[q], 0, (size_t)m * sizeof(float));
  }
}

/* recv = every rank's posted block, in rank order. */
static void gather_blocks(CommShm s, const CommOp *op)
{
  size_t bytes = (size_t)op->count * sizeof(float);
  for (int q = 0; q < s->size; q++)
    memcpy((char *)op->recv + (size_t)q * bytes,
           s->segment[q] + atomic_load_explicit(&s->flags[q]->offset, memory_order_relaxed), bytes);
}

int CommShmStart(const CommOp *op, CommShmState *st)
{
  CommShm s = op->shm;
  ShmFlags *mine = s->flags[s->rank];
  const char *send = op->send, *seg = s->segment[s->rank];
  /* A reduce-scatter posts the whole gradient, an all-gather its block. */
  size_t need = (size_t)op->count * (op->kind == COMM_REDUCE_SCATTER ? (size_t)s->size : 1) * sizeof(float);
  int64_t offset = send >= seg && send + need <= seg + s->bytes ? (int64_t)(send - seg) : -1;

  st->seq = ++s->seq;
  st->phase = SHM_POSTED;
  if (op->epoch) { /* posted once its block is in place (CommShmTest) */
    st->phase = SHM_RELEASING;
    return MPI_SUCCESS;
  }
  atomic_store_explicit(&mine->offset, offset, memory_order_relaxed);
  atomic_store_explicit(&mine->arrived, st->seq, memory_order_release);
  return MPI_SUCCESS;
}

static bool all_reached(CommShm s, bool done, uint64_t seq)
{
  for (int q = 0; q < s->size; q++) {
    ShmFlags *f = s->flags[q];
    if (atomic_load_explicit(done ? &f->done : &f->arrived, memory_order_acquire) < seq) return false;
  }
  return true;
}

/* An all-gather into a view: this rank's block into place once every rank
   has released the view's previous gather, then posted; done once every
   rank has posted (nothing is read through the flags, so a peer may go on
   to its next operation at once). */
static int view_test(const CommOp *op, CommShmState *st, int *flag)
{
  CommShm s = op->shm;
  size_t bytes = (size_t)op->count * sizeof(float);
  if (st->phase == SHM_RELEASING) {
    char *place = (char *)op->recv + (size_t)s->rank * bytes;
    for (int q = 0; q < s->size; q++)
      if (atomic_load_explicit(&s->released[q][op->view], memory_order_acquire) + 1 < op->epoch) return MPI_SUCCESS;
    if (place != op->send) memcpy(place, op->send, bytes);
    atomic_store_explicit(&s->flags[s->rank]->offset, -1, memory_order_relaxed);
    atomic_store_explicit(&s->flags[s->rank]->arrived, st->seq, memory_order_release);
    st->phase = SHM_POSTED;
  }
  if (all_reached(s, false, st->seq)) {
    atomic_store_explicit(&s->flags[s->rank]->done, st->seq, memory_order_release);
    *flag = 1;
  }
  return MPI_SUCCESS;
}

int CommShmTest(const CommOp *op, CommShmState *st, MPI_Request *fallback, int *flag)
{
  CommShm s = op->shm;
  int err = MPI_SUCCESS;
  *flag = 0;
  if (op->epoch) return view_test(op, st, flag);
  if (st->phase == SHM_POSTED && all_reached(s, false, st->seq)) {
    bool in_window = true;
    for (int q = 0; q < s->size; q++)
      if (atomic_load_explicit(&s->flags[q]->offset, memory_order_relaxed) < 0) in_window = false;
    if (in_window) {
      if (op->kind == COMM_REDUCE_SCATTER) sum_blocks(s, op);
      else gather_blocks(s, op);
      st->phase = SHM_READ;
    } else {
      /* Every rank sees the same offsets, and so takes this path too; on
         the CommShm's own communicator, as its moment depends on timing. */
      CommOp mpi = *op;
      mpi.comm = s->fallback_comm;
      err = CommStartNonblocking(&mpi, fallback);
      st->phase = SHM_MPI;
      atomic_fetch_add(&s->fallbacks, 1);
    }
    atomic_store_explicit(&s->flags[s->rank]->done, st->seq, memory_order_release);
    if (err) return err;
  }
  if (st->phase == SHM_READ && all_reached(s, true, st->seq)) {
    *flag = 1;
    if (op->kind == COMM_REDUCE_SCATTER && op->zeroed) *op->zeroed = true; /* every reader zeroed its block */
  }
  if (st->phase == SHM_MPI) err = MPI_Test(fallback, flag, MPI_STATUS_IGNORE);
  return err;
}
