/* FSDPInitialize/FSDPFinalize: MPI (only when the user has not started it),
   the options database, logging, and the reports printed at the end. */
#include <signal.h>
#include <string.h>

#include "fsdpimpl.h"
#include "simd.h"

/* libfsdp's host communication thread issues collectives while the
   application thread may call MPI too. */
#define FSDP_MPI_THREAD_NEEDED MPI_THREAD_MULTIPLE

static struct {
  bool initialized;
  bool initialized_mpi; /* MPI_Init_thread was ours, so MPI_Finalize is too */
  MPI_Comm world;
  bool log_view;
  bool options_left;
} sys = {.world = MPI_COMM_NULL};

static const char *thread_level_name(int level)
{
  switch (level) {
  case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  default: return "an unknown thread level";
  }
}

MPI_Comm FSDPCommWorld_Private(void) { return sys.world; }

static volatile sig_atomic_t pending_signal;

void FSDPNotifySignal(int signo) { pending_signal = signo; }

int FSDPPendingSignal_Private(void) { return pending_signal; }

FSDPErrorCode FSDPInitialized(bool *initialized)
{
  FSDPCheck(initialized, MPI_COMM_SELF, FSDP_ERR_ARG, "initialized must not be NULL");
  *initialized = sys.initialized;
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPGetVersion(int *major, int *minor, int *patch)
{
  if (major) *major = FSDP_VERSION_MAJOR;
  if (minor) *minor = FSDP_VERSION_MINOR;
  if (patch) *patch = FSDP_VERSION_PATCH;
  return FSDP_SUCCESS;
}

static FSDPErrorCode read_sys_options(void)
{
  static const char *const on_error[] = {"print", "return", "abort", NULL};
  int mode;
  bool set;

  FSDPCall(FSDPOptionsGetBool("-fsdp_log_view", "print the event and memory table at FSDPFinalize", false,
                              &sys.log_view, NULL));
  FSDPCall(FSDPOptionsGetBool("-fsdp_options_left", "warn at FSDPFinalize about options given but never used", true,
                              &sys.options_left, NULL));
  FSDPCall(FSDPOptionsGetEnum("-fsdp_on_error",
                              "on an error: print a traceback and return, return silently, or print and MPI_Abort",
                              on_error, FSDP_ERRORS_PRINT, &mode, &set));
  if (set) FSDPCall(FSDPSetErrorMode((FSDPErrorMode)mode));
  FSDPCall(FSDPSimdSetFromOptions_Private());
  {
    bool debug;
    double timeout;
    FSDPCall(FSDPOptionsGetBool("-fsdp_debug_collectives",
                                "check at each collective call that every rank of its communicator makes the same "
                                "call (a small all-reduce per call), and before each collective of a unit",
                                false, &debug, NULL));
    FSDPCall(FSDPOptionsGetReal("-fsdp_collective_timeout", FSDP_COLLECTIVE_TIMEOUT_HELP, 600, &timeout, NULL));
    FSDPCheck(timeout >= 0, MPI_COMM_SELF, FSDP_ERR_OPTION,
              "-fsdp_collective_timeout %g: the timeout is >= 0 seconds (0 turns the watchdog off)", timeout);
    FSDPCall(FSDPCollectiveChecksSet_Private(debug, timeout > 0 ? timeout : 1e9));
  }
  if (sys.log_view) FSDPCall(FSDPLogSetActive(true));
  {
    char path[1024];
    FSDPCall(FSDPOptionsGetString(
        "-fsdp_log_trace", "write every timed span as Chrome trace events (Perfetto) to this file at FSDPFinalize", "",
        path, sizeof path, &set));
    if (set && path[0]) FSDPCall(FSDPTraceStart_Private(path));
  }
  return FSDP_SUCCESS;
}

/* FSDPFinalize's reports are collective on the world: every rank must ask
   for them, or none (a rank with -fsdp_log_view alone would wait forever). */
static FSDPErrorCode agree_on_sys_options(void)
{
  FSDPSetting s[4];
  FSDPCall(FSDPSettingSet_Private(&s[0], "-fsdp_log_view", "%s", sys.log_view ? "true" : "false"));
  FSDPCall(FSDPSettingSet_Private(&s[1], "-fsdp_options_left", "%s", sys.options_left ? "true" : "false"));
  FSDPCall(FSDPSettingSet_Private(&s[2], "-fsdp_log_trace", "%s", FSDPTraceOn_Private() ? "a file" : "none"));
  FSDPCall(
      FSDPSettingSet_Private(&s[3], "-fsdp_debug_collectives", "%s", FSDPCollectiveChecks_Private ? "true" : "false"));
  FSDPCall(FSDPSettingsAgree_Private(sys.world, "FSDPInitialize", 4, s));
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPInitialize(int *argc, char ***argv)
{
  int up = 0, down = 0, provided = MPI_THREAD_SINGLE, rank;

  if (sys.initialized) return FSDP_SUCCESS;
  MPI_Finalized(&down);
  FSDPCheck(!down, MPI_COMM_SELF, FSDP_ERR_STATE,
            "MPI has been finalized already: FSDPInitialize() must come before MPI_Finalize()");
  MPI_Initialized(&up);
  if (!up) {
    /* MPI's start-up (its transports, their libraries) runs with the caller's traps masked and leaves no flag. */
    fenv_t fpenv;
    int mpierr;
    FSDPFPEnter_Private(&fpenv);
    mpierr = MPI_Init_thread(argc, argv, FSDP_MPI_THREAD_NEEDED, &provided);
    FSDPFPLeave_Private(&fpenv);
    if (mpierr != MPI_SUCCESS) return FSDPErrorMPI(__LINE__, __func__, __FILE__, mpierr, "MPI_Init_thread");
    sys.initialized_mpi = true;
  } else FSDPCallMPI(MPI_Query_thread(&provided));
  FSDPCallMPI(MPI_Comm_dup(MPI_COMM_WORLD, &sys.world));
  FSDPCallMPI(MPI_Comm_set_errhandler(sys.world, MPI_ERRORS_RETURN));
  FSDPCallMPI(MPI_Comm_rank(sys.world, &rank));
  /* From here on FSDPFinalize can undo what was done, even if options are bad. */
  sys.initialized = true;
  FSDPCall(FSDPLogInitialize_Private());
  {
    /* FSDP_OPTIONS and options files may differ per rank: a rank whose options
       are wrong does not leave the others alone in the collectives to come. */
    FSDPErrorCode ierr = FSDPOptionsInitialize_Private(argc, argv);
    if (!ierr) ierr = read_sys_options();
    FSDPCall(FSDPErrorAgree_Private(sys.world, ierr));
  }
  FSDPCall(agree_on_sys_options());
  if (provided < FSDP_MPI_THREAD_NEEDED && rank == 0) {
    fprintf(stderr,
            "libfsdp WARNING: MPI provides %s, but libfsdp needs %s to communicate on its own thread;\n"
            "libfsdp WARNING: communication will not overlap computation. Initialize MPI with\n"
            "libfsdp WARNING: MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), or let FSDPInitialize do "
            "it.\n",
            thread_level_name(provided), thread_level_name(FSDP_MPI_THREAD_NEEDED));
    fflush(stderr);
  }
  return FSDP_SUCCESS;
}

FSDPErrorCode FSDPFinalize(void)
{
  FSDPErrorCode trace_err;
  FSDPCheck(sys.initialized, MPI_COMM_SELF, FSDP_ERR_STATE, "FSDPFinalize() called without FSDPInitialize()");
  FSDPCollectiveTeardown(sys.world);
  /* A trace that cannot be written (the error says why, on every rank) still
     lets the library and MPI finalize; the error is returned at the end. */
  trace_err = FSDPTraceWrite_Private(sys.world);
  if (sys.log_view) FSDPCall(FSDPLogView(NULL));
  if (sys.options_left) FSDPCall(FSDPOptionsLeft(NULL, NULL));
  FSDPCall(FSDPOptionsFinalize_Private());
  FSDPCall(FSDPLogFinalize_Private());
  FSDPCollectiveChecksFinalize_Private();
  FSDPCallMPI(MPI_Comm_free(&sys.world));
  sys.initialized = false;
  if (sys.initialized_mpi) {
    fenv_t fpenv;
    int mpierr;
    sys.initialized_mpi = false;
    FSDPFPEnter_Private(&fpenv);
    mpierr = MPI_Finalize();
    FSDPFPLeave_Private(&fpenv);
    if (mpierr != MPI_SUCCESS) return FSDPErrorMPI(__LINE__, __func__, __FILE__, mpierr, "MPI_Finalize");
  }
  return trace_err;
}

FSDPErrorCode FSDPCheckCreateComm_Private(MPI_Comm comm, const char *caller)
{
  int up = 0;
  MPI_Initialized(&up);
  FSDPCheck(up, MPI_COMM_SELF, FSDP_ERR_STATE, "%s needs MPI: call FSDPInitialize or MPI_Init first", caller);
  FSDPCheck(comm != MPI_COMM_NULL, MPI_COMM_SELF, FSDP_ERR_ARG, "%s: comm must not be MPI_COMM_NULL", caller);
  return FSDP_SUCCESS;
}
