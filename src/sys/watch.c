/* A watch on a call that has no way out once a peer went astray: NCCL's
   blocking communicator set-up, HDF5's collective I/O after one rank's write
   failed.  A thread waits for the call to finish; after `timeout` seconds it
   prints why and aborts the job, so that a failure somewhere ends the job
   with its message instead of leaving the others in the call forever.
   It calls MPI_Abort while the rank's own thread is inside another library
   (or inside MPI): with MPI_THREAD_MULTIPLE, what FSDPInitialize asks for,
   that is MPI's rule; below it, it is outside the standard but what MPICH and
   Open MPI do. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fsdpimpl.h"

struct FSDPWatch_s {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t finished;
  bool done;
  int rank; /* the world rank, known before: the thread makes no MPI call but the abort */
  double timeout;
  FSDPErrorCode code;
  char message[FSDP_MAX_MESSAGE + 200];
};

static void *watch(void *arg)
{
  FSDPWatch w = arg;
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
    fprintf(stderr, "[%d] libfsdp watchdog: %s. Aborting the job.\n", w->rank, w->message);
    fflush(stderr);
    FSDPAbortJob_Private(MPI_COMM_WORLD, w->code);
  }
  return NULL;
}

FSDPErrorCode FSDPWatchStart_Private(double timeout, FSDPErrorCode code, FSDPWatch *watch_out, const char *fmt, ...)
{
  pthread_condattr_t attr;
  FSDPWatch w;
  va_list ap;
  *watch_out = NULL;
  if (!(timeout > 0)) return FSDP_SUCCESS;
  FSDPCall(FSDPCalloc(1, sizeof *w, FSDP_MEM_OTHER, &w));
  w->timeout = timeout;
  w->code = code;
  w->rank = FSDPWorldRank_Private();
  va_start(ap, fmt);
  vsnprintf(w->message, sizeof w->message, fmt, ap);
  va_end(ap);
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->finished, &attr);
  pthread_condattr_destroy(&attr);
  if (pthread_create(&w->thread, NULL, watch, w)) { /* no thread, no watch: the call goes on unwatched */
    pthread_cond_destroy(&w->finished);
    pthread_mutex_destroy(&w->lock);
    FSDPCall(FSDPFree(&w));
    return FSDP_SUCCESS;
  }
  *watch_out = w;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPWatchStop_Private(FSDPWatch *watch_io)
{
  FSDPWatch w = *watch_io;
  if (!w) return FSDP_SUCCESS;
  pthread_mutex_lock(&w->lock);
  w->done = true;
  pthread_cond_signal(&w->finished);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->finished);
  pthread_mutex_destroy(&w->lock);
  FSDPCall(FSDPFree(watch_io));
  return FSDP_SUCCESS;
}
