/* testutil.h: assertions and output capture for libfsdp's C tests. */
#ifndef FSDP_TESTUTIL_H
#define FSDP_TESTUTIL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsdp.h"

static inline int test_rank(void)
{
  int up = 0, down = 0, rank = -1;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/* A failed test takes the whole job down, so no rank waits for it forever. */
static inline void test_fail(void)
{
  int up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1);
}

#define TEST_ASSERT(cond, ...)                                                                                         \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      fprintf(stderr, "[%d] %s:%d: test failed: %s: ", test_rank(), __FILE__, __LINE__, #cond);                        \
      fprintf(stderr, __VA_ARGS__);                                                                                    \
      fprintf(stderr, "\n");                                                                                           \
      fflush(stderr);                                                                                                  \
      test_fail();                                                                                                     \
    }                                                                                                                  \
  } while (0)

/* Expect a call to return `code`. */
#define TEST_CODE(code, ...)                                                                                           \
  do {                                                                                                                 \
    FSDPErrorCode test_got_ = (__VA_ARGS__);                                                                           \
    TEST_ASSERT(test_got_ == (code), "%s returned %d (%s), expected %d (%s)", #__VA_ARGS__, (int)test_got_,            \
                FSDPGetErrorString(test_got_), (int)(code), FSDPGetErrorString(code));                                 \
  } while (0)

#define TEST_OK(...) TEST_CODE(FSDP_SUCCESS, __VA_ARGS__)

/* Expect the last error's message to contain `text`. */
#define TEST_MESSAGE_HAS(text)                                                                                         \
  do {                                                                                                                 \
    const char *test_msg_;                                                                                             \
    FSDPGetLastError(NULL, &test_msg_, NULL);                                                                          \
    TEST_ASSERT(strstr(test_msg_, text), "last error message '%s' does not contain '%s'", test_msg_, text);            \
  } while (0)

/* Redirect a file descriptor (1 or 2) of this process into a temporary file. */
typedef struct {
  int target, saved, fd;
} Capture;

static inline void capture_begin(Capture *c, int target)
{
  char path[256];
  const char *dir = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/fsdp-capture-XXXXXX", dir && *dir ? dir : "/tmp");
  fflush(stdout);
  fflush(stderr);
  c->target = target;
  c->fd = mkstemp(path);
  TEST_ASSERT(c->fd >= 0, "cannot create a capture file in %s", path);
  unlink(path);
  c->saved = dup(target);
  dup2(c->fd, target);
}

/* Restore the descriptor; returns what was written (free it). */
static inline char *capture_end(Capture *c)
{
  off_t len;
  char *text;
  fflush(stdout);
  fflush(stderr);
  dup2(c->saved, c->target);
  close(c->saved);
  len = lseek(c->fd, 0, SEEK_END);
  text = calloc((size_t)len + 1, 1);
  TEST_ASSERT(text, "out of memory");
  if (len > 0) TEST_ASSERT(pread(c->fd, text, (size_t)len, 0) == len, "cannot read the capture file");
  close(c->fd);
  return text;
}

static inline int count_occurrences(const char *text, const char *needle)
{
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

#endif
