/* The thread engine: a thread of the context's runs the queue with blocking
   collectives, so that MPI progresses while the computing thread computes.
   Needs MPI_THREAD_MULTIPLE (FSDPContextSetUp checks). */
#include <string.h>
#include <time.h>

#include "engine.h"

static void *thread_main(void *arg)
{
  CommStream s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->next_run > s->submitted && !s->quit) pthread_cond_wait(&s->work, &s->lock);
    if (s->next_run > s->submitted) break; /* quit with nothing left */
    Slot *sl = CommSlot(s, s->next_run);
    pthread_mutex_unlock(&s->lock);
    sl->start = FSDPTime_Private();
    int err = CommRun(s, &sl->op);
    double end = FSDPTime_Private();
    pthread_mutex_lock(&s->lock);
    sl->mpierr = err;
    sl->end = end;
    sl->done = true;
    CommAccount(s, sl);
    s->next_run++;
    pthread_cond_broadcast(&s->done);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static FSDPErrorCode thread_start(CommStream s)
{
  int err = pthread_create(&s->thread, NULL, thread_main, s);
  FSDPCheck(!err, MPI_COMM_SELF, FSDP_ERR_INTERNAL, "cannot start the communication thread: %s", strerror(err));
  s->have_thread = true;
  return FSDP_SUCCESS;
}

/* Stream.c signalled the thread when it queued the operation. */
static FSDPErrorCode thread_submit(CommStream s, Slot *sl)
{
  (void)s;
  (void)sl;
  return FSDP_SUCCESS;
}

static FSDPErrorCode thread_wait(CommStream s, Slot *sl)
{
  double t0 = FSDPTime_Private(), waited;
  bool blocked;
  char what[256];

  pthread_mutex_lock(&s->lock);
  blocked = !sl->done;
  if (blocked) (void)FSDPLogEventBegin(s->ev_wait);
  while (!sl->done) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 250000000L; /* look at the watchdog and for a signal 4 times a second */
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->done, &s->lock, &until);
    if (!sl->done && CommOverdue(s, t0, &waited)) {
      CommDescribe(CommSlot(s, s->next_run), what, sizeof what); /* the one the thread is stuck in */
      pthread_mutex_unlock(&s->lock);
      CommWatchdogFire(s, what, waited);
    }
  }
  pthread_mutex_unlock(&s->lock);
  CommWaitBlocked(s, blocked, t0);
  return FSDP_SUCCESS;
}

static void thread_stop(CommStream s)
{
  if (!s->have_thread) return;
  pthread_mutex_lock(&s->lock);
  s->quit = true;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->thread, NULL);
  s->have_thread = false;
}

const CommEngineOps CommEngineThread_Private = {
    .name = "thread", .start = thread_start, .submit = thread_submit, .wait = thread_wait, .stop = thread_stop};
