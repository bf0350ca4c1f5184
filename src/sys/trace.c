/* -fsdp_log_trace FILE.json: every timed span of a run as Chrome trace
   events (Perfetto and chrome://tracing open them), one process per rank and
   two threads, "compute" (the events timed with Begin/End: each unit's
   forward and backward, GEMMs, waits for collectives, the optimizer) and
   "communication" (each collective, from its start to its end, on whatever
   engine runs it).  Spans are kept in memory (at most TRACE_MAX per rank)
   and written by rank 0 at FSDPFinalize. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fsdpimpl.h"

#define TRACE_MAX 200000
#define TRACE_NAME 48

typedef struct {
  char name[TRACE_NAME];
  int thread;
  double start, end;
  int64_t bytes;
} Span;

static struct {
  bool on;
  char path[1024];
  Span *spans;
  int n;
  int64_t dropped;
  pthread_mutex_t lock;
} trace = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool FSDPTraceOn_Private(void) { return trace.on; }

FSDPErrorCode FSDPTraceStart_Private(const char *path)
{
  FSDPCheck(strlen(path) < sizeof trace.path, MPI_COMM_SELF, FSDP_ERR_OPTION,
            "-fsdp_log_trace: the path has %zu characters, more than %zu", strlen(path), sizeof trace.path - 1);
  FSDPCall(FSDPMalloc(TRACE_MAX * sizeof *trace.spans, FSDP_MEM_OTHER, &trace.spans));
  snprintf(trace.path, sizeof trace.path, "%s", path);
  trace.n = 0;
  trace.dropped = 0;
  trace.on = true;
  FSDPCall(FSDPLogSetActive(true)); /* Begin/End time their events only while logging */
  return FSDP_SUCCESS;
}

void FSDPTraceSpan_Private(const char *name, int thread, double start, double end, int64_t bytes)
{
  if (!trace.on) return;
  pthread_mutex_lock(&trace.lock);
  if (trace.n < TRACE_MAX) {
    Span *s = &trace.spans[trace.n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->thread = thread;
    s->start = start;
    s->end = end;
    s->bytes = bytes;
  } else trace.dropped++;
  pthread_mutex_unlock(&trace.lock);
}

/* JSON strings: names are unit and event names; escape what JSON must. */
static void put_name(FILE *f, const char *s)
{
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

/* Collective on comm.  Clocks of different nodes differ: each rank's times
   are shifted by its clock's difference to rank 0's, read after a barrier. */
FSDPErrorCode FSDPTraceWrite_Private(MPI_Comm comm)
{
  int rank, size, *counts = NULL, *displs = NULL, total = 0, ok = 1;
  FSDPErrorCode ierr = FSDP_SUCCESS;
  double t0, origin;
  Span *all = NULL;
  FILE *f = NULL;

  if (!trace.on) return FSDP_SUCCESS;
  trace.on = false;
  FSDPCallMPI(MPI_Comm_rank(comm, &rank));
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  FSDPCallMPI(MPI_Barrier(comm));
  t0 = FSDPTime_Private();
  origin = t0;
  FSDPCallMPI(MPI_Bcast(&origin, 1, MPI_DOUBLE, 0, comm));
  for (int i = 0; i < trace.n; i++) { /* rank 0's clock, then microseconds from the first span */
    trace.spans[i].start += origin - t0;
    trace.spans[i].end += origin - t0;
  }
  /* Rank 0's allocations are agreed on before each gather: the other ranks must not wait in one it left. */
  if (rank == 0) {
    ierr = FSDPMalloc((size_t)size * sizeof *counts, FSDP_MEM_OTHER, &counts);
    if (!ierr) ierr = FSDPMalloc((size_t)size * sizeof *displs, FSDP_MEM_OTHER, &displs);
  }
  if ((ierr = FSDPErrorAgree_Private(comm, ierr))) goto cleanup;
  {
    int bytes = trace.n * (int)sizeof(Span);
    FSDPCallMPI(MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, comm));
  }
  if (rank == 0) {
    for (int r = 0; r < size; r++) {
      displs[r] = total;
      total += counts[r];
    }
    ierr = FSDPMalloc((size_t)total + 1, FSDP_MEM_OTHER, &all);
  }
  if ((ierr = FSDPErrorAgree_Private(comm, ierr))) goto cleanup;
  FSDPCallMPI(MPI_Gatherv(trace.spans, trace.n * (int)sizeof(Span), MPI_BYTE, all, counts, displs, MPI_BYTE, 0, comm));
  if (rank == 0) {
    double first = 1e300;
    int nspans = total / (int)sizeof(Span);
    for (int i = 0; i < nspans; i++)
      if (all[i].start < first) first = all[i].start;
    if ((f = fopen(trace.path, "w"))) {
      fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
      for (int r = 0; r < size; r++) {
        fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": \"rank %d\"}},\n", r,
                r);
        fprintf(
            f,
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"compute\"}},\n",
            r);
        fprintf(f,
                "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 1, \"args\": {\"name\": "
                "\"communication\"}},\n",
                r);
      }
      for (int r = 0, i = 0; r < size; r++)
        for (int k = 0; k < counts[r] / (int)sizeof(Span); k++, i++) {
          const Span *s = &all[i];
          fprintf(f, "{\"name\": ");
          put_name(f, s->name);
          fprintf(
              f,
              ", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"bytes\": %lld}},\n",
              r, s->thread, 1e6 * (s->start - first), 1e6 * (s->end - s->start), (long long)s->bytes);
        }
      fprintf(f, "{\"name\": \"trace_end\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": \"libfsdp\"}}\n]}\n");
      ok = fclose(f) == 0;
    } else ok = 0;
  }
  FSDPCallMPI(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));
  if (rank == 0) {
    FSDPCall(FSDPFree(&counts));
    FSDPCall(FSDPFree(&displs));
    FSDPCall(FSDPFree(&all));
  }
  if (trace.dropped && rank == 0)
    fprintf(stderr, "libfsdp WARNING: -fsdp_log_trace kept the first %d spans of rank 0; %lld more were dropped\n",
            TRACE_MAX, (long long)trace.dropped);
  FSDPCall(FSDPFree(&trace.spans));
  FSDPCheck(ok, comm, FSDP_ERR_IO, "-fsdp_log_trace: cannot write '%s'", trace.path);
  return FSDP_SUCCESS;
cleanup:
  (void)FSDPFree(&counts);
  (void)FSDPFree(&displs);
  (void)FSDPFree(&all);
  (void)FSDPFree(&trace.spans);
  return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
}
