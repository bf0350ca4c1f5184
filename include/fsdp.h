/** @file fsdp.h
    The public C interface of libfsdp, Fully Sharded Data Parallel training for MPI programs.  One header;
    every function returns an FSDPErrorCode (FSDP_SUCCESS is 0).  doc/ tells the whole story. */
#ifndef FSDP_H
#define FSDP_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fsdpconf.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
/** What libfsdp exports: the library builds with -fvisibility=hidden, so a function is public exactly when its
    declaration here says FSDP_EXTERN.  Expands to extern, with default visibility under GCC and Clang. */
#define FSDP_EXTERN extern __attribute__((visibility("default")))
#else
/** What libfsdp exports: the library builds with -fvisibility=hidden, so a function is public exactly when its
    declaration here says FSDP_EXTERN.  Expands to extern, with default visibility under GCC and Clang. */
#define FSDP_EXTERN extern
#endif

#if defined(__GNUC__) || defined(__clang__)
/** Marks a function as printf-like so that GCC and Clang check its format: fmt is the position of the format
    argument, args that of the first value.  Expands to nothing with other compilers.
    @see FSDPError */
#define FSDP_ATTR_FORMAT(fmt, args) __attribute__((format(printf, fmt, args)))
/** Evaluates cond and tells the compiler it is rarely true, for the error branches of FSDPCall and friends.
    Its value is cond's truth (0 or 1 under GCC and Clang, cond itself with other compilers).
    @see FSDPCall, FSDPCheck */
#define FSDPUnlikely(cond) __builtin_expect(!!(cond), 0)
#else
/** Marks a function as printf-like so that GCC and Clang check its format: fmt is the position of the format
    argument, args that of the first value.  Expands to nothing with other compilers.
    @see FSDPError */
#define FSDP_ATTR_FORMAT(fmt, args)
/** Evaluates cond and tells the compiler it is rarely true, for the error branches of FSDPCall and friends.
    Its value is cond's truth (0 or 1 under GCC and Clang, cond itself with other compilers).
    @see FSDPCall, FSDPCheck */
#define FSDPUnlikely(cond) (cond)
#endif

/* ------------------------------------------------------------------ errors */

/** The error code every libfsdp function returns; FSDP_SUCCESS is 0.  FSDPGetErrorString gives each code's short
    text; doc/errors.md tells how errors are raised, printed and propagated.
    @see FSDPGetErrorString, FSDPGetLastError, FSDPCheck, FSDPErrorMode */
typedef enum {
  FSDP_SUCCESS = 0,     /**< no error */
  FSDP_ERR_ARG,         /**< an argument is invalid: NULL, out of range, inconsistent */
  FSDP_ERR_STATE,       /**< the object is not in a state that allows this call */
  FSDP_ERR_MEM,         /**< out of memory */
  FSDP_ERR_MPI,         /**< an MPI call failed */
  FSDP_ERR_HWLOC,       /**< hwloc topology discovery failed */
  FSDP_ERR_HDF5,        /**< an HDF5 call failed */
  FSDP_ERR_CUDA,        /**< a CUDA runtime or cuBLAS call failed */
  FSDP_ERR_NCCL,        /**< an NCCL call failed */
  FSDP_ERR_IO,          /**< a file system operation failed */
  FSDP_ERR_OPTION,      /**< a runtime option has a malformed or invalid value */
  FSDP_ERR_UNSUPPORTED, /**< not supported by this build or configuration */
  FSDP_ERR_TIMEOUT,     /**< a collective or a wait did not finish in time */
  FSDP_ERR_CORRUPT,     /**< data failed verification (checksum, format) */
  FSDP_ERR_USER,        /**< raised by user code or a user callback */
  FSDP_ERR_INTERNAL,    /**< a bug in libfsdp: please report it */
  FSDP_ERR_NOT_FINITE,  /**< a loss, gradient or parameter is NaN or infinite (-fsdp_check_finite) */
  FSDP_ERR_NUM_CODES    /**< the number of codes; not a code */
} FSDPErrorCode;

/** What happens when an error is raised (see FSDPSetErrorMode).  The mode is the process's, for all its threads;
    -fsdp_on_error print|return|abort sets it at FSDPInitialize.  FSDP_ERRORS_ARE_FATAL aborts the communicator
    the error was raised on (FSDPCheck's comm; MPI_COMM_SELF for MPI errors).
    @see FSDPSetErrorMode, FSDPGetErrorMode, FSDPGetLastError */
typedef enum {
  FSDP_ERRORS_PRINT = 0, /**< print a traceback line per frame on stderr, return the code (default) */
  FSDP_ERRORS_RETURN,    /**< print nothing, return the code; FSDPGetLastError/FSDPErrorPrintTrace tell */
  FSDP_ERRORS_ARE_FATAL  /**< print the error and MPI_Abort at once */
} FSDPErrorMode;

/** Returns the short text of an error code, e.g. "invalid argument" for FSDP_ERR_ARG.
    The string is static: do not free it.
    @collective Not collective: each rank may call it alone, also before FSDPInitialize.
    @param[in] code  the error code
    @errors None: returns "unknown error code" for a code out of range.
    @see FSDPErrorCode, FSDPGetLastError, FSDPErrorPrintTrace */
FSDP_EXTERN const char *FSDPGetErrorString(FSDPErrorCode code);
/** Sets what happens when an error is raised: print a traceback and return the code, return it silently, or
    print and MPI_Abort.
    The mode is this process's, for all its threads; ranks may set different ones.  -fsdp_on_error
    print|return|abort sets it at FSDPInitialize.
    @collective Not collective: each rank may call it alone, also before FSDPInitialize.
    @param[in] mode  FSDP_ERRORS_PRINT (the default), FSDP_ERRORS_RETURN or FSDP_ERRORS_ARE_FATAL
    @retval FSDP_ERR_ARG  mode is not one of the three
    @see FSDPErrorMode, FSDPGetErrorMode, FSDPGetLastError */
FSDP_EXTERN FSDPErrorCode FSDPSetErrorMode(FSDPErrorMode mode);
/** Gets what happens when an error is raised, as set by FSDPSetErrorMode or -fsdp_on_error.
    @collective Not collective: each rank may call it alone, also before FSDPInitialize.
    @param[out] mode  the error mode of this process
    @retval FSDP_ERR_ARG  mode is NULL
    @see FSDPSetErrorMode, FSDPErrorMode */
FSDP_EXTERN FSDPErrorCode FSDPGetErrorMode(FSDPErrorMode *mode);
/** Gets the last error raised on this thread: its code, message and traceback depth.
    The error stays until the next one is raised on this thread: later successful calls do not clear it.  With
    no error raised yet, the code is FSDP_SUCCESS, the message empty and the depth 0.  Tracebacks are per thread.
    @collective Not collective: each rank may call it alone.
    @param[out] code     the error's code; NULL if not wanted
    @param[out] message  its message, in this thread's storage, overwritten by its next error; NULL if not wanted
    @param[out] nframes  the number of frames kept (at most 64; deeper ones are printed, not kept); NULL if not
                         wanted
    @errors None: always returns FSDP_SUCCESS.
    @see FSDPErrorPrintTrace, FSDPGetErrorString, FSDPSetErrorMode */
FSDP_EXTERN FSDPErrorCode FSDPGetLastError(FSDPErrorCode *code, const char **message, int *nframes);
/** Prints the last error's traceback, one line per frame, prefixed by the rank.
    The first line has the code's text and the message, then one line per frame kept, innermost first; the
    prefix is the rank in MPI_COMM_WORLD (-1 when MPI is not running).  Prints nothing if no error has been raised
    on this thread.  Useful with FSDP_ERRORS_RETURN, which prints nothing itself.
    @collective Not collective: each rank may call it alone.
    @param[in] fp  the stream to print on, e.g. stderr
    @retval FSDP_ERR_ARG  fp is NULL (raised as a new error, which replaces the one to print)
    @see FSDPGetLastError, FSDPSetErrorMode */
FSDP_EXTERN FSDPErrorCode FSDPErrorPrintTrace(FILE *fp);

/** Raises an error: starts a new traceback on this thread with code and a printf-style message, and returns
    code.  Used by FSDPCheck; call it through the macro.
    Unless the mode is FSDP_ERRORS_RETURN it prints the error and this first frame on stderr.  With
    FSDP_ERRORS_ARE_FATAL it then calls MPI_Abort(comm, code) and does not return (MPI_COMM_NULL means
    MPI_COMM_WORLD; with MPI not running, abort()).  The message is truncated to 1023 characters.
    @collective Not collective: comm is only what an abort ends; nothing is communicated.
    @param[in] comm  the ranks that all see this error (MPI_COMM_SELF when only this one does)
    @param[in] line  the source line, __LINE__
    @param[in] func  the function, __func__; kept, not copied
    @param[in] file  the source file, __FILE__; kept, not copied
    @param[in] code  the error to raise
    @param[in] fmt   the message's printf format
    @param[in] ...   the values fmt formats
    @errors None of its own: returns code; with FSDP_ERRORS_ARE_FATAL it does not return.
    @see FSDPCheck, FSDPErrorTraceback, FSDPSetErrorMode, FSDPGetLastError */
FSDP_EXTERN FSDPErrorCode FSDPError(MPI_Comm comm, int line, const char *func, const char *file, FSDPErrorCode code,
                                    const char *fmt, ...) FSDP_ATTR_FORMAT(6, 7);
/** Adds a frame to this thread's traceback for an error a callee returned, and returns code.  Used by FSDPCall
    and FSDPCallAbort; call it through the macros.
    Unless the mode is FSDP_ERRORS_RETURN it prints the frame on stderr.  If this thread's last error has another
    code, or none, the code was returned without being raised (by a user callback, say): it is raised here, on
    MPI_COMM_SELF, with the message "error code N returned without a message".
    @collective Not collective: each rank may call it alone.
    @param[in] line  the source line, __LINE__
    @param[in] func  the function, __func__; kept, not copied
    @param[in] file  the source file, __FILE__; kept, not copied
    @param[in] code  the error the callee returned (not FSDP_SUCCESS)
    @errors None of its own: returns code; a code raised here with FSDP_ERRORS_ARE_FATAL does not return.
    @see FSDPCall, FSDPError, FSDPErrorPrintTrace */
FSDP_EXTERN FSDPErrorCode FSDPErrorTraceback(int line, const char *func, const char *file, FSDPErrorCode code);
/** Raises FSDP_ERR_MPI for a failed MPI call, with the call and MPI's own error string in the message.  Used by
    FSDPCallMPI; call it through the macro.
    It raises as FSDPError does, on MPI_COMM_SELF.
    @collective Not collective: each rank may call it alone.
    @param[in] line    the source line, __LINE__
    @param[in] func    the function, __func__; kept, not copied
    @param[in] file    the source file, __FILE__; kept, not copied
    @param[in] mpierr  the code the MPI call returned (not MPI_SUCCESS)
    @param[in] call    the call's text, for the message
    @retval FSDP_ERR_MPI  always; with FSDP_ERRORS_ARE_FATAL it does not return (MPI_Abort on MPI_COMM_SELF)
    @see FSDPCallMPI, FSDPError */
FSDP_EXTERN FSDPErrorCode FSDPErrorMPI(int line, const char *func, const char *file, int mpierr, const char *call);
/** Ends the job after an error: prints this thread's traceback on stderr if the mode is FSDP_ERRORS_RETURN (the
    other modes have printed it), then calls MPI_Abort(comm, code).  Used by FSDPCallAbort.
    MPI_COMM_NULL means MPI_COMM_WORLD; with MPI not running (not initialized, or finalized) it calls abort().
    If MPI_Abort has not ended the process within 10 s (a launcher that cannot be reached), the process exits by
    itself with code.
    @collective Not collective: one rank's call aborts comm.
    @param[in] comm  the communicator to abort; MPI_COMM_NULL for MPI_COMM_WORLD
    @param[in] code  the error, also the exit code
    @errors None: it does not return.
    @see FSDPCallAbort, FSDPErrorPrintTrace */
FSDP_EXTERN void FSDPErrorAbort(MPI_Comm comm, FSDPErrorCode code);

/** Calls a function that returns FSDPErrorCode; on error, adds this frame to the traceback and returns the code
    to the caller, so it belongs in functions that return FSDPErrorCode: FSDPCall(FSDPInitialize(&argc, &argv)).
    @see FSDPCheck, FSDPCallMPI, FSDPCallAbort, FSDPErrorTraceback */
#define FSDPCall(...)                                                                                                  \
  do {                                                                                                                 \
    FSDPErrorCode fsdp_ierr_ = (__VA_ARGS__);                                                                          \
    if (FSDPUnlikely(fsdp_ierr_ != FSDP_SUCCESS)) return FSDPErrorTraceback(__LINE__, __func__, __FILE__, fsdp_ierr_); \
  } while (0)

/** Raises `code` with a printf-style message when `cond` is false, and returns it to the caller.  `comm` holds
    the ranks that all see this error (MPI_COMM_SELF when only this one does); FSDP_ERRORS_ARE_FATAL aborts it.
    Example: FSDPCheck(n > 0, MPI_COMM_SELF, FSDP_ERR_ARG, "n must be positive, got %d", n).
    @see FSDPCall, FSDPError, FSDPErrorCode */
#define FSDPCheck(cond, comm, code, ...)                                                                               \
  do {                                                                                                                 \
    if (FSDPUnlikely(!(cond))) return FSDPError(comm, __LINE__, __func__, __FILE__, code, __VA_ARGS__);                \
  } while (0)

/** Calls an MPI function; a code other than MPI_SUCCESS becomes FSDP_ERR_MPI with MPI's own error string,
    returned to the caller.  The communicator needs MPI_ERRORS_RETURN (libfsdp sets it on every communicator it
    duplicates); under MPI's default handler an error aborts inside MPI.
    @see FSDPCall, FSDPErrorMPI */
#define FSDPCallMPI(...)                                                                                               \
  do {                                                                                                                 \
    int fsdp_mpierr_ = (__VA_ARGS__);                                                                                  \
    if (FSDPUnlikely(fsdp_mpierr_ != MPI_SUCCESS))                                                                     \
      return FSDPErrorMPI(__LINE__, __func__, __FILE__, fsdp_mpierr_, #__VA_ARGS__);                                   \
  } while (0)

/** For a program's top level: calls a function that returns FSDPErrorCode; on error, prints the whole traceback
    and calls MPI_Abort(comm, code).  It never returns from the calling function, so it fits main and functions of
    any return type.
    @see FSDPCall, FSDPErrorAbort */
#define FSDPCallAbort(comm, ...)                                                                                       \
  do {                                                                                                                 \
    FSDPErrorCode fsdp_ierr_ = (__VA_ARGS__);                                                                          \
    if (FSDPUnlikely(fsdp_ierr_ != FSDP_SUCCESS)) {                                                                    \
      (void)FSDPErrorTraceback(__LINE__, __func__, __FILE__, fsdp_ierr_);                                              \
      FSDPErrorAbort(comm, fsdp_ierr_);                                                                                \
    }                                                                                                                  \
  } while (0)

/* ------------------------------------------------------------------ initialization */

/** Initializes libfsdp: reads -fsdp_* options from argv and FSDP_OPTIONS, and calls MPI_Init_thread
    (MPI_THREAD_MULTIPLE) only when MPI is not initialized yet.
    argc and argv may be NULL.  When argv names options files (-options_file FILE), *argc and *argv are replaced
    by a list with each file's words in place of the pair, valid until FSDPFinalize.  If MPI provides less than
    MPI_THREAD_MULTIPLE, rank 0 warns that communication will not overlap computation.  A call while libfsdp is
    initialized returns FSDP_SUCCESS at once.  An option error on any rank is returned on every rank; libfsdp is
    then initialized nonetheless, and FSDPFinalize undoes it.
    @collective Collective on MPI_COMM_WORLD (MPI_Init_thread, MPI_Comm_dup): every rank calls it, and
    -fsdp_log_view, -fsdp_options_left, -fsdp_log_trace and -fsdp_debug_collectives must be given alike on all
    ranks.  A repeated call returns at once, without communicating.  (-fsdp_debug_collectives cannot check this
    call: MPI starts in it.)
    @param[in,out] argc  the program's argument count, or NULL
    @param[in,out] argv  the program's arguments, or NULL
    @retval FSDP_ERR_STATE        MPI has been finalized already
    @retval FSDP_ERR_MPI          MPI_Init_thread or another MPI call failed
    @retval FSDP_ERR_OPTION       an option value is malformed or invalid, a word in FSDP_OPTIONS is not a libfsdp
                                  option, a quote is unterminated, or -options_file has no file name or files name
                                  each other more than 8 deep
    @retval FSDP_ERR_IO           an options file cannot be opened or read
    @retval FSDP_ERR_UNSUPPORTED  -fsdp_simd names a SIMD level this CPU or build lacks
    @retval FSDP_ERR_ARG          -fsdp_log_view, -fsdp_options_left, -fsdp_log_trace or -fsdp_debug_collectives
                                  differ across ranks
    @retval FSDP_ERR_MEM          out of memory (the options, -fsdp_log_trace's span buffer)
    @options -help, -options_file, -fsdp_on_error, -fsdp_log_view, -fsdp_log_trace, -fsdp_options_left, -fsdp_simd,
    -fsdp_debug_collectives, -fsdp_collective_timeout (doc/options.md).
    @see FSDPFinalize, FSDPInitialized, FSDPSetErrorMode */
FSDP_EXTERN FSDPErrorCode FSDPInitialize(int *argc, char ***argv);
/** Finalizes libfsdp: writes the -fsdp_log_trace file, prints the -fsdp_log_view table and the report of options
    never used (-fsdp_options_left), and finalizes MPI only when FSDPInitialize initialized it.
    If the trace file cannot be written, it still finalizes and returns the error at the end.  Afterwards
    FSDPInitialize may be called again if MPI is still running.
    @collective Collective on MPI_COMM_WORLD: every rank calls it (the trace, the reports, MPI_Comm_free,
    MPI_Finalize).
    @retval FSDP_ERR_STATE  libfsdp is not initialized (no FSDPInitialize, or FSDPFinalize was called already)
    @retval FSDP_ERR_IO     the -fsdp_log_trace file cannot be written (on every rank, after finalizing)
    @retval FSDP_ERR_MPI    an MPI call failed, MPI_Finalize included
    @retval FSDP_ERR_MEM    out of memory gathering the trace or the reports
    @see FSDPInitialize, FSDPLogView, FSDPOptionsLeft */
FSDP_EXTERN FSDPErrorCode FSDPFinalize(void);
/** Tells whether libfsdp is initialized: between FSDPInitialize and FSDPFinalize.
    @collective Not collective: each rank may call it alone, also before FSDPInitialize.
    @param[out] initialized  true after FSDPInitialize (also one that returned an option error) until FSDPFinalize
    @retval FSDP_ERR_ARG  initialized is NULL
    @see FSDPInitialize, FSDPFinalize */
FSDP_EXTERN FSDPErrorCode FSDPInitialized(bool *initialized);
/** Records that the job is being stopped by a signal, for a program's SIGTERM/SIGUSR1 handler
    (async-signal-safe).  libfsdp only records it.  A collective that is then still waiting after the context's
    signal grace (-fsdp_signal_grace) aborts the job with a message naming the signal and the collective, instead
    of waiting for the watchdog: a peer that will never arrive is usually why a job does not stop at its signal.
    @collective Not collective: each rank records its own signal.
    @param[in] signo  the signal's number, e.g. SIGTERM; 0 withdraws the notice
    @errors None: any value is recorded.
    @see FSDPContextSetFromOptions */
FSDP_EXTERN void FSDPNotifySignal(int signo);

/** Gets the version of the libfsdp linked, major.minor.patch (FSDP_VERSION_* in fsdpconf.h as it was built).
    @collective Not collective: each rank may call it alone, also before FSDPInitialize.
    @param[out] major  the major version; NULL if not wanted
    @param[out] minor  the minor version; NULL if not wanted
    @param[out] patch  the patch level; NULL if not wanted
    @errors None: always returns FSDP_SUCCESS.
    @see FSDPInitialize */
FSDP_EXTERN FSDPErrorCode FSDPGetVersion(int *major, int *minor, int *patch);

/* ------------------------------------------------------------------ memory */

/** What a block of library memory is counted as: the category FSDPMalloc tags it with.
    FSDPGetMemoryStats, FSDPGetDeviceMemoryStats and -fsdp_log_view report bytes per category.
    @see FSDPMalloc, FSDPMemoryStats, FSDPMemCategoryName */
typedef enum {
  FSDP_MEM_PARAMS = 0,    /**< parameter shards (full precision) */
  FSDP_MEM_GRADS,         /**< gradient shards */
  FSDP_MEM_OPTIM_STATE,   /**< optimizer state shards */
  FSDP_MEM_UNSHARDED,     /**< unsharded (all-gathered) parameter and gradient buffers */
  FSDP_MEM_COMM_STAGING,  /**< communication staging buffers */
  FSDP_MEM_OTHER,         /**< everything else the library allocates */
  FSDP_MEM_NUM_CATEGORIES /**< the number of categories (not a category) */
} FSDPMemCategory;

/** This process's memory counters, per FSDPMemCategory and in total: host memory from FSDPGetMemoryStats,
    device memory from FSDPGetDeviceMemoryStats.
    @see FSDPGetMemoryStats, FSDPGetDeviceMemoryStats, FSDPMemoryResetPeak */
typedef struct {
  size_t current[FSDP_MEM_NUM_CATEGORIES]; /**< bytes allocated now */
  size_t peak[FSDP_MEM_NUM_CATEGORIES];    /**< most bytes allocated at once, since start or reset */
  size_t total_current;                    /**< bytes allocated now, all categories together */
  size_t total_peak;                       /**< most bytes allocated at once, all categories, since start or reset */
  uint64_t nallocs;                        /**< successful allocations, since start */
  uint64_t nfrees;                         /**< frees, since start */
} FSDPMemoryStats;

/** Allocates host memory, 64-byte aligned and counted in a memory category.
    ptr is the address of a pointer.  The memory is not zeroed; bytes may be 0.  *ptr is set to NULL before the
    allocation, so it is NULL when that fails.  Free the memory with FSDPFree.  Any thread may call it (the
    counters are atomic).
    @collective Not collective: each rank may call it alone.
    @param[in] bytes     the size in bytes
    @param[in] category  what the memory is counted as
    @param[out] ptr      the address of a pointer (a void ** passed as void *), which gets the memory
    @retval FSDP_ERR_ARG  ptr is NULL, or category is not an FSDPMemCategory
    @retval FSDP_ERR_MEM  out of memory, or bytes is so large that the size overflows
    @see FSDPCalloc, FSDPFree, FSDPGetMemoryStats */
FSDP_EXTERN FSDPErrorCode FSDPMalloc(size_t bytes, FSDPMemCategory category, void *ptr);
/** Allocates count * size bytes of zeroed host memory, 64-byte aligned and counted in a memory category.
    As FSDPMalloc, but on failure *ptr is left as it was.  Free the memory with FSDPFree.
    @collective Not collective: each rank may call it alone.
    @param[in] count     the number of elements
    @param[in] size      the size of an element in bytes
    @param[in] category  what the memory is counted as
    @param[out] ptr      the address of a pointer (a void ** passed as void *), which gets the memory; must not be
                         NULL (not checked)
    @retval FSDP_ERR_ARG  category is not an FSDPMemCategory
    @retval FSDP_ERR_MEM  out of memory, or count * size overflows
    @see FSDPMalloc, FSDPFree */
FSDP_EXTERN FSDPErrorCode FSDPCalloc(size_t count, size_t size, FSDPMemCategory category, void *ptr);
/** Frees memory from FSDPMalloc or FSDPCalloc and sets the pointer to NULL.
    ptr is the address of a pointer from FSDPMalloc/FSDPCalloc (or NULL); it is set to NULL.  A NULL pointer
    (*ptr NULL) is fine: nothing happens.
    @collective Not collective: each rank may call it alone.
    @param[in,out] ptr  the address of the pointer (a void ** passed as void *); the pointer is set to NULL
    @retval FSDP_ERR_ARG  ptr is NULL, or *ptr was not allocated by FSDPMalloc or was freed already (detected by a tag
                          in front of the block)
    @see FSDPMalloc, FSDPCalloc */
FSDP_EXTERN FSDPErrorCode FSDPFree(void *ptr);
/** Gets this process's host memory counters: what it holds through libfsdp now and at the peak, per category.
    Counts every FSDPMalloc/FSDPCalloc, the library's and the program's, and (in current and peak, not in nallocs)
    the node shared-memory buffers a context maps, the pages a checkpoint load stages in, and a GPU context's
    pinned host staging (FSDP_MEM_COMM_STAGING) for the collectives that go through MPI.
    @collective Not collective: each rank reads its own counters.
    @param[out] stats  the counters
    @retval FSDP_ERR_ARG  stats is NULL
    @see FSDPMemoryResetPeak, FSDPGetDeviceMemoryStats, FSDPLogView */
FSDP_EXTERN FSDPErrorCode FSDPGetMemoryStats(FSDPMemoryStats *stats);
/** Restarts the host memory peaks: each peak, per category and in total, becomes the current value.
    The device peaks (FSDPGetDeviceMemoryStats) are not reset.
    @collective Not collective: each rank resets its own counters.
    @errors None: always returns FSDP_SUCCESS.
    @see FSDPGetMemoryStats, FSDPMemoryStats */
FSDP_EXTERN FSDPErrorCode FSDPMemoryResetPeak(void);
/** Gets this process's device memory counters: what the contexts of this process hold on their GPU
    (-fsdp_device cuda), now and at the peak, per category.
    The pinned host staging of collectives through MPI is host memory (FSDPGetMemoryStats).  All zero in a build
    without CUDA, or before a context allocates on a GPU.  FSDPMemoryResetPeak does not reset these peaks.
    @collective Not collective: each rank reads its own counters.
    @param[out] stats  the counters
    @retval FSDP_ERR_ARG  stats is NULL
    @see FSDPGetMemoryStats, FSDPMemoryStats */
FSDP_EXTERN FSDPErrorCode FSDPGetDeviceMemoryStats(FSDPMemoryStats *stats);
/** Returns a memory category's name as the views print it.
    The names: "parameters", "gradients", "optimizer state", "unsharded buffers", "communication staging",
    "other".  The string is static.
    @collective Not collective: each rank may call it alone.
    @param[in] category  the category
    @errors None: returns "unknown category" for a category out of range.
    @see FSDPMemCategory, FSDPLogView */
FSDP_EXTERN const char *FSDPMemCategoryName(FSDPMemCategory category);

/* ------------------------------------------------------------------ viewers */

/** An ASCII viewer: where objects print themselves, with XView(obj, viewer), for the ranks of a communicator.
    FSDPViewerASCIIOpen creates one (collective on its communicator), FSDPViewerDestroy destroys it (collective).
    Rank 0 of the communicator writes.  A NULL viewer, where an XView takes one, means stdout on MPI_COMM_WORLD
    (rank 0 writes; needs FSDPInitialize).  Whether a view is collective is on its own page.
    @see FSDPViewerASCIIOpen, FSDPViewerDestroy, FSDPViewerASCIIPrintf, FSDPViewerFlush */
typedef struct FSDPViewer_s *FSDPViewer;

/** Opens an ASCII viewer on comm that writes to stdout, stderr or a file.
    name: "stdout", "stderr" or a file name (created by the communicator's rank 0).  Only rank 0's name is used; a
    file is truncated.  When rank 0 cannot open the file, every rank returns FSDP_ERR_IO.  The viewer works on a
    duplicate of comm.
    @collective Collective on comm.
    @param[in] comm     the ranks that share the viewer
    @param[in] name     "stdout", "stderr" or a file name
    @param[out] viewer  the new viewer; NULL on error
    @retval FSDP_ERR_ARG  viewer is NULL, or name is NULL or empty
    @retval FSDP_ERR_MEM  out of memory
    @retval FSDP_ERR_MPI  an MPI call (MPI_Comm_dup, MPI_Bcast) failed
    @retval FSDP_ERR_IO   rank 0 cannot open the file for writing
    @see FSDPViewerDestroy, FSDPViewerASCIIPrintf, FSDPViewerGetComm */
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIIOpen(MPI_Comm comm, const char *name, FSDPViewer *viewer);
/** Destroys a viewer and sets *viewer to NULL.
    Flushes synchronized output first (FSDPViewerFlush), then closes a file the viewer opened.  A NULL *viewer is
    fine: nothing happens.
    @collective Collective on the viewer's communicator; with *viewer NULL it returns at once.
    @param[in,out] viewer  the address of the viewer; set to NULL
    @retval FSDP_ERR_ARG  viewer is NULL, or the synchronized output is too large (1 GiB pending on a rank, 2 GiB
                          in all)
    @retval FSDP_ERR_MEM  out of memory (rank 0, flushing)
    @retval FSDP_ERR_MPI  an MPI call failed
    @retval FSDP_ERR_IO   writing or closing the file failed (rank 0)
    @see FSDPViewerASCIIOpen, FSDPViewerFlush */
FSDP_EXTERN FSDPErrorCode FSDPViewerDestroy(FSDPViewer *viewer);
/** Gets the viewer's communicator: the viewer's own duplicate of the one it was opened on.
    The viewer owns it: do not free it; it is valid until FSDPViewerDestroy.
    @collective Not collective: each rank may call it alone.
    @param[in] viewer  the viewer
    @param[out] comm   the viewer's communicator
    @retval FSDP_ERR_ARG  viewer or comm is NULL
    @see FSDPViewerASCIIOpen */
FSDP_EXTERN FSDPErrorCode FSDPViewerGetComm(FSDPViewer viewer, MPI_Comm *comm);
/** Prints printf-style text once: written by rank 0 of the viewer's communicator.
    Each new line is indented by two spaces per FSDPViewerASCIIPushTab; the text is written and flushed at once.
    The other ranks return at once, without formatting.
    @collective Not collective: rank 0 writes, the other ranks return at once; each rank may call it alone.
    @param[in] viewer  the viewer
    @param[in] fmt     a printf format
    @param[in] ...     the values fmt converts
    @retval FSDP_ERR_ARG  viewer or fmt is NULL, or fmt cannot be formatted (rank 0)
    @retval FSDP_ERR_MEM  out of memory (rank 0)
    @retval FSDP_ERR_IO   writing failed (rank 0)
    @see FSDPViewerASCIISynchronizedPrintf, FSDPViewerASCIIPushTab */
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIIPrintf(FSDPViewer viewer, const char *fmt, ...) FSDP_ATTR_FORMAT(2, 3);
/** Buffers printf-style text on this rank, for FSDPViewerFlush to write with the other ranks' in rank order.
    Buffered on every rank; FSDPViewerFlush (collective) writes all ranks' text in rank order.  Indented as by
    FSDPViewerASCIIPrintf, with this rank's tab level.
    @collective Not collective: each rank buffers its own text; the FSDPViewerFlush that writes it is collective.
    @param[in] viewer  the viewer
    @param[in] fmt     a printf format
    @param[in] ...     the values fmt converts
    @retval FSDP_ERR_ARG  viewer or fmt is NULL, or fmt cannot be formatted
    @retval FSDP_ERR_MEM  out of memory
    @see FSDPViewerFlush, FSDPViewerASCIIPrintf */
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIISynchronizedPrintf(FSDPViewer viewer, const char *fmt, ...)
    FSDP_ATTR_FORMAT(2, 3);
/** Writes every rank's buffered synchronized text, in rank order, from rank 0, and empties the buffers.
    @collective Collective on the viewer's communicator.
    @param[in] viewer  the viewer
    @retval FSDP_ERR_ARG  viewer is NULL, or the output is too large (1 GiB pending on a rank, 2 GiB in all)
    @retval FSDP_ERR_MEM  out of memory (rank 0)
    @retval FSDP_ERR_MPI  an MPI call (MPI_Gather, MPI_Gatherv) failed
    @retval FSDP_ERR_IO   writing failed (rank 0)
    @see FSDPViewerASCIISynchronizedPrintf, FSDPViewerDestroy */
FSDP_EXTERN FSDPErrorCode FSDPViewerFlush(FSDPViewer viewer);
/** Indents the lines this rank prints next to the viewer by two more spaces.
    FSDPViewerASCIIPopTab undoes it.  The tab level is this rank's own.
    @collective Not collective: each rank may call it alone.
    @param[in,out] viewer  the viewer
    @retval FSDP_ERR_ARG  viewer is NULL
    @see FSDPViewerASCIIPopTab, FSDPViewerASCIIPrintf */
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIIPushTab(FSDPViewer viewer);
/** Undoes the last FSDPViewerASCIIPushTab: the lines printed next are indented by two spaces less.
    @collective Not collective: each rank may call it alone.
    @param[in,out] viewer  the viewer
    @retval FSDP_ERR_ARG    viewer is NULL
    @retval FSDP_ERR_STATE  no FSDPViewerASCIIPushTab is left to undo on this rank
    @see FSDPViewerASCIIPushTab */
FSDP_EXTERN FSDPErrorCode FSDPViewerASCIIPopTab(FSDPViewer viewer);

/** Prints the build: version, backends, and the versions of MPI, hwloc, HDF5, BLAS, FFTW, CUDA and NCCL this
    library runs with.
    Rank 0 of the viewer's communicator prints what it sees (the CUDA line counts the devices visible to rank 0).
    @collective Collective on the viewer's communicator (MPI_COMM_WORLD when viewer is NULL); rank 0 of it writes.
    @param[in] viewer  the viewer; NULL for stdout on MPI_COMM_WORLD
    @retval FSDP_ERR_STATE  viewer is NULL and FSDPInitialize has not been called (or FSDPFinalize has)
    @retval FSDP_ERR_MEM    out of memory
    @retval FSDP_ERR_MPI    an MPI call failed
    @retval FSDP_ERR_IO     writing failed (rank 0)
    @see FSDPGetVersion, FSDPViewerASCIIOpen */
FSDP_EXTERN FSDPErrorCode FSDPConfigView(FSDPViewer viewer);
/** Formats a size in bytes as the views print it: "512 B", "1.50 KiB", ... "2.00 TiB", into buf[len].
    Units are powers of 1024; sizes from 1024 TiB up stay in TiB.
    @collective Not collective: each rank may call it alone.
    @param[out] buf   the text, NUL-terminated
    @param[in] len    the size of buf
    @param[in] bytes  the size to format
    @errors None: the text is cut to len - 1 characters; with len 0 nothing is written.
    @see FSDPLogView, FSDPGetMemoryStats */
FSDP_EXTERN void FSDPFormatBytes(char *buf, size_t len, double bytes);

/* ------------------------------------------------------------------ options */

/** Registers and reads an integer option: *value is its value when given, else defval.
    Each getter registers its option (for -help and the unused-option report) and reads it.  `set` (may be NULL)
    tells whether the option was given; when it was not, *value is the default.  A malformed value is
    FSDP_ERR_OPTION, and *value is then defval.  Names are case-insensitive; under -help, rank 0 prints the
    option's line the first time it is registered.
    @collective Not collective: each rank reads its own options database.
    @param[in] name    the option's name, starting with '-' ("-fsdp_...")
    @param[in] help    a one-line description for -help; may be NULL
    @param[in] defval  the default, in [min, max]
    @param[in] min     the smallest value accepted
    @param[in] max     the largest value accepted
    @param[out] value  the value
    @param[out] set    whether the option was given; NULL if not wanted
    @retval FSDP_ERR_ARG     value is NULL, name is NULL or does not start with '-', or defval is outside [min, max]
    @retval FSDP_ERR_OPTION  the option has no value, or one that is not a decimal 64-bit integer in [min, max]
    @retval FSDP_ERR_MEM     out of memory (registering the option)
    @see FSDPOptionsGetReal, FSDPOptionsSetValue, FSDPOptionsLeft */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetInt(const char *name, const char *help, int64_t defval, int64_t min,
                                            int64_t max, int64_t *value, bool *set);
/** Registers and reads a real option: *value is its value when given, else defval.
    Registers the option for -help and the unused-option report.  Any value strtod reads fully is accepted,
    inf included, nan not; after FSDP_ERR_OPTION *value is defval.
    @collective Not collective: each rank reads its own options database.
    @param[in] name    the option's name, starting with '-' ("-fsdp_...")
    @param[in] help    a one-line description for -help; may be NULL
    @param[in] defval  the default
    @param[out] value  the value
    @param[out] set    whether the option was given; NULL if not wanted
    @retval FSDP_ERR_ARG     value is NULL, or name is NULL or does not start with '-'
    @retval FSDP_ERR_OPTION  the option has no value, or one that is not a real number
    @retval FSDP_ERR_MEM     out of memory (registering the option)
    @see FSDPOptionsGetInt, FSDPOptionsGetRealList */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetReal(const char *name, const char *help, double defval, double *value,
                                             bool *set);
/** Registers and reads a boolean option: *value is its value when given, else defval.
    Registers the option for -help and the unused-option report.  Accepts true/false, yes/no, on/off, 1/0 (any
    case); given without a value, the option is true.  After FSDP_ERR_OPTION *value is defval.
    @collective Not collective: each rank reads its own options database.
    @param[in] name    the option's name, starting with '-' ("-fsdp_...")
    @param[in] help    a one-line description for -help; may be NULL
    @param[in] defval  the default
    @param[out] value  the value
    @param[out] set    whether the option was given; NULL if not wanted
    @retval FSDP_ERR_ARG     value is NULL, or name is NULL or does not start with '-'
    @retval FSDP_ERR_OPTION  the value is not a boolean
    @retval FSDP_ERR_MEM     out of memory (registering the option)
    @see FSDPOptionsGetEnum, FSDPOptionsGetInt */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetBool(const char *name, const char *help, bool defval, bool *value, bool *set);
/** Registers and reads an option with a fixed list of choices: *value is the index of the choice given, else defval.
    choices: NULL-terminated; defval and *value index it.  A value matches a choice in any case; one that matches
    none is FSDP_ERR_OPTION, with the closest choice suggested, and *value is then defval.  Registers the option
    for -help and the unused-option report.
    @collective Not collective: each rank reads its own options database.
    @param[in] name     the option's name, starting with '-' ("-fsdp_...")
    @param[in] help     a one-line description for -help; may be NULL
    @param[in] choices  the choices' names, NULL-terminated, at least one
    @param[in] defval   the index of the default choice
    @param[out] value   the index of the choice
    @param[out] set     whether the option was given; NULL if not wanted
    @retval FSDP_ERR_ARG     value or choices is NULL, choices is empty, defval is not an index of choices, or name is
                             NULL or does not start with '-'
    @retval FSDP_ERR_OPTION  the option has no value, or one that is none of the choices
    @retval FSDP_ERR_MEM     out of memory (registering the option)
    @see FSDPOptionsGetBool, FSDPOptionsGetString */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetEnum(const char *name, const char *help, const char *const *choices, int defval,
                                             int *value, bool *set);
/** Registers and reads a string option into value[len]: its value when given, else defval.
    Copies into value[len]; a value that does not fit is an error (value is then left as it was).  Registers the
    option for -help and the unused-option report.
    @collective Not collective: each rank reads its own options database.
    @param[in] name    the option's name, starting with '-' ("-fsdp_...")
    @param[in] help    a one-line description for -help; may be NULL
    @param[in] defval  the default; NULL means ""
    @param[out] value  the value, NUL-terminated
    @param[in] len     the size of value, at least 1
    @param[out] set    whether the option was given; NULL if not wanted
    @retval FSDP_ERR_ARG     value is NULL, len is 0, defval does not fit in len bytes, or name is NULL or does not
                             start with '-'
    @retval FSDP_ERR_OPTION  the option has no value, or one longer than len - 1 characters
    @retval FSDP_ERR_MEM     out of memory (registering the option)
    @see FSDPOptionsGetEnum, FSDPOptionsSetValue */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetString(const char *name, const char *help, const char *defval, char *value,
                                               size_t len, bool *set);
/** Registers and reads a comma-separated list of integers, such as "4,8,16".
    Comma-separated lists: on entry *n is the capacity of values, on exit the count read (unchanged, with values
    untouched, when the option is not set).  Empty items are errors; on an error *n is unchanged but values may be
    partly written.  Registers the option for -help and the unused-option report.
    @collective Not collective: each rank reads its own options database.
    @param[in] name       the option's name, starting with '-' ("-fsdp_...")
    @param[in] help       a one-line description for -help; may be NULL
    @param[out] values    the items read
    @param[in,out] n      on entry the capacity of values, on exit the number of items read
    @param[out] set       whether the option was given; NULL if not wanted
    @retval FSDP_ERR_ARG     values or n is NULL, *n is negative, or name is NULL or does not start with '-'
    @retval FSDP_ERR_OPTION  the option has no value, an empty item, more than *n items, or an item that is not a
                             decimal 64-bit integer
    @retval FSDP_ERR_MEM     out of memory
    @see FSDPOptionsGetRealList, FSDPOptionsGetInt */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetIntList(const char *name, const char *help, int64_t *values, int *n, bool *set);
/** Registers and reads a comma-separated list of real numbers, such as "0.9,0.999".
    As FSDPOptionsGetIntList: on entry *n is the capacity of values, on exit the count read (unchanged, with values
    untouched, when the option is not set); on an error *n is unchanged but values may be partly written.
    @collective Not collective: each rank reads its own options database.
    @param[in] name       the option's name, starting with '-' ("-fsdp_...")
    @param[in] help       a one-line description for -help; may be NULL
    @param[out] values    the items read
    @param[in,out] n      on entry the capacity of values, on exit the number of items read
    @param[out] set       whether the option was given; NULL if not wanted
    @retval FSDP_ERR_ARG     values or n is NULL, *n is negative, or name is NULL or does not start with '-'
    @retval FSDP_ERR_OPTION  the option has no value, an empty item, more than *n items, or an item that is not a
                             real number
    @retval FSDP_ERR_MEM     out of memory
    @see FSDPOptionsGetIntList, FSDPOptionsGetReal */
FSDP_EXTERN FSDPErrorCode FSDPOptionsGetRealList(const char *name, const char *help, double *values, int *n, bool *set);

/** Sets an option in this process's options database; value NULL sets a flag.
    Programmatic access to the database.  Replaces the option's value, wherever that came from; the option counts
    as not read yet.  Getters called afterwards see it.
    @collective Not collective: each rank has its own options database.
    @param[in] name   the option's name, starting with '-'
    @param[in] value  its value (copied); NULL for a flag
    @retval FSDP_ERR_ARG  name is NULL, does not start with '-', or is -options_file (use FSDPOptionsInsertString)
    @retval FSDP_ERR_MEM  out of memory
    @see FSDPOptionsClearValue, FSDPOptionsInsertString, FSDPOptionsGetInt */
FSDP_EXTERN FSDPErrorCode FSDPOptionsSetValue(const char *name, const char *value);
/** Removes an option from this process's options database, as if it had never been given.
    An option that is not there is fine.  Getters called afterwards give the default.
    @collective Not collective: each rank has its own options database.
    @param[in] name  the option's name (any case)
    @retval FSDP_ERR_ARG  name is NULL
    @see FSDPOptionsSetValue */
FSDP_EXTERN FSDPErrorCode FSDPOptionsClearValue(const char *name);
/** Inserts the options in a string into this process's options database.
    Parse a string like the FSDP_OPTIONS environment variable: "-fsdp_a 1 -fsdp_b".  Words are separated by white
    space, '...' or "..." quote a value with spaces, and -options_file FILE reads FILE's options in its place.  Every
    word must be a libfsdp option (-fsdp_*, -help, -options_file) or its value.  An option replaces its earlier value.
    @collective Not collective: each rank has its own options database (and reads an options file itself).
    @param[in] options  the options
    @retval FSDP_ERR_ARG     options is NULL
    @retval FSDP_ERR_OPTION  a word is neither a libfsdp option nor its value, a quote is not closed, or an options
                             file is malformed (doc/options.md)
    @retval FSDP_ERR_IO      an options file cannot be opened or read
    @retval FSDP_ERR_MEM     out of memory
    @see FSDPOptionsSetValue, FSDPInitialize */
FSDP_EXTERN FSDPErrorCode FSDPOptionsInsertString(const char *options);
/** Reports every option given but never read, with the closest registered name to each.
    Rank 0 of the viewer's communicator prints its own unread options; *nleft (may be NULL) gets their number on
    this rank.  FSDPFinalize calls it with a NULL viewer unless -fsdp_options_left false.
    @collective Collective on the viewer's communicator (MPI_COMM_WORLD when viewer is NULL); rank 0 of it writes.
    @param[in] viewer  the viewer; NULL for stdout on MPI_COMM_WORLD
    @param[out] nleft  the number of options given but never read on this rank; NULL if not wanted
    @retval FSDP_ERR_STATE  viewer is NULL and FSDPInitialize has not been called (or FSDPFinalize has)
    @retval FSDP_ERR_MEM    out of memory
    @retval FSDP_ERR_MPI    an MPI call failed
    @retval FSDP_ERR_IO     writing failed (rank 0)
    @see FSDPOptionsView, FSDPFinalize */
FSDP_EXTERN FSDPErrorCode FSDPOptionsLeft(FSDPViewer viewer, int *nleft);
/** Prints the options database: each option given, its value, where it came from, and whether it was read yet.
    Rank 0 of the viewer's communicator prints its own database.
    @collective Collective on the viewer's communicator (MPI_COMM_WORLD when viewer is NULL); rank 0 of it writes.
    @param[in] viewer  the viewer; NULL for stdout on MPI_COMM_WORLD
    @retval FSDP_ERR_STATE  viewer is NULL and FSDPInitialize has not been called (or FSDPFinalize has)
    @retval FSDP_ERR_MEM    out of memory
    @retval FSDP_ERR_MPI    an MPI call failed
    @retval FSDP_ERR_IO     writing failed (rank 0)
    @see FSDPOptionsLeft, FSDPOptionsSetValue */
FSDP_EXTERN FSDPErrorCode FSDPOptionsView(FSDPViewer viewer);

/* ------------------------------------------------------------------ logging */

/** A timed event: its index in this process's event table, from FSDPLogEventRegister.
    The table holds 256 events and is per process; FSDPLogView matches events across ranks by name.  Events are
    not destroyed one by one: FSDPFinalize forgets them all.
    @see FSDPLogEventRegister, FSDPLogEventBegin, FSDPLogView */
typedef int FSDPLogEvent;

/** One event's numbers on this rank, from FSDPLogEventGetInfo.
    @see FSDPLogEventGetInfo, FSDPLogView */
typedef struct {
  int64_t count; /**< completed Begin/End pairs */
  double time;   /**< seconds inside the event (outermost pairs only) */
  int64_t bytes; /**< bytes moved, as reported to FSDPLogEventEnd */
} FSDPLogEventInfo;

/** Registers a timed event by name, or finds the event already registered under that name.
    Registering a name twice returns the same event.  Names (case-sensitive) have 1 to 63 characters; a process
    has at most 256 events.  Any thread may register.
    @collective Not collective: each rank has its own event table; FSDPLogView matches events by name.
    @param[in] name    the event's name (copied)
    @param[out] event  the event
    @retval FSDP_ERR_ARG  name or event is NULL, name is empty or longer than 63 characters, or all 256 events are
                          taken
    @see FSDPLogEventBegin, FSDPLogEventEnd, FSDPLogView */
FSDP_EXTERN FSDPErrorCode FSDPLogEventRegister(const char *name, FSDPLogEvent *event);
/** Starts a timed interval of an event on this rank, to be ended by FSDPLogEventEnd.
    Begin/End cost a branch while logging is off (see FSDPLogSetActive, -fsdp_log_view): they then return at once,
    without checking event.  Pairs of one event may nest; only the outermost is timed.  An event is begun and ended
    by one thread at a time.
    @collective Not collective: each rank may call it alone.
    @param[in] event  a registered event
    @retval FSDP_ERR_ARG  logging is on and event is not registered
    @see FSDPLogEventEnd, FSDPLogEventRegister, FSDPLogSetActive */
FSDP_EXTERN FSDPErrorCode FSDPLogEventBegin(FSDPLogEvent event);
/** Ends a timed interval of an event: adds one to its count, bytes to its bytes, and the time for an outermost pair.
    Returns at once, without checking, while logging is off.  Under -fsdp_log_trace an outermost pair is also kept
    as a trace span.
    @collective Not collective: each rank may call it alone.
    @param[in] event  the event of the matching FSDPLogEventBegin
    @param[in] bytes  the bytes moved in the interval (0 if none), for the GB/s column of FSDPLogView
    @retval FSDP_ERR_ARG    logging is on and event is not registered
    @retval FSDP_ERR_STATE  logging is on and event has no open FSDPLogEventBegin
    @see FSDPLogEventBegin, FSDPLogEventGetInfo */
FSDP_EXTERN FSDPErrorCode FSDPLogEventEnd(FSDPLogEvent event, int64_t bytes);
/** Gets an event's count, time and bytes on this rank so far.
    @collective Not collective: each rank reads its own numbers.
    @param[in] event  a registered event
    @param[out] info  the event's numbers
    @retval FSDP_ERR_ARG  info is NULL, or event is not registered
    @see FSDPLogEventInfo, FSDPLogView */
FSDP_EXTERN FSDPErrorCode FSDPLogEventGetInfo(FSDPLogEvent event, FSDPLogEventInfo *info);
/** Turns event logging on or off in this process.
    Logging is off by default; -fsdp_log_view and -fsdp_log_trace turn it on at FSDPInitialize.  Switching drops
    the Begin/End pairs that are open (an End after the switch is not an error), so switch between events, not
    inside them.  The numbers logged so far are kept.
    @collective Not collective: each rank switches its own logging.
    @param[in] active  true to log events, false to stop
    @errors None: always returns FSDP_SUCCESS.
    @see FSDPLogGetActive, FSDPLogEventBegin, FSDPLogView */
FSDP_EXTERN FSDPErrorCode FSDPLogSetActive(bool active);
/** Tells whether event logging is on in this process.
    @collective Not collective: each rank may call it alone.
    @param[out] active  whether logging is on
    @retval FSDP_ERR_ARG  active is NULL
    @see FSDPLogSetActive */
FSDP_EXTERN FSDPErrorCode FSDPLogGetActive(bool *active);
/** Prints the per-event table (min/max/avg over ranks, GB/s) and the host memory table, reduced over the ranks.
    Rank 0 of the viewer's communicator prints.  Events are matched across ranks by name, a row each.  The table
    also gives each event's share of the wall time since FSDPInitialize and, when the library's collectives were
    logged, the communication overlap.  FSDPFinalize calls it with a NULL viewer under -fsdp_log_view.
    @collective Collective on the viewer's communicator (MPI_COMM_WORLD when viewer is NULL).
    @param[in] viewer  the viewer; NULL for stdout on MPI_COMM_WORLD
    @retval FSDP_ERR_STATE  viewer is NULL and FSDPInitialize has not been called (or FSDPFinalize has)
    @retval FSDP_ERR_MEM    out of memory
    @retval FSDP_ERR_MPI    an MPI call failed
    @retval FSDP_ERR_IO     writing failed (rank 0)
    @see FSDPLogSetActive, FSDPLogEventGetInfo, FSDPGetMemoryStats */
FSDP_EXTERN FSDPErrorCode FSDPLogView(FSDPViewer viewer);

/* ------------------------------------------------------------------ data types */

/** Element types of parameters and buffers.  A FlatParam's master copy (its
    shard) is FSDP_FLOAT32 or FSDP_FLOAT64; the 16-bit types are for
    mixed-precision copies and reductions.
    @see FSDPDataTypeName, FSDPDataTypeSize, FSDPDataTypeConvert */
typedef enum {
  FSDP_FLOAT32 = 0,   /**< IEEE single precision, 4 bytes ("fp32") */
  FSDP_FLOAT64,       /**< IEEE double precision, 8 bytes ("fp64") */
  FSDP_BFLOAT16,      /**< bfloat16: fp32's exponent range with an 8-bit significand, 2 bytes ("bf16") */
  FSDP_FLOAT16,       /**< IEEE half precision, 2 bytes ("fp16") */
  FSDP_NUM_DATA_TYPES /**< the number of data types; not a type */
} FSDPDataType;

/** The short name of a data type: "fp32", "fp64", "bf16" or "fp16".
    The string is static: do not free it.
    @collective Not collective: each rank may call it alone.
    @param[in] dtype  the data type
    @errors None: returns "unknown data type" for a value that is not an FSDPDataType.
    @see FSDPDataType, FSDPDataTypeSize */
FSDP_EXTERN const char *FSDPDataTypeName(FSDPDataType dtype);

/** The SIMD path of the host kernels (GELU, LayerNorm, the optimizers'
    updates): by default the best this CPU runs.  Every path gives the same
    bits; choosing one is for tests and benchmarks.  Setting a level the CPU
    lacks is FSDP_ERR_UNSUPPORTED.
    @see FSDPSetSimd, FSDPGetSimd, FSDPSimdName */
typedef enum {
  FSDP_SIMD_GENERIC = 0, /**< portable code, on any CPU and in a build for another architecture ("generic") */
  FSDP_SIMD_AVX2,        /**< x86-64 AVX2 and FMA ("avx2") */
  FSDP_SIMD_AVX512,      /**< x86-64 AVX-512 F, VL, BW and DQ, and FMA ("avx512") */
  FSDP_NUM_SIMD          /**< the number of levels; not a level */
} FSDPSimd;
/** The name of a SIMD level: "generic", "avx2" or "avx512", as -fsdp_simd spells it.
    The string is static: do not free it.
    @collective Not collective: each rank may call it alone.
    @param[in] level  the SIMD level
    @errors None: returns "unknown SIMD level" for a value that is not an FSDPSimd.
    @see FSDPSimd, FSDPSetSimd, FSDPGetSimd */
FSDP_EXTERN const char *FSDPSimdName(FSDPSimd level);
/** Chooses the SIMD path of this process's host kernels.
    Every path gives the same bits.  The option -fsdp_simd generic|avx2|avx512,
    read at FSDPInitialize, calls it.
    @collective Not collective: it sets this process's level only.
    @param[in] level  the level to use; at most the best this CPU (and this build) runs
    @retval FSDP_ERR_ARG          level is not an FSDPSimd value
    @retval FSDP_ERR_UNSUPPORTED  this CPU, or this build, does not run level
    @see FSDPGetSimd, FSDPSimdName, FSDPSimd */
FSDP_EXTERN FSDPErrorCode FSDPSetSimd(FSDPSimd level);
/** The SIMD level in use, and the best this CPU runs.
    Until FSDPSetSimd or -fsdp_simd chooses one, the level in use is the best.
    @collective Not collective: each rank may call it alone.
    @param[out] level  the level the host kernels use; NULL if not wanted
    @param[out] best   the best level this CPU (and this build) runs; NULL if not wanted
    @errors None: always returns FSDP_SUCCESS.
    @see FSDPSetSimd, FSDPSimdName, FSDPSimd */
FSDP_EXTERN FSDPErrorCode FSDPGetSimd(FSDPSimd *level, FSDPSimd *best);
/** Bytes per element of a data type: 4, 8, 2 or 2.
    @collective Not collective: each rank may call it alone.
    @param[in] dtype  the data type
    @errors None: returns 0 for a value that is not an FSDPDataType.
    @see FSDPDataType, FSDPDataTypeName */
FSDP_EXTERN size_t FSDPDataTypeSize(FSDPDataType dtype);
/** Converts n values from one data type to another.
    To bf16 and fp16 with round to nearest even (a NaN stays a NaN, a value
    beyond fp16's range becomes an infinity), from them exactly.  Every type
    converts to and from fp32; fp64 and the 16-bit types do not convert into
    each other, nor bf16 and fp16 (through fp32 they would round twice).  A
    type converts to itself as a copy.  dst and src may be the same array only
    when the types are.
    @collective Not collective: each rank may call it alone.
    @param[in] to    the data type of dst
    @param[out] dst  n values of type to
    @param[in] from  the data type of src
    @param[in] src   n values of type from
    @param[in] n     the number of values; 0 does nothing
    @retval FSDP_ERR_ARG          to or from is not an FSDPDataType, n is negative, or dst or src is NULL with n > 0
    @retval FSDP_ERR_UNSUPPORTED  the types differ and neither is FSDP_FLOAT32
    @see FSDPDataType, FSDPDataTypeSize */
FSDP_EXTERN FSDPErrorCode FSDPDataTypeConvert(FSDPDataType to, void *dst, FSDPDataType from, const void *src,
                                              int64_t n);

/* ------------------------------------------------------------------ ShardGroup */

/** The process layout of FSDP: the shard communicator (the F ranks that split
    every FlatParam, normally one node) and the replicate communicator (the W/F
    ranks that hold the same shard in different groups), built from MPI's node
    discovery and each node's hwloc topology.  doc/shardgroup.md tells how.
    ShardGroupCreate (collective on its communicator) makes one, and
    ShardGroupDestroy (collective) frees it; configure it with the Set calls,
    then ShardGroupSetUp (collective) builds the layout.  An FSDPContext creates
    its own, which FSDPContextGetShardGroup returns and which belongs to the context.
    @see ShardGroupCreate, ShardGroupSetUp, ShardGroupDestroy, FSDPContextGetShardGroup */
typedef struct ShardGroup_s *ShardGroup;

/** Where shard groups come from when no sharding factor is set (-fsdp_shard_domain).
    The package and NUMA domains need every rank bound within one such object.
    @see ShardGroupSetShardDomain, ShardGroupSetShardingFactor */
typedef enum {
  FSDP_SHARD_DOMAIN_NODE = 0, /**< the ranks of one node (hybrid sharding; the default) */
  FSDP_SHARD_DOMAIN_PACKAGE,  /**< the ranks on one package (socket) of a node */
  FSDP_SHARD_DOMAIN_NUMA,     /**< the ranks on one NUMA node */
  FSDP_SHARD_DOMAIN_WORLD     /**< every rank (full sharding) */
} FSDPShardDomain;

/** Optional CPU binding of each rank, applied at ShardGroupSetUp through hwloc (-fsdp_bind).
    With a binding, local rank r of a node's n ranks gets object floor(r count / n) of the node's count objects.
    @see ShardGroupSetBind, ShardGroupSetUp */
typedef enum {
  FSDP_BIND_NONE = 0, /**< keep whatever binding the launcher gave */
  FSDP_BIND_CORE,     /**< one core per rank */
  FSDP_BIND_NUMA,     /**< the cores of one NUMA node */
  FSDP_BIND_PACKAGE   /**< the cores of one package */
} FSDPBind;

/** Creates a shard group on a duplicate of comm, with the default settings
    (shard domain node, no binding).
    The node split of comm is cached on comm, so later groups and contexts on
    it reuse it.  Configure the group, then call ShardGroupSetUp.
    @collective Collective on comm (MPI_Comm_dup, and the first time MPI_Comm_split_type).
    @param[in] comm    the ranks of the layout; duplicated
    @param[out] group  the new group
    @retval FSDP_ERR_ARG    group is NULL, or comm is MPI_COMM_NULL
    @retval FSDP_ERR_STATE  MPI is not initialized
    @retval FSDP_ERR_MEM    out of memory
    @retval FSDP_ERR_MPI    an MPI call failed
    @see ShardGroupSetUp, ShardGroupDestroy, ShardGroupSetFromOptions */
FSDP_EXTERN FSDPErrorCode ShardGroupCreate(MPI_Comm comm, ShardGroup *group);
/** Sets F, the ranks per shard group; 0 (the default) derives F from the shard domain.
    F must divide the communicator's size; ShardGroupSetUp checks it.
    @collective Not collective: each rank sets its own copy, but every rank must
    pass the same value (ShardGroupSetUp checks).
    @param[in] group   the group, not set up
    @param[in] factor  F, or 0
    @retval FSDP_ERR_ARG    group is NULL, or factor is negative
    @retval FSDP_ERR_STATE  group is already set up
    @see ShardGroupSetShardDomain, ShardGroupGetShardComm, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode ShardGroupSetShardingFactor(ShardGroup group, int factor);
/** Sets what one shard group spans when no sharding factor is set (default FSDP_SHARD_DOMAIN_NODE).
    @collective Not collective: each rank sets its own copy, but every rank must
    pass the same value (ShardGroupSetUp checks).
    @param[in] group   the group, not set up
    @param[in] domain  the shard domain
    @retval FSDP_ERR_ARG    group is NULL, or domain is not an FSDPShardDomain
    @retval FSDP_ERR_STATE  group is already set up
    @see FSDPShardDomain, ShardGroupSetShardingFactor, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode ShardGroupSetShardDomain(ShardGroup group, FSDPShardDomain domain);
/** Sets the CPU binding that ShardGroupSetUp applies to each rank (default FSDP_BIND_NONE).
    @collective Not collective: each rank sets its own copy, but every rank must
    pass the same value (ShardGroupSetUp checks).
    @param[in] group  the group, not set up
    @param[in] bind   the binding
    @retval FSDP_ERR_ARG    group is NULL, or bind is not an FSDPBind
    @retval FSDP_ERR_STATE  group is already set up
    @see FSDPBind, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode ShardGroupSetBind(ShardGroup group, FSDPBind bind);
/** Sets the group's settings from the runtime options.
    @collective Not collective: it reads this process's options; every rank must
    end with the same settings (ShardGroupSetUp checks).
    @param[in] group  the group, not set up
    @retval FSDP_ERR_ARG     group is NULL
    @retval FSDP_ERR_STATE   group is already set up
    @retval FSDP_ERR_OPTION  an option's value is malformed or out of range
    @retval FSDP_ERR_MEM     out of memory
    @options -fsdp_sharding_factor, -fsdp_shard_domain, -fsdp_bind, -fsdp_bind_force, -fsdp_topology,
    -fsdp_ranks_per_node, -fsdp_rank_placement, -fsdp_node_source, -fsdp_view (doc/options.md).
    @see ShardGroupCreate, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode ShardGroupSetFromOptions(ShardGroup group);
/** Builds the layout: discovers nodes and topology, binds, builds the
    shard and replicate communicators and assigns devices.
    Errors are raised on every rank.  With -fsdp_view it prints the layout
    (ShardGroupView).  On a group already set up it returns at once.
    @collective Collective on the group's communicator; every rank must have the same settings.
    @param[in,out] group  the group
    @retval FSDP_ERR_ARG          group is NULL; the ranks' settings differ; the sharding factor exceeds or
    does not divide the communicator's size, or -fsdp_ranks_per_node exceeds it; the shard domain gives
    groups of different sizes, or a rank is not bound within one package or NUMA node; -fsdp_topology is
    not a regular file nor a synthetic description; the topology has no objects to bind to
    @retval FSDP_ERR_OPTION       -fsdp_node_source slurm without a SLURM_NODEID on some rank, or -fsdp_bind on
    a task Slurm has bound, without -fsdp_bind_force
    @retval FSDP_ERR_IO           the -fsdp_topology file cannot be read
    @retval FSDP_ERR_HWLOC        hwloc cannot load the topology, or binding failed
    @retval FSDP_ERR_UNSUPPORTED  -fsdp_topology or -fsdp_bind in a build without hwloc
    @retval FSDP_ERR_MEM          out of memory
    @retval FSDP_ERR_MPI          an MPI call failed
    @see ShardGroupCreate, ShardGroupSetFromOptions, ShardGroupGetShardComm, ShardGroupView */
FSDP_EXTERN FSDPErrorCode ShardGroupSetUp(ShardGroup group);
/** Prints the layout: the topology per node, the groups, and one line per rank.
    A NULL viewer is stdout on the group's communicator.
    @collective Collective on the group's communicator, which the viewer's must be (or congruent to).
    @param[in] group   the group, set up
    @param[in] viewer  an ASCII viewer on the group's communicator, or NULL
    @retval FSDP_ERR_ARG    group is NULL, or the viewer is on another communicator
    @retval FSDP_ERR_STATE  group is not set up
    @retval FSDP_ERR_IO     writing to the viewer failed
    @retval FSDP_ERR_MEM    out of memory
    @retval FSDP_ERR_MPI    an MPI call failed
    @see ShardGroupSetUp, FSDPViewerASCIIOpen */
FSDP_EXTERN FSDPErrorCode ShardGroupView(ShardGroup group, FSDPViewer viewer);
/** Destroys a shard group and frees its communicators; sets *group to NULL.
    A NULL *group does nothing.  Do not destroy a context's group.
    @collective Collective on the group's communicator (MPI_Comm_free).
    @param[in,out] group  the group; NULL on return
    @retval FSDP_ERR_ARG  group is NULL
    @retval FSDP_ERR_MPI  freeing a communicator failed
    @see ShardGroupCreate */
FSDP_EXTERN FSDPErrorCode ShardGroupDestroy(ShardGroup *group);

/** The group's communicator: the duplicate of the one given to ShardGroupCreate.
    Valid from ShardGroupCreate on.  It belongs to the group: do not free it.
    @collective Not collective: each rank may call it alone.
    @param[in] group  the group
    @param[out] comm  the group's communicator; NULL if not wanted
    @retval FSDP_ERR_ARG  group is NULL
    @see ShardGroupGetShardComm, ShardGroupGetReplicateComm */
FSDP_EXTERN FSDPErrorCode ShardGroupGetComm(ShardGroup group, MPI_Comm *comm);
/** The F ranks of this rank's shard group; *index is this rank's shard.
    The communicator belongs to the group: do not free it.
    @collective Not collective: each rank may call it alone.
    @param[in] group    the group, set up
    @param[out] comm    the shard communicator; NULL if not wanted
    @param[out] index   this rank's shard, its rank in comm (0 to F-1); NULL if not wanted
    @param[out] factor  F, the ranks per shard group; NULL if not wanted
    @retval FSDP_ERR_ARG    group is NULL
    @retval FSDP_ERR_STATE  group is not set up
    @see ShardGroupGetReplicateComm, ShardGroupSetShardingFactor, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode ShardGroupGetShardComm(ShardGroup group, MPI_Comm *comm, int *index, int *factor);
/** The W/F ranks holding the same shard; *index is this rank's shard group.
    The communicator belongs to the group: do not free it.
    @collective Not collective: each rank may call it alone.
    @param[in] group   the group, set up
    @param[out] comm   the replicate communicator; NULL if not wanted
    @param[out] index  this rank's shard group, its rank in comm; NULL if not wanted
    @param[out] size   W/F, the number of shard groups; NULL if not wanted
    @retval FSDP_ERR_ARG    group is NULL
    @retval FSDP_ERR_STATE  group is not set up
    @see ShardGroupGetShardComm, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode ShardGroupGetReplicateComm(ShardGroup group, MPI_Comm *comm, int *index, int *size);
/** Node of this rank (nodes numbered by their lowest rank) and how many there are.
    @collective Not collective: each rank may call it alone.
    @param[in] group    the group, set up
    @param[out] node    this rank's node; NULL if not wanted
    @param[out] nnodes  the number of nodes; NULL if not wanted
    @retval FSDP_ERR_ARG    group is NULL
    @retval FSDP_ERR_STATE  group is not set up
    @see ShardGroupGetLocalRank, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode ShardGroupGetNode(ShardGroup group, int *node, int *nnodes);
/** This rank's position among its node's ranks, in rank order, and how many ranks the node has.
    @collective Not collective: each rank may call it alone.
    @param[in] group        the group, set up
    @param[out] local_rank  this rank's local rank; NULL if not wanted
    @param[out] local_size  the number of ranks on this rank's node; NULL if not wanted
    @retval FSDP_ERR_ARG    group is NULL
    @retval FSDP_ERR_STATE  group is not set up
    @see ShardGroupGetNode, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode ShardGroupGetLocalRank(ShardGroup group, int *local_rank, int *local_size);
/** The GPU assigned to this rank, numbered in PCI bus order on its node, or -1
    when the node has none; *nsharing is how many ranks of the node share it.
    @collective Not collective: each rank may call it alone.
    @param[in] group      the group, set up
    @param[out] device    the GPU, or -1; NULL if not wanted
    @param[out] nsharing  the node's ranks assigned this GPU (0 without one); NULL if not wanted
    @retval FSDP_ERR_ARG    group is NULL
    @retval FSDP_ERR_STATE  group is not set up
    @see ShardGroupGetDevicePCIBusId, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode ShardGroupGetDevice(ShardGroup group, int *device, int *nsharing);
/** The PCI bus id ("0000:18:00.0") of this rank's GPU, or NULL without a GPU:
    what cudaDeviceGetByPCIBusId takes, whatever CUDA's device order.
    The string belongs to the group.
    @collective Not collective: each rank may call it alone.
    @param[in] group   the group, set up
    @param[out] busid  the bus id, or NULL; must not be NULL itself
    @retval FSDP_ERR_ARG    group or busid is NULL
    @retval FSDP_ERR_STATE  group is not set up
    @see ShardGroupGetDevice */
FSDP_EXTERN FSDPErrorCode ShardGroupGetDevicePCIBusId(ShardGroup group, const char **busid);
/* ------------------------------------------------------------------ FSDPContext (doc/flatparam.md): types */

/** A context: the units of a model, how they are sharded over a communicator, and the runtime that gathers and
    reduces them (doc/flatparam.md tells the whole story).
    FSDPContextCreate makes one (collective on its communicator), FSDPContextSetUp lays it out (collective), and
    FSDPContextDestroy frees it.  The context owns its units; their getters, like the ShardGroup's, take NULL for
    any output not wanted.
    @see FSDPContextCreate, FSDPContextSetUp, FSDPContextDestroy, FlatParam */
typedef struct FSDPContext_s *FSDPContext;
/** A unit: parameters flattened into one buffer that is sharded, gathered and reduced as a whole.
    FSDPContextAddUnit creates it (not collective; every rank must add the same units); it belongs to its
    context, which frees it in FSDPContextDestroy.
    @see FSDPContextAddUnit, FlatParamAddParam, FSDPContextGetUnit */
typedef struct FlatParam_s *FlatParam;
/** An optimizer of a context's shards (the optimizers section); checkpoints save it with the context.
    FSDPOptimizerCreate makes one on a context and FSDPOptimizerDestroy frees it.
    @see FSDPOptimizerCreate, FSDPOptimizerDestroy, FSDPContextSave */
typedef struct FSDPOptimizer_s *FSDPOptimizer;
/** A parameter's index in its unit, in registration order (0, 1, ...).
    @see FlatParamAddParam, FlatParamGetParam */
typedef int FSDPParamId;

/** A unit initializer, called by FSDPContextSetUp for each unit in order: it fills the unit's parameters
    (FlatParamGetParam works inside it) the same way on every rank of a shard group; units are materialized one
    at a time.  `unit` is the unit, `user` the pointer given to FSDPContextSetUnitInit.  Return FSDP_SUCCESS, or
    an error (raise it with FSDPCheck to give a message): SetUp then fails on every rank.
    @see FSDPContextSetUnitInit, FSDPShardInitFn, FlatParamGetParam */
typedef FSDPErrorCode (*FSDPUnitInitFn)(FlatParam unit, void *user);
/** A shard initializer, called by FSDPContextSetUp for each parameter with a part in this rank's shard: it fills
    elements [begin, end) of parameter `id` of `unit`, flattened in row-major order, into values[0 .. end-begin)
    (in the unit's data type), and nothing is materialized.  `user` is the pointer given to
    FSDPContextSetShardInit.  Return FSDP_SUCCESS, or an error (raise it with FSDPCheck to give a message).
    @see FSDPContextSetShardInit, FSDPUnitInitFn, FlatParamGetShardRange */
typedef FSDPErrorCode (*FSDPShardInitFn)(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values,
                                         void *user);

/** How units are sharded (doc/flatparam.md). W ranks in all, F per shard group.
    @see FSDPContextSetShardingStrategy, FSDPShardingStrategyName */
typedef enum {
  FSDP_FULL_SHARD = 0,         /**< F = W; parameters resharded after forward and after backward */
  FSDP_SHARD_GRAD_OP,          /**< F = W; parameters stay unsharded from forward to backward */
  FSDP_NO_SHARD,               /**< F = 1: every rank holds everything, gradients all-reduced (DDP) */
  FSDP_HYBRID_SHARD,           /**< F from the ShardGroup (a node by default), replicated across groups */
  FSDP_HYBRID_SHARD_ZERO2,     /**< hybrid, with parameters unsharded from forward to backward */
  FSDP_NUM_SHARDING_STRATEGIES /**< the number of strategies */
} FSDPShardingStrategy;

/** The name of a sharding strategy: "full", "grad_op", "none", "hybrid", "hybrid_zero2", the
    -fsdp_sharding_strategy values.
    @collective Not collective.
    @param[in] strategy  the strategy
    @errors None: returns "unknown strategy" for a value out of range.
    @see FSDPShardingStrategy, FSDPContextSetShardingStrategy */
FSDP_EXTERN const char *FSDPShardingStrategyName(FSDPShardingStrategy strategy);

/** Where the context's collectives run. On the host the default is THREAD when every rank has
    MPI_THREAD_MULTIPLE and every node at least 2 CPUs per rank, NONBLOCKING otherwise; a GPU context
    (FSDP_DEVICE_CUDA) runs its collectives on its own CUDA engine instead (doc/cuda.md).
    @see FSDPContextSetCommEngine, FSDPWaitMode */
typedef enum {
  FSDP_COMM_ENGINE_THREAD = 0,  /**< a communication thread of the context (needs MPI_THREAD_MULTIPLE) */
  FSDP_COMM_ENGINE_NONBLOCKING, /**< MPI_I* collectives, progressed inside the library's MPI calls */
  FSDP_COMM_ENGINE_SYNC,        /**< blocking collectives at the point of call */
  FSDP_NUM_COMM_ENGINES         /**< the number of engines */
} FSDPCommEngine;

/** How the context waits for collectives. AUTO is the default: SLEEP where the node has more ranks than CPUs
    they may run on, POLL elsewhere; with the THREAD and SYNC engines on the host every rank sleeps when some
    node is oversubscribed (they must wait alike).
    @see FSDPContextSetWaitMode, FSDPContextGetWaitMode, FSDPContextWait */
typedef enum {
  FSDP_WAIT_AUTO = 0, /**< decided at FSDPContextSetUp from the node's ranks and CPUs */
  FSDP_WAIT_POLL,     /**< test in a loop (MPI's own blocking calls do): the lowest latency when every rank has a
                           core */
  FSDP_WAIT_SLEEP,    /**< test, then sleep with backoff (1 us doubling to 32 us), giving the core back to the ranks
                           being waited for */
  FSDP_NUM_WAIT_MODES /**< the number of wait modes */
} FSDPWaitMode;

/** When backward issues the next unit's all-gather (default PRE).
    @see FSDPContextSetBackwardPrefetch, FSDPContextSetForwardPrefetch */
typedef enum {
  FSDP_BACKWARD_PREFETCH_PRE = 0, /**< when the current unit is unsharded for its backward (before its
                                       reduce-scatter) */
  FSDP_BACKWARD_PREFETCH_POST,    /**< after the current unit's reduce-scatter is issued */
  FSDP_BACKWARD_PREFETCH_NONE,    /**< when it is needed */
  FSDP_NUM_BACKWARD_PREFETCH      /**< the number of modes */
} FSDPBackwardPrefetch;

/** Where a context's shards, gradients, unsharded buffers and staging live (default HOST). With CUDA,
    FlatParamGetParam, FlatParamGetGrad, FlatParamGetShard and FlatParamGetGradShard return device pointers,
    ordered on the context's compute stream; initializers still fill host memory.
    @see FSDPContextSetDevice, FSDPReplicateEngine */
typedef enum {
  FSDP_DEVICE_HOST = 0, /**< host memory */
  FSDP_DEVICE_CUDA,     /**< device memory on the rank's GPU (the ShardGroup's choice), NCCL in the shard group */
  FSDP_NUM_DEVICE_TYPES /**< the number of device types */
} FSDPDeviceType;
/** How gradients cross the replicas on a GPU (default MPI).
    @see FSDPContextSetReplicateEngine, FSDPDeviceType */
typedef enum {
  FSDP_REPLICATE_ENGINE_MPI = 0, /**< MPI, through pinned host staging, or device pointers when MPI is CUDA-aware */
  FSDP_REPLICATE_ENGINE_NCCL,    /**< NCCL, over a second communicator of the replicate group */
  FSDP_NUM_REPLICATE_ENGINES     /**< the number of engines */
} FSDPReplicateEngine;

/** How ranks move a checkpoint's data (default AUTO). AUTO is decided at FSDPContextSetUp, alike on every rank.
    @see FSDPContextSetCheckpointIO, FSDPContextSave, FSDPContextLoad */
typedef enum {
  FSDP_CHECKPOINT_IO_COLLECTIVE = 0, /**< collective MPI-IO transfers: MPI-IO aggregates the ranks' pieces into large
                                          aligned writes, what parallel file systems want */
  FSDP_CHECKPOINT_IO_INDEPENDENT,    /**< independent transfers: each rank reads and writes its own contiguous
                                          pieces, with no synchronization per dataset */
  FSDP_CHECKPOINT_IO_AUTO,           /**< POSIX where a node of the job has more ranks than CPUs (MPI-IO's and
                                          HDF5's collectives there wait for descheduled ranks), else collective,
                                          except loads without replicas: independent (no two ranks read the same
                                          bytes, so a collective read would only synchronize them) */
  FSDP_CHECKPOINT_IO_POSIX,          /**< no MPI-IO: rank 0 writes the file's structure alone (serial HDF5), then
                                          each rank writes its own pieces with pwrite at their datasets' offsets; a
                                          load opens the file on each rank alone and reads its pieces */
  FSDP_NUM_CHECKPOINT_IO             /**< the number of modes */
} FSDPCheckpointIO;

/** What a training program needs besides parameters and optimizer state to resume exactly; a checkpoint keeps it
    in its root attributes.
    @see FSDPContextSetTrainingState, FSDPContextGetTrainingState, FSDPContextSave */
typedef struct {
  int64_t step;        /**< steps taken (FSDPContextSave writes the optimizer's step when given one) */
  int64_t data_cursor; /**< where the program's data resumes, in the program's own units */
  uint64_t rng[4];     /**< the program's random-number state */
} FSDPTrainingState;
/** The memory plan of a set-up context, bytes per category on this rank: what FSDPContextSetUp allocated for
    shards, unsharded buffers and staging.
    @see FSDPContextGetMemoryPlan, FSDPContextSetMemoryLimit */
typedef struct {
  size_t bytes[FSDP_MEM_NUM_CATEGORIES]; /**< bytes per FSDPMemCategory (parameter and gradient shards, unsharded
                                              buffers, staging; the others 0) */
  size_t total;                          /**< the sum of bytes[] */
  int unsharded_buffers;                 /**< parameter buffers of the largest unit's size (the limit L) */
  int gradient_buffers;                  /**< unsharded gradient buffers of that size */
} FSDPMemoryPlan;

/** What the runtime did, since SetUp, on this rank.
    @see FSDPContextGetCommStats */
typedef struct {
  int64_t collectives;     /**< collectives issued */
  int64_t prefetches;      /**< all-gathers issued before their FlatParamUnshard */
  int64_t prefetch_hits;   /**< FlatParamUnshard calls that found the all-gather under way or done */
  int64_t cache_hits;      /**< FlatParamUnshard calls that found the unit still unsharded from forward */
  int64_t deferred;        /**< prefetches the limiter held back until a buffer was released */
  int64_t buffer_growths;  /**< buffers allocated beyond the plan (more units held unsharded than planned) */
  int64_t shm_collectives; /**< of them, the shard group's run in node shared memory (-fsdp_shm_reduce) */
  int64_t shm_fallbacks;   /**< of those, run through MPI after all: a buffer outside the window */
  int max_unsharded;       /**< most units unsharded, being gathered, or cached (in a buffer) at once */
  int params_in_use;       /**< unsharded parameter buffers held now (the plan's or a unit's own) */
  int grads_in_use;        /**< unsharded gradient buffers held now */
  double comm_time;        /**< seconds in collectives */
  double exposed_time;     /**< seconds the calling thread waited for collectives */
} FSDPCommStats;

/* ------------------------------------------------------------------ FSDPContext: create and configure, before SetUp */

/** Create a context on comm, which is duplicated; the context creates its ShardGroup on comm too.
    Needs MPI initialized (FSDPInitialize or MPI_Init).  On error *ctx is NULL.
    @collective Collective on comm (MPI_Comm_dup, twice, and the node's shared-memory split).
    @param[in] comm  the ranks of the context; not MPI_COMM_NULL
    @param[out] ctx  the new context
    @retval FSDP_ERR_ARG    ctx is NULL, or comm is MPI_COMM_NULL
    @retval FSDP_ERR_STATE  MPI is not initialized
    @retval FSDP_ERR_MEM    out of memory
    @retval FSDP_ERR_MPI    an MPI call failed
    @see FSDPContextSetFromOptions, FSDPContextSetUp, FSDPContextDestroy, FSDPContextGetShardGroup */
FSDP_EXTERN FSDPErrorCode FSDPContextCreate(MPI_Comm comm, FSDPContext *ctx);
/** Set how units are sharded (default FSDP_FULL_SHARD), before FSDPContextSetUp; same as -fsdp_sharding_strategy.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx       the context, not set up
    @param[in] strategy  the strategy
    @retval FSDP_ERR_ARG    ctx is NULL, or strategy is not an FSDPShardingStrategy
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPShardingStrategy, FSDPContextGetShardingStrategy, ShardGroupSetShardingFactor */
FSDP_EXTERN FSDPErrorCode FSDPContextSetShardingStrategy(FSDPContext ctx, FSDPShardingStrategy strategy);
/** Get the context's ShardGroup: configure it before FSDPContextSetUp (hybrid strategies take F from it), query
    it after.  It belongs to the context: do not destroy it.
    @collective Not collective.
    @param[in] ctx     the context
    @param[out] group  its ShardGroup; NULL if not wanted
    @retval FSDP_ERR_ARG  ctx is NULL
    @see ShardGroupSetShardingFactor, ShardGroupGetShardComm, FSDPContextSetShardingStrategy */
FSDP_EXTERN FSDPErrorCode FSDPContextGetShardGroup(FSDPContext ctx, ShardGroup *group);
/** Set the unit initializer FSDPContextSetUp runs, before SetUp; init NULL removes it.
    A context has at most one of the two initializers; without either, parameters start at zero.
    @collective Not collective: each rank records its own; FSDPContextSetUp checks that every rank has the same
    kind of initializer (unit, shard or none).
    @param[in] ctx   the context, not set up
    @param[in] init  the initializer; NULL for none
    @param[in] user  passed to init as is
    @retval FSDP_ERR_ARG    ctx is NULL, or init is not NULL and the context has a shard initializer
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPUnitInitFn, FSDPContextSetShardInit, FSDPContextSetUp */
FSDP_EXTERN FSDPErrorCode FSDPContextSetUnitInit(FSDPContext ctx, FSDPUnitInitFn init, void *user);
/** Set the shard initializer FSDPContextSetUp runs, before SetUp; init NULL removes it.
    A context has at most one of the two initializers; without either, parameters start at zero.
    @collective Not collective: each rank records its own; FSDPContextSetUp checks that every rank has the same
    kind of initializer (unit, shard or none).
    @param[in] ctx   the context, not set up
    @param[in] init  the initializer; NULL for none
    @param[in] user  passed to init as is
    @retval FSDP_ERR_ARG    ctx is NULL, or init is not NULL and the context has a unit initializer
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPShardInitFn, FSDPContextSetUnitInit, FSDPContextSetUp */
FSDP_EXTERN FSDPErrorCode FSDPContextSetShardInit(FSDPContext ctx, FSDPShardInitFn init, void *user);
/** Set whether SetUp broadcasts each shard from the first replica to the others (default false), before SetUp;
    same as -fsdp_sync_params.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx   the context, not set up
    @param[in] sync  true to broadcast at SetUp
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPContextBroadcastParams, FSDPContextSetUp */
FSDP_EXTERN FSDPErrorCode FSDPContextSetSyncParams(FSDPContext ctx, bool sync);
/** Set the mixed precision of fp32 units, before SetUp; same as -fsdp_param_dtype and -fsdp_reduce_dtype.
    Parameters are rounded to param_dtype once per unshard, all-gathered and viewed in it
    (FlatParamGetViewDataType); gradients stay fp32 in their views, are rounded to reduce_dtype and summed in it
    across ranks (each pairwise sum in fp32, rounded), then accumulated into the fp32 gradient shard.  Shards,
    gradient shards and optimizer state stay fp32: the master copy.  Each type is FSDP_FLOAT32 (full precision,
    the default), FSDP_BFLOAT16 or FSDP_FLOAT16.  With fp16, see the gradient scaler
    (FSDPOptimizerSetGradScaler).  A unit that is not fp32 makes SetUp fail (FSDP_ERR_UNSUPPORTED) unless both
    are FSDP_FLOAT32.
    @collective Not collective: each rank records its values; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx           the context, not set up
    @param[in] param_dtype   the type of unsharded parameters and all-gathers
    @param[in] reduce_dtype  the type gradients are reduced in
    @retval FSDP_ERR_ARG    ctx is NULL, or a type is not FSDP_FLOAT32, FSDP_BFLOAT16 or FSDP_FLOAT16
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPContextGetMixedPrecision, FlatParamGetViewDataType, FSDPOptimizerSetGradScaler */
FSDP_EXTERN FSDPErrorCode FSDPContextSetMixedPrecision(FSDPContext ctx, FSDPDataType param_dtype,
                                                       FSDPDataType reduce_dtype);

/* Overlap (doc/overlap.md). */
/** Set where the context's collectives run, before SetUp; same as -fsdp_comm_engine.
    Without this call SetUp chooses (FSDPCommEngine).
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx     the context, not set up
    @param[in] engine  the engine
    @retval FSDP_ERR_ARG    ctx is NULL, or engine is not an FSDPCommEngine
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPCommEngine, FSDPContextSetWaitMode */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCommEngine(FSDPContext ctx, FSDPCommEngine engine);
/** Set when backward issues the next unit's all-gather (default FSDP_BACKWARD_PREFETCH_PRE), before SetUp; same
    as -fsdp_backward_prefetch.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx   the context, not set up
    @param[in] mode  the prefetch mode
    @retval FSDP_ERR_ARG    ctx is NULL, or mode is not an FSDPBackwardPrefetch
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPBackwardPrefetch, FSDPContextSetForwardPrefetch, FSDPContextBeginBackward */
FSDP_EXTERN FSDPErrorCode FSDPContextSetBackwardPrefetch(FSDPContext ctx, FSDPBackwardPrefetch mode);
/** Set whether forward issues the next unit's all-gather before the current unit's forward (default false; for
    static graphs), before SetUp; same as -fsdp_forward_prefetch.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx       the context, not set up
    @param[in] prefetch  true to prefetch in forward
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPContextSetBackwardPrefetch, FSDPContextBeginForward */
FSDP_EXTERN FSDPErrorCode FSDPContextSetForwardPrefetch(FSDPContext ctx, bool prefetch);
/** Allow at most `limit` units' parameters unsharded or being gathered at once (default 2; 0 = no limit), before
    SetUp; same as -fsdp_limit_all_gathers.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx    the context, not set up
    @param[in] limit  a number of units, or 0 for no limit
    @retval FSDP_ERR_ARG    ctx is NULL, or limit is negative
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPContextGetCommStats, FSDPMemoryPlan */
FSDP_EXTERN FSDPErrorCode FSDPContextSetLimitAllGathers(FSDPContext ctx, int limit);
/** Set the seconds a collective may take before the watchdog aborts the job (default 600; 0 = never), before
    SetUp; same as -fsdp_collective_timeout.  It also bounds the NCCL set-up in FSDPContextSetUp on a GPU.
    @collective Not collective: each rank may have its own value (the first watchdog to fire ends the job).
    @param[in] ctx      the context, not set up
    @param[in] seconds  the timeout, >= 0
    @retval FSDP_ERR_ARG    ctx is NULL, or seconds is negative or NaN
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPContextSetSignalGrace, FSDPContextWait */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCollectiveTimeout(FSDPContext ctx, double seconds);
/** Set how long a collective wait may go on after FSDPNotifySignal before the job aborts, saying so: another rank
    is not coming (default 5; 0 = wait for the watchdog), before SetUp; same as -fsdp_signal_grace.
    @collective Not collective: each rank may have its own value.
    @param[in] ctx      the context, not set up
    @param[in] seconds  the grace, >= 0
    @retval FSDP_ERR_ARG    ctx is NULL, or seconds is negative or NaN
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPNotifySignal, FSDPContextSetCollectiveTimeout */
FSDP_EXTERN FSDPErrorCode FSDPContextSetSignalGrace(FSDPContext ctx, double seconds);
/** Set whether, before each collective, the context checks that every rank issues the same one (default false;
    costs a small all-gather per collective), before SetUp; same as -fsdp_debug_collectives.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx    the context, not set up
    @param[in] debug  true to check
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPContextSetCollectiveTimeout, FSDPContextSetUp */
FSDP_EXTERN FSDPErrorCode FSDPContextSetDebugCollectives(FSDPContext ctx, bool debug);
/** Set how the context waits for collectives (default FSDP_WAIT_AUTO), before SetUp; same as -fsdp_wait.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx   the context, not set up
    @param[in] mode  the wait mode
    @retval FSDP_ERR_ARG    ctx is NULL, or mode is not an FSDPWaitMode
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPWaitMode, FSDPContextGetWaitMode, FSDPContextWait */
FSDP_EXTERN FSDPErrorCode FSDPContextSetWaitMode(FSDPContext ctx, FSDPWaitMode mode);
/** Get, after SetUp, the wait mode in force (POLL or SLEEP), and the node's ranks and CPUs it was chosen from.
    @collective Not collective.
    @param[in] ctx          the context, set up
    @param[out] mode        FSDP_WAIT_POLL or FSDP_WAIT_SLEEP; NULL if not wanted
    @param[out] node_ranks  the ranks on this rank's node, counted by machine: the containers of one host (one
                            Linux kernel) count together though MPI puts each on a node of its own; NULL if not wanted
    @param[out] node_cpus   the CPUs they may run on; NULL if not wanted
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or a SetUp of it failed midway
    @retval FSDP_ERR_CUDA   on a GPU context, the GPU is unusable
    @see FSDPContextSetWaitMode, FSDPWaitMode */
FSDP_EXTERN FSDPErrorCode FSDPContextGetWaitMode(FSDPContext ctx, FSDPWaitMode *mode, int *node_ranks, int *node_cpus);
/** Wait for a nonblocking MPI operation of the caller's (an MPI_Iallreduce of the loss, say) as the context waits
    for its own collectives: under its watchdog, progressing its queued collectives, and sleeping between tests
    when the wait mode is SLEEP.  A blocking MPI call would poll instead.  After SetUp.  A wait longer than the
    collective timeout aborts the job.
    @collective Not collective: it waits for this rank's request (whatever that request needs of other ranks).
    @param[in] ctx          the context, set up
    @param[in,out] request  the request; MPI_REQUEST_NULL once complete
    @retval FSDP_ERR_ARG    ctx or request is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or a SetUp of it failed midway
    @retval FSDP_ERR_MPI    testing the request, or a queued collective of the context, failed
    @retval FSDP_ERR_CUDA   on a GPU context, the GPU is unusable
    @see FSDPContextSetWaitMode, FSDPContextSetCollectiveTimeout */
FSDP_EXTERN FSDPErrorCode FSDPContextWait(FSDPContext ctx, MPI_Request *request);
/** Set whether a host shard group whose ranks share a node reduce-scatters fp32 gradients and all-gathers fp32
    shards through node shared memory (default true; doc/overlap.md), before SetUp; same as -fsdp_shm_reduce.
    The unsharded gradient buffers (and, without views, the shards) then sit in an MPI shared-memory window, and
    each rank reads its peers' data where it lies.  false: MPI's collectives.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx  the context, not set up
    @param[in] use  true for shared memory
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPContextSetShmViews, FSDPCommStats */
FSDP_EXTERN FSDPErrorCode FSDPContextSetShmReduce(FSDPContext ctx, bool use);
/** Set whether, with that window and fp32 parameters, each unit's parameters are kept whole in it, once per shard
    group (default true; doc/overlap.md, "Views"), before SetUp; same as -fsdp_shm_views.
    That view is every rank's unsharded buffer, read in place: an all-gather copies only the rank's own shard
    into its place (once every peer is done with the view's previous gather), backward needs none, and no
    parameter buffers are allocated.  The shards stay each rank's own: a rank may write its shard at any time
    between its passes.  false: each rank all-gathers into buffers of its own.
    @collective Not collective: each rank records its value; every rank must set the same, which
    FSDPContextSetUp checks.
    @param[in] ctx  the context, not set up
    @param[in] use  true for views
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPContextGetShmViews, FSDPContextSetShmReduce */
FSDP_EXTERN FSDPErrorCode FSDPContextSetShmViews(FSDPContext ctx, bool use);
/** Get, before SetUp, whether views were asked for; after, whether the units are views.
    @collective Not collective.
    @param[in] ctx   the context
    @param[out] use  the answer
    @retval FSDP_ERR_ARG  ctx or use is NULL
    @see FSDPContextSetShmViews */
FSDP_EXTERN FSDPErrorCode FSDPContextGetShmViews(FSDPContext ctx, bool *use);

/* Where the context computes (doc/cuda.md). */
/** Set where the context's shards and buffers live (default FSDP_DEVICE_HOST), before SetUp; same as
    -fsdp_device host|cuda.  FSDP_DEVICE_CUDA needs a CUDA build: SetUp fails otherwise.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx     the context, not set up
    @param[in] device  the device type
    @retval FSDP_ERR_ARG    ctx is NULL, or device is not an FSDPDeviceType
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPDeviceType, FSDPContextGetDevice, FSDPContextSetReplicateEngine */
FSDP_EXTERN FSDPErrorCode FSDPContextSetDevice(FSDPContext ctx, FSDPDeviceType device);
/** Set how a GPU context's gradients cross the replicas (default FSDP_REPLICATE_ENGINE_MPI), before SetUp; same as
    -fsdp_replicate_engine.
    @collective Not collective: each rank records its value; FSDPContextSetUp checks that every rank has the same.
    @param[in] ctx     the context, not set up
    @param[in] engine  the engine
    @retval FSDP_ERR_ARG    ctx is NULL, or engine is not an FSDPReplicateEngine
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDPReplicateEngine, FSDPContextSetDevice */
FSDP_EXTERN FSDPErrorCode FSDPContextSetReplicateEngine(FSDPContext ctx, FSDPReplicateEngine engine);

/** Keep the last `keep` checkpoints: path, path.1, ... (default 1); same as -fsdp_checkpoint_keep.
    Before or after SetUp.
    @collective Not collective: each rank records its value; every rank must have the same, which
    FSDPContextSetUp, FSDPContextSave and FSDPContextLoad check.
    @param[in] ctx   the context
    @param[in] keep  the number of checkpoints, >= 1
    @retval FSDP_ERR_ARG  ctx is NULL, or keep is less than 1
    @see FSDPContextGetCheckpointKeep, FSDPContextSave */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCheckpointKeep(FSDPContext ctx, int keep);
/** Set how ranks move a checkpoint's data (default FSDP_CHECKPOINT_IO_AUTO); same as -fsdp_checkpoint_io.
    Before or after SetUp (after it, AUTO is decided as SetUp decided it).
    @collective Not collective: each rank records its value; every rank must have the same, which
    FSDPContextSetUp, FSDPContextSave and FSDPContextLoad check.
    @param[in] ctx  the context
    @param[in] io   the transfer mode
    @retval FSDP_ERR_ARG  ctx is NULL, or io is not an FSDPCheckpointIO
    @see FSDPCheckpointIO, FSDPContextSave, FSDPContextLoad */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCheckpointIO(FSDPContext ctx, FSDPCheckpointIO io);
/** Set whether FSDPContextLoad requires the file and the context to match exactly (default true: any difference
    is an error); false loads the parameters and state they share and reports the rest on rank 0's stderr.  Same
    as -fsdp_checkpoint_strict; before or after SetUp.
    @collective Not collective: each rank records its value; every rank must have the same, which
    FSDPContextSetUp, FSDPContextSave and FSDPContextLoad check.
    @param[in] ctx     the context
    @param[in] strict  false to load what matches
    @retval FSDP_ERR_ARG  ctx is NULL
    @see FSDPContextLoad */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCheckpointStrict(FSDPContext ctx, bool strict);
/** Guard against NaN and Inf (default true); same as -fsdp_check_finite; before or after SetUp.
    FSDPOptimizerStep stops with FSDP_ERR_NOT_FINITE when the global gradient norm is not finite (with the
    gradient scaler on, an overflow skips the step instead), FSDPContextSave refuses to write non-finite
    parameters or state, and FSDPContextLoad refuses a file that holds them.  false lets all three go on.
    @collective Not collective: each rank records its value; every rank must have the same, which
    FSDPContextSetUp, FSDPContextSave and FSDPContextLoad check.
    @param[in] ctx    the context
    @param[in] check  false to let non-finite values through
    @retval FSDP_ERR_ARG  ctx is NULL
    @see FSDPContextGetCheckFinite, FSDPOptimizerStep, FSDPContextSave */
FSDP_EXTERN FSDPErrorCode FSDPContextSetCheckFinite(FSDPContext ctx, bool check);
/** The default memory limit of FSDPContextSetMemoryLimit: the least of the node's physical memory divided by its
    ranks, the cgroup's memory limit divided by its ranks on the node, and what RLIMIT_AS leaves.
    @see FSDPContextSetMemoryLimit */
#define FSDP_MEMORY_LIMIT_AUTO (-1)
/** Set the most memory the rank's memory plan may take (doc/options.md), before SetUp; same as
    -fsdp_memory_limit.  FSDPContextSetUp refuses, on every rank and before allocating, a host plan above it (a
    GPU plan is not checked).  bytes > 0: this limit; 0: no check; FSDP_MEMORY_LIMIT_AUTO (the default).
    @collective Not collective: each rank may have its own limit (the check's verdict is agreed at SetUp).
    @param[in] ctx    the context, not set up
    @param[in] bytes  the limit in bytes, 0, or FSDP_MEMORY_LIMIT_AUTO
    @retval FSDP_ERR_ARG    ctx is NULL, or bytes is below FSDP_MEMORY_LIMIT_AUTO
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @see FSDP_MEMORY_LIMIT_AUTO, FSDPMemoryPlan, FSDPContextGetMemoryPlan */
FSDP_EXTERN FSDPErrorCode FSDPContextSetMemoryLimit(FSDPContext ctx, int64_t bytes);

/** Set the context, and its ShardGroup, from the runtime options, before SetUp.
    Every option of the setters above, -fsdp_mpi_cuda_aware, -fsdp_view, -fsdp_log_view_units, and the
    ShardGroup's options (ShardGroupSetFromOptions).  With -fsdp_view the ShardGroup is printed inside the
    context's view at SetUp.
    @collective Not collective: it reads this rank's options; FSDPContextSetUp checks that the settings that must
    agree do.
    @param[in] ctx  the context, not set up
    @retval FSDP_ERR_ARG     ctx is NULL, or -fsdp_collective_timeout or -fsdp_signal_grace is negative
    @retval FSDP_ERR_STATE   ctx or its ShardGroup is set up, or a SetUp of ctx failed midway
    @retval FSDP_ERR_OPTION  an option's value is malformed or out of range
    @retval FSDP_ERR_MEM     out of memory
    @options -fsdp_sharding_strategy, -fsdp_param_dtype, -fsdp_reduce_dtype, -fsdp_device, -fsdp_replicate_engine,
    -fsdp_mpi_cuda_aware, -fsdp_sync_params, -fsdp_view, -fsdp_comm_engine, -fsdp_shm_reduce, -fsdp_shm_views,
    -fsdp_backward_prefetch, -fsdp_forward_prefetch, -fsdp_limit_all_gathers, -fsdp_collective_timeout,
    -fsdp_signal_grace, -fsdp_wait, -fsdp_debug_collectives, -fsdp_log_view_units, -fsdp_checkpoint_keep,
    -fsdp_checkpoint_io, -fsdp_memory_limit, -fsdp_checkpoint_strict, -fsdp_check_finite, -fsdp_sharding_factor,
    -fsdp_shard_domain, -fsdp_bind, -fsdp_bind_force, -fsdp_topology, -fsdp_ranks_per_node, -fsdp_rank_placement,
    -fsdp_node_source (doc/options.md).
    @see ShardGroupSetFromOptions, FSDPContextSetUp, FSDPOptionsGetEnum */
FSDP_EXTERN FSDPErrorCode FSDPContextSetFromOptions(FSDPContext ctx);
/** Add a new unit, last in execution order, before SetUp; it belongs to the context.
    Every rank must add the same units, with the same parameters, in the same order: FSDPContextSetUp checks.
    @collective Not collective.
    @param[in] ctx    the context, not set up
    @param[in] name   the unit's name, not empty, unique in the context
    @param[out] unit  the new unit
    @retval FSDP_ERR_ARG    ctx or unit is NULL, name is NULL or empty, or a unit of that name exists
    @retval FSDP_ERR_STATE  ctx is set up, or a SetUp of it failed midway
    @retval FSDP_ERR_MEM    out of memory
    @see FlatParamAddParam, FlatParamSetDataType, FSDPContextGetUnit, FSDPContextSetUp */
FSDP_EXTERN FSDPErrorCode FSDPContextAddUnit(FSDPContext ctx, const char *name, FlatParam *unit);
/** Set up the context: check that every rank has the same settings and units, build the ShardGroup, lay out and
    allocate shards, and run the initializer.
    It also decides the automatic settings (engine, wait mode, checkpoint transfers), refuses a host memory plan
    above the memory limit before allocating anything (the context may then be set up again), starts the GPU and
    NCCL on a GPU context, broadcasts the shards with FSDPContextSetSyncParams, and prints the context with
    -fsdp_view.  Errors are returned on every rank, an initializer's own error code included.  An error once the
    shards are being laid out leaves a context that can only be destroyed.  On a GPU, an NCCL set-up that outlasts
    the collective timeout aborts the job.
    @collective Collective on the context's communicator: every rank of ctx calls it.
    @param[in] ctx  the context, not set up
    @retval FSDP_ERR_ARG          ctx is NULL; a setting that must agree, or the units, differ across ranks; or a
                                  sharding factor was set that the strategy does not allow
    @retval FSDP_ERR_STATE        ctx is set up, or an earlier SetUp of it failed once laying out shards
    @retval FSDP_ERR_UNSUPPORTED  the THREAD engine without MPI_THREAD_MULTIPLE; mixed precision with a unit that
                                  is not fp32; FSDP_DEVICE_CUDA, -fsdp_topology or -fsdp_bind in a build without
                                  CUDA or hwloc
    @retval FSDP_ERR_MEM          the host memory plan is above the memory limit, or an allocation failed
    @retval FSDP_ERR_MPI          an MPI call failed
    @retval FSDP_ERR_HWLOC        topology discovery failed
    @retval FSDP_ERR_IO           the -fsdp_topology file cannot be read
    @retval FSDP_ERR_OPTION       -fsdp_node_source slurm without SLURM_NODEID, or -fsdp_bind over a task Slurm bound
    @retval FSDP_ERR_CUDA         on a GPU context, a CUDA call failed
    @retval FSDP_ERR_NCCL         on a GPU context, an NCCL call failed
    @see FSDPContextCreate, FSDPContextSetFromOptions, FSDPContextGetMemoryPlan, ShardGroupSetUp */
FSDP_EXTERN FSDPErrorCode FSDPContextSetUp(FSDPContext ctx);
/* ------------------------------------------------------------------ FSDPContext: a training step */

/** Mark the start of a training step's forward pass, as autograd's hooks tell PyTorch FSDP.
    The forward pass records the order in which units are first unsharded;
    backward prefetches in the reverse of that order, the next forward (with
    forward prefetch) in that order.  Without these calls nothing is
    prefetched.  Parameters kept or cached since the last forward, and
    prefetches nobody used, are released, so the shards may change between
    steps.  After SetUp; FSDPContextFinishBackward ends the step.
    @collective Not collective: it starts no communication (it may wait for a prefetch every rank issued), but
    every rank must call it at the same point of its step, or the ranks' next all-gathers differ.
    @param[in] ctx  the context, set up
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed
    @retval FSDP_ERR_MPI    an unused prefetch it waited for failed
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed (also a fault left on the GPU)
    @retval FSDP_ERR_NCCL   on a GPU context, an unused prefetch it waited for failed in NCCL
    @see FSDPContextBeginBackward, FSDPContextFinishBackward, FlatParamUnshard, FSDPContextSetForwardPrefetch */
FSDP_EXTERN FSDPErrorCode FSDPContextBeginForward(FSDPContext ctx);
/** Mark the start of a training step's backward pass, as autograd's hooks tell PyTorch FSDP.
    From here FlatParamUnshard prefetches the unit before the current one in
    this step's forward order (-fsdp_backward_prefetch).  After SetUp.
    @collective Not collective: it only changes the context's phase; every rank should call it at the same point.
    @param[in] ctx  the context, set up
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed (also a fault left on the GPU)
    @see FSDPContextBeginForward, FSDPContextFinishBackward, FSDPContextSetBackwardPrefetch */
FSDP_EXTERN FSDPErrorCode FSDPContextBeginBackward(FSDPContext ctx);

/** End a training step: finish every gradient reduction, so that gradient shards are final.
    It waits for every reduction started by FlatParamReduceGrad and, with
    gradient sync on, reduces what accumulation left unreduced; the optimizer
    may run after it.  It releases parameters kept for a backward pass that
    did not come and prefetches nobody used, and advances the step counter
    once per step (calling it again does nothing more).  Reductions that
    failed are not retried: the unit leaves REDUCING all the same.
    @collective Collective on the context's communicator: every rank of ctx calls it, once per backward pass. It
    communicates when, with gradient sync on, gradients were left unreduced (accumulated with FSDPContextSetGradSync
    false, or reduced in the shard group only with FSDPContextSetReplicateGradSync false): it reduces them, unit by
    unit; otherwise it waits for the reductions and prefetches already in flight.
    @param[in] ctx  the context, set up
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed; or, with -fsdp_debug_collectives,
                            the ranks are about to run different collectives
    @retval FSDP_ERR_MPI    a reduction or a prefetch failed in MPI
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed
    @retval FSDP_ERR_NCCL   on a GPU context, a reduction or prefetch failed in NCCL
    @see FlatParamReduceGrad, FSDPContextBeginForward, FSDPContextSetGradSync, FSDPOptimizerStep */
FSDP_EXTERN FSDPErrorCode FSDPContextFinishBackward(FSDPContext ctx);
/** Zero every gradient shard and drop gradients accumulated without synchronization.
    A unit unsharded now keeps its unsharded gradient buffer, zeroed.  Call it
    between steps, with no reduction in flight.
    @collective Not collective: no communication.
    @param[in] ctx  the context, set up
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed; or a gradient reduction is in
                            flight (call FSDPContextFinishBackward first)
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed
    @see FSDPContextFinishBackward, FSDPContextSetGradSync, FlatParamGetGradShard */
FSDP_EXTERN FSDPErrorCode FSDPContextZeroGrad(FSDPContext ctx);
/** Turn gradient synchronization of FlatParamReduceGrad on or off (default on).
    With false no communication happens: each unit keeps its unsharded
    gradient and later micro-batches add to it, until a reduction with
    synchronization on (PyTorch's no_sync).  FSDPContextFinishBackward reduces
    what is left once it is back on.  It may be called at any time, before
    or after SetUp.
    @collective Not collective: no communication, but every rank must set the same value, since it decides
    which collectives the next reductions run.
    @param[in] ctx   the context
    @param[in] sync  true: reduce at each FlatParamReduceGrad; false: accumulate unreduced
    @retval FSDP_ERR_ARG  ctx is NULL
    @see FSDPContextSetReplicateGradSync, FlatParamReduceGrad, FSDPContextFinishBackward, FSDPContextZeroGrad */
FSDP_EXTERN FSDPErrorCode FSDPContextSetGradSync(FSDPContext ctx, bool sync);
/** Turn the all-reduce of gradients across replicas on or off (default on).
    With replicas (the hybrid strategies, and no_shard, where each rank is
    one) and false, gradients are reduce-scattered in the shard group but not
    all-reduced across replicas, until a reduction with it on.  Turning it off
    while gradient shards hold gradients already averaged across replicas
    makes the next FlatParamReduceGrad an error: zero them first.  It may be
    called at any time, before or after SetUp.
    @collective Not collective: no communication, but every rank must set the same value, since it decides
    which collectives the next reductions run.
    @param[in] ctx   the context
    @param[in] sync  true: all-reduce across replicas; false: reduce in the shard group only
    @retval FSDP_ERR_ARG  ctx is NULL
    @see FSDPContextSetGradSync, FSDPContextZeroGrad, FlatParamReduceGrad, FSDPContextSetShardingStrategy */
FSDP_EXTERN FSDPErrorCode FSDPContextSetReplicateGradSync(FSDPContext ctx, bool sync);
/** Broadcast every shard from the first replica to the others (what -fsdp_sync_params does at SetUp).
    Between steps: every unit must be sharded; the ranks agree on that first,
    so a refusal is returned on every rank.  Cached, kept and prefetched
    unsharded copies are dropped.  Without replicas it changes nothing.  On a
    GPU the shards travel through host memory.
    @collective Collective on the context's communicator: every rank of ctx calls it.
    @param[in] ctx  the context, set up
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed; or a unit is not sharded on
                            some rank
    @retval FSDP_ERR_MEM    on a GPU context, the host staging cannot be allocated
    @retval FSDP_ERR_MPI    an MPI call failed
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed
    @see FSDPContextSetSyncParams, FSDPContextSetUp, FSDPContextLoad */
FSDP_EXTERN FSDPErrorCode FSDPContextBroadcastParams(FSDPContext ctx);
/** Wait until the work the context queued on its GPU has run.
    Shards then read right on the host, and timings are complete.  After
    SetUp; on the host it returns at once.
    @collective Not collective: it waits for this rank's GPU only.
    @param[in] ctx  the context, set up
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed or the GPU's work faulted
    @see FSDPContextGetCommStats, FlatParamGetShard, FSDPContextSetDevice */
FSDP_EXTERN FSDPErrorCode FSDPContextSynchronize(FSDPContext ctx);

/* -------------------------------------------------------------- FSDPContext: checkpoints (doc/checkpoint-format.md) */

/** Set the training state that the next FSDPContextSave stores; FSDPContextLoad sets it from the file.
    The state is copied.  With an optimizer, Save writes the optimizer's step
    instead of state->step.  Every rank must set the same state: it becomes
    the file's root attributes, written collectively (this is not checked).
    @collective Not collective: each rank may call it alone.
    @param[in] ctx    the context
    @param[in] state  the step, data cursor and random-number state to store
    @retval FSDP_ERR_ARG  ctx or state is NULL
    @see FSDPContextGetTrainingState, FSDPContextSave, FSDPTrainingState */
FSDP_EXTERN FSDPErrorCode FSDPContextSetTrainingState(FSDPContext ctx, const FSDPTrainingState *state);
/** Get the context's training state: the last one set, or loaded by FSDPContextLoad (all zero before either).
    @collective Not collective: each rank may call it alone.
    @param[in] ctx     the context
    @param[out] state  the training state; NULL if not wanted
    @retval FSDP_ERR_ARG  ctx is NULL
    @see FSDPContextSetTrainingState, FSDPContextLoad, FSDPTrainingState */
FSDP_EXTERN FSDPErrorCode FSDPContextGetTrainingState(FSDPContext ctx, FSDPTrainingState *state);
/** Save a checkpoint: one HDF5 file with every parameter at its full shape as /params/\<name\> and, when opt is
    not NULL, its state as /optim/\<state\>/\<name\>.
    After SetUp.  Each rank writes only what lies in its shard (replicas
    split it), through MPI-IO or, with FSDP_CHECKPOINT_IO_POSIX, with pwrite
    into the file rank 0 made alone.  The file is written beside path (path.partial, after its
    room on disk is reserved) and renamed over it once complete, so a crash
    leaves the previous checkpoint intact; older ones move to path.1, ...
    as FSDPContextSetCheckpointKeep says.  A symbolic link at path is
    followed.  With -fsdp_check_finite (the default) non-finite parameters or
    state are refused and nothing is written.  Errors are agreed: every rank
    returns one.
    @collective Collective on the context's communicator: every rank of ctx calls it, with the same checkpoint
    settings (rank 0's path is used).  A build without HDF5 returns FSDP_ERR_UNSUPPORTED at once.
    @param[in] ctx   the context, set up
    @param[in] opt   its optimizer, set up, whose state and step are saved; NULL for the parameters alone
    @param[in] path  the checkpoint file
    @retval FSDP_ERR_ARG          ctx is NULL; path is NULL, empty or too long; opt belongs to another
                                  context; or the checkpoint settings differ across ranks
    @retval FSDP_ERR_STATE        ctx is not set up; opt is not set up, or parameters were frozen or
                                  unfrozen after its FSDPOptimizerSetUp
    @retval FSDP_ERR_IO           path is a directory, no room on the file system, or a file cannot be
                                  created, written, removed, synced or renamed
    @retval FSDP_ERR_HDF5         an HDF5 call failed
    @retval FSDP_ERR_NOT_FINITE   a parameter or state value is NaN or infinite (-fsdp_check_finite)
    @retval FSDP_ERR_MEM          out of memory
    @retval FSDP_ERR_MPI          an MPI call failed
    @retval FSDP_ERR_CUDA         on a GPU context, a copy to the host failed
    @retval FSDP_ERR_UNSUPPORTED  libfsdp was built without HDF5, or POSIX transfers on a machine that is not
                                  little-endian
    @see FSDPContextLoad, FSDPContextSetTrainingState, FSDPContextSetCheckpointKeep, FSDPContextSetCheckpointIO */
FSDP_EXTERN FSDPErrorCode FSDPContextSave(FSDPContext ctx, FSDPOptimizer opt, const char *path);
/** Load a checkpoint written at any world size, strategy and wrapping, each rank reading only its shards.
    After SetUp and between steps (every unit sharded).  opt NULL loads the
    parameters alone.  Names, shapes and types are checked first: a
    difference is an error listing them all, and nothing is loaded (with
    FSDPContextSetCheckpointStrict false, what matches is loaded).  Checksums
    are verified unit by unit before the unit changes: a corrupt dataset is
    an error naming it, leaving its unit and later ones as they were.  The
    training state, the step and the optimizer's step and gradient scale are
    set from the file.  Shards keep their addresses (FlatParamGetShard); on
    the host their pages, and the optimizer state's, may change places with
    the staging buffer's instead of being copied.  Errors are agreed: every
    rank returns one.
    @collective Collective on the context's communicator: every rank of ctx calls it with the same path and
    the same checkpoint settings.  A build without HDF5 returns FSDP_ERR_UNSUPPORTED at once.
    @param[in] ctx   the context, set up
    @param[in] opt   its optimizer, set up, whose state and step are loaded; NULL for the parameters alone
    @param[in] path  the checkpoint file
    @retval FSDP_ERR_ARG          ctx is NULL; path is NULL or empty; opt belongs to another context; the
                                  checkpoint settings differ across ranks; or the file does not match the
                                  model or optimizer (names, shapes, types, optimizer type)
    @retval FSDP_ERR_STATE        ctx is not set up; a unit is not sharded (mid-step); opt is not set up, or
                                  parameters were frozen or unfrozen after its FSDPOptimizerSetUp
    @retval FSDP_ERR_IO           path is a directory or cannot be opened, or (POSIX transfers) was replaced
                                  while the ranks opened it, or a read failed
    @retval FSDP_ERR_CORRUPT      the file is not readable HDF5, or is damaged (a checksum, an attribute)
    @retval FSDP_ERR_NOT_FINITE   the file holds NaN or infinite values (-fsdp_check_finite)
    @retval FSDP_ERR_HDF5         an HDF5 call failed
    @retval FSDP_ERR_MEM          out of memory
    @retval FSDP_ERR_MPI          an MPI call failed
    @retval FSDP_ERR_CUDA         on a GPU context, a copy to the GPU failed
    @retval FSDP_ERR_UNSUPPORTED  libfsdp was built without HDF5, or the file's format is newer than it reads
    @see FSDPContextSave, FSDPContextGetTrainingState, FSDPContextSetCheckpointStrict, FSDPContextSetCheckFinite */
FSDP_EXTERN FSDPErrorCode FSDPContextLoad(FSDPContext ctx, FSDPOptimizer opt, const char *path);

/* ------------------------------------------------------------------ FSDPContext: queries */

/** Get the context's sharding strategy (FSDP_FULL_SHARD unless set).
    @collective Not collective: each rank may call it alone.
    @param[in] ctx        the context
    @param[out] strategy  the sharding strategy; NULL if not wanted
    @retval FSDP_ERR_ARG  ctx is NULL
    @see FSDPContextSetShardingStrategy, FSDPShardingStrategyName, FSDPContextGetShardGroup */
FSDP_EXTERN FSDPErrorCode FSDPContextGetShardingStrategy(FSDPContext ctx, FSDPShardingStrategy *strategy);
/** Get the context's own duplicate of the communicator it was created on.
    It belongs to the context: do not free it; it is valid until
    FSDPContextDestroy.
    @collective Not collective: each rank may call it alone.
    @param[in] ctx    the context
    @param[out] comm  the context's communicator
    @retval FSDP_ERR_ARG  ctx or comm is NULL
    @see FSDPContextCreate, FSDPContextWait, FSDPContextGetShardGroup */
FSDP_EXTERN FSDPErrorCode FSDPContextGetComm(FSDPContext ctx, MPI_Comm *comm);
/** Get the number of units added to the context so far.
    @collective Not collective: each rank may call it alone.
    @param[in] ctx      the context
    @param[out] nunits  the number of units; NULL if not wanted
    @retval FSDP_ERR_ARG  ctx is NULL
    @see FSDPContextGetUnit, FSDPContextAddUnit */
FSDP_EXTERN FSDPErrorCode FSDPContextGetNumUnits(FSDPContext ctx, int *nunits);
/** Get unit i, in execution order (the order of FSDPContextAddUnit, from 0).
    The unit belongs to the context.
    @collective Not collective: each rank may call it alone.
    @param[in] ctx    the context
    @param[in] i      the unit's index, 0 <= i < the number of units
    @param[out] unit  the unit; NULL if not wanted
    @retval FSDP_ERR_ARG  ctx is NULL, or i is out of range
    @see FSDPContextGetNumUnits, FSDPContextAddUnit, FSDPContextFindParam */
FSDP_EXTERN FSDPErrorCode FSDPContextGetUnit(FSDPContext ctx, int i, FlatParam *unit);
/** Find the unit holding the parameter called `name`, and the parameter's index in it.
    @collective Not collective: each rank may call it alone.
    @param[in] ctx    the context
    @param[in] name   the parameter's name, as registered
    @param[out] unit  the unit holding it; NULL if not wanted
    @param[out] id    its index in the unit; NULL if not wanted
    @retval FSDP_ERR_ARG  ctx or name is NULL, or no unit has a parameter called name
    @see FSDPContextGetUnit, FlatParamGetParam, FSDPParamId */
FSDP_EXTERN FSDPErrorCode FSDPContextFindParam(FSDPContext ctx, const char *name, FlatParam *unit, FSDPParamId *id);
/** Get the context's sizes in elements: all original parameters, this rank's shards (padding included), and
    the largest unit unsharded (padding included).  After SetUp.
    @collective Not collective: each rank may call it alone.
    @param[in] ctx              the context, set up
    @param[out] numel           the elements of all original parameters; NULL if not wanted
    @param[out] shard_numel     the elements of this rank's shards; NULL if not wanted
    @param[out] max_unit_numel  the elements of the largest unit unsharded; NULL if not wanted
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed
    @see FSDPContextGetMemoryPlan, FlatParamGetShardRange, FSDPContextView */
FSDP_EXTERN FSDPErrorCode FSDPContextGetSizes(FSDPContext ctx, int64_t *numel, int64_t *shard_numel,
                                              int64_t *max_unit_numel);
/** Get where the context computes (FSDP_DEVICE_HOST unless set).
    @collective Not collective: each rank may call it alone.
    @param[in] ctx      the context
    @param[out] device  the device type; NULL if not wanted
    @retval FSDP_ERR_ARG  ctx is NULL
    @see FSDPContextSetDevice, FSDPDeviceType */
FSDP_EXTERN FSDPErrorCode FSDPContextGetDevice(FSDPContext ctx, FSDPDeviceType *device);
/** Get the context's mixed-precision types (FSDP_FLOAT32 for both unless set).
    @collective Not collective: each rank may call it alone.
    @param[in] ctx            the context
    @param[out] param_dtype   the type parameters are unsharded and all-gathered in; NULL if not wanted
    @param[out] reduce_dtype  the type gradients are reduced in; NULL if not wanted
    @retval FSDP_ERR_ARG  ctx is NULL
    @see FSDPContextSetMixedPrecision, FSDPDataType */
FSDP_EXTERN FSDPErrorCode FSDPContextGetMixedPrecision(FSDPContext ctx, FSDPDataType *param_dtype,
                                                       FSDPDataType *reduce_dtype);
/** Get how many checkpoints FSDPContextSave keeps (default 1).
    @collective Not collective: each rank may call it alone.
    @param[in] ctx    the context
    @param[out] keep  the number of checkpoints kept: path, path.1, ...
    @retval FSDP_ERR_ARG  ctx or keep is NULL
    @see FSDPContextSetCheckpointKeep, FSDPContextSave */
FSDP_EXTERN FSDPErrorCode FSDPContextGetCheckpointKeep(FSDPContext ctx, int *keep);
/** Get whether the context guards against NaN and Inf (default true).
    @collective Not collective: each rank may call it alone.
    @param[in] ctx     the context
    @param[out] check  true: FSDPOptimizerStep, FSDPContextSave and FSDPContextLoad refuse non-finite values
    @retval FSDP_ERR_ARG  ctx or check is NULL
    @see FSDPContextSetCheckFinite, FSDPOptimizerStep, FSDPContextSave, FSDPContextLoad */
FSDP_EXTERN FSDPErrorCode FSDPContextGetCheckFinite(FSDPContext ctx, bool *check);
/** Get the memory plan that FSDPContextSetUp allocated on this rank, in bytes per category.
    @collective Not collective: each rank may call it alone.
    @param[in] ctx    the context, set up
    @param[out] plan  the memory plan
    @retval FSDP_ERR_ARG    ctx or plan is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed
    @see FSDPMemoryPlan, FSDPContextSetMemoryLimit, FSDPContextGetCommStats, FSDPContextView */
FSDP_EXTERN FSDPErrorCode FSDPContextGetMemoryPlan(FSDPContext ctx, FSDPMemoryPlan *plan);
/** Get what the runtime did on this rank since SetUp: collectives, prefetches, cache hits, the buffers in use
    now and the time spent in collectives.
    On a GPU context, call FSDPContextSynchronize first for complete timings.
    @collective Not collective: each rank may call it alone.
    @param[in] ctx     the context, set up
    @param[out] stats  the statistics
    @retval FSDP_ERR_ARG    ctx or stats is NULL
    @retval FSDP_ERR_STATE  ctx is not set up, or its FSDPContextSetUp failed
    @see FSDPCommStats, FSDPContextGetMemoryPlan, FSDPContextSynchronize */
FSDP_EXTERN FSDPErrorCode FSDPContextGetCommStats(FSDPContext ctx, FSDPCommStats *stats);

/* ------------------------------------------------------------------ FSDPContext: view, destroy */

/** Print the context: strategy, ShardGroup, units and the memory they take.
    Before SetUp it prints the units and the strategy asked for only.  Lines
    that differ by rank (GPU, wait mode) are printed in rank order.
    -fsdp_view prints it at SetUp.
    @collective Collective on the context's communicator: every rank of ctx calls it; a viewer given spans the same
    ranks (after SetUp it must).
    @param[in] ctx     the context
    @param[in] viewer  where to print, on the context's ranks; NULL for stdout
    @retval FSDP_ERR_ARG  ctx is NULL, or, after SetUp, viewer's communicator has other ranks than ctx's
    @retval FSDP_ERR_IO   the output cannot be written
    @retval FSDP_ERR_MEM  out of memory
    @retval FSDP_ERR_MPI  an MPI call failed
    @see ShardGroupView, FSDPViewerASCIIOpen, FSDPContextGetMemoryPlan */
FSDP_EXTERN FSDPErrorCode FSDPContextView(FSDPContext ctx, FSDPViewer viewer);
/** Destroy a context, its units, ShardGroup, buffers and communicators, and set *ctx to NULL.
    A context whose FSDPContextSetUp failed may be destroyed.  While a
    gradient reduction is in flight it is an error, with the context left
    intact: call FSDPContextFinishBackward first.  Prefetches nobody used
    finish before their buffers are freed.  *ctx NULL: nothing to do.
    @collective Collective on the context's communicator (MPI_Comm_free, and MPI_Win_free of node shared
    memory): every rank of ctx calls it.
    @param[in,out] ctx  the context; set to NULL
    @retval FSDP_ERR_ARG    ctx is NULL
    @retval FSDP_ERR_STATE  a gradient reduction is in flight
    @retval FSDP_ERR_MPI    an MPI call failed, or a prefetch it finished failed
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed
    @see FSDPContextCreate, FSDPContextFinishBackward */
FSDP_EXTERN FSDPErrorCode FSDPContextDestroy(FSDPContext *ctx);

/* ------------------------------------------------------------------ FlatParam (doc/flatparam.md) */

/** One unit's lifecycle: SHARDED -> GATHERING -> UNSHARDED -> REDUCING -> SHARDED.
    FlatParamUnshard, FlatParamReshard and FlatParamReduceGrad move a unit between the states; a call that
    needs another state fails with FSDP_ERR_STATE, naming the unit and its state.
    @see FlatParamGetState, FlatParamStateName, FlatParamUnshard, FlatParamReduceGrad */
typedef enum {
  FSDP_FLATPARAM_SHARDED = 0, /**< only this rank's shard is held */
  FSDP_FLATPARAM_GATHERING,   /**< an all-gather is under way */
  FSDP_FLATPARAM_UNSHARDED,   /**< the whole unit is held: parameter and gradient views are valid */
  FSDP_FLATPARAM_REDUCING     /**< the gradient is being reduced into the gradient shard */
} FlatParamState;

/** Returns the name of a unit state: "sharded", "gathering", "unsharded" or "reducing".
    The string is static.
    @collective Not collective.
    @param[in] state  the state
    @errors None: returns "unknown state" for a value out of range.
    @see FlatParamState, FlatParamGetState */
FSDP_EXTERN const char *FlatParamStateName(FlatParamState state);

/** Sets the unit's data type, which all its parameters share (default FSDP_FLOAT32).
    It is the master copy's type (shard, gradient shard, unsharded gradient): FSDP_FLOAT32 or FSDP_FLOAT64;
    16-bit parameters come from a mixed-precision policy over fp32 units.  Before FSDPContextSetUp, alike on
    every rank: SetUp checks that the units agree.
    @collective Not collective.
    @param[in] unit   the unit, not set up
    @param[in] dtype  FSDP_FLOAT32 or FSDP_FLOAT64
    @retval FSDP_ERR_ARG          unit is NULL, or dtype is not an FSDPDataType
    @retval FSDP_ERR_STATE        FSDPContextSetUp ran (or failed) on the context: the layout is fixed
    @retval FSDP_ERR_UNSUPPORTED  dtype is FSDP_BFLOAT16 or FSDP_FLOAT16
    @see FlatParamGetDataType, FSDPContextSetMixedPrecision, FSDPContextSetUp */
FSDP_EXTERN FSDPErrorCode FlatParamSetDataType(FlatParam unit, FSDPDataType dtype);
/** Registers a parameter of shape[0] x ... x shape[ndim-1] at the end of the unit (ndim 0: a scalar;
    a zero extent: an empty tensor).
    Names are unique in the context, and are not "." and contain no '/' (they name checkpoint datasets: use
    dots, as in blocks.0.weight).  Before FSDPContextSetUp, alike on every rank: SetUp checks that the units
    agree.
    @collective Not collective.
    @param[in] unit   the unit, not set up
    @param[in] name   the parameter's name, copied
    @param[in] ndim   the number of dimensions, >= 0
    @param[in] shape  the ndim extents, each >= 0, row-major (C order), copied; may be NULL when ndim is 0
    @param[out] id    the parameter's id in the unit (0, 1, ... in registration order); NULL if not wanted
    @retval FSDP_ERR_ARG    unit is NULL; name is NULL, empty, "." or contains '/'; ndim < 0; shape is NULL with
                            ndim > 0; an extent is negative; the parameter or the unit would have more than 2^63
                            elements; or the context has a parameter called name already
    @retval FSDP_ERR_STATE  FSDPContextSetUp ran (or failed) on the context: the layout is fixed
    @retval FSDP_ERR_MEM    out of memory
    @see FSDPContextAddUnit, FlatParamGetParamInfo, FlatParamGetShardRange, FSDPContextFindParam */
FSDP_EXTERN FSDPErrorCode FlatParamAddParam(FlatParam unit, const char *name, int ndim, const int64_t shape[],
                                            FSDPParamId *id);

/** Makes a parameter trainable (the default) or frozen, like requires_grad in PyTorch.
    A frozen parameter keeps its value and has no optimizer state, while the other parameters of its unit
    train.  Set it the same on every rank (FSDPOptimizerSetUp checks), before FSDPOptimizerSetUp: a change
    after it makes the next FSDPOptimizerStep fail with FSDP_ERR_STATE.
    @collective Not collective.
    @param[in] unit       the unit
    @param[in] id         the parameter, from FlatParamAddParam
    @param[in] trainable  true: trainable; false: frozen
    @retval FSDP_ERR_ARG  unit is NULL, or id is not one of its parameters
    @see FlatParamGetTrainable, FSDPOptimizerSetUp */
FSDP_EXTERN FSDPErrorCode FlatParamSetTrainable(FlatParam unit, FSDPParamId id, bool trainable);
/** Tells whether a parameter is trainable (the default) or frozen.
    @collective Not collective.
    @param[in] unit        the unit
    @param[in] id          the parameter
    @param[out] trainable  true when trainable, false when frozen
    @retval FSDP_ERR_ARG  unit or trainable is NULL, or id is not one of the unit's parameters
    @see FlatParamSetTrainable */
FSDP_EXTERN FSDPErrorCode FlatParamGetTrainable(FlatParam unit, FSDPParamId id, bool *trainable);

/** All-gathers the unit's parameters from its shard group (state UNSHARDED), before its forward or backward.
    Needs state SHARDED, or GATHERING (a prefetch: this waits for it).  A unit still held since its forward
    (kept under SHARD_GRAD_OP and HYBRID_SHARD_ZERO2, or cached) gathers nothing, nor does any unit with F = 1.
    Inside passes (FSDPContextBeginForward, FSDPContextBeginBackward) it may start the next unit's prefetch.
    In mixed precision the parameters are gathered in param_dtype.
    @collective Collective on the context's communicator: every rank of the context unshards the same units in the same
    order. The all-gather runs in the unit's shard group (nothing is sent when F = 1), and a rank left waiting there
    ends the job after -fsdp_collective_timeout.
    @param[in] unit  the unit, SHARDED or GATHERING
    @retval FSDP_ERR_ARG    unit is NULL
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed; called inside an initializer; the unit
                            is UNSHARDED or REDUCING; or (-fsdp_debug_collectives) ranks are about to run
                            different collectives
    @retval FSDP_ERR_MEM    a parameter buffer beyond the memory plan cannot be allocated
    @retval FSDP_ERR_MPI    the all-gather, or an MPI call of the debug check, failed
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed
    @retval FSDP_ERR_NCCL   on a GPU context, an NCCL call failed
    @see FlatParamReshard, FlatParamGetParam, FlatParamReduceGrad, FSDPContextBeginForward */
FSDP_EXTERN FSDPErrorCode FlatParamUnshard(FlatParam unit);
/** Releases the unit's unsharded parameters (state SHARDED) after its forward; their views become invalid.
    Needs state UNSHARDED.  Under SHARD_GRAD_OP and HYBRID_SHARD_ZERO2 the buffer is kept for the backward
    pass, and in a forward pass it may stay cached for backward, but views are invalid all the same.  It may
    start a prefetch that the rate limiter (-fsdp_limit_all_gathers) held back.
    @collective Collective on the context's communicator: every rank of the context reshards the same units in the same
    order. It communicates only when F > 1 and the rate limiter held back a prefetch inside a pass
    (FSDPContextBeginForward, FSDPContextBeginBackward): it then starts that all-gather in the shard group.
    @param[in] unit  the unit, UNSHARDED
    @retval FSDP_ERR_ARG    unit is NULL
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed; called inside an initializer; the unit
                            is not UNSHARDED; or (-fsdp_debug_collectives) ranks are about to run different
                            collectives
    @retval FSDP_ERR_MEM    the held-back prefetch cannot get a buffer
    @retval FSDP_ERR_MPI    an MPI call of the -fsdp_debug_collectives check failed
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed
    @retval FSDP_ERR_NCCL   on a GPU context, an NCCL call failed
    @see FlatParamUnshard, FlatParamReduceGrad, FlatParamGetState */
FSDP_EXTERN FSDPErrorCode FlatParamReshard(FlatParam unit);
/** After the unit's backward, releases its unsharded parameters and starts averaging its unsharded gradient
    over all W ranks into the gradient shard (state REDUCING).
    The reduction, a reduce-scatter in the shard group then an all-reduce across the replicas (with F = 1,
    the all-reduce alone), stays in flight until the next unit's FlatParamReduceGrad or
    FSDPContextFinishBackward completes it; this call first completes the previous unit's, and returns its
    errors.  Needs state UNSHARDED, or a gradient accumulated with gradient sync off.  A rank that never asked
    for the gradient reduces zeros.  With gradient sync off (FSDPContextSetGradSync) it only releases, and
    the unsharded gradient accumulates on; with replicate gradient sync off (FSDPContextSetReplicateGradSync)
    the all-reduce across replicas waits for a reduction with it on.
    @collective Collective on the context's communicator: every rank of the context reduces the same units in the same
    order. With gradient sync on, the reduce-scatter runs in the shard group and, with replicas and replicate gradient
    sync on, the all-reduce in the replicate group; with it off, it communicates only to start a prefetch the rate
    limiter held back (as FlatParamReshard).
    @param[in] unit  the unit, UNSHARDED for its backward
    @retval FSDP_ERR_ARG    unit is NULL
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed; called inside an initializer; the unit
                            is REDUCING, or has no gradient (neither UNSHARDED nor holding one accumulated
                            without sync); replicate gradient sync is off while its gradient shard holds
                            gradients averaged across replicas (call FSDPContextZeroGrad first); or
                            (-fsdp_debug_collectives) ranks are about to run different collectives
    @retval FSDP_ERR_MEM    a gradient or parameter buffer beyond the memory plan cannot be allocated
    @retval FSDP_ERR_MPI    a collective of this or the previous unit's reduction failed
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed
    @retval FSDP_ERR_NCCL   on a GPU context, an NCCL call failed
    @see FlatParamGetGrad, FSDPContextFinishBackward, FSDPContextSetGradSync, FlatParamGetGradShard */
FSDP_EXTERN FSDPErrorCode FlatParamReduceGrad(FlatParam unit);

/** Points *values at parameter id in the unit's unsharded parameters, a view valid while the unit is UNSHARDED.
    The view is in FlatParamGetViewDataType's type.  A unit initializer fills the unit through it; otherwise do
    not write through it (with F = 1 at full precision it is the shard itself, elsewhere a copy that the next
    reshard discards).
    @collective Not collective.
    @param[in] unit     the unit, UNSHARDED
    @param[in] id       the parameter
    @param[out] values  the parameter's elements, row-major
    @retval FSDP_ERR_ARG    unit or values is NULL, or id is not one of the unit's parameters
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed; or the unit is not UNSHARDED
    @see FlatParamUnshard, FlatParamGetGrad, FlatParamGetViewDataType, FlatParamGetParamInfo */
FSDP_EXTERN FSDPErrorCode FlatParamGetParam(FlatParam unit, FSDPParamId id, void **values);
/** Points *values at parameter id's gradient in the unit's unsharded gradient, valid while the unit is UNSHARDED.
    The gradient is zero when first asked for in a step (with gradient sync off it holds what earlier
    micro-batches accumulated): add to it, as autograd accumulates.  It is in the unit's data type.  Refused
    inside an initializer.
    @collective Not collective.
    @param[in] unit     the unit, UNSHARDED
    @param[in] id       the parameter
    @param[out] values  the gradient's elements, row-major
    @retval FSDP_ERR_ARG    unit or values is NULL, or id is not one of the unit's parameters
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed; called inside an initializer; or the
                            unit is not UNSHARDED
    @retval FSDP_ERR_MEM    a gradient buffer beyond the memory plan cannot be allocated
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed
    @see FlatParamGetParam, FlatParamReduceGrad, FSDPContextSetGradSync, FSDPContextZeroGrad */
FSDP_EXTERN FSDPErrorCode FlatParamGetGrad(FlatParam unit, FSDPParamId id, void **values);

/** Gives this rank's shard of the unit (always valid after SetUp) and its length.
    The shard is the master copy, in the unit's data type, that the optimizer updates (device memory on a GPU
    context).  A shard written between a unit's forward and its backward is not seen by that backward.
    @collective Not collective.
    @param[in] unit     the unit, set up
    @param[out] values  the shard; NULL if not wanted
    @param[out] numel   its length in elements, padding included; NULL if not wanted
    @retval FSDP_ERR_ARG    unit is NULL
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed
    @see FlatParamGetGradShard, FlatParamGetShardRange, FlatParamGetSizes */
FSDP_EXTERN FSDPErrorCode FlatParamGetShard(FlatParam unit, void **values, int64_t *numel);
/** Gives this rank's gradient shard of the unit (always valid after SetUp) and its length.
    It is in the unit's data type (device memory on a GPU context), holds the reduced gradients once
    FSDPContextFinishBackward has completed the reductions, and is zeroed by FSDPContextZeroGrad.
    @collective Not collective.
    @param[in] unit     the unit, set up
    @param[out] values  the gradient shard; NULL if not wanted
    @param[out] numel   its length in elements, padding included; NULL if not wanted
    @retval FSDP_ERR_ARG    unit is NULL
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed
    @see FlatParamGetShard, FlatParamReduceGrad, FSDPContextFinishBackward */
FSDP_EXTERN FSDPErrorCode FlatParamGetGradShard(FlatParam unit, void **values, int64_t *numel);
/** Tells which part of parameter id this rank's shard holds: elements [*begin, *end) of the flattened
    parameter, at element *offset of the shard.
    *begin == *end when it holds none of it.  Valid from SetUp on, shard initializers included.
    @collective Not collective.
    @param[in] unit     the unit, set up
    @param[in] id       the parameter
    @param[out] begin   the first element held; NULL if not wanted
    @param[out] end     one past the last element held; NULL if not wanted
    @param[out] offset  where element *begin lies in the shard; NULL if not wanted
    @retval FSDP_ERR_ARG    unit is NULL, or id is not one of its parameters
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed
    @see FlatParamGetShard, FlatParamGetSizes, FSDPContextSetShardInit */
FSDP_EXTERN FSDPErrorCode FlatParamGetShardRange(FlatParam unit, FSDPParamId id, int64_t *begin, int64_t *end,
                                                 int64_t *offset);

/** Gives the unit's name, as given to FSDPContextAddUnit.
    @collective Not collective.
    @param[in] unit   the unit
    @param[out] name  the name, owned by the unit; NULL if not wanted
    @retval FSDP_ERR_ARG  unit is NULL
    @see FSDPContextAddUnit, FSDPContextGetUnit */
FSDP_EXTERN FSDPErrorCode FlatParamGetName(FlatParam unit, const char **name);
/** Gives the unit's state in its lifecycle.
    @collective Not collective.
    @param[in] unit    the unit
    @param[out] state  the state; NULL if not wanted
    @retval FSDP_ERR_ARG  unit is NULL
    @see FlatParamState, FlatParamStateName */
FSDP_EXTERN FSDPErrorCode FlatParamGetState(FlatParam unit, FlatParamState *state);
/** Gives the unit's data type, that of its master copy (FSDP_FLOAT32 unless FlatParamSetDataType changed it).
    @collective Not collective.
    @param[in] unit    the unit
    @param[out] dtype  the data type; NULL if not wanted
    @retval FSDP_ERR_ARG  unit is NULL
    @see FlatParamSetDataType, FlatParamGetViewDataType */
FSDP_EXTERN FSDPErrorCode FlatParamGetDataType(FlatParam unit, FSDPDataType *dtype);
/** Gives the type of FlatParamGetParam's views: the mixed-precision param_dtype, or the unit's own (always
    the unit's own inside a unit initializer).
    @collective Not collective.
    @param[in] unit    the unit, set up
    @param[out] dtype  the views' data type; NULL if not wanted
    @retval FSDP_ERR_ARG    unit is NULL
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed
    @see FlatParamGetParam, FlatParamGetDataType, FSDPContextSetMixedPrecision */
FSDP_EXTERN FSDPErrorCode FlatParamGetViewDataType(FlatParam unit, FSDPDataType *dtype);
/** Gives the number of parameters registered in the unit; their ids are 0 to *nparams - 1.
    @collective Not collective.
    @param[in] unit      the unit
    @param[out] nparams  the number of parameters; NULL if not wanted
    @retval FSDP_ERR_ARG  unit is NULL
    @see FlatParamAddParam, FlatParamGetParamInfo */
FSDP_EXTERN FSDPErrorCode FlatParamGetNumParams(FlatParam unit, int *nparams);
/** Gives a parameter's name, number of dimensions, shape and number of elements.
    The name and shape are the unit's and live as long as the context.
    @collective Not collective.
    @param[in] unit    the unit
    @param[in] id      the parameter
    @param[out] name   its name; NULL if not wanted
    @param[out] ndim   its number of dimensions; NULL if not wanted
    @param[out] shape  its ndim extents (NULL for a scalar); NULL if not wanted
    @param[out] numel  its number of elements; NULL if not wanted
    @retval FSDP_ERR_ARG  unit is NULL, or id is not one of its parameters
    @see FlatParamAddParam, FlatParamGetNumParams, FSDPContextFindParam */
FSDP_EXTERN FSDPErrorCode FlatParamGetParamInfo(FlatParam unit, FSDPParamId id, const char **name, int *ndim,
                                                const int64_t **shape, int64_t *numel);
/** Gives the unit's sizes in elements: the original parameters, padded to a multiple of F, and one shard
    (padded / F).
    @collective Not collective.
    @param[in] unit           the unit, set up
    @param[out] numel         the elements of its parameters; NULL if not wanted
    @param[out] padded_numel  numel rounded up to a multiple of F; NULL if not wanted
    @param[out] shard_numel   padded_numel / F, one shard; NULL if not wanted
    @retval FSDP_ERR_ARG    unit is NULL
    @retval FSDP_ERR_STATE  the context is not set up, or its SetUp failed
    @see FlatParamGetShard, FSDPContextGetSizes, FlatParamGetShardRange */
FSDP_EXTERN FSDPErrorCode FlatParamGetSizes(FlatParam unit, int64_t *numel, int64_t *padded_numel,
                                            int64_t *shard_numel);

/* ------------------------------------------------------------------ optimizers */

/** The update rule of an FSDPOptimizer (default ADAMW), as torch.optim's (doc/optim.md).
    Sharded SGD and AdamW: each rank updates only its own shards, with the update rules and defaults of
    torch.optim.SGD and torch.optim.AdamW; state exists only for the trainable elements of its shards.  Global
    gradient-norm clipping counts each distinct shard once.
    @see FSDPOptimizerSetType, FSDPOptimizerTypeName, FSDPOptimizerCreate */
typedef enum {
  FSDP_OPTIMIZER_SGD = 0, /**< torch.optim.SGD (dampening 0): lr 1e-3, momentum 0, weight decay 0, no nesterov */
  FSDP_OPTIMIZER_ADAMW    /**< torch.optim.AdamW: lr 1e-3, betas 0.9 and 0.999, eps 1e-8, weight decay 0.01 */
} FSDPOptimizerType;
/** The learning-rate schedule of an FSDPOptimizer (default CONSTANT): constant, or linear warmup then cosine
    decay to zero.
    @see FSDPOptimizerSetSchedule, FSDPLRScheduleName, FSDPOptimizerGetLearningRate */
typedef enum {
  FSDP_LR_CONSTANT = 0, /**< the learning rate at every step */
  FSDP_LR_COSINE        /**< at step index t (0 first): lr (t + 1) / warmup for t < warmup, then
                             lr (1 + cos(pi (t - warmup) / (total - warmup))) / 2, and 0 from total on */
} FSDPLRSchedule;
/** Returns the name of an optimizer type: "sgd" or "adamw", the -fsdp_optimizer values.
    The string is static.
    @collective Not collective.
    @param[in] type  the optimizer type
    @errors None: returns "unknown optimizer" for a value out of range.
    @see FSDPOptimizerType, FSDPOptimizerSetType */
FSDP_EXTERN const char *FSDPOptimizerTypeName(FSDPOptimizerType type);
/** Returns the name of a learning-rate schedule: "constant" or "cosine", the -fsdp_lr_schedule values.
    The string is static.
    @collective Not collective.
    @param[in] schedule  the schedule
    @errors None: returns "unknown schedule" for a value out of range.
    @see FSDPLRSchedule, FSDPOptimizerSetSchedule */
FSDP_EXTERN const char *FSDPLRScheduleName(FSDPLRSchedule schedule);

/** Creates an optimizer of the context's shards, with PyTorch's defaults.
    Default AdamW: lr 1e-3, betas 0.9 and 0.999, eps 1e-8, weight decay 0.01.  SGD: lr 1e-3, momentum 0,
    weight decay 0, no nesterov.  Constant schedule, no clipping, gradient scaler off, no parameter groups.
    The context need not be set up yet; FSDPOptimizerSetUp needs it set up.  Destroy the optimizer with
    FSDPOptimizerDestroy.
    @collective Not collective: FSDPOptimizerSetUp is the collective step.
    @param[in] ctx   the context whose shards it updates
    @param[out] opt  the new optimizer; NULL on error
    @retval FSDP_ERR_ARG  ctx or opt is NULL
    @retval FSDP_ERR_MEM  out of memory
    @see FSDPOptimizerSetFromOptions, FSDPOptimizerSetUp, FSDPOptimizerStep, FSDPOptimizerDestroy */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerCreate(FSDPContext ctx, FSDPOptimizer *opt);
/** Sets the update rule, SGD or AdamW (default AdamW), before FSDPOptimizerSetUp.
    The weight decay switches to the type's default (AdamW 0.01, SGD 0) unless FSDPOptimizerSetWeightDecay
    set one.
    @collective Not collective: FSDPOptimizerSetUp checks that every rank set the same.
    @param[in] opt   the optimizer, not set up
    @param[in] type  FSDP_OPTIMIZER_SGD or FSDP_OPTIMIZER_ADAMW
    @retval FSDP_ERR_ARG    opt is NULL, or type is not an FSDPOptimizerType
    @retval FSDP_ERR_STATE  opt is set up
    @see FSDPOptimizerType, FSDPOptimizerSetWeightDecay, FSDPOptimizerSetFromOptions */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetType(FSDPOptimizer opt, FSDPOptimizerType type);
/** Sets the learning rate (default 1e-3), the peak of the cosine schedule.
    It may change between steps, as PyTorch's param_groups[0]["lr"]; FSDPOptimizerSetUp checks that the ranks
    agree on the value it sees, so a later change must be made alike on every rank.
    @collective Not collective.
    @param[in] opt  the optimizer
    @param[in] lr   the rate, >= 0 and finite
    @retval FSDP_ERR_ARG  opt is NULL, or lr is negative or not finite
    @see FSDPOptimizerGetLearningRate, FSDPOptimizerSetSchedule, FSDPOptimizerAddParamGroup */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetLearningRate(FSDPOptimizer opt, double lr);
/** Sets the weight decay of the parameters in no parameter group: an L2 penalty for SGD (default 0), decoupled
    decay for AdamW (default 0.01).
    Once set, FSDPOptimizerSetType keeps it.  It may change after FSDPOptimizerSetUp, which checks that the
    ranks agree on the value it sees; a later change must be made alike on every rank.
    @collective Not collective.
    @param[in] opt           the optimizer
    @param[in] weight_decay  the decay, >= 0 and finite
    @retval FSDP_ERR_ARG  opt is NULL, or weight_decay is negative or not finite
    @see FSDPOptimizerAddParamGroup, FSDPOptimizerGetParamSettings, FSDPOptimizerSetType */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetWeightDecay(FSDPOptimizer opt, double weight_decay);
/** Sets SGD's momentum (default 0, no state) and Nesterov momentum (default off), before FSDPOptimizerSetUp.
    SGD only: AdamW ignores them.  Dampening is 0.
    @collective Not collective: FSDPOptimizerSetUp checks that every rank set the same.
    @param[in] opt       the optimizer, not set up
    @param[in] momentum  the momentum, >= 0 and finite
    @param[in] nesterov  true for Nesterov momentum, which needs momentum > 0
    @retval FSDP_ERR_ARG    opt is NULL, momentum is negative or not finite, or nesterov is true with momentum 0
    @retval FSDP_ERR_STATE  opt is set up
    @see FSDPOptimizerSetType, FSDPOptimizerSetFromOptions */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetMomentum(FSDPOptimizer opt, double momentum, bool nesterov);
/** Sets AdamW's moment decay rates (default 0.9 and 0.999).
    AdamW only: SGD ignores them.  They may change after FSDPOptimizerSetUp, which checks that the ranks agree
    on the values it sees; a later change must be made alike on every rank.
    @collective Not collective.
    @param[in] opt    the optimizer
    @param[in] beta1  the first moment's rate, in [0, 1)
    @param[in] beta2  the second moment's rate, in [0, 1)
    @retval FSDP_ERR_ARG  opt is NULL, or a beta is outside [0, 1)
    @see FSDPOptimizerSetEps, FSDPOptimizerSetType */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetBetas(FSDPOptimizer opt, double beta1, double beta2);
/** Sets AdamW's denominator term eps (default 1e-8).
    AdamW only: SGD ignores it.  It may change after FSDPOptimizerSetUp, which checks that the ranks agree on
    the value it sees; a later change must be made alike on every rank.
    @collective Not collective.
    @param[in] opt  the optimizer
    @param[in] eps  the term, >= 0 and finite
    @retval FSDP_ERR_ARG  opt is NULL, or eps is negative or not finite
    @see FSDPOptimizerSetBetas, FSDPOptimizerSetType */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetEps(FSDPOptimizer opt, double eps);
/** Sets the learning-rate schedule (default constant).
    Cosine: the rate rises linearly over warmup_steps steps, then decays to zero at step total_steps, and stays
    0 after; the first step trains at lr / warmup_steps (at lr without warmup).  The constant schedule keeps the
    step counts but does not use them.  It may change after FSDPOptimizerSetUp, which checks that the ranks agree
    on what it sees; a later change must be made alike on every rank.
    @collective Not collective.
    @param[in] opt           the optimizer
    @param[in] schedule      FSDP_LR_CONSTANT or FSDP_LR_COSINE
    @param[in] warmup_steps  the steps of linear warmup, >= 0
    @param[in] total_steps   the step at which the cosine schedule reaches zero; above warmup_steps for cosine
    @retval FSDP_ERR_ARG  opt is NULL, schedule is not an FSDPLRSchedule, a step count is negative, or the schedule
                          is cosine and total_steps is not above warmup_steps
    @see FSDPLRSchedule, FSDPOptimizerSetLearningRate, FSDPOptimizerGetLearningRate */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetSchedule(FSDPOptimizer opt, FSDPLRSchedule schedule, int64_t warmup_steps,
                                                   int64_t total_steps);
/** Clips the global gradient norm to max_norm in every FSDPOptimizerStep (0: off, the default).
    The step then scales the gradient shards as FSDPOptimizerClipGradNorm does.  Clipping decides an all-reduce in
    the step: FSDPOptimizerSetUp checks that the ranks agree on the value it sees, and a later change must be made
    alike on every rank.
    @collective Not collective.
    @param[in] opt       the optimizer
    @param[in] max_norm  the largest global norm, >= 0 and finite; 0: no clipping
    @retval FSDP_ERR_ARG  opt is NULL, or max_norm is negative or not finite
    @see FSDPOptimizerClipGradNorm, FSDPOptimizerGetGradNorm, FSDPOptimizerStep */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetClipGradNorm(FSDPOptimizer opt, double max_norm);
/** Adds a parameter group, as torch.optim's param_groups: the parameters pattern selects take this weight decay
    and lr_scale times the learning rate (of the schedule); the others keep the optimizer's.
    pattern is a shell glob on the parameter's name ("*.bias", "blocks.*.ln_?.*", fnmatch(3)) or a test of its
    dimensions, ndim<N, ndim<=N, ndim=N, ndim>=N or ndim>N: "ndim<2" is nanoGPT's and GPT-2's rule, no decay
    for biases and LayerNorm's weights.  A parameter is in the last group that selects it.  Before SetUp; a
    group that selects no trainable parameter is an error there, and so are ranks with other groups.
    Checkpoints record the groups, and a load refuses other patterns.
    @collective Not collective: FSDPOptimizerSetUp checks that every rank added the same groups.
    @param[in] opt           the optimizer, not set up
    @param[in] pattern       the glob or dimension test, copied
    @param[in] weight_decay  the group's weight decay, >= 0 and finite
    @param[in] lr_scale      the multiple of the learning rate the group takes, >= 0 and finite
    @retval FSDP_ERR_ARG    opt is NULL; pattern is NULL, empty, or starts with "ndim" and is not a dimension
                            test; or weight_decay or lr_scale is negative or not finite
    @retval FSDP_ERR_STATE  opt is set up
    @retval FSDP_ERR_MEM    out of memory
    @see FSDPOptimizerGetParamSettings, FSDPOptimizerSetWeightDecay, FSDPOptimizerSetUp */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerAddParamGroup(FSDPOptimizer opt, const char *pattern, double weight_decay,
                                                     double lr_scale);
/** Gives the weight decay and learning-rate scale that parameter name takes: those of the last group that
    selects it, or the optimizer's weight decay and 1.
    It works before and after FSDPOptimizerSetUp, for any parameter the context has registered.
    @collective Not collective.
    @param[in] opt            the optimizer
    @param[in] name           the parameter's name
    @param[out] weight_decay  its weight decay; NULL if not wanted
    @param[out] lr_scale      the multiple of the learning rate it takes; NULL if not wanted
    @retval FSDP_ERR_ARG  opt or name is NULL, or the context has no parameter called name
    @see FSDPOptimizerAddParamGroup, FSDPContextFindParam */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetParamSettings(FSDPOptimizer opt, const char *name, double *weight_decay,
                                                        double *lr_scale);
/** Sets the optimizer from the runtime options, which override what the program set.
    It may run before or after FSDPOptimizerSetUp.  After SetUp -fsdp_optimizer, -fsdp_no_decay and the gradient
    scaler's options are not applied, and -fsdp_momentum or -fsdp_nesterov given is an error.  -fsdp_no_decay adds
    one group without weight decay per comma-separated pattern, once however often this runs.
    @collective Not collective: it reads this rank's options; FSDPOptimizerSetUp checks that the ranks agree.
    @param[in] opt  the optimizer
    @retval FSDP_ERR_ARG     opt is NULL, or an option's value is out of the setter's range (a negative rate,
                             nesterov without momentum, a cosine schedule without more decay steps than warmup
                             steps, an ndim pattern that is not a dimension test, ...)
    @retval FSDP_ERR_STATE   opt is set up and -fsdp_momentum or -fsdp_nesterov is given
    @retval FSDP_ERR_OPTION  an option's value is malformed or out of range
    @retval FSDP_ERR_MEM     out of memory
    @options -fsdp_optimizer, -fsdp_lr, -fsdp_weight_decay, -fsdp_no_decay, -fsdp_momentum, -fsdp_nesterov,
    -fsdp_beta1, -fsdp_beta2, -fsdp_eps, -fsdp_lr_schedule, -fsdp_warmup_steps, -fsdp_lr_decay_steps,
    -fsdp_clip_grad_norm, -fsdp_grad_scaler, -fsdp_grad_scaler_init_scale, -fsdp_grad_scaler_growth_interval
    (doc/options.md).
    @see FSDPOptimizerCreate, FSDPOptimizerSetUp, FSDPOptionsGetReal */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetFromOptions(FSDPOptimizer opt);
/** Turns dynamic loss scaling on or off (default off), for fp16: PyTorch's ShardedGradScaler (doc/optim.md).
    Multiply the loss gradient by FSDPOptimizerGetGradScale's scale before backward.  FSDPOptimizerStep (and
    FSDPOptimizerClipGradNorm, if called first) divides the gradient shards by it; when any shard of any rank
    holds an inf or a NaN, every rank skips the step and multiplies the scale by backoff_factor; after
    growth_interval steps in a row without one, it multiplies the scale by growth_factor.  Defaults: off, 65536,
    2, 0.5, 2000.  Before SetUp; -fsdp_grad_scaler sets it through FSDPOptimizerSetFromOptions.
    @collective Not collective: FSDPOptimizerSetUp checks that every rank set the same.
    @param[in] opt     the optimizer, not set up
    @param[in] enable  true: scale the loss; false: do not
    @retval FSDP_ERR_ARG    opt is NULL
    @retval FSDP_ERR_STATE  opt is set up
    @see FSDPOptimizerSetGradScalerParams, FSDPOptimizerGetGradScale, FSDPOptimizerGetGradScaler */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetGradScaler(FSDPOptimizer opt, bool enable);
/** Tells whether the gradient scaler is on.
    @collective Not collective.
    @param[in] opt       the optimizer
    @param[out] enabled  true when it is on; NULL if not wanted
    @retval FSDP_ERR_ARG  opt is NULL
    @see FSDPOptimizerSetGradScaler, FSDPOptimizerGetGradScale */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetGradScaler(FSDPOptimizer opt, bool *enabled);
/** Sets the gradient scaler's parameters, before FSDPOptimizerSetUp (defaults PyTorch's: 65536, 2, 0.5, 2000).
    The scale becomes init_scale.
    @collective Not collective: FSDPOptimizerSetUp checks that every rank set the same.
    @param[in] opt              the optimizer, not set up
    @param[in] init_scale       the first scale, > 0 and finite
    @param[in] growth_factor    what the scale is multiplied by after growth_interval clean steps, > 1 and finite
    @param[in] backoff_factor   what the scale is multiplied by on an inf or a NaN, in (0, 1)
    @param[in] growth_interval  the steps in a row without an inf or a NaN before the scale grows, > 0
    @retval FSDP_ERR_ARG    opt is NULL, or a parameter is out of its range
    @retval FSDP_ERR_STATE  opt is set up
    @see FSDPOptimizerSetGradScaler, FSDPOptimizerGetGradScale */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetGradScalerParams(FSDPOptimizer opt, double init_scale, double growth_factor,
                                                           double backoff_factor, int64_t growth_interval);
/** Gives the scale for the next backward (1 with the scaler off), and the steps skipped so far.
    @collective Not collective.
    @param[in] opt       the optimizer
    @param[out] scale    the factor to multiply the loss gradient by; NULL if not wanted
    @param[out] skipped  the steps the scaler skipped for an inf or a NaN; NULL if not wanted
    @retval FSDP_ERR_ARG  opt is NULL
    @see FSDPOptimizerSetGradScaler, FSDPOptimizerStep */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetGradScale(FSDPOptimizer opt, double *scale, int64_t *skipped);
/** Sets the optimizer up, after FSDPContextSetUp: checks that every rank has the same settings and froze the
    same parameters, and allocates the state.
    It checks that every parameter group selects a trainable parameter, then allocates zeroed state for the
    trainable elements of this rank's shards, on the context's device: AdamW's exp_avg and exp_avg_sq, SGD's
    momentum_buffer when momentum > 0.  The type, momentum, parameter groups and gradient scaler are then fixed.
    @collective Collective on the context's communicator: every rank of ctx calls it (blocking MPI all-reduces,
    not under the context's watchdog).
    @param[in] opt  the optimizer, not set up
    @retval FSDP_ERR_ARG    opt is NULL; a setting differs across ranks (every rank returns it, naming the
                            settings and ranks); ranks froze different parameters; or a parameter group selects no
                            trainable parameter
    @retval FSDP_ERR_STATE  opt is set up, or the context is not set up (or its FSDPContextSetUp failed)
    @retval FSDP_ERR_MEM    out of memory, on the host or the GPU
    @retval FSDP_ERR_MPI    an MPI call failed
    @retval FSDP_ERR_CUDA   on a GPU context, the GPU is unusable
    @see FSDPOptimizerCreate, FSDPContextSetUp, FlatParamSetTrainable, FSDPOptimizerStep */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerSetUp(FSDPOptimizer opt);
/** Takes an optimizer step: completes the backward pass (FSDPContextFinishBackward), unscales and checks the
    gradients (gradient scaler), clips if asked, and updates every trainable element of this rank's shards.
    Each parameter takes its group's weight decay and learning rate (the schedule's, times the group's scale),
    and the step count rises by one.  A step the scaler finds an inf or a NaN in is skipped on every rank: the
    parameters, state and step count stay, and the scale backs off.  With -fsdp_check_finite on (the default)
    and the scaler off, a global gradient norm that is NaN or infinite stops the step, nothing updated.
    @collective Collective on the context's communicator: every rank of ctx calls it. It communicates when the gradient
    scaler is on (the all-reduce of its inf/NaN flag, unless FSDPOptimizerClipGradNorm made it since the last step),
    when clipping is on, or when -fsdp_check_finite is on (the default) with the scaler off (the all-reduce of the
    gradient norm), and as FSDPContextFinishBackward does; a rank left waiting ends the job after
    -fsdp_collective_timeout.
    @param[in] opt  the optimizer, set up
    @retval FSDP_ERR_ARG         opt is NULL
    @retval FSDP_ERR_STATE       opt is not set up; parameters were frozen or unfrozen after FSDPOptimizerSetUp;
                                 or (-fsdp_debug_collectives) the ranks are about to run different collectives
    @retval FSDP_ERR_NOT_FINITE  the global gradient norm is NaN or infinite (-fsdp_check_finite on): nothing was
                                 updated
    @retval FSDP_ERR_MPI         an all-reduce, or a reduction FSDPContextFinishBackward completes, failed
    @retval FSDP_ERR_CUDA        on a GPU context, a CUDA call failed
    @retval FSDP_ERR_NCCL        on a GPU context, a reduction failed in NCCL
    @see FSDPOptimizerSetUp, FSDPContextFinishBackward, FSDPOptimizerClipGradNorm, FSDPOptimizerGetStep */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerStep(FSDPOptimizer opt);
/** Computes the global L2 norm of the gradients of trainable parameters and, with max_norm > 0, clips them to
    it, as torch.nn.utils.clip_grad_norm_ does.
    Each distinct shard is counted once and padding excluded; the gradient shards are scaled by
    max_norm / (norm + 1e-6) when that is below 1 (a NaN norm makes them NaN).  It completes the backward pass
    first (FSDPContextFinishBackward) and, with the gradient scaler on, unscales the gradients, once between two
    steps.  Every rank gets the same norm; FSDPOptimizerGetGradNorm does not report it.
    @collective Collective on the context's communicator: every rank of ctx calls it (an all-reduce of the norm,
    and with the scaler on of its inf/NaN flag), and a rank left waiting ends the job after
    -fsdp_collective_timeout.
    @param[in] opt          the optimizer, set up
    @param[in] max_norm     the largest global norm, >= 0 and finite; 0: only compute the norm
    @param[out] total_norm  the norm before clipping; NULL if not wanted
    @retval FSDP_ERR_ARG    opt is NULL, or max_norm is negative or not finite
    @retval FSDP_ERR_STATE  opt is not set up, or (-fsdp_debug_collectives) the ranks are about to run different
                            collectives
    @retval FSDP_ERR_MPI    an all-reduce, or a reduction FSDPContextFinishBackward completes, failed
    @retval FSDP_ERR_CUDA   on a GPU context, a CUDA call failed
    @retval FSDP_ERR_NCCL   on a GPU context, a reduction failed in NCCL
    @see FSDPOptimizerSetClipGradNorm, FSDPOptimizerStep, FSDPOptimizerSetGradScaler */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerClipGradNorm(FSDPOptimizer opt, double max_norm, double *total_norm);
/** Gives the number of steps taken; steps the gradient scaler skipped do not count.
    FSDPContextLoad sets it from a checkpoint.
    @collective Not collective.
    @param[in] opt    the optimizer
    @param[out] step  the steps taken; NULL if not wanted
    @retval FSDP_ERR_ARG  opt is NULL
    @see FSDPOptimizerStep, FSDPOptimizerGetLearningRate */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetStep(FSDPOptimizer opt, int64_t *step);
/** Gives the learning rate the next step will use, from the schedule (a parameter group multiplies it by its
    lr_scale).
    @collective Not collective.
    @param[in] opt  the optimizer
    @param[out] lr  the rate; NULL if not wanted
    @retval FSDP_ERR_ARG  opt is NULL
    @see FSDPOptimizerSetLearningRate, FSDPOptimizerSetSchedule, FSDPOptimizerGetStep */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetLearningRate(FSDPOptimizer opt, double *lr);
/** Gives the global gradient norm the last FSDPOptimizerStep measured.
    It is NaN when that step measured none (no clipping, and -fsdp_check_finite off or the gradient scaler on),
    when the scaler skipped it, and before the first step.
    @collective Not collective.
    @param[in] opt    the optimizer
    @param[out] norm  the norm, before clipping; NULL if not wanted
    @retval FSDP_ERR_ARG  opt is NULL
    @see FSDPOptimizerSetClipGradNorm, FSDPOptimizerClipGradNorm, FSDPOptimizerStep */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetGradNorm(FSDPOptimizer opt, double *norm);
/** Gives the elements of state this rank holds, all state tensors together.
    That is twice its trainable shard elements for AdamW, as many for SGD with momentum, 0 for SGD without;
    0 before FSDPOptimizerSetUp.
    @collective Not collective.
    @param[in] opt     the optimizer
    @param[out] numel  the elements of state; NULL if not wanted
    @retval FSDP_ERR_ARG  opt is NULL
    @see FSDPOptimizerSetUp, FSDPGetMemoryStats, FSDPOptimizerView */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerGetStateSize(FSDPOptimizer opt, int64_t *numel);
/** Prints the optimizer: type and hyperparameters, schedule, parameter groups (with their parameter counts),
    clipping, the gradient scaler, and after SetUp the state per rank (least and most elements).
    @collective Collective on the context's communicator: every rank of ctx calls it (an all-reduce of the state
    sizes), before or after FSDPOptimizerSetUp.
    @param[in] opt     the optimizer
    @param[in] viewer  where to print (rank 0 of its communicator writes); NULL for stdout on the context's ranks
    @retval FSDP_ERR_ARG  opt is NULL
    @retval FSDP_ERR_IO   the output cannot be written
    @retval FSDP_ERR_MEM  out of memory
    @retval FSDP_ERR_MPI  an MPI call failed
    @see FSDPContextView, FSDPViewerASCIIOpen, FSDPOptimizerGetStateSize */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerView(FSDPOptimizer opt, FSDPViewer viewer);
/** Destroys an optimizer and its state, and sets *opt to NULL; *opt NULL: nothing to do.
    On a GPU context destroy it before the context: its state is freed on the context's GPU.
    @collective Not collective.
    @param[in,out] opt  the optimizer; set to NULL
    @retval FSDP_ERR_ARG  opt is NULL
    @see FSDPOptimizerCreate, FSDPContextDestroy */
FSDP_EXTERN FSDPErrorCode FSDPOptimizerDestroy(FSDPOptimizer *opt);

#ifdef __cplusplus
}
#endif

#endif /* FSDP_H */
