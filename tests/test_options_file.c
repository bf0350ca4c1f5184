/* -options_file FILE: options read from a file as if given in its place, with
   # comments and quotes; where they sit between FSDP_OPTIONS, the rest of the
   command line and the program; the program's argv with the file's words in
   place of the pair; and a clear error for a missing file and each kind of
   bad line, naming the file and the line, on every rank.  MPI is started here,
   so that each case is one FSDPInitialize/FSDPFinalize with its own argv.
   mpitest: -n 2 */
#include "testutil.h"

static char dir[200];
static int rank;

/* Write dir/name (rank 0; every rank gets the path). */
static const char *file(const char *name, const char *text)
{
  static char paths[16][256];
  static int next;
  char *path = paths[next++ % 16];
  snprintf(path, sizeof paths[0], "%s/%s", dir, name);
  if (rank == 0) {
    FILE *f = fopen(path, "w");
    TEST_ASSERT(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

/* FSDPInitialize with this argv (NULL-terminated, argv[0] first) and FSDP_OPTIONS (NULL: unset). */
static FSDPErrorCode initialize(const char *env, char **args, int *argc, char ***argv)
{
  FSDPErrorCode err;
  Capture cap;
  if (env) setenv("FSDP_OPTIONS", env, 1);
  else unsetenv("FSDP_OPTIONS");
  for (*argc = 0; args[*argc];) (*argc)++;
  *argv = args;
  capture_begin(&cap, 2); /* the traceback of an expected error */
  err = FSDPInitialize(argc, argv);
  free(capture_end(&cap));
  return err;
}

static void expect_string(const char *name, const char *want)
{
  char got[64];
  bool set;
  TEST_OK(FSDPOptionsGetString(name, "test", "unset", got, sizeof got, &set));
  TEST_ASSERT(!strcmp(got, want), "%s is '%s', expected '%s'", name, got, want);
}

/* An option whose value is not an integer: the error says where the value came from. */
static void expect_from(const char *name, const char *from)
{
  int64_t v;
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsGetInt(name, "test", 0, 0, 1, &v, NULL));
  TEST_MESSAGE_HAS(from);
}

/* FSDPInitialize fails with `code`, saying `text`; FSDPFinalize still cleans up. */
static void expect_init_error(const char *env, char **args, FSDPErrorCode code, const char *text)
{
  int argc;
  char **argv;
  TEST_CODE(code, initialize(env, args, &argc, &argv));
  TEST_MESSAGE_HAS(text);
  TEST_OK(FSDPFinalize());
}

static void test_precedence(void)
{
  const char *job = file("job.opts", "# a job's configuration\n"
                                     "\n"
                                     "   -fsdp_t_b file   # after a value\n"
                                     "-fsdp_t_c file -fsdp_t_flag\n"
                                     "\t-fsdp_t_words 'two words' -fsdp_t_hash a#b -fsdp_t_quoted '#1'\n"
                                     "-steps 5   -prog_flag -fsdp_t_last\n");
  char *args[] = {"prog", "-fsdp_t_c", "early", "-options_file", (char *)job, "positional", "-fsdp_t_e", "late", NULL};
  /* The program's argv: the file's words in place of the pair, the rest as it was. */
  const char *want[] = {"prog",           "-fsdp_t_c",    "early",         "-fsdp_t_b", "file",         "-fsdp_t_c",
                        "file",           "-fsdp_t_flag", "-fsdp_t_words", "two words", "-fsdp_t_hash", "a#b",
                        "-fsdp_t_quoted", "#1",           "-steps",        "5",         "-prog_flag",   "-fsdp_t_last",
                        "positional",     "-fsdp_t_e",    "late"};
  const int nwant = (int)(sizeof want / sizeof want[0]);
  int argc;
  char **argv;
  bool flag;

  TEST_OK(initialize("-fsdp_t_a env -fsdp_t_b env -fsdp_t_c env -fsdp_t_e env", args, &argc, &argv));
  TEST_ASSERT(argc == nwant && argv[argc] == NULL, "argc %d after expanding the file, expected %d", argc, nwant);
  for (int i = 0; i < nwant; i++)
    TEST_ASSERT(!strcmp(argv[i], want[i]), "argv[%d] is '%s', expected '%s'", i, argv[i], want[i]);
  /* FSDP_OPTIONS < the file < what follows it on the command line; what precedes it < the file. */
  expect_string("-fsdp_t_a", "env");
  expect_string("-fsdp_t_b", "file");
  expect_string("-fsdp_t_c", "file");
  expect_string("-fsdp_t_e", "late");
  expect_string("-fsdp_t_words", "two words");
  expect_string("-fsdp_t_hash", "a#b");
  expect_string("-fsdp_t_quoted", "#1");
  TEST_OK(FSDPOptionsGetBool("-fsdp_t_flag", "test", false, &flag, NULL));
  TEST_ASSERT(flag, "-fsdp_t_flag, a bare flag in the file, is not set");
  /* The file's last flag does not take the command line's next word as its value. */
  TEST_OK(FSDPOptionsGetBool("-fsdp_t_last", "test", false, &flag, NULL));
  TEST_ASSERT(flag, "-fsdp_t_last, a bare flag at the end of the file, is not set");
  expect_string("-options_file", job);
  /* Errors name the file and line a value came from. */
  {
    char where[300];
    snprintf(where, sizeof where, "'file' (from options file '%s' line 3)", job);
    expect_from("-fsdp_t_b", where);
    snprintf(where, sizeof where, "'file' (from options file '%s' line 4)", job);
    expect_from("-fsdp_t_c", where);
  }
  expect_from("-fsdp_t_a", "'env' (from FSDP_OPTIONS)");
  expect_from("-fsdp_t_e", "'late' (from the command line)");
  /* The program comes last. */
  TEST_OK(FSDPOptionsSetValue("-fsdp_t_b", "program"));
  expect_string("-fsdp_t_b", "program");
  TEST_OK(FSDPFinalize());
}

static void test_other_sources(void)
{
  const char *lib = file("lib.opts", "-fsdp_t_x from_file\n");
  (void)file("outer.opts", "-fsdp_t_y outer\n-options_file lib.opts\n");
  char *plain[] = {"prog", NULL};
  char env[512];
  int argc;
  char **argv;

  /* From FSDP_OPTIONS, with -options_file=FILE: argv stays the caller's. */
  snprintf(env, sizeof env, "-fsdp_t_x env -options_file=%s", lib);
  TEST_OK(initialize(env, plain, &argc, &argv));
  TEST_ASSERT(argv == plain && argc == 1, "argv changed without an options file on the command line");
  expect_string("-fsdp_t_x", "from_file");
  /* From the program, and a file naming another (relative to the working directory). */
  TEST_ASSERT(chdir(dir) == 0, "cannot enter %s", dir);
  TEST_OK(FSDPOptionsInsertString("-options_file outer.opts"));
  expect_string("-fsdp_t_y", "outer");
  expect_string("-fsdp_t_x", "from_file");
  /* Written on Windows: a byte-order mark, CR LF line ends, no newline at the end. */
  (void)file("windows.opts", "\xEF\xBB\xBF-fsdp_t_crlf yes\r\n\r\n-fsdp_t_final 3");
  TEST_OK(FSDPOptionsInsertString("-options_file windows.opts"));
  expect_string("-fsdp_t_crlf", "yes");
  expect_string("-fsdp_t_final", "3");
  /* Files naming files: 8 deep is fine, 9 is a loop. */
  for (int i = 1; i <= 9; i++) {
    char name[32], text[64];
    snprintf(name, sizeof name, "chain%d.opts", i);
    if (i < 9) snprintf(text, sizeof text, "-fsdp_t_depth %d -options_file chain%d.opts\n", i, i + 1);
    else snprintf(text, sizeof text, "-fsdp_t_end 9\n");
    (void)file(name, text);
  }
  TEST_OK(FSDPOptionsInsertString("-options_file chain2.opts"));
  expect_string("-fsdp_t_depth", "8");
  expect_string("-fsdp_t_end", "9");
  TEST_CODE(FSDP_ERR_OPTION, FSDPOptionsInsertString("-options_file chain1.opts"));
  TEST_MESSAGE_HAS("-options_file 'chain9.opts' (from options file 'chain8.opts' line 1): options files name each "
                   "other more than 8 deep");
  /* Setting the option would not read the file: the program is told what to call instead. */
  TEST_CODE(FSDP_ERR_ARG, FSDPOptionsSetValue("-options_file", "lib.opts"));
  TEST_MESSAGE_HAS("use FSDPOptionsInsertString(\"-options_file FILE\")");
  TEST_OK(FSDPFinalize());
}

/* -options_file NAME, NAME holding `text`: FSDPInitialize fails with `code`, saying `message` (%s: NAME's path). */
static void expect_bad_file(const char *name, const char *text, FSDPErrorCode code, const char *message)
{
  const char *path = file(name, text);
  char *args[] = {"prog", "-options_file", (char *)path, NULL}, want[512];
  snprintf(want, sizeof want, message, path);
  expect_init_error(NULL, args, code, want);
}

static void test_errors(void)
{
  char text[512], env[512];
  const char *missing = file("absent.opts", ""), *loop, *program;
  char *args[] = {"prog", "-options_file", (char *)missing, NULL};

  if (rank == 0) remove(missing);
  MPI_Barrier(MPI_COMM_WORLD);
  snprintf(text, sizeof text, "-options_file '%s' (from the command line): cannot open it: No such file or directory",
           missing);
  expect_init_error(NULL, args, FSDP_ERR_IO, text);

  expect_bad_file("stray.opts", "-fsdp_t_a 1\nfsdp_t_b 2\n", FSDP_ERR_OPTION,
                  "options file '%s' line 2: 'fsdp_t_b' is not an option");
  expect_bad_file("two.opts", "# one value each\n-fsdp_t_a 1 2\n", FSDP_ERR_OPTION,
                  "options file '%s' line 2: '2' follows -fsdp_t_a's value '1': an option takes one value");
  expect_bad_file("quote.opts", "-fsdp_t_a 'open\n", FSDP_ERR_OPTION, "options file '%s' line 1: unterminated ' quote");
  expect_bad_file("noname.opts", "-fsdp_t_a 1\n\n-options_file\n", FSDP_ERR_OPTION,
                  "-options_file (from options file '%s' line 3) needs a file name");
  args[1] = "-options_file=";
  args[2] = NULL;
  expect_init_error(NULL, args, FSDP_ERR_OPTION, "-options_file (from the command line) needs a file name");

  loop = file("loop.opts", "-fsdp_t_a 1\n");
  snprintf(text, sizeof text, "-options_file %s\n", loop);
  loop = file("loop.opts", text);
  args[1] = "-options_file";
  args[2] = (char *)loop;
  expect_init_error(NULL, args, FSDP_ERR_OPTION, "options files name each other more than 8 deep");

  /* FSDP_OPTIONS holds libfsdp's options only, and so do the files it names. */
  program = file("program.opts", "-fsdp_t_a 1 -steps 5\n");
  snprintf(env, sizeof env, "-options_file %s", program);
  snprintf(text, sizeof text,
           "options file '%s' line 1: '-steps' is not a libfsdp option (options start with -fsdp_ or are -help or "
           "-options_file); only files named on the command line may hold the program's own options",
           program);
  args[1] = NULL;
  expect_init_error(env, args, FSDP_ERR_OPTION, text);
}

int main(int argc, char **argv)
{
  const char *tmp = getenv("TMPDIR");
  char cwd[1024];
  int provided;

  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  TEST_ASSERT(getcwd(cwd, sizeof cwd), "getcwd failed");
  if (rank == 0) {
    snprintf(dir, sizeof dir, "%s/fsdp-test-options-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    TEST_ASSERT(mkdtemp(dir), "cannot make a directory %s", dir);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);

  test_precedence();
  test_other_sources();
  test_errors();

  TEST_ASSERT(chdir(cwd) == 0, "cannot return to %s", cwd);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    const char *names[] = {"job.opts",    "lib.opts",    "outer.opts",  "stray.opts",   "two.opts",
                           "quote.opts",  "noname.opts", "loop.opts",   "program.opts", "windows.opts",
                           "chain1.opts", "chain2.opts", "chain3.opts", "chain4.opts",  "chain5.opts",
                           "chain6.opts", "chain7.opts", "chain8.opts", "chain9.opts"};
    char path[300];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
      snprintf(path, sizeof path, "%s/%s", dir, names[i]);
      TEST_ASSERT(remove(path) == 0, "cannot remove %s", path);
    }
    TEST_ASSERT(rmdir(dir) == 0, "cannot remove %s", dir);
  }
  if (rank == 0) printf("test_options_file: precedence, comments, argv and every bad file checked\n");
  MPI_Finalize();
  return 0;
}
