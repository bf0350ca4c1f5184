/* Memory accounting: every byte the library allocates on the host goes through
   FSDPMalloc, tagged by category, so that -fsdp_log_view and the memory plan
   can say where memory went and a training step can be shown to allocate nothing. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fsdpimpl.h"

#define FSDP_ALIGNMENT 64
#define MAGIC_LIVE 0x66736470616c6976ULL /* "fsdpaliv" */
#define MAGIC_DEAD 0x6673647064656164ULL /* "fsdpdead" */

/* Sits in the FSDP_ALIGNMENT bytes before the user's pointer. */
typedef struct {
  uint64_t magic;
  size_t bytes;
  int category;
} BlockHeader;

_Static_assert(sizeof(BlockHeader) <= FSDP_ALIGNMENT, "block header must fit in the alignment pad");

/* Counters are atomic: the communication thread allocates too. */
static _Atomic size_t mem_current[FSDP_MEM_NUM_CATEGORIES];
static _Atomic size_t mem_peak[FSDP_MEM_NUM_CATEGORIES];
static _Atomic size_t mem_total_current, mem_total_peak;
static _Atomic uint64_t mem_nallocs, mem_nfrees;

static const char *const category_names[FSDP_MEM_NUM_CATEGORIES] = {
    [FSDP_MEM_PARAMS] = "parameters",
    [FSDP_MEM_GRADS] = "gradients",
    [FSDP_MEM_OPTIM_STATE] = "optimizer state",
    [FSDP_MEM_UNSHARDED] = "unsharded buffers",
    [FSDP_MEM_COMM_STAGING] = "communication staging",
    [FSDP_MEM_OTHER] = "other",
};

const char *FSDPMemCategoryName(FSDPMemCategory category)
{
  if ((int)category < 0 || category >= FSDP_MEM_NUM_CATEGORIES) return "unknown category";
  return category_names[category];
}

static void raise_peak(_Atomic size_t *peak, size_t now)
{
  size_t seen = atomic_load(peak);
  while (now > seen && !atomic_compare_exchange_weak(peak, &seen, now)) {
  }
}

FSDPErrorCode FSDPMalloc(size_t bytes, FSDPMemCategory category, void *ptr)
{
  void *raw = NULL, *user;
  BlockHeader *h;

  FSDPCheck(ptr, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPMalloc: ptr (address of the result) must not be NULL");
  FSDPCheck((int)category >= 0 && category < FSDP_MEM_NUM_CATEGORIES, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPMalloc: memory category %d is not an FSDPMemCategory", (int)category);
  memset(ptr, 0, sizeof(void *));
  FSDPCheck(bytes <= SIZE_MAX - FSDP_ALIGNMENT, MPI_COMM_SELF, FSDP_ERR_MEM,
            "cannot allocate %zu bytes of %s: size overflows", bytes, category_names[category]);
  if (posix_memalign(&raw, FSDP_ALIGNMENT, bytes + FSDP_ALIGNMENT) != 0) raw = NULL;
  FSDPCheck(raw, MPI_COMM_SELF, FSDP_ERR_MEM,
            "out of memory allocating %zu bytes of %s (this process already holds %zu bytes through libfsdp)", bytes,
            category_names[category], atomic_load(&mem_total_current));
  h = raw;
  h->magic = MAGIC_LIVE;
  h->bytes = bytes;
  h->category = (int)category;
  user = (char *)raw + FSDP_ALIGNMENT;
  raise_peak(&mem_peak[category], atomic_fetch_add(&mem_current[category], bytes) + bytes);
  raise_peak(&mem_total_peak, atomic_fetch_add(&mem_total_current, bytes) + bytes);
  atomic_fetch_add(&mem_nallocs, 1);
  memcpy(ptr, &user, sizeof user);
  return FSDP_SUCCESS;
}

void FSDPMemoryCount_Private(FSDPMemCategory category, size_t bytes, bool freed)
{
  if (freed) {
    atomic_fetch_sub(&mem_current[category], bytes);
    atomic_fetch_sub(&mem_total_current, bytes);
    return;
  }
  raise_peak(&mem_peak[category], atomic_fetch_add(&mem_current[category], bytes) + bytes);
  raise_peak(&mem_total_peak, atomic_fetch_add(&mem_total_current, bytes) + bytes);
}

FSDPErrorCode FSDPCalloc(size_t count, size_t size, FSDPMemCategory category, void *ptr)
{
  void *p;
  FSDPCheck(size == 0 || count <= SIZE_MAX / size, MPI_COMM_SELF, FSDP_ERR_MEM,
            "cannot allocate %zu x %zu bytes of %s: size overflows", count, size, FSDPMemCategoryName(category));
  FSDPCall(FSDPMalloc(count * size, category, &p));
  memset(p, 0, count * size);
  memcpy(ptr, &p, sizeof p);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPFree(void *ptr)
{
  void *user;
  BlockHeader *h;

  FSDPCheck(ptr, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPFree: ptr (address of the pointer to free) must not be NULL");
  memcpy(&user, ptr, sizeof user);
  if (!user) return FSDP_SUCCESS;
  h = (BlockHeader *)((char *)user - FSDP_ALIGNMENT);
  FSDPCheck(h->magic == MAGIC_LIVE, MPI_COMM_SELF, FSDP_ERR_ARG,
            "FSDPFree: %p was not allocated by FSDPMalloc, or was freed already", user);
  h->magic = MAGIC_DEAD;
  atomic_fetch_sub(&mem_current[h->category], h->bytes);
  atomic_fetch_sub(&mem_total_current, h->bytes);
  atomic_fetch_add(&mem_nfrees, 1);
  free(h);
  memset(ptr, 0, sizeof(void *));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPGetMemoryStats(FSDPMemoryStats *stats)
{
  FSDPCheck(stats, MPI_COMM_SELF, FSDP_ERR_ARG, "stats must not be NULL");
  for (int c = 0; c < FSDP_MEM_NUM_CATEGORIES; c++) {
    stats->current[c] = atomic_load(&mem_current[c]);
    stats->peak[c] = atomic_load(&mem_peak[c]);
  }
  stats->total_current = atomic_load(&mem_total_current);
  stats->total_peak = atomic_load(&mem_total_peak);
  stats->nallocs = atomic_load(&mem_nallocs);
  stats->nfrees = atomic_load(&mem_nfrees);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPMemoryResetPeak(void)
{
  for (int c = 0; c < FSDP_MEM_NUM_CATEGORIES; c++) atomic_store(&mem_peak[c], atomic_load(&mem_current[c]));
  atomic_store(&mem_total_peak, atomic_load(&mem_total_current));
  return FSDP_SUCCESS;
}

/* Device memory (src/device): counted apart from the host's. */
static _Atomic size_t dev_current[FSDP_MEM_NUM_CATEGORIES];
static _Atomic size_t dev_peak[FSDP_MEM_NUM_CATEGORIES];
static _Atomic size_t dev_total_current, dev_total_peak;
static _Atomic uint64_t dev_nallocs, dev_nfrees;

void FSDPDeviceMemoryCount_Private(FSDPMemCategory category, size_t bytes, bool freed)
{
  if (freed) {
    atomic_fetch_sub(&dev_current[category], bytes);
    atomic_fetch_sub(&dev_total_current, bytes);
    atomic_fetch_add(&dev_nfrees, 1);
    return;
  }
  raise_peak(&dev_peak[category], atomic_fetch_add(&dev_current[category], bytes) + bytes);
  raise_peak(&dev_total_peak, atomic_fetch_add(&dev_total_current, bytes) + bytes);
  atomic_fetch_add(&dev_nallocs, 1);
}

FSDPErrorCode FSDPGetDeviceMemoryStats(FSDPMemoryStats *stats)
{
  FSDPCheck(stats, MPI_COMM_SELF, FSDP_ERR_ARG, "stats must not be NULL");
  for (int c = 0; c < FSDP_MEM_NUM_CATEGORIES; c++) {
    stats->current[c] = atomic_load(&dev_current[c]);
    stats->peak[c] = atomic_load(&dev_peak[c]);
  }
  stats->total_current = atomic_load(&dev_total_current);
  stats->total_peak = atomic_load(&dev_total_peak);
  stats->nallocs = atomic_load(&dev_nallocs);
  stats->nfrees = atomic_load(&dev_nfrees);
  return FSDP_SUCCESS;
}

uint64_t FSDPHashBytes_Private(uint64_t h, const void *data, size_t n)
{
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

FSDPErrorCode FSDPStrdup(const char *s, char **copy)
{
  size_t n;
  FSDPCheck(s && copy, MPI_COMM_SELF, FSDP_ERR_ARG, "FSDPStrdup: NULL argument");
  n = strlen(s) + 1;
  FSDPCall(FSDPMalloc(n, FSDP_MEM_OTHER, copy));
  memcpy(*copy, s, n);
  return FSDP_SUCCESS;
}

/* Make room for `need` elements in *array (capacity *cap), doubling. */
FSDPErrorCode FSDPGrowArray_Private(void *array, size_t elemsize, int need, int *cap, FSDPMemCategory category)
{
  void *old, *grown;
  int newcap;

  if (need <= *cap) return FSDP_SUCCESS;
  newcap = *cap ? *cap : 8;
  while (newcap < need) newcap *= 2;
  memcpy(&old, array, sizeof old);
  FSDPCall(FSDPCalloc((size_t)newcap, elemsize, category, &grown));
  if (old) memcpy(grown, old, (size_t)*cap * elemsize);
  FSDPCall(FSDPFree(&old));
  memcpy(array, &grown, sizeof grown);
  *cap = newcap;
  return FSDP_SUCCESS;
}
