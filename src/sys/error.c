/* Errors: codes, the per-thread traceback, and what happens on an error. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsdpimpl.h"

/* Here, not in init.c: the error stack, which everything uses, uses nothing above it. */
int FSDPWorldRank_Private(void)
{
  int up = 0, down = 0, rank = -1;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

#define FSDP_MAX_FRAMES 64

typedef struct {
  int line;
  const char *func; /* __func__ and __FILE__ have static storage */
  const char *file;
} ErrorFrame;

/* One traceback per thread, like HDF5's error stack: an error raised on the
   communication thread must not scribble over the compute thread's. */
typedef struct {
  FSDPErrorCode code;
  int depth;   /* frames seen */
  int nframes; /* frames kept */
  ErrorFrame frames[FSDP_MAX_FRAMES];
  char message[FSDP_MAX_MESSAGE];
} ErrorStack;

static _Thread_local ErrorStack error_stack;
static FSDPErrorMode error_mode = FSDP_ERRORS_PRINT;

static const char *const error_strings[FSDP_ERR_NUM_CODES] = {
    [FSDP_SUCCESS] = "success",
    [FSDP_ERR_ARG] = "invalid argument",
    [FSDP_ERR_STATE] = "object in wrong state",
    [FSDP_ERR_MEM] = "out of memory",
    [FSDP_ERR_MPI] = "MPI error",
    [FSDP_ERR_HWLOC] = "hwloc error",
    [FSDP_ERR_HDF5] = "HDF5 error",
    [FSDP_ERR_CUDA] = "CUDA error",
    [FSDP_ERR_NCCL] = "NCCL error",
    [FSDP_ERR_IO] = "I/O error",
    [FSDP_ERR_OPTION] = "invalid option value",
    [FSDP_ERR_UNSUPPORTED] = "unsupported",
    [FSDP_ERR_TIMEOUT] = "timed out",
    [FSDP_ERR_CORRUPT] = "data corrupt",
    [FSDP_ERR_USER] = "user error",
    [FSDP_ERR_INTERNAL] = "internal error (please report)",
    [FSDP_ERR_NOT_FINITE] = "not finite (NaN or Inf)",
};

const char *FSDPGetErrorString(FSDPErrorCode code)
{
  if ((int)code < 0 || code >= FSDP_ERR_NUM_CODES) return "unknown error code";
  return error_strings[code];
}

FSDPErrorCode FSDPSetErrorMode(FSDPErrorMode mode)
{
  FSDPCheck(mode == FSDP_ERRORS_PRINT || mode == FSDP_ERRORS_RETURN || mode == FSDP_ERRORS_ARE_FATAL, MPI_COMM_SELF,
            FSDP_ERR_ARG, "error mode %d is not one of FSDP_ERRORS_PRINT, FSDP_ERRORS_RETURN, FSDP_ERRORS_ARE_FATAL",
            (int)mode);
  error_mode = mode;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPGetErrorMode(FSDPErrorMode *mode)
{
  FSDPCheck(mode, MPI_COMM_SELF, FSDP_ERR_ARG, "mode must not be NULL");
  *mode = error_mode;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPGetLastError(FSDPErrorCode *code, const char **message, int *nframes)
{
  if (code) *code = error_stack.code;
  if (message) *message = error_stack.message;
  if (nframes) *nframes = error_stack.nframes;
  return FSDP_SUCCESS;
}

static void print_header(FILE *fp)
{
  fprintf(fp, "[%d] FSDP ERROR: %s: %s\n", FSDPWorldRank_Private(), FSDPGetErrorString(error_stack.code),
          error_stack.message);
}

static void print_frame(FILE *fp, int number, const ErrorFrame *f)
{
  fprintf(fp, "[%d] FSDP ERROR: #%d %s() at %s:%d\n", FSDPWorldRank_Private(), number, f->func, f->file, f->line);
}

FSDPErrorCode FSDPErrorPrintTrace(FILE *fp)
{
  FSDPCheck(fp, MPI_COMM_SELF, FSDP_ERR_ARG, "fp must not be NULL");
  if (error_stack.code == FSDP_SUCCESS) return FSDP_SUCCESS;
  print_header(fp);
  for (int i = 0; i < error_stack.nframes; i++) print_frame(fp, i + 1, &error_stack.frames[i]);
  fflush(fp);
  return FSDP_SUCCESS;
}

/* Frames past FSDP_MAX_FRAMES are printed but not kept. */
static void push_frame(int line, const char *func, const char *file)
{
  ErrorFrame f = {line, func, file};
  error_stack.depth++;
  if (error_stack.nframes < FSDP_MAX_FRAMES) error_stack.frames[error_stack.nframes++] = f;
  if (error_mode != FSDP_ERRORS_RETURN) {
    if (error_stack.depth == 1) print_header(stderr);
    print_frame(stderr, error_stack.depth, &f);
    fflush(stderr);
  }
}

/* MPI_Abort asks the launcher to end the job and, with MPICH's hydra, waits
   for its answer (gdb: in PMI's read): on a node cut off from mpiexec (its
   link down) it waits forever, and the rank lives on after its message.  A
   detached thread ends the process itself if MPI_Abort has not within this
   many seconds. */
#define FSDP_ABORT_FALLBACK_S 10

/* Made before the thread starts, so that it touches neither MPI nor stdio
   (the aborting thread, or another, may hold either); per thread, since
   several threads may abort at once. */
typedef struct {
  int code;
  char message[256];
} AbortFallback;

static void *abort_fallback(void *arg)
{
  const AbortFallback *f = arg;
  struct timespec left = {FSDP_ABORT_FALLBACK_S, 0};
  while (nanosleep(&left, &left) && errno == EINTR) {
  }
  if (write(STDERR_FILENO, f->message, strlen(f->message)) < 0) {
    /* nothing else to tell it with */
  }
  _exit(f->code);
}

_Noreturn void FSDPAbortJob_Private(MPI_Comm comm, FSDPErrorCode code)
{
  static _Thread_local AbortFallback fallback; /* lives while this thread waits in MPI_Abort */
  int up = 0, down = 0;
  pthread_t thread;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (!up || down) { /* no MPI to take the job down: the user asked for an abort */
    fflush(stdout);
    fflush(stderr);
    abort();
  }
  fallback.code = (int)code;
  snprintf(fallback.message, sizeof fallback.message,
           "[%d] libfsdp: MPI_Abort has not ended this process within %d s: the launcher cannot be reached "
           "(has this node lost its network?). Exiting with code %d.\n",
           FSDPWorldRank_Private(), FSDP_ABORT_FALLBACK_S, (int)code);
  /* Started first: flushing into a pipe to an unreachable launcher can block
     too.  On the default stack: glibc carves every library's static TLS out
     of it (cuBLAS's, UCX's), and a small one makes pthread_create fail. */
  if (pthread_create(&thread, NULL, abort_fallback, &fallback) == 0) pthread_detach(thread);
  fflush(stdout);
  fflush(stderr);
  /* mpiexec kills the job on MPI_Abort and can drop output it has not
     forwarded yet, the error message included: give it a moment. */
  nanosleep(&(struct timespec){0, 250000000L}, NULL);
  MPI_Abort(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, (int)code);
  _exit((int)code); /* MPI_Abort does not return; if it does, the process still ends here */
}

FSDPErrorCode FSDPError(MPI_Comm comm, int line, const char *func, const char *file, FSDPErrorCode code,
                        const char *fmt, ...)
{
  va_list ap;
  /* A new error starts a new traceback. */
  error_stack.code = code;
  error_stack.nframes = 0;
  error_stack.depth = 0;
  va_start(ap, fmt);
  vsnprintf(error_stack.message, sizeof error_stack.message, fmt, ap);
  va_end(ap);
  push_frame(line, func, file);
  if (error_mode == FSDP_ERRORS_ARE_FATAL) FSDPAbortJob_Private(comm, code);
  return code;
}

FSDPErrorCode FSDPErrorTraceback(int line, const char *func, const char *file, FSDPErrorCode code)
{
  if (error_stack.nframes == 0 || error_stack.code != code) {
    /* The code came from somewhere that did not raise it (a user callback, say). */
    return FSDPError(MPI_COMM_SELF, line, func, file, code, "error code %d returned without a message", (int)code);
  }
  push_frame(line, func, file);
  return code;
}

FSDPErrorCode FSDPErrorMPI(int line, const char *func, const char *file, int mpierr, const char *call)
{
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (MPI_Error_string(mpierr, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "unknown MPI error");
  return FSDPError(MPI_COMM_SELF, line, func, file, FSDP_ERR_MPI, "%s failed with MPI error %d: %s", call, mpierr,
                   text);
}

void FSDPErrorAbort(MPI_Comm comm, FSDPErrorCode code)
{
  /* In the printing modes the traceback is already on stderr. */
  if (error_mode == FSDP_ERRORS_RETURN) (void)FSDPErrorPrintTrace(stderr);
  FSDPAbortJob_Private(comm, code);
}

FSDPErrorCode FSDPErrorAgree_Private(MPI_Comm comm, FSDPErrorCode code)
{
  int rank, size, failed, first;
  struct {
    int code;
    int world_rank;
    char message[sizeof error_stack.message];
  } first_error = {0};

  FSDPCallMPI(MPI_Comm_rank(comm, &rank));
  FSDPCallMPI(MPI_Comm_size(comm, &size));
  failed = code != FSDP_SUCCESS ? rank : size;
  FSDPCallMPI(FSDPAllreduce_Private(&failed, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return FSDP_SUCCESS;
  if (rank == first) {
    first_error.code = (int)code;
    first_error.world_rank = FSDPWorldRank_Private();
    memcpy(first_error.message, error_stack.message, sizeof first_error.message);
  }
  FSDPCallMPI(FSDPBcast_Private(&first_error, (int)sizeof first_error, MPI_BYTE, first, comm));
  if (code != FSDP_SUCCESS) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, code);
  return FSDPError(comm, __LINE__, __func__, __FILE__, (FSDPErrorCode)first_error.code, "on rank %d: %s",
                   first_error.world_rank, first_error.message);
}
