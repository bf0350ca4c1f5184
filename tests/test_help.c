/* -help lists every registered option once, with type, default and description,
   from rank 0 only; options given but never read are reported at finalize with
   the closest registered name.
   mpitest: -n 2 -help -fsdp_log_veiw -fsdp_t_given 5 */
#include "testutil.h"

static void expect_line(const char *out, const char *line)
{
  TEST_ASSERT(count_occurrences(out, line) == 1, "expected once in -help output: '%s'\noutput:\n%s", line, out);
}

int main(int argc, char **argv)
{
  static const char *const sizes[] = {"small", "medium", "large", NULL};
  Capture cap;
  char *out, header[128], s[32];
  int64_t i64, list[3];
  double r;
  int rank, e, n = 3, nleft;
  bool b;

  capture_begin(&cap, 1);
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPOptionsGetInt("-fsdp_t_given", "an int the test gives", 3, 0, 10, &i64, NULL));
  TEST_OK(FSDPOptionsGetInt("-fsdp_t_given", "asked twice, listed once", 3, 0, 10, &i64, NULL));
  TEST_OK(FSDPOptionsGetReal("-fsdp_t_rate", "a rate", 0.5, &r, NULL));
  TEST_OK(FSDPOptionsGetBool("-fsdp_t_switch", "a switch", true, &b, NULL));
  TEST_OK(FSDPOptionsGetEnum("-fsdp_t_size", "a size", sizes, 1, &e, NULL));
  TEST_OK(FSDPOptionsGetString("-fsdp_t_name", "a name", "anon", s, sizeof s, NULL));
  TEST_OK(FSDPOptionsGetIntList("-fsdp_t_dims", "some dims", list, &n, NULL));
  out = capture_end(&cap);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  if (rank == 0) {
    snprintf(header, sizeof header, "libfsdp %s options", FSDP_VERSION_STRING);
    expect_line(out, header);
    expect_line(
        out, "  -help <false> (bool): print every option with its type, default and description [given: (no value)]\n");
    expect_line(out,
                "  -options_file <none> (string): read options from this file as if given in its place: lines of -name "
                "[value], # comments\n");
    expect_line(out, "  -fsdp_log_view <false> (bool): print the event and memory table at FSDPFinalize\n");
    expect_line(out, "  -fsdp_options_left <true> (bool): ");
    expect_line(out, "  -fsdp_on_error <print> (one of print return abort): ");
    expect_line(out, "  -fsdp_simd <");
    expect_line(out, "  -fsdp_debug_collectives <false> (bool): check at each collective call");
    expect_line(out, "  -fsdp_collective_timeout <600> (real): ");
    expect_line(out, "  -fsdp_log_trace <> (string): write every timed span as Chrome trace events");
    expect_line(out, "  -fsdp_t_given <3> (int): an int the test gives [given: 5]\n");
    expect_line(out, "  -fsdp_t_rate <0.5> (real): a rate\n");
    expect_line(out, "  -fsdp_t_switch <true> (bool): a switch\n");
    expect_line(out, "  -fsdp_t_size <medium> (one of small medium large): a size\n");
    expect_line(out, "  -fsdp_t_name <anon> (string): a name\n");
    expect_line(out, "  -fsdp_t_dims <none> (int list): some dims\n");
    TEST_ASSERT(strstr(out, header) == out, "the header comes first:\n%s", out);
    TEST_ASSERT(count_occurrences(out, "\n  -") == 15, "expected 15 options listed under the header:\n%s", out);
  } else TEST_ASSERT(out[0] == '\0', "only rank 0 prints -help; rank %d printed:\n%s", rank, out);
  free(out);

  /* The misspelt option is the only one never read: reported on demand (NULL
     viewer: stdout, rank 0) and again at FSDPFinalize. */
  for (int pass = 0; pass < 2; pass++) {
    capture_begin(&cap, 1);
    if (pass == 0) {
      TEST_OK(FSDPOptionsLeft(NULL, &nleft));
      TEST_ASSERT(nleft == 1, "%d options left, expected 1", nleft);
    } else TEST_OK(FSDPFinalize());
    out = capture_end(&cap);
    if (rank == 0) {
      expect_line(out, "WARNING: 1 libfsdp option was given but never used:\n");
      expect_line(out, "  -fsdp_log_veiw (no value) (from the command line): did you mean -fsdp_log_view?\n");
    } else TEST_ASSERT(out[0] == '\0', "rank %d printed:\n%s", rank, out);
    free(out);
  }
  return 0;
}
