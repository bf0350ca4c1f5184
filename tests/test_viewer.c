/* ASCII viewers: rank-ordered synchronized output, rank-0 output, tabs, files,
   and a file that cannot be opened failing on every rank.
   mpitest: -n 3 */
#include <time.h>

#include "testutil.h"

int main(int argc, char **argv)
{
  FSDPViewer v;
  char path[256], *out, expect[512] = "";
  int rank, size;
  FILE *fp;
  long len;

  TEST_OK(FSDPInitialize(&argc, &argv));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  snprintf(path, sizeof path, "%s/fsdp-test-viewer-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (rank == 0) close(mkstemp(path));
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

  TEST_OK(FSDPViewerASCIIOpen(MPI_COMM_WORLD, path, &v));
  TEST_OK(FSDPViewerASCIIPrintf(v, "title from rank %d\n", rank));
  TEST_OK(FSDPViewerASCIIPushTab(v));
  /* Higher ranks write first; the file must still be in rank order. */
  {
    struct timespec ts = {0, (long)(size - rank) * 5000000L};
    nanosleep(&ts, NULL);
  }
  TEST_OK(FSDPViewerASCIISynchronizedPrintf(v, "rank %d line one\nrank %d ", rank, rank));
  TEST_OK(FSDPViewerASCIISynchronizedPrintf(v, "line two\n"));
  TEST_OK(FSDPViewerFlush(v));
  TEST_OK(FSDPViewerASCIIPopTab(v));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  TEST_CODE(FSDP_ERR_STATE, FSDPViewerASCIIPopTab(v));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_PRINT));
  TEST_OK(FSDPViewerASCIIPrintf(v, "end\n"));
  TEST_OK(FSDPViewerDestroy(&v));
  TEST_ASSERT(v == NULL, "FSDPViewerDestroy sets the handle to NULL");
  TEST_OK(FSDPViewerDestroy(&v));

  if (rank == 0) {
    fp = fopen(path, "r");
    TEST_ASSERT(fp, "cannot reopen %s", path);
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    rewind(fp);
    out = calloc((size_t)len + 1, 1);
    TEST_ASSERT(fread(out, 1, (size_t)len, fp) == (size_t)len, "short read");
    fclose(fp);
    remove(path);
    strcat(expect, "title from rank 0\n");
    for (int r = 0; r < size; r++) {
      char line[64];
      snprintf(line, sizeof line, "  rank %d line one\n  rank %d line two\n", r, r);
      strcat(expect, line);
    }
    strcat(expect, "end\n");
    TEST_ASSERT(strcmp(out, expect) == 0, "file holds:\n%s\nexpected:\n%s", out, expect);
    free(out);
  }

  /* A NULL viewer is stdout on MPI_COMM_WORLD, written by rank 0. */
  {
    Capture cap;
    capture_begin(&cap, 1);
    TEST_OK(FSDPConfigView(NULL));
    out = capture_end(&cap);
    snprintf(expect, sizeof expect, "libfsdp %s\n  backends: host", FSDP_VERSION_STRING);
    if (rank == 0) TEST_ASSERT(strstr(out, expect) == out, "FSDPConfigView(NULL) printed:\n%s", out);
    else TEST_ASSERT(out[0] == '\0', "rank %d printed:\n%s", rank, out);
    free(out);
  }

  /* A file rank 0 cannot create is an I/O error on every rank, naming the file. */
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  TEST_CODE(FSDP_ERR_IO, FSDPViewerASCIIOpen(MPI_COMM_WORLD, "/nonexistent-dir/out.txt", &v));
  TEST_MESSAGE_HAS(
      "cannot open viewer file '/nonexistent-dir/out.txt' for writing on rank 0: No such file or directory");
  TEST_ASSERT(v == NULL, "a failed open leaves the handle NULL");
  TEST_CODE(FSDP_ERR_ARG, FSDPViewerASCIIOpen(MPI_COMM_WORLD, "", &v));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_PRINT));
  TEST_OK(FSDPFinalize());
  return 0;
}
