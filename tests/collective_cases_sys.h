/* The calls of errors, initialization, memory, viewers, options, logging
   and data types that the headers document as not collective: each made on
   rank 0 alone must succeed (tests/test_collectives.c). */
#ifndef FSDP_COLLECTIVE_CASES_SYS_H
#define FSDP_COLLECTIVE_CASES_SYS_H

#include <signal.h>

static FSDPErrorCode print_trace_quietly(void)
{
  FILE *null = fopen("/dev/null", "w");
  FSDPErrorCode err;
  if (!null) return FSDP_ERR_IO;
  err = FSDPErrorPrintTrace(null);
  fclose(null);
  return err;
}

static FSDPErrorCode event_info(Kit *k)
{
  FSDPLogEventInfo info;
  FSDPCall(FSDPLogEventRegister("collectives.info", &k->event));
  return FSDPLogEventGetInfo(k->event, &info);
}

static const char *const sys_choices[] = {"one", "two", NULL};

/* The raising calls return the code they raise: that is their success. */
#define SYS_CASES(X)                                                                                                   \
  X(FSDPGetErrorString, 0, (void)0, k->s = FSDPGetErrorString(FSDP_ERR_ARG);                                           \
    return k->s ? FSDP_SUCCESS : FSDP_ERR_USER;)                                                                       \
  X(FSDPSetErrorMode, 0, (void)0, return FSDPSetErrorMode(FSDP_ERRORS_RETURN);)                                        \
  X(FSDPGetErrorMode, 0, (void)0, FSDPErrorMode mode; return FSDPGetErrorMode(&mode);)                                 \
  X(FSDPGetLastError, 0, (void)0, FSDPErrorCode code; return FSDPGetLastError(&code, &k->s, &k->i);)                   \
  X(FSDPErrorPrintTrace, 0, (void)0, return print_trace_quietly();)                                                    \
  X(FSDPError, 0, (void)0,                                                                                             \
    return FSDPError(MPI_COMM_SELF, __LINE__, "case", __FILE__, FSDP_ERR_USER, "raised on one rank") == FSDP_ERR_USER  \
               ? FSDP_SUCCESS                                                                                          \
               : FSDP_ERR_INTERNAL;)                                                                                   \
  X(FSDPErrorTraceback, 0, (void)0,                                                                                    \
    return FSDPErrorTraceback(__LINE__, "case", __FILE__, FSDP_ERR_USER) == FSDP_ERR_USER ? FSDP_SUCCESS               \
                                                                                          : FSDP_ERR_INTERNAL;)        \
  X(FSDPErrorMPI, 0, (void)0,                                                                                          \
    return FSDPErrorMPI(__LINE__, "case", __FILE__, MPI_ERR_COUNT, "MPI_Send") == FSDP_ERR_MPI ? FSDP_SUCCESS          \
                                                                                               : FSDP_ERR_INTERNAL;)   \
  X(FSDPInitialized, 0, (void)0, return FSDPInitialized(&k->b);)                                                       \
  X(FSDPNotifySignal, 0, (void)0, FSDPNotifySignal(SIGUSR1); FSDPNotifySignal(0); return FSDP_SUCCESS;)                \
  X(FSDPGetVersion, 0, (void)0, return FSDPGetVersion(&k->i, &k->j, &k->n);)                                           \
  X(FSDPMalloc, 0, (void)0, FSDPCall(FSDPMalloc(64, FSDP_MEM_OTHER, &k->p)); return FSDPFree(&k->p);)                  \
  X(FSDPCalloc, 0, (void)0, FSDPCall(FSDPCalloc(8, 8, FSDP_MEM_OTHER, &k->p)); return FSDPFree(&k->p);)                \
  X(FSDPFree, 0, (void)0, FSDPCall(FSDPMalloc(64, FSDP_MEM_OTHER, &k->p)); return FSDPFree(&k->p);)                    \
  X(FSDPGetMemoryStats, 0, (void)0, return FSDPGetMemoryStats(&k->mem);)                                               \
  X(FSDPMemoryResetPeak, 0, (void)0, return FSDPMemoryResetPeak();)                                                    \
  X(FSDPGetDeviceMemoryStats, 0, (void)0, return FSDPGetDeviceMemoryStats(&k->mem);)                                   \
  X(FSDPMemCategoryName, 0, (void)0, return FSDPMemCategoryName(FSDP_MEM_PARAMS) ? FSDP_SUCCESS : FSDP_ERR_USER;)      \
  X(FSDPViewerGetComm, KIT_VIEWER, (void)0, return FSDPViewerGetComm(k->viewer, &k->c);)                               \
  X(FSDPViewerASCIIPrintf, KIT_VIEWER, (void)0, return FSDPViewerASCIIPrintf(k->viewer, "rank 0 alone\n");)            \
  X(FSDPViewerASCIISynchronizedPrintf, KIT_VIEWER, (void)0,                                                            \
    return FSDPViewerASCIISynchronizedPrintf(k->viewer, "buffered on rank 0\n");)                                      \
  X(FSDPViewerASCIIPushTab, KIT_VIEWER, (void)0, return FSDPViewerASCIIPushTab(k->viewer);)                            \
  X(FSDPViewerASCIIPopTab, KIT_VIEWER, FSDPCall(FSDPViewerASCIIPushTab(k->viewer)),                                    \
    return FSDPViewerASCIIPopTab(k->viewer);)                                                                          \
  X(FSDPFormatBytes, 0, (void)0, FSDPFormatBytes(k->buf, sizeof k->buf, 12345.0); return FSDP_SUCCESS;)                \
  X(FSDPOptionsGetInt, 0, (void)0, return FSDPOptionsGetInt("-case_int", "a test option", 3, 0, 9, &k->l[0], &k->b);)  \
  X(FSDPOptionsGetReal, 0, (void)0, return FSDPOptionsGetReal("-case_real", "a test option", 0.5, &k->d, &k->b);)      \
  X(FSDPOptionsGetBool, 0, (void)0, return FSDPOptionsGetBool("-case_bool", "a test option", true, &k->b, NULL);)      \
  X(FSDPOptionsGetEnum, 0, (void)0,                                                                                    \
    return FSDPOptionsGetEnum("-case_enum", "a test option", sys_choices, 1, &k->i, &k->b);)                           \
  X(FSDPOptionsGetString, 0, (void)0,                                                                                  \
    return FSDPOptionsGetString("-case_string", "a test option", "x", k->buf, sizeof k->buf, &k->b);)                  \
  X(FSDPOptionsGetIntList, 0, (void)0, k->i = 4;                                                                       \
    return FSDPOptionsGetIntList("-case_ints", "a test option", k->l, &k->i, &k->b);)                                  \
  X(FSDPOptionsGetRealList, 0, (void)0, double v[2]; k->i = 2;                                                         \
    return FSDPOptionsGetRealList("-case_reals", "a test option", v, &k->i, &k->b);)                                   \
  X(FSDPOptionsSetValue, 0, (void)0, return FSDPOptionsSetValue("-case_set", "1");)                                    \
  X(FSDPOptionsClearValue, 0, (void)0, return FSDPOptionsClearValue("-case_set");)                                     \
  X(FSDPOptionsInsertString, 0, (void)0, return FSDPOptionsInsertString("-fsdp_case_inserted 2");)                     \
  X(FSDPLogEventRegister, 0, (void)0, return FSDPLogEventRegister("collectives.register", &k->event);)                 \
  X(FSDPLogEventBegin, 0, (void)0, FSDPCall(FSDPLogEventRegister("collectives.begin", &k->event));                     \
    FSDPCall(FSDPLogEventBegin(k->event)); return FSDPLogEventEnd(k->event, 0);)                                       \
  X(FSDPLogEventEnd, 0, (void)0, FSDPCall(FSDPLogEventRegister("collectives.end", &k->event));                         \
    FSDPCall(FSDPLogEventBegin(k->event)); return FSDPLogEventEnd(k->event, 8);)                                       \
  X(FSDPLogEventGetInfo, 0, (void)0, return event_info(k);)                                                            \
  X(FSDPLogSetActive, 0, (void)0, FSDPCall(FSDPLogGetActive(&k->b)); return FSDPLogSetActive(k->b);)                   \
  X(FSDPLogGetActive, 0, (void)0, return FSDPLogGetActive(&k->b);)                                                     \
  X(FSDPDataTypeName, 0, (void)0, return FSDPDataTypeName(FSDP_BFLOAT16) ? FSDP_SUCCESS : FSDP_ERR_USER;)              \
  X(FSDPSimdName, 0, (void)0, return FSDPSimdName(FSDP_SIMD_GENERIC) ? FSDP_SUCCESS : FSDP_ERR_USER;)                  \
  X(FSDPSetSimd, 0, (void)0, FSDPSimd level; FSDPCall(FSDPGetSimd(&level, NULL)); return FSDPSetSimd(level);)          \
  X(FSDPGetSimd, 0, (void)0, FSDPSimd level, best; return FSDPGetSimd(&level, &best);)                                 \
  X(FSDPDataTypeSize, 0, (void)0, return FSDPDataTypeSize(FSDP_FLOAT16) == 2 ? FSDP_SUCCESS : FSDP_ERR_USER;)          \
  X(FSDPDataTypeConvert, 0, (void)0, uint16_t h[4];                                                                    \
    return FSDPDataTypeConvert(FSDP_BFLOAT16, h, FSDP_FLOAT32, k->x, 4);)

#endif
