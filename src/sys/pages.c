/* Whole pages: memory the library maps itself, and moving bytes between two
   buffers by exchanging their pages instead of copying them.  A checkpoint
   load reads a unit into staging, verifies it, and only then installs it;
   installing by exchanging pages keeps the shard's address (FlatParamGetShard
   says it is valid from SetUp on) and costs page-table updates instead of a
   pass over memory. */
#define _GNU_SOURCE /* mremap */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/mman.h>
#include <sys/syscall.h>
#endif

#include "fsdpimpl.h"

#if defined(__linux__) && !defined(MREMAP_DONTUNMAP)
#define MREMAP_DONTUNMAP 4 /* Linux 5.7; glibc names it from 2.32 */
#endif

/* About where a copy takes as long as the five system calls of an exchange. */
#define EXCHANGE_MIN_BYTES (128 * 1024)

size_t FSDPPageSize_Private(void)
{
  static size_t page;
  if (!page) {
    long p = sysconf(_SC_PAGESIZE);
    page = p > 0 ? (size_t)p : 4096;
  }
  return page;
}

FSDPErrorCode FSDPPagesAlloc_Private(size_t bytes, FSDPMemCategory category, void *ptr)
{
  void *p = NULL;
  memset(ptr, 0, sizeof p);
#ifdef __linux__
  p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) p = NULL;
  FSDPCheck(p, MPI_COMM_SELF, FSDP_ERR_MEM, "out of memory mapping %zu bytes of %s", bytes,
            FSDPMemCategoryName(category));
  /* Fresh pages fault in as they are first written; 2 MB ones fault 512
     times less often (a load's first unit: 20 ms instead of 32 for 50 MB).
     Only a hint: where transparent huge pages are off, nothing changes. */
  (void)madvise(p, bytes, MADV_HUGEPAGE);
  FSDPMemoryCount_Private(category, bytes, false);
#else
  FSDPCall(FSDPMalloc(bytes, category, &p));
#endif
  memcpy(ptr, &p, sizeof p);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPPagesFree_Private(void *ptr, size_t bytes, FSDPMemCategory category)
{
  void *p;
  memcpy(&p, ptr, sizeof p);
  if (!p) return FSDP_SUCCESS;
#ifdef __linux__
  memset(ptr, 0, sizeof p);
  FSDPMemoryCount_Private(category, bytes, true);
  FSDPCheck(munmap(p, bytes ? bytes : 1) == 0, MPI_COMM_SELF, FSDP_ERR_MEM, "cannot unmap %zu bytes of %s at %p", bytes,
            FSDPMemCategoryName(category), p);
#else
  (void)bytes;
  (void)category;
  FSDPCall(FSDPFree(ptr));
#endif
  return FSDP_SUCCESS;
}

#ifdef __linux__
/* One move of n bytes of pages, made by the system call itself: an MPI's
   memory hooks stand in for libc's mremap, and UCX 1.13's does not pass the
   fifth argument on (the kernel then sees a new address of 0 or garbage).
   keep: MREMAP_DONTUNMAP, which leaves the source mapped, and empty. */
static bool move_pages(void *from, size_t n, void *to, bool keep)
{
  return syscall(SYS_mremap, from, n, n, MREMAP_MAYMOVE | MREMAP_FIXED | (keep ? MREMAP_DONTUNMAP : 0), to) != -1;
}

/* The pages of [a, a+n) and [b, b+n) change places through a scratch
   mapping: b's to it, a's to b, then its to a.  The first two leave their
   source mapped, so no address of a or b is ever unmapped and no other
   thread's mmap can land there.  The first move, the only one whose source
   may span regions that earlier exchanges made (which kernels before 6.17
   refuse), changes nothing when it fails.  False, then, or when the kernel
   cannot move this way at all (before Linux 5.7, or under valgrind, which
   ends the tries): nothing moved. */
static bool exchange_pages(char *a, char *b, size_t n)
{
  static _Atomic int unsupported;
  void *tmp;
  bool done = false;

  if (atomic_load(&unsupported)) return false;
  tmp = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (tmp == MAP_FAILED) return false;
  if (!move_pages(b, n, tmp, true)) {
    if (errno == EINVAL || errno == ENOSYS || errno == EPERM) atomic_store(&unsupported, 1);
  } else if (!move_pages(a, n, b, true)) {
    /* b is empty and tmp holds its pages: give them back.  These moves undo
       ones that just succeeded; if one fails anyway, bytes are lost, and
       going on would compute with zeros. */
    if (!move_pages(tmp, n, b, false)) abort();
  } else if (!move_pages(tmp, n, a, false)) {
    if (!move_pages(b, n, a, false) || !move_pages(tmp, n, b, false)) abort();
  } else done = true;
  (void)munmap(tmp, n);
  if (done) {
    /* Other pages now back both ranges.  An MPI that pinned the old ones for
       RDMA (a registration cache) must forget them: a move of each range to
       where it is, through libc, is what the memory hooks of UCX, libfabric
       and Open MPI watch, and the kernel does nothing. */
    (void)mremap(a, n, n, 0);
    (void)mremap(b, n, n, 0);
  }
  return done;
}
#endif

/* dst takes src's n bytes; what src holds after is unspecified.  The whole
   pages of dst are exchanged with src's where both buffers sit at the same
   offset within a page, are private memory of this process (not a mapping
   shared with another), and nothing else uses them meanwhile; the partial
   pages at the ends are copied. */
void FSDPTakeBytes_Private(void *dst, void *src, size_t n)
{
#ifdef __linux__
  size_t page = FSDPPageSize_Private();
  uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
  uintptr_t first = (d + page - 1) & ~(uintptr_t)(page - 1), last = (d + n) & ~(uintptr_t)(page - 1);
  if (n >= EXCHANGE_MIN_BYTES && (d - s) % page == 0 && last > first &&
      exchange_pages((char *)first, (char *)(s + (first - d)), last - first)) {
    memcpy(dst, src, first - d);
    memcpy((char *)last, (char *)(s + (last - d)), d + n - last);
    return;
  }
#endif
  memcpy(dst, src, n);
}
