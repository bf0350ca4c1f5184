/* fsdpf.c: the few calls the Fortran module (fsdp.F90) cannot make through
   bind(C) alone: the command line, communicators (Fortran handles are
   MPI_Fint, converted with MPI_Comm_f2c/c2f), Fortran initializers (called
   through trampolines that hand them the unit by reference), and errors
   raised or traced from Fortran.  Only the public headers are used. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fsdp_nn.h"

#if defined(__GNUC__) || defined(__clang__)
#define FSDPF_EXTERN __attribute__((visibility("default")))
#else
#define FSDPF_EXTERN
#endif

/* ------------------------------------------------------------------ initialization */

/* FSDPInitialize keeps pointers into argv until FSDPFinalize. */
static int fargc;
static char **fargv;

static void free_args(void)
{
  for (int i = 0; fargv && i < fargc; i++) free(fargv[i]);
  free(fargv);
  fargv = NULL;
  fargc = 0;
}

/* args: the program name and its arguments, each NUL-terminated, one after another. */
FSDPF_EXTERN FSDPErrorCode fsdpf_initialize(int argc, const char *args)
{
  FSDPErrorCode ierr;
  int argc_in;
  char **argv_in;

  free_args();
  fargv = calloc((size_t)argc + 1, sizeof *fargv);
  if (!fargv) return FSDP_ERR_MEM;
  for (int i = 0; i < argc; i++) {
    size_t len = strlen(args);
    fargv[i] = malloc(len + 1);
    if (!fargv[i]) {
      fargc = i;
      free_args();
      return FSDP_ERR_MEM;
    }
    memcpy(fargv[i], args, len + 1);
    args += len + 1;
  }
  fargc = argc;
  /* FSDPInitialize may replace the list (-options_file); the original stays ours to free. */
  argc_in = fargc;
  argv_in = fargv;
  ierr = FSDPInitialize(&argc_in, &argv_in);
  return ierr;
}

FSDPF_EXTERN FSDPErrorCode fsdpf_finalize(void)
{
  FSDPErrorCode ierr = FSDPFinalize();
  free_args();
  return ierr;
}

/* ------------------------------------------------------------------ communicators */

FSDPF_EXTERN FSDPErrorCode fsdpf_context_create(const MPI_Fint *comm, FSDPContext *ctx)
{
  return FSDPContextCreate(MPI_Comm_f2c(*comm), ctx);
}

FSDPF_EXTERN FSDPErrorCode fsdpf_plan_create(const MPI_Fint *comm, FSDPPlan *plan)
{
  return FSDPPlanCreate(MPI_Comm_f2c(*comm), plan);
}

FSDPF_EXTERN FSDPErrorCode fsdpf_shardgroup_create(const MPI_Fint *comm, ShardGroup *group)
{
  return ShardGroupCreate(MPI_Comm_f2c(*comm), group);
}

/* A Fortran request handle through FSDPContextWait, and back (MPI_REQUEST_NULL when done). */
FSDPF_EXTERN FSDPErrorCode fsdpf_context_wait(FSDPContext ctx, MPI_Fint *request)
{
  MPI_Request r = MPI_Request_f2c(*request);
  FSDPErrorCode ierr = FSDPContextWait(ctx, &r);
  *request = MPI_Request_c2f(r);
  return ierr;
}

FSDPF_EXTERN FSDPErrorCode fsdpf_context_get_comm(FSDPContext ctx, MPI_Fint *comm)
{
  MPI_Comm c;
  FSDPCall(FSDPContextGetComm(ctx, &c));
  *comm = MPI_Comm_c2f(c);
  return FSDP_SUCCESS;
}

/* which: 0 the group's communicator, 1 its shard group, 2 its replicate group. */
FSDPF_EXTERN FSDPErrorCode fsdpf_shardgroup_get_comm(ShardGroup group, int which, MPI_Fint *comm, int *index, int *size)
{
  MPI_Comm c = MPI_COMM_NULL;
  if (which == 0) {
    FSDPCall(ShardGroupGetComm(group, &c));
    MPI_Comm_rank(c, index);
    MPI_Comm_size(c, size);
  } else if (which == 1) FSDPCall(ShardGroupGetShardComm(group, &c, index, size));
  else FSDPCall(ShardGroupGetReplicateComm(group, &c, index, size));
  *comm = MPI_Comm_c2f(c);
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ initializers */

/* A Fortran initializer receives the unit by reference (a type(fsdp_flatparam)). */
typedef FSDPErrorCode (*FortranUnitInit)(FlatParam *unit, void *user);
typedef FSDPErrorCode (*FortranShardInit)(FlatParam *unit, FSDPParamId id, int64_t begin, int64_t end, void *values,
                                          void *user);

/* One per context that has a Fortran initializer; freed with the context.
   The unit and shard initializers have their own slots: C refuses a second
   kind, and the one it keeps must still find its own procedure. */
typedef struct Trampoline {
  FSDPContext ctx;
  FortranUnitInit unit;
  FortranShardInit shard;
  void *unit_user, *shard_user;
  struct Trampoline *next;
} Trampoline;
static Trampoline *trampolines;

static Trampoline *trampoline_for(FSDPContext ctx)
{
  for (Trampoline *t = trampolines; t; t = t->next)
    if (t->ctx == ctx) return t;
  Trampoline *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->ctx = ctx;
  t->next = trampolines;
  trampolines = t;
  return t;
}

static FSDPErrorCode unit_init(FlatParam unit, void *user)
{
  Trampoline *t = user;
  return t->unit(&unit, t->unit_user);
}

static FSDPErrorCode shard_init(FlatParam unit, FSDPParamId id, int64_t begin, int64_t end, void *values, void *user)
{
  Trampoline *t = user;
  return t->shard(&unit, id, begin, end, values, t->shard_user);
}

/* kind: 0 a unit initializer, 1 a shard initializer. */
FSDPF_EXTERN FSDPErrorCode fsdpf_context_set_init(FSDPContext ctx, int kind, void (*fn)(void), void *user)
{
  Trampoline *t;
  FSDPCheck(ctx, MPI_COMM_SELF, FSDP_ERR_ARG, "fsdp_context_set_%s_init: the context is not created",
            kind ? "shard" : "unit");
  FSDPCheck(fn, MPI_COMM_SELF, FSDP_ERR_ARG, "fsdp_context_set_%s_init: the initializer is a null procedure",
            kind ? "shard" : "unit");
  t = trampoline_for(ctx);
  FSDPCheck(t, MPI_COMM_SELF, FSDP_ERR_MEM, "fsdp_context_set_%s_init: out of memory", kind ? "shard" : "unit");
  if (kind) {
    t->shard = (FortranShardInit)fn;
    t->shard_user = user;
    FSDPCall(FSDPContextSetShardInit(ctx, shard_init, t));
  } else {
    t->unit = (FortranUnitInit)fn;
    t->unit_user = user;
    FSDPCall(FSDPContextSetUnitInit(ctx, unit_init, t));
  }
  return FSDP_SUCCESS;
}

/* The trampoline goes only with the context: a destroy that fails keeps both. */
FSDPF_EXTERN FSDPErrorCode fsdpf_context_destroy(FSDPContext *ctx)
{
  FSDPContext old = *ctx;
  FSDPCall(FSDPContextDestroy(ctx));
  for (Trampoline **p = &trampolines; *p; p = &(*p)->next)
    if ((*p)->ctx == old) {
      Trampoline *t = *p;
      *p = t->next;
      free(t);
      break;
    }
  return FSDP_SUCCESS;
}

/* ------------------------------------------------------------------ errors */

/* A traceback frame keeps the names of its function and file by address (C's
   are literals); the module passes Fortran temporaries, freed when the call
   returns, and fsdp_error_print_trace would read them later.  Each distinct
   name is copied here once and kept for the life of the process (a few: the
   module's callers and the files that use FSDPCallA). */
typedef struct KeptName {
  struct KeptName *next;
  char text[];
} KeptName;

static const char *kept_name(const char *name, const char *fallback)
{
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static KeptName *names;
  KeptName *n = NULL;
  size_t len = strlen(name);
  pthread_mutex_lock(&lock);
  for (KeptName *k = names; k && !n; k = k->next)
    if (!strcmp(k->text, name)) n = k;
  if (!n && (n = malloc(sizeof *n + len + 1))) {
    memcpy(n->text, name, len + 1);
    n->next = names;
    names = n;
  }
  pthread_mutex_unlock(&lock);
  return n ? n->text : fallback;
}

/* An error found by the module itself (a shape that does not match, ...). */
FSDPF_EXTERN FSDPErrorCode fsdpf_raise(FSDPErrorCode code, const char *func, const char *message)
{
  return FSDPError(MPI_COMM_SELF, 0, kept_name(func, "(Fortran)"), "fsdp.F90", code, "%s", message);
}

/* The module's call that got an error from C, as a frame of its traceback. */
FSDPF_EXTERN FSDPErrorCode fsdpf_frame(FSDPErrorCode code, const char *func)
{
  return FSDPErrorTraceback(0, kept_name(func, "(Fortran)"), "fsdp.F90", code);
}

/* A Fortran frame of the traceback (FSDPCallA's). */
FSDPF_EXTERN FSDPErrorCode fsdpf_traceback(FSDPErrorCode code, int line, const char *file)
{
  return FSDPErrorTraceback(line, "(Fortran)", kept_name(file, "(a Fortran file)"), code);
}

FSDPF_EXTERN void fsdpf_abort(FSDPErrorCode code) { FSDPErrorAbort(MPI_COMM_WORLD, code); }

FSDPF_EXTERN FSDPErrorCode fsdpf_error_print_trace(void) { return FSDPErrorPrintTrace(stderr); }
