/* Event logging: counts, time and bytes per event; nesting; misuse; the
   -fsdp_log_view table reduced over ranks, with events only some ranks have.
   mpitest: -n 3
   mpitest: -n 2 -fsdp_log_view */
#include <math.h>
#include <time.h>

#include "testutil.h"

static double seconds(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Equal to the 4 significant digits the table prints. */
static bool same_printed(double printed, double exact) { return fabs(printed - exact) <= 5e-4 * fabs(exact); }

static void sleep_ms(int ms)
{
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The table line of an event, parsed: count, min, max, avg time. */
static void parse_row(const char *table, const char *event, double *count, double *tmin, double *tmax, double *tavg)
{
  char needle[80];
  const char *row;
  snprintf(needle, sizeof needle, "\n%s ", event);
  row = strstr(table, needle);
  TEST_ASSERT(row, "no row for %s in:\n%s", event, table);
  TEST_ASSERT(sscanf(row + strlen(needle), "%lf %lf %lf %lf", count, tmin, tmax, tavg) == 4, "cannot parse row of %s",
              event);
}

int main(int argc, char **argv)
{
  FSDPLogEvent ev_sleep, ev_again, ev_nest, ev_reduce, ev_some;
  FSDPLogEventInfo info;
  FSDPViewer viewer;
  Capture cap;
  double send[1000] = {0}, recv[1000], count, tmin, tmax, tavg, expect_min, expect_max, expect_avg;
  int rank, size;
  bool active, log_view;
  char *out = NULL;

  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  TEST_OK(FSDPOptionsGetBool("-fsdp_log_view", "", false, &log_view, NULL));
  TEST_OK(FSDPLogGetActive(&active));
  TEST_ASSERT(active == log_view, "logging is on exactly when -fsdp_log_view is given");

  TEST_OK(FSDPLogEventRegister("TestSleep", &ev_sleep));
  TEST_OK(FSDPLogEventRegister("TestSleep", &ev_again));
  TEST_ASSERT(ev_sleep == ev_again, "registering a name twice gives the same event");
  TEST_OK(FSDPLogEventRegister("TestNest", &ev_nest));
  TEST_OK(FSDPLogEventRegister("TestAllreduce", &ev_reduce));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  TEST_CODE(FSDP_ERR_ARG, FSDPLogEventRegister("", &ev_again));
  TEST_CODE(FSDP_ERR_ARG, FSDPLogEventRegister(
                              "an-event-name-far-too-long-to-fit-in-the-sixty-four-byte-slot-of-the-table", &ev_again));
  TEST_MESSAGE_HAS("must have 1 to 63 characters");
  TEST_CODE(FSDP_ERR_ARG, FSDPLogEventGetInfo(12345, &info));

  /* Off: Begin/End do nothing. */
  TEST_OK(FSDPLogSetActive(false));
  TEST_OK(FSDPLogEventBegin(ev_sleep));
  TEST_OK(FSDPLogEventEnd(ev_sleep, 100));
  TEST_OK(FSDPLogEventGetInfo(ev_sleep, &info));
  TEST_ASSERT(info.count == 0 && info.bytes == 0 && info.time == 0, "logging off must not count");
  TEST_OK(FSDPLogSetActive(true));

  /* Rank r sleeps (r+1)*10 ms twice: min and max over ranks differ. */
  for (int i = 0; i < 2; i++) {
    TEST_OK(FSDPLogEventBegin(ev_sleep));
    sleep_ms(10 * (rank + 1));
    TEST_OK(FSDPLogEventEnd(ev_sleep, 0));
  }
  TEST_OK(FSDPLogEventGetInfo(ev_sleep, &info));
  TEST_ASSERT(info.count == 2 && info.time >= 0.02 * (rank + 1), "sleep count %lld time %g", (long long)info.count,
              info.time);

  /* Nested pairs of one event count twice but time once: counted twice, the
     time would be about twice the span measured around the outer pair. */
  {
    double t0 = seconds(), span;
    TEST_OK(FSDPLogEventBegin(ev_nest));
    TEST_OK(FSDPLogEventBegin(ev_nest));
    sleep_ms(50);
    TEST_OK(FSDPLogEventEnd(ev_nest, 0));
    TEST_OK(FSDPLogEventEnd(ev_nest, 0));
    span = seconds() - t0;
    TEST_OK(FSDPLogEventGetInfo(ev_nest, &info));
    TEST_ASSERT(info.count == 2 && info.time >= 0.05 && info.time <= span,
                "nested: count %lld time %g, outer span %g (time counted once lies within the span)",
                (long long)info.count, info.time, span);
  }
  TEST_CODE(FSDP_ERR_STATE, FSDPLogEventEnd(ev_nest, 0));
  TEST_MESSAGE_HAS("FSDPLogEventEnd(TestNest) without a matching FSDPLogEventBegin");

  /* Bytes as reported by the caller. */
  TEST_OK(FSDPLogEventBegin(ev_reduce));
  MPI_Allreduce(send, recv, 1000, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  TEST_OK(FSDPLogEventEnd(ev_reduce, (int64_t)sizeof send));
  TEST_OK(FSDPLogEventGetInfo(ev_reduce, &info));
  TEST_ASSERT(info.count == 1 && info.bytes == 8000, "allreduce count %lld bytes %lld", (long long)info.count,
              (long long)info.bytes);

  /* An event that rank 0 does not have. */
  if (rank != 0) {
    TEST_OK(FSDPLogEventRegister("TestNotOnRank0", &ev_some));
    TEST_OK(FSDPLogEventBegin(ev_some));
    TEST_OK(FSDPLogEventEnd(ev_some, 64));
  }
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_PRINT));

  /* What the table must say about TestSleep: min, max and mean over ranks. */
  TEST_OK(FSDPLogEventGetInfo(ev_sleep, &info));
  MPI_Reduce(&info.time, &expect_min, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  MPI_Reduce(&info.time, &expect_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&info.time, &expect_avg, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  expect_avg /= size;

  if (!log_view) {
    capture_begin(&cap, 1);
    TEST_OK(FSDPViewerASCIIOpen(MPI_COMM_WORLD, "stdout", &viewer));
    TEST_OK(FSDPLogView(viewer));
    TEST_OK(FSDPViewerDestroy(&viewer));
    out = capture_end(&cap);
    TEST_OK(FSDPFinalize());
  } else {
    capture_begin(&cap, 1);
    TEST_OK(FSDPFinalize()); /* prints the table */
    out = capture_end(&cap);
  }

  if (rank == 0) {
    char header[128];
    snprintf(header, sizeof header, "libfsdp performance summary: %d ranks", size);
    TEST_ASSERT(strstr(out, header), "no '%s' in:\n%s", header, out);
    parse_row(out, "TestSleep", &count, &tmin, &tmax, &tavg);
    TEST_ASSERT(count == 2, "TestSleep count %g", count);
    TEST_ASSERT(same_printed(tmin, expect_min) && same_printed(tmax, expect_max) && same_printed(tavg, expect_avg),
                "TestSleep min %g max %g avg %g, expected %g %g %g over %d ranks", tmin, tmax, tavg, expect_min,
                expect_max, expect_avg, size);
    TEST_ASSERT(tmin >= 0.02 && tmax >= 0.02 * size, "each rank r slept at least 2 x (r+1) x 10 ms");
    parse_row(out, "TestAllreduce", &count, &tmin, &tmax, &tavg);
    TEST_ASSERT(count == 1, "TestAllreduce count %g", count);
    TEST_ASSERT(strstr(strstr(out, "\nTestAllreduce "), "8.0000e+03"), "TestAllreduce moves 8000 bytes per rank:\n%s",
                out);
    parse_row(out, "TestNotOnRank0", &count, &tmin, &tmax, &tavg);
    TEST_ASSERT(count == 1 && tmin == 0, "TestNotOnRank0: count %g, min %g (0 on rank 0)", count, tmin);
    TEST_ASSERT(strstr(out, "Host memory allocated by libfsdp") && strstr(out, "\n  parameters ") &&
                    strstr(out, "\n  communication staging ") && strstr(out, "\n  total "),
                "memory table missing:\n%s", out);
  } else TEST_ASSERT(out[0] == '\0', "rank %d printed the table:\n%s", rank, out);
  free(out);
  return 0;
}
