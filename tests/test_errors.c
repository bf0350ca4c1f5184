/* Error codes, propagation through FSDPCall, the traceback text, FSDPCallMPI,
   and the error modes.
   mpitest: -n 1
   mpitest: -n 2 */
#include "testutil.h"

static int inner_line;

static FSDPErrorCode inner(int x)
{
  inner_line = __LINE__ + 1;
  FSDPCheck(x > 0, MPI_COMM_SELF, FSDP_ERR_ARG, "x must be positive, got %d", x);
  return FSDP_SUCCESS;
}

static FSDPErrorCode middle(int x)
{
  FSDPCall(inner(x));
  return FSDP_SUCCESS;
}

static FSDPErrorCode outer(int x)
{
  FSDPCall(middle(x));
  return FSDP_SUCCESS;
}

/* A user callback that fails without raising an error. */
static FSDPErrorCode silent_callback(void) { return FSDP_ERR_USER; }

static FSDPErrorCode calls_callback(void)
{
  FSDPCall(silent_callback());
  return FSDP_SUCCESS;
}

static FSDPErrorCode send_to_nowhere(MPI_Comm comm, int size)
{
  int x = 0;
  FSDPCallMPI(MPI_Send(&x, 1, MPI_INT, size + 5, 0, comm));
  return FSDP_SUCCESS;
}

/* Line i (0-based) of text, copied into line[len]. */
static void nth_line(const char *text, int i, char *line, size_t len)
{
  while (i-- > 0 && text) text = strchr(text, '\n') ? strchr(text, '\n') + 1 : NULL;
  line[0] = '\0';
  if (text) snprintf(line, len, "%.*s", (int)strcspn(text, "\n"), text);
}

int main(int argc, char **argv)
{
  int rank, size, nframes;
  FSDPErrorCode code;
  const char *msg;
  char expect[256], line[256], *out;
  Capture cap;
  MPI_Comm comm;
  FSDPErrorMode mode;

  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* Every code has its own non-empty description. */
  TEST_ASSERT(strcmp(FSDPGetErrorString(FSDP_SUCCESS), "success") == 0, "FSDP_SUCCESS string");
  for (int i = 1; i < FSDP_ERR_NUM_CODES; i++) {
    TEST_ASSERT(FSDPGetErrorString((FSDPErrorCode)i)[0], "code %d has an empty string", i);
    for (int j = 0; j < i; j++)
      TEST_ASSERT(strcmp(FSDPGetErrorString((FSDPErrorCode)i), FSDPGetErrorString((FSDPErrorCode)j)) != 0,
                  "codes %d and %d share a string", i, j);
  }
  TEST_ASSERT(strcmp(FSDPGetErrorString((FSDPErrorCode)999), "unknown error code") == 0, "out-of-range code");
  TEST_ASSERT(strcmp(FSDPGetErrorString((FSDPErrorCode)-1), "unknown error code") == 0, "negative code");

  /* Default mode prints a traceback line per frame, prefixed by the rank, as the error travels up. */
  TEST_OK(FSDPGetErrorMode(&mode));
  TEST_ASSERT(mode == FSDP_ERRORS_PRINT, "default error mode is %d", (int)mode);
  capture_begin(&cap, 2);
  code = outer(-3);
  out = capture_end(&cap);
  TEST_ASSERT(code == FSDP_ERR_ARG, "outer(-3) returned %d", (int)code);
  nth_line(out, 0, line, sizeof line);
  snprintf(expect, sizeof expect, "[%d] FSDP ERROR: invalid argument: x must be positive, got -3", rank);
  TEST_ASSERT(strcmp(line, expect) == 0, "first line '%s', expected '%s'", line, expect);
  nth_line(out, 1, line, sizeof line);
  snprintf(expect, sizeof expect, "[%d] FSDP ERROR: #1 inner() at ", rank);
  TEST_ASSERT(strstr(line, expect) == line, "second line '%s' should start '%s'", line, expect);
  snprintf(expect, sizeof expect, "test_errors.c:%d", inner_line);
  TEST_ASSERT(strstr(line, expect), "second line '%s' should name %s", line, expect);
  nth_line(out, 2, line, sizeof line);
  TEST_ASSERT(strstr(line, "#2 middle() at ") && strstr(line, "test_errors.c:"), "third line '%s'", line);
  nth_line(out, 3, line, sizeof line);
  TEST_ASSERT(strstr(line, "#3 outer() at "), "fourth line '%s'", line);
  TEST_ASSERT(count_occurrences(out, "\n") == 4, "expected 4 lines, got:\n%s", out);
  free(out);

  /* The same error, kept for the program to inspect. */
  TEST_OK(FSDPGetLastError(&code, &msg, &nframes));
  TEST_ASSERT(code == FSDP_ERR_ARG && nframes == 3, "last error %d with %d frames", (int)code, nframes);
  TEST_ASSERT(strcmp(msg, "x must be positive, got -3") == 0, "message '%s'", msg);

  /* FSDP_ERRORS_RETURN prints nothing; FSDPErrorPrintTrace prints the same lines on demand. */
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  capture_begin(&cap, 2);
  TEST_CODE(FSDP_ERR_ARG, middle(0));
  out = capture_end(&cap);
  TEST_ASSERT(out[0] == '\0', "FSDP_ERRORS_RETURN printed:\n%s", out);
  free(out);
  capture_begin(&cap, 2);
  TEST_OK(FSDPErrorPrintTrace(stderr));
  out = capture_end(&cap);
  snprintf(expect, sizeof expect, "[%d] FSDP ERROR: invalid argument: x must be positive, got 0\n", rank);
  TEST_ASSERT(strstr(out, expect) == out, "trace starts '%s'", out);
  TEST_ASSERT(strstr(out, "#2 middle()") && !strstr(out, "#3"), "trace:\n%s", out);
  free(out);

  /* An error code returned without a message still gets a traceback. */
  TEST_CODE(FSDP_ERR_USER, calls_callback());
  TEST_OK(FSDPGetLastError(&code, &msg, &nframes));
  TEST_ASSERT(code == FSDP_ERR_USER && nframes == 1, "code %d frames %d", (int)code, nframes);
  snprintf(expect, sizeof expect, "error code %d returned without a message", (int)FSDP_ERR_USER);
  TEST_MESSAGE_HAS(expect);

  /* MPI failures become FSDP_ERR_MPI with the call and MPI's own words. */
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  TEST_CODE(FSDP_ERR_MPI, send_to_nowhere(comm, size));
  TEST_MESSAGE_HAS("MPI_Send(&x, 1, MPI_INT, size + 5, 0, comm) failed with MPI error");
  MPI_Comm_free(&comm);

  /* Bad arguments to the error API itself. */
  TEST_CODE(FSDP_ERR_ARG, FSDPSetErrorMode((FSDPErrorMode)42));
  TEST_MESSAGE_HAS("error mode 42");
  TEST_CODE(FSDP_ERR_ARG, FSDPErrorPrintTrace(NULL));

  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_PRINT));
  TEST_OK(FSDPFinalize());
  return 0;
}
