/* The tracked allocator: per-category current and peak bytes, counts,
   alignment, failures that name the size and category, and thread safety.
   mpitest: -n 1 */
#include <pthread.h>
#include <stdint.h>

#include "testutil.h"

static void *churn(void *arg)
{
  (void)arg;
  for (int i = 0; i < 1000; i++) {
    void *p;
    if (FSDPMalloc(100, FSDP_MEM_COMM_STAGING, &p) || FSDPFree(&p)) return (void *)1;
  }
  return NULL;
}

int main(int argc, char **argv)
{
  FSDPMemoryStats s0, s;
  float *params;
  double *grads;
  char *state, *fake;
  void *p, *null_ptr = NULL;
  pthread_t threads[2];

  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  TEST_OK(FSDPGetMemoryStats(&s0));

  TEST_OK(FSDPMalloc(1000 * sizeof(float), FSDP_MEM_PARAMS, &params));
  TEST_OK(FSDPMalloc(3000 * sizeof(double), FSDP_MEM_GRADS, &grads));
  TEST_OK(FSDPCalloc(10, 100, FSDP_MEM_OPTIM_STATE, &state));
  TEST_ASSERT((uintptr_t)params % 64 == 0 && (uintptr_t)grads % 64 == 0 && (uintptr_t)state % 64 == 0,
              "allocations must be 64-byte aligned");
  for (int i = 0; i < 1000; i++) TEST_ASSERT(state[i] == 0, "FSDPCalloc byte %d is %d", i, state[i]);
  params[999] = 1.0f; /* the whole block is usable (valgrind checks the bounds) */
  grads[2999] = 1.0;

  TEST_OK(FSDPGetMemoryStats(&s));
  TEST_ASSERT(s.current[FSDP_MEM_PARAMS] - s0.current[FSDP_MEM_PARAMS] == 4000, "params current %zu",
              s.current[FSDP_MEM_PARAMS]);
  TEST_ASSERT(s.current[FSDP_MEM_GRADS] - s0.current[FSDP_MEM_GRADS] == 24000, "grads current");
  TEST_ASSERT(s.current[FSDP_MEM_OPTIM_STATE] - s0.current[FSDP_MEM_OPTIM_STATE] == 1000, "state current");
  TEST_ASSERT(s.total_current - s0.total_current == 29000, "total current grew by %zu",
              s.total_current - s0.total_current);
  TEST_ASSERT(s.nallocs - s0.nallocs == 3 && s.nfrees == s0.nfrees, "3 allocations, no frees");
  TEST_ASSERT(s.peak[FSDP_MEM_GRADS] == 24000, "grads peak %zu", s.peak[FSDP_MEM_GRADS]);

  /* Freeing lowers current, not peak, and clears the pointer. */
  TEST_OK(FSDPFree(&grads));
  TEST_ASSERT(grads == NULL, "FSDPFree sets the pointer to NULL");
  TEST_OK(FSDPFree(&grads)); /* freeing NULL is fine */
  TEST_OK(FSDPGetMemoryStats(&s));
  TEST_ASSERT(s.current[FSDP_MEM_GRADS] == 0 && s.peak[FSDP_MEM_GRADS] == 24000, "grads current %zu peak %zu",
              s.current[FSDP_MEM_GRADS], s.peak[FSDP_MEM_GRADS]);
  TEST_ASSERT(s.total_peak >= s.total_current + 24000, "total peak keeps the freed gradients");
  TEST_ASSERT(s.nfrees - s0.nfrees == 1, "one free counted");
  TEST_OK(FSDPMemoryResetPeak());
  TEST_OK(FSDPGetMemoryStats(&s));
  TEST_ASSERT(s.peak[FSDP_MEM_GRADS] == 0 && s.total_peak == s.total_current, "peaks reset to current");

  /* Two threads allocating at once leave the counters balanced. */
  for (int t = 0; t < 2; t++) TEST_ASSERT(pthread_create(&threads[t], NULL, churn, NULL) == 0, "pthread_create");
  for (int t = 0; t < 2; t++) {
    void *ret;
    pthread_join(threads[t], &ret);
    TEST_ASSERT(ret == NULL, "thread %d failed to allocate", t);
  }
  TEST_OK(FSDPGetMemoryStats(&s0));
  TEST_ASSERT(s0.current[FSDP_MEM_COMM_STAGING] == 0 && s0.peak[FSDP_MEM_COMM_STAGING] >= 100 &&
                  s0.peak[FSDP_MEM_COMM_STAGING] <= 200,
              "staging current %zu peak %zu", s0.current[FSDP_MEM_COMM_STAGING], s0.peak[FSDP_MEM_COMM_STAGING]);
  TEST_ASSERT(s0.nallocs - s.nallocs == 2000 && s0.nfrees - s.nfrees == 2000, "2000 allocations and frees counted");

  /* Failures say how much, of what. */
  TEST_CODE(FSDP_ERR_MEM, FSDPMalloc((size_t)1 << 62, FSDP_MEM_UNSHARDED, &p));
  TEST_MESSAGE_HAS("out of memory allocating 4611686018427387904 bytes of unsharded buffers");
  TEST_ASSERT(p == NULL, "a failed allocation leaves NULL");
  TEST_CODE(FSDP_ERR_MEM, FSDPMalloc(SIZE_MAX - 8, FSDP_MEM_PARAMS, &p));
  TEST_MESSAGE_HAS("bytes of parameters: size overflows");
  TEST_CODE(FSDP_ERR_MEM, FSDPCalloc(SIZE_MAX / 2, 4, FSDP_MEM_OTHER, &p));
  TEST_MESSAGE_HAS("x 4 bytes of other: size overflows");
  TEST_CODE(FSDP_ERR_ARG, FSDPMalloc(8, (FSDPMemCategory)77, &p));
  TEST_MESSAGE_HAS("memory category 77");
  TEST_CODE(FSDP_ERR_ARG, FSDPMalloc(8, FSDP_MEM_OTHER, NULL));
  TEST_CODE(FSDP_ERR_ARG, FSDPFree(NULL));
  TEST_OK(FSDPFree(&null_ptr));
  /* A pointer that FSDPMalloc did not make (its header lies inside our own block). */
  fake = calloc(1, 256);
  p = fake + 128;
  TEST_CODE(FSDP_ERR_ARG, FSDPFree(&p));
  TEST_MESSAGE_HAS("was not allocated by FSDPMalloc");
  free(fake);

  TEST_ASSERT(strcmp(FSDPMemCategoryName(FSDP_MEM_OPTIM_STATE), "optimizer state") == 0, "category name");
  TEST_ASSERT(strcmp(FSDPMemCategoryName((FSDPMemCategory)-1), "unknown category") == 0, "bad category name");

  TEST_OK(FSDPFree(&params));
  TEST_OK(FSDPFree(&state));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_PRINT));
  TEST_OK(FSDPFinalize());
  return 0;
}
