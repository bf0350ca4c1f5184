/* bench-log: what event logging costs, off and on, measured in one run.
   make benchmarks && ./benchmarks/bench-log [-fsdp_bench_pairs N] */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsdp.h"

static double seconds(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static FSDPErrorCode time_pairs(FSDPLogEvent e, int64_t n, double *ns)
{
  double t0 = seconds();
  for (int64_t i = 0; i < n; i++) {
    FSDPCall(FSDPLogEventBegin(e));
    FSDPCall(FSDPLogEventEnd(e, 8));
  }
  *ns = (seconds() - t0) / (double)n * 1e9;
  return FSDP_SUCCESS;
}

int main(int argc, char **argv)
{
  FSDPLogEvent e;
  int64_t n;
  double off, on;

  FSDPCall(FSDPInitialize(&argc, &argv));
  FSDPCall(FSDPOptionsGetInt("-fsdp_bench_pairs", "Begin/End pairs to time", 10000000, 1, INT64_MAX, &n, NULL));
  FSDPCall(FSDPLogEventRegister("BenchPair", &e));
  FSDPCall(FSDPLogSetActive(false));
  FSDPCall(time_pairs(e, n, &off));
  FSDPCall(FSDPLogSetActive(true));
  FSDPCall(time_pairs(e, n, &on));
  FSDPCall(FSDPLogSetActive(false));
  printf("bench-log: %lld Begin/End pairs: logging off %.2f ns/pair, on %.2f ns/pair, on/off %.1f\n", (long long)n, off,
         on, on / off);
  FSDPCall(FSDPFinalize());
  return 0;
}
