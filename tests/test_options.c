/* The options database: every getter type, the three sources and their order,
   and malformed values, each an error that names the option and the value.
   mpitest: -n 2 -fsdp_t_int 42 -fsdp_t_real=-2.5e-3 -fsdp_t_flag -fsdp_t_bool off -user_flag 7 -fsdp_t_enum GELU -fsdp_t_str hello -fsdp_t_ilist 1,-2,3 -fsdp_t_rlist 0.5,1e3 -fsdp_t_neg -7 -fsdp_t_both argv positional
   mpitest: -n 1 -fsdp_t_int=42 -fsdp_t_real -0.0025 -fsdp_t_flag -fsdp_t_bool no -fsdp_t_enum gelu -fsdp_t_str=hello -fsdp_t_ilist=1,-2,3 -fsdp_t_rlist 0.5,1000 -fsdp_t_neg=-7 -fsdp_t_both=argv */
#include <math.h>

#include "testutil.h"

static const char *const acts[] = {"relu", "tanh", "gelu", NULL};

/* Set an option to a bad value and expect FSDP_ERR_OPTION naming it and the value. */
#define EXPECT_BAD_INT(value, min, max, words)                                                                         \
  do {                                                                                                                 \
    int64_t v_;                                                                                                        \
    TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", value));                                                                \
    TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetInt("-fsdp_t_bad", "bad", 0, min, max, &v_, NULL));                       \
    TEST_MESSAGE_HAS("-fsdp_t_bad");                                                                                   \
    TEST_MESSAGE_HAS(words);                                                                                           \
  } while (0)

int main(int argc, char **argv)
{
  int64_t i64, ilist[4];
  double r, rlist[2];
  bool b, set;
  int e, n;
  char s[16];

  setenv("FSDP_OPTIONS", "-fsdp_t_env 'two words' -fsdp_t_both env", 1);
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));

  /* Values from the command line, in both "-name value" and "-name=value" forms. */
  TEST_OK(FSDPOptionsGetInt("-fsdp_t_int", "an int", 1, 0, 100, &i64, &set));
  TEST_ASSERT(i64 == 42 && set, "int %lld set %d", (long long)i64, set);
  TEST_OK(FSDPOptionsGetReal("-fsdp_t_real", "a real", 1.0, &r, &set));
  TEST_ASSERT(r == -2.5e-3 && set, "real %g", r);
  TEST_OK(FSDPOptionsGetBool("-fsdp_t_flag", "a flag", false, &b, &set));
  TEST_ASSERT(b && set, "a bare flag is true");
  TEST_OK(FSDPOptionsGetBool("-fsdp_t_bool", "a bool", true, &b, &set));
  TEST_ASSERT(!b && set, "off/no is false");
  TEST_OK(FSDPOptionsGetEnum("-fsdp_t_enum", "an enum", acts, 0, &e, &set));
  TEST_ASSERT(e == 2 && set, "enum index %d (case-insensitive match of gelu)", e);
  TEST_OK(FSDPOptionsGetString("-fsdp_t_str", "a string", "x", s, sizeof s, &set));
  TEST_ASSERT(strcmp(s, "hello") == 0 && set, "string '%s'", s);
  n = 4;
  TEST_OK(FSDPOptionsGetIntList("-fsdp_t_ilist", "ints", ilist, &n, &set));
  TEST_ASSERT(n == 3 && ilist[0] == 1 && ilist[1] == -2 && ilist[2] == 3 && set, "int list n=%d", n);
  n = 2;
  TEST_OK(FSDPOptionsGetRealList("-fsdp_t_rlist", "reals", rlist, &n, &set));
  TEST_ASSERT(n == 2 && rlist[0] == 0.5 && rlist[1] == 1000.0, "real list n=%d", n);
  TEST_OK(FSDPOptionsGetInt("-fsdp_t_neg", "a negative value is a value, not an option", 0, -10, 10, &i64, NULL));
  TEST_ASSERT(i64 == -7, "negative int %lld", (long long)i64);

  /* FSDP_OPTIONS, with quotes; the command line overrides it. */
  TEST_OK(FSDPOptionsGetString("-fsdp_t_env", "from the environment", "", s, sizeof s, &set));
  TEST_ASSERT(strcmp(s, "two words") == 0 && set, "env string '%s'", s);
  TEST_OK(FSDPOptionsGetString("-fsdp_t_both", "in both", "", s, sizeof s, NULL));
  TEST_ASSERT(strcmp(s, "argv") == 0, "command line must override FSDP_OPTIONS, got '%s'", s);
  /* ... and the program overrides both. */
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_both", "api"));
  TEST_OK(FSDPOptionsGetString("-fsdp_t_both", "in both", "", s, sizeof s, NULL));
  TEST_ASSERT(strcmp(s, "api") == 0, "FSDPOptionsSetValue must override, got '%s'", s);

  /* Options not given: defaults, set = false, lists untouched. */
  TEST_OK(FSDPOptionsGetInt("-fsdp_t_unset", "unset", 17, 0, 100, &i64, &set));
  TEST_ASSERT(i64 == 17 && !set, "default int");
  TEST_OK(FSDPOptionsGetReal("-fsdp_t_unset_r", "unset", 0.25, &r, &set));
  TEST_ASSERT(r == 0.25 && !set, "default real");
  TEST_OK(FSDPOptionsGetEnum("-fsdp_t_unset_e", "unset", acts, 1, &e, &set));
  TEST_ASSERT(e == 1 && !set, "default enum");
  TEST_OK(FSDPOptionsGetString("-fsdp_t_unset_s", "unset", "dflt", s, sizeof s, &set));
  TEST_ASSERT(strcmp(s, "dflt") == 0 && !set, "default string");
  n = 4;
  ilist[0] = 99;
  TEST_OK(FSDPOptionsGetIntList("-fsdp_t_unset_l", "unset", ilist, &n, &set));
  TEST_ASSERT(n == 4 && ilist[0] == 99 && !set, "unset list untouched");

  /* Cleared options fall back to their defaults. */
  TEST_OK(FSDPOptionsClearValue("-fsdp_t_int"));
  TEST_OK(FSDPOptionsGetInt("-fsdp_t_int", "an int", 1, 0, 100, &i64, &set));
  TEST_ASSERT(i64 == 1 && !set, "cleared option reads its default");

  /* Malformed integers. */
  EXPECT_BAD_INT("abc", 0, 10, "'abc' (from the program) is not an integer");
  EXPECT_BAD_INT("1.5", 0, 10, "'1.5' (from the program) is not an integer");
  EXPECT_BAD_INT("12x", 0, 10, "'12x'");
  EXPECT_BAD_INT("", 0, 10, "'' (from the program) is not an integer");
  EXPECT_BAD_INT("99999999999999999999", INT64_MIN, INT64_MAX, "is not an integer that fits in 64 bits");
  EXPECT_BAD_INT("11", 0, 10, "11 (from the program) is out of range [0, 10]");
  EXPECT_BAD_INT(NULL, 0, 10, "needs a value");
  /* Malformed reals, bools, enums, strings and lists. */
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", "abc"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetReal("-fsdp_t_bad", "bad", 0, &r, NULL));
  TEST_MESSAGE_HAS("option -fsdp_t_bad: 'abc' (from the program) is not a real number");
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", "nan"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetReal("-fsdp_t_bad", "bad", 0, &r, NULL));
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", "1e999"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetReal("-fsdp_t_bad", "bad", 0, &r, NULL));
  TEST_MESSAGE_HAS("'1e999'");
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", "maybe"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetBool("-fsdp_t_bad", "bad", false, &b, NULL));
  TEST_MESSAGE_HAS("option -fsdp_t_bad: 'maybe' (from the program) is not a boolean");
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", "gleu"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetEnum("-fsdp_t_bad", "bad", acts, 0, &e, NULL));
  TEST_MESSAGE_HAS("option -fsdp_t_bad: 'gleu' (from the program) is not one of relu tanh gelu; did you mean 'gelu'?");
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", "much-too-long-for-the-buffer"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetString("-fsdp_t_bad", "bad", "", s, sizeof s, NULL));
  TEST_MESSAGE_HAS("is longer than 15 characters");
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", "1,,2"));
  n = 4;
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetIntList("-fsdp_t_bad", "bad", ilist, &n, NULL));
  TEST_MESSAGE_HAS("'1,,2' (from the program) has an empty item");
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", "1,x,2"));
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetIntList("-fsdp_t_bad", "bad", ilist, &n, NULL));
  TEST_MESSAGE_HAS("item 'x' of '1,x,2' (from the program) is not an integer");
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_bad", "1,2,3"));
  n = 2;
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetRealList("-fsdp_t_bad", "bad", rlist, &n, NULL));
  TEST_MESSAGE_HAS("has more than 2 items");

  /* Strings of options, strict like FSDP_OPTIONS. */
  TEST_OK(FSDPOptionsInsertString("  -fsdp_t_ins 5   -fsdp_t_ins_flag "));
  TEST_OK(FSDPOptionsGetInt("-fsdp_t_ins", "inserted", 0, 0, 10, &i64, NULL));
  TEST_OK(FSDPOptionsGetBool("-fsdp_t_ins_flag", "inserted flag", false, &b, NULL));
  TEST_ASSERT(i64 == 5 && b, "inserted string");
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsInsertString("-fsdp_t_x 1 stray"));
  TEST_MESSAGE_HAS("'stray' is not a libfsdp option");
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsInsertString("-log_view"));
  TEST_MESSAGE_HAS("'-log_view' is not a libfsdp option (options start with -fsdp_");
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsInsertString("-fsdp_t_q 'open"));
  TEST_MESSAGE_HAS("unterminated ' quote");

  /* Mistakes in the calls themselves. */
  TEST_CODE(FSDP_ERR_ARG, FSDPOptionsGetInt("fsdp_t_nodash", "x", 0, 0, 1, &i64, NULL));
  TEST_MESSAGE_HAS("'fsdp_t_nodash' must start with '-'");
  TEST_CODE(FSDP_ERR_ARG, FSDPOptionsGetInt("-fsdp_t_range", "x", 5, 0, 1, &i64, NULL));
  TEST_CODE(FSDP_ERR_ARG, FSDPOptionsGetEnum("-fsdp_t_e2", "x", acts, 3, &e, NULL));

  /* The database as a table: every option, its value and source. */
  {
    Capture cap;
    char *out;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    TEST_OK(FSDPOptionsSetValue("-fsdp_t_unread", "9"));
    capture_begin(&cap, 1);
    TEST_OK(FSDPOptionsView(NULL));
    out = capture_end(&cap);
    if (rank == 0)
      TEST_ASSERT(strstr(out, "\n  -fsdp_t_both api (from the program)\n") &&
                      strstr(out, "\n  -fsdp_t_env two words (from FSDP_OPTIONS)\n") &&
                      strstr(out, "\n  -fsdp_t_str hello (from the command line)\n") &&
                      strstr(out, "\n  -fsdp_t_unread 9 (from the program, not used yet)\n"),
                  "FSDPOptionsView printed:\n%s", out);
    else TEST_ASSERT(out[0] == '\0', "rank %d printed:\n%s", rank, out);
    free(out);
    TEST_OK(FSDPOptionsClearValue("-fsdp_t_unread"));
  }

  TEST_OK(FSDPOptionsClearValue("-fsdp_t_bad"));
  TEST_OK(FSDPOptionsClearValue("-fsdp_t_x"));
  TEST_OK(FSDPOptionsClearValue("-fsdp_t_q"));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_PRINT));
  TEST_OK(FSDPFinalize());
  return 0;
}
