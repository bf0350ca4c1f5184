# FSDP_MPI_SELECT_CC: make mpicc the C compiler unless CC is set.
AC_DEFUN([FSDP_MPI_SELECT_CC], [
AC_ARG_WITH([mpi],
  [AS_HELP_STRING([--with-mpi=DIR], [MPI installation whose DIR/bin/mpicc compiles libfsdp (default: CC, else mpicc on PATH)])],
  [], [with_mpi=check])
AS_IF([test "x$with_mpi" = xno],
  [AC_MSG_ERROR([libfsdp is an MPI library and cannot be built --without-mpi])])
AS_IF([test "x$with_mpi" != xcheck && test "x$with_mpi" != xyes], [
  AS_IF([test ! -x "$with_mpi/bin/mpicc"],
    [AC_MSG_ERROR([--with-mpi=$with_mpi: looked for $with_mpi/bin/mpicc and found no executable there])])
  AS_IF([test -z "$CC"], [CC="$with_mpi/bin/mpicc"])
], [test -z "$CC"], [
  AC_PATH_PROGS([FSDP_MPICC], [mpicc mpicc.mpich], [])
  AS_IF([test -n "$FSDP_MPICC"], [CC="$FSDP_MPICC"])
])
])

# FSDP_CHECK_MPI: the compiler must compile and link MPI-3 programs; find mpiexec.
AC_DEFUN([FSDP_CHECK_MPI], [
AC_MSG_CHECKING([whether $CC compiles and links MPI-3 programs])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#if !defined(MPI_VERSION) || MPI_VERSION < 3
#error libfsdp needs MPI 3 or later
#endif]], [[int provided; MPI_Comm c;
  MPI_Init_thread(0, 0, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c);
  MPI_Finalize();]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([$CC cannot compile and link an MPI-3 program (looked for mpi.h, MPI_Init_thread and MPI_Comm_split_type).
  On Debian: apt-get install mpich libmpich-dev.  Elsewhere: CC=mpicc or --with-mpi=DIR.])])
AC_MSG_CHECKING([which MPI])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_VERSION
#error not MPICH
#endif]], [])], [fsdp_mpi_flavor="MPICH"],
  [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef OPEN_MPI
#error not Open MPI
#endif]], [])], [fsdp_mpi_flavor="Open MPI"], [fsdp_mpi_flavor="MPI (other)"])])
AC_MSG_RESULT([$fsdp_mpi_flavor])

AC_ARG_VAR([MPIEXEC], [launcher used by make check (default: mpiexec next to the MPI compiler)])
fsdp_mpi_bindir=""
AS_IF([test "x$with_mpi" != xcheck && test "x$with_mpi" != xyes], [fsdp_mpi_bindir="$with_mpi/bin"],
      [fsdp_cc_path=`command -v "${CC%% *}" 2>/dev/null`
       AS_IF([test -n "$fsdp_cc_path"], [fsdp_mpi_bindir=`dirname "$fsdp_cc_path"`])])
AC_PATH_PROGS([MPIEXEC], [mpiexec mpiexec.mpich mpirun], [], [$fsdp_mpi_bindir$PATH_SEPARATOR$PATH])
AS_IF([test -z "$MPIEXEC"],
  [AC_MSG_WARN([no mpiexec found: make check will fail unless MPIEXEC is set])
   MPIEXEC=mpiexec])
])

# FSDP_CHECK_PTHREAD: POSIX threads (the host communication thread uses them).
AC_DEFUN([FSDP_CHECK_PTHREAD], [
AC_SEARCH_LIBS([pthread_create], [pthread], [],
  [AC_MSG_ERROR([POSIX threads (pthread_create) not found])])
])
