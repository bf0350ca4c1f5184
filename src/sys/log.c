/* Event logging, the project's profiler: Begin/End pairs count calls, time and
   bytes; FSDPLogView reduces them over ranks into a -log_view style table.
   While logging is off, Begin and End return after one branch. */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "fsdpimpl.h"

#define FSDP_LOG_MAX_EVENTS 256
#define FSDP_LOG_NAME_LEN 64

typedef struct {
  char name[FSDP_LOG_NAME_LEN];
  int64_t count, bytes;
  double time;
  double begun_at; /* of the outermost open Begin */
  int depth;       /* open Begins; nested ones add calls, not time */
  int kind;        /* FSDP_LOG_KIND_*: what the communication summary adds up */
} LogEvent;

/* A fixed table: events never move, so a thread may time one event while
   another registers a new one.  Each event is begun and ended by one thread. */
static LogEvent log_events[FSDP_LOG_MAX_EVENTS];
static int log_nevents;
static bool log_active;
static double log_started_at;
static pthread_mutex_t log_register_lock = PTHREAD_MUTEX_INITIALIZER;

/* Seconds on a monotonic clock. */
static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double FSDPTime_Private(void) { return now(); }

FSDPErrorCode FSDPLogInitialize_Private(void)
{
  log_started_at = now();
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLogFinalize_Private(void)
{
  pthread_mutex_lock(&log_register_lock);
  memset(log_events, 0, sizeof log_events);
  log_nevents = 0;
  log_active = false;
  pthread_mutex_unlock(&log_register_lock);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLogEventRegister(const char *name, FSDPLogEvent *event)
{
  int found = -1;

  FSDPCheck(name && event, MPI_COMM_SELF, FSDP_ERR_ARG, "name and event must not be NULL");
  FSDPCheck(name[0] && strlen(name) < FSDP_LOG_NAME_LEN, MPI_COMM_SELF, FSDP_ERR_ARG,
            "event name '%s' must have 1 to %d characters", name, FSDP_LOG_NAME_LEN - 1);
  pthread_mutex_lock(&log_register_lock);
  for (int i = 0; i < log_nevents && found < 0; i++)
    if (strcmp(log_events[i].name, name) == 0) found = i;
  if (found < 0 && log_nevents < FSDP_LOG_MAX_EVENTS) {
    found = log_nevents++;
    memset(&log_events[found], 0, sizeof log_events[found]);
    memcpy(log_events[found].name, name, strlen(name) + 1);
  }
  pthread_mutex_unlock(&log_register_lock);
  FSDPCheck(found >= 0, MPI_COMM_SELF, FSDP_ERR_ARG, "cannot register event '%s': all %d event slots are taken", name,
            FSDP_LOG_MAX_EVENTS);
  *event = found;
  return FSDP_SUCCESS;
}

static FSDPErrorCode check_event(FSDPLogEvent event)
{
  FSDPCheck(event >= 0 && event < log_nevents, MPI_COMM_SELF, FSDP_ERR_ARG,
            "event %d is not registered (%d events are)", event, log_nevents);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLogEventBegin(FSDPLogEvent event)
{
  LogEvent *e;
  if (!log_active) return FSDP_SUCCESS;
  FSDPCall(check_event(event));
  e = &log_events[event];
  if (e->depth++ == 0) e->begun_at = now();
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLogEventEnd(FSDPLogEvent event, int64_t bytes)
{
  LogEvent *e;
  if (!log_active) return FSDP_SUCCESS;
  FSDPCall(check_event(event));
  e = &log_events[event];
  FSDPCheck(e->depth > 0, MPI_COMM_SELF, FSDP_ERR_STATE, "FSDPLogEventEnd(%s) without a matching FSDPLogEventBegin",
            e->name);
  if (--e->depth == 0) {
    double t = now();
    e->time += t - e->begun_at;
    FSDPTraceSpan_Private(e->name, 0, e->begun_at, t, bytes);
  }
  e->count++;
  e->bytes += bytes;
  return FSDP_SUCCESS;
}

/* The communication stream times collectives on its own thread and adds
   them here; the lock keeps two such threads from losing an update. */
FSDPErrorCode FSDPLogEventAdd_Private(FSDPLogEvent event, int64_t count, double time, int64_t bytes)
{
  if (!log_active) return FSDP_SUCCESS;
  FSDPCall(check_event(event));
  pthread_mutex_lock(&log_register_lock);
  log_events[event].count += count;
  log_events[event].time += time;
  log_events[event].bytes += bytes;
  pthread_mutex_unlock(&log_register_lock);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLogEventSetKind_Private(FSDPLogEvent event, int kind)
{
  FSDPCall(check_event(event));
  log_events[event].kind = kind;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLogEventGetInfo(FSDPLogEvent event, FSDPLogEventInfo *info)
{
  FSDPCheck(info, MPI_COMM_SELF, FSDP_ERR_ARG, "info must not be NULL");
  FSDPCall(check_event(event));
  pthread_mutex_lock(&log_register_lock); /* the communication thread adds to some events */
  info->count = log_events[event].count;
  info->time = log_events[event].time;
  info->bytes = log_events[event].bytes;
  pthread_mutex_unlock(&log_register_lock);
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLogSetActive(bool active)
{
  /* Switching drops half-open pairs, so an End after the switch is not an error. */
  for (int i = 0; i < log_nevents; i++) log_events[i].depth = 0;
  log_active = active;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLogGetActive(bool *active)
{
  FSDPCheck(active, MPI_COMM_SELF, FSDP_ERR_ARG, "active must not be NULL");
  *active = log_active;
  return FSDP_SUCCESS;
}

/* The union of event names over the communicator, in order of first appearance
   by rank, so ranks that registered different events still line up. */
static FSDPErrorCode gather_event_names(MPI_Comm comm, int *nunion, char (**names)[FSDP_LOG_NAME_LEN])
{
  int size, total = 0, n = 0, *counts = NULL, *displs, mine = log_nevents; /* once: another thread may register */
  char(*all)[FSDP_LOG_NAME_LEN] = NULL, (*u)[FSDP_LOG_NAME_LEN] = NULL;
  FSDPErrorCode ierr;

  FSDPCallMPI(MPI_Comm_size(comm, &size));
  /* Each allocation is agreed on before the collective that needs it: a rank
     that failed must not leave the others waiting in it. */
  ierr = FSDPErrorAgree_Private(comm, FSDPMalloc(2 * (size_t)size * sizeof(int), FSDP_MEM_OTHER, &counts));
  if (ierr) goto cleanup;
  displs = counts + size;
  FSDPCallMPI(MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, comm));
  for (int r = 0; r < size; r++) {
    displs[r] = total * FSDP_LOG_NAME_LEN;
    total += counts[r];
    counts[r] *= FSDP_LOG_NAME_LEN;
  }
  ierr = FSDPMalloc((size_t)(total ? total : 1) * FSDP_LOG_NAME_LEN, FSDP_MEM_OTHER, &all);
  if (!ierr) ierr = FSDPMalloc((size_t)(total ? total : 1) * FSDP_LOG_NAME_LEN, FSDP_MEM_OTHER, &u);
  if ((ierr = FSDPErrorAgree_Private(comm, ierr))) goto cleanup;
  for (int i = 0; i < mine; i++) memcpy(u[i], log_events[i].name, FSDP_LOG_NAME_LEN);
  FSDPCallMPI(MPI_Allgatherv(u, mine * FSDP_LOG_NAME_LEN, MPI_CHAR, all, counts, displs, MPI_CHAR, comm));
  for (int i = 0; i < total; i++) {
    bool seen = false;
    for (int j = 0; j < n && !seen; j++) seen = strcmp(u[j], all[i]) == 0;
    if (!seen) memcpy(u[n++], all[i], FSDP_LOG_NAME_LEN);
  }
  FSDPCall(FSDPFree(&all));
  FSDPCall(FSDPFree(&counts));
  *nunion = n;
  *names = u;
  return FSDP_SUCCESS;
cleanup:
  (void)FSDPFree(&all);
  (void)FSDPFree(&u);
  (void)FSDPFree(&counts);
  return FSDPErrorTraceback(__LINE__, __func__, __FILE__, ierr);
}

void FSDPFormatBytes(char *buf, size_t len, double bytes)
{
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    u++;
  }
  snprintf(buf, len, u ? "%.2f %s" : "%.0f %s", bytes, unit[u]);
}

static FSDPErrorCode view_memory(FSDPViewer viewer, MPI_Comm comm)
{
  FSDPMemoryStats st;
  enum { NC = FSDP_MEM_NUM_CATEGORIES + 1 };
  double mine[2 * NC + 2], maxs[2 * NC + 2] = {0}, sums[2 * NC + 2] = {0}; /* only rank 0 receives */
  char a[32], b[32], c[32];

  FSDPCall(FSDPGetMemoryStats(&st));
  for (int k = 0; k < FSDP_MEM_NUM_CATEGORIES; k++) {
    mine[k] = (double)st.current[k];
    mine[NC + k] = (double)st.peak[k];
  }
  mine[NC - 1] = (double)st.total_current;
  mine[2 * NC - 1] = (double)st.total_peak;
  mine[2 * NC] = (double)st.nallocs;
  mine[2 * NC + 1] = (double)st.nfrees;
  FSDPCallMPI(MPI_Reduce(mine, maxs, 2 * NC + 2, MPI_DOUBLE, MPI_MAX, 0, comm));
  FSDPCallMPI(MPI_Reduce(mine, sums, 2 * NC + 2, MPI_DOUBLE, MPI_SUM, 0, comm));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "\nHost memory allocated by libfsdp   %16s %16s %16s\n", "current (max)",
                                 "peak (max)", "peak (sum)"));
  for (int k = 0; k < NC; k++) {
    FSDPFormatBytes(a, sizeof a, maxs[k]);
    FSDPFormatBytes(b, sizeof b, maxs[NC + k]);
    FSDPFormatBytes(c, sizeof c, sums[NC + k]);
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "  %-32s %16s %16s %16s\n",
                                   k < FSDP_MEM_NUM_CATEGORIES ? FSDPMemCategoryName((FSDPMemCategory)k) : "total", a,
                                   b, c));
  }
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "  allocations: %.0f, frees: %.0f (sum over ranks)\n", sums[2 * NC],
                                 sums[2 * NC + 1]));
  return FSDP_SUCCESS;
}

/* Total and exposed communication, averaged over ranks: time the stream spent
   in collectives, and time the computing thread spent waiting for them. */
static FSDPErrorCode view_overlap(FSDPViewer viewer, int n, char (*names)[FSDP_LOG_NAME_LEN], const double *sums,
                                  int size)
{
  double total = 0, exposed = 0;
  bool any = false;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < log_nevents; k++)
      if (strcmp(names[i], log_events[k].name) == 0) {
        if (log_events[k].kind == FSDP_LOG_KIND_COMM) total += sums[3 * i + 1] / size, any = true;
        if (log_events[k].kind == FSDP_LOG_KIND_EXPOSED) exposed += sums[3 * i + 1] / size, any = true;
      }
  if (!any) return FSDP_SUCCESS;
  char overlap[16] = "-";
  if (total > 0) snprintf(overlap, sizeof overlap, "%.1f%%", 100.0 * (1.0 - exposed / total));
  FSDPCall(FSDPViewerASCIIPrintf(viewer,
                                 "\nCommunication (average per rank): %.3e s in collectives, %.3e s exposed (the "
                                 "computing thread waiting for them); overlap = 1 - exposed/total = %s\n",
                                 total, exposed, overlap));
  return FSDP_SUCCESS;
}

static FSDPErrorCode log_view(FSDPViewer viewer, void *ctx)
{
  MPI_Comm comm;
  int size, n;
  char(*names)[FSDP_LOG_NAME_LEN];
  double *mine, *maxs, *mins, *sums, wall, wallmax;
  static const char rule[] =
      "------------------------------------------------------------------------------------------------------------\n";

  (void)ctx;
  FSDPCall(FSDPViewerGetComm(viewer, &comm));
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  FSDPCall(gather_event_names(comm, &n, &names));
  /* Per event: count, time, bytes; reduced with max, min and sum. */
  FSDPCall(FSDPCalloc(4 * (size_t)(3 * n + 1), sizeof(double), FSDP_MEM_OTHER, &mine));
  maxs = mine + 3 * n + 1;
  mins = maxs + 3 * n + 1;
  sums = mins + 3 * n + 1;
  pthread_mutex_lock(&log_register_lock); /* the communication thread adds to some events */
  for (int i = 0; i < n; i++)
    for (int k = 0; k < log_nevents; k++)
      if (strcmp(names[i], log_events[k].name) == 0) {
        mine[3 * i] = (double)log_events[k].count;
        mine[3 * i + 1] = log_events[k].time;
        mine[3 * i + 2] = (double)log_events[k].bytes;
      }
  pthread_mutex_unlock(&log_register_lock);
  wall = now() - log_started_at;
  mine[3 * n] = wall;
  FSDPCallMPI(MPI_Reduce(mine, maxs, 3 * n + 1, MPI_DOUBLE, MPI_MAX, 0, comm));
  FSDPCallMPI(MPI_Reduce(mine, mins, 3 * n + 1, MPI_DOUBLE, MPI_MIN, 0, comm));
  FSDPCallMPI(MPI_Reduce(mine, sums, 3 * n + 1, MPI_DOUBLE, MPI_SUM, 0, comm));
  wallmax = maxs[3 * n];

  FSDPCall(FSDPViewerASCIIPrintf(viewer, "%s", rule));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "libfsdp performance summary: %d rank%s, %.3e s wall time (max over ranks)\n",
                                 size, size == 1 ? "" : "s", wallmax));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "%s", rule));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "%-26s %8s %32s %7s %11s %8s %6s\n", "Event", "Count", "Time (s)           ",
                                 "Ratio", "Bytes/rank", "GB/s", "%Wall"));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "%-26s %8s %10s %10s %10s %7s %11s %8s %6s\n", "", "max", "min", "max", "avg",
                                 "max/min", "avg", "avg", "avg"));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "%s", rule));
  for (int i = 0; i < n; i++) {
    double tmin = mins[3 * i + 1], tmax = maxs[3 * i + 1], tavg = sums[3 * i + 1] / size;
    double bavg = sums[3 * i + 2] / size;
    char ratio[16] = "-", gbs[16] = "-";
    if (tmin > 0) snprintf(ratio, sizeof ratio, "%.1f", tmax / tmin);
    if (tavg > 0 && bavg > 0) snprintf(gbs, sizeof gbs, "%.3f", bavg / tavg * 1e-9);
    FSDPCall(FSDPViewerASCIIPrintf(viewer, "%-26s %8.0f %10.3e %10.3e %10.3e %7s %11.4e %8s %6.1f\n", names[i],
                                   maxs[3 * i], tmin, tmax, tavg, ratio, bavg, gbs,
                                   wallmax > 0 ? 100.0 * tavg / wallmax : 0.0));
  }
  if (n == 0) FSDPCall(FSDPViewerASCIIPrintf(viewer, "(no events registered)\n"));
  FSDPCall(view_overlap(viewer, n, names, sums, size));
  FSDPCall(view_memory(viewer, comm));
  FSDPCall(FSDPViewerASCIIPrintf(viewer, "%s", rule));
  FSDPCall(FSDPFree(&mine));
  FSDPCall(FSDPFree(&names));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPLogView(FSDPViewer viewer)
{
  FSDPCall(FSDPViewerApply_Private(__func__, viewer, MPI_COMM_NULL, log_view, NULL));
  return FSDP_SUCCESS;
}
