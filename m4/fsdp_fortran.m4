# FSDP_MPI_SELECT_FC: MPI's Fortran compiler (mpifort) unless FC is set,
# before AC_PROG_FC looks for one.
AC_DEFUN([FSDP_MPI_SELECT_FC], [
AC_ARG_ENABLE([fortran],
  [AS_HELP_STRING([--disable-fortran],
    [do not build the Fortran module fsdp (built when MPI's Fortran compiler works; --enable-fortran makes that an error)])],
  [], [enable_fortran=check])
AS_IF([test "x$enable_fortran" != xno && test -z "$FC" && test "x$with_mpi" != xcheck && test "x$with_mpi" != xyes],
  [AS_IF([test -x "$with_mpi/bin/mpifort"], [FC="$with_mpi/bin/mpifort"])])
])

# FSDP_CHECK_FORTRAN: the Fortran module needs a Fortran 2008 compiler with
# MPI's Fortran support (use mpi; mpi_f08 too when MPI has it).  Sets
# FSDP_FORTRAN (automake), FSDP_FCFLAGS and fsdp_fortran_summary.
AC_DEFUN([FSDP_CHECK_FORTRAN], [
fsdp_fortran=no
fsdp_fortran_why=""
FSDP_FCFLAGS=""
# FSDPCallA (fsdpf.h) expands to more than 132 columns: gfortran must allow it.
FSDP_FC_LINE_FLAGS=""
# What users' debug builds trap (gfortran's -ffpe-trap): tests/test_fortran_fpe is built with it.
FSDP_FC_TRAP_FLAGS=""
AS_IF([test "x$enable_fortran" = xno], [fsdp_fortran_why="--disable-fortran"],
      [test -z "$FC"], [fsdp_fortran_why="no Fortran compiler (looked for mpifort, mpif90; set FC)"], [
  AC_LANG_PUSH([Fortran])
  fsdp_save_FCFLAGS=$FCFLAGS
  AC_FC_SRCEXT([F90])
  AC_MSG_CHECKING([whether $FC compiles and links MPI Fortran programs (use mpi)])
  AC_LINK_IFELSE([AC_LANG_SOURCE([[
      program t
      use mpi
      integer :: ierr
      call MPI_Init(ierr)
      call MPI_Finalize(ierr)
      end program]])],
    [AC_MSG_RESULT([yes])
     AC_MSG_CHECKING([whether $FC has Fortran 2008's C interoperability (bind(C), c_loc of contiguous arrays)])
     AC_COMPILE_IFELSE([AC_LANG_SOURCE([[
      module m
      use, intrinsic :: iso_c_binding
      implicit none
      interface
        integer(c_int) function f(p) bind(C, name="g")
          import :: c_ptr, c_int
          type(c_ptr), value :: p
        end function
      end interface
      contains
      subroutine s(x)
        real(c_float), contiguous, target, intent(in) :: x(:, :)
        type(c_ptr) :: q
        q = c_loc(x)
      end subroutine
      end module]])],
      [AC_MSG_RESULT([yes]); fsdp_fortran=yes],
      [AC_MSG_RESULT([no]); fsdp_fortran_why="$FC lacks Fortran 2008 C interoperability"])
     rm -f m.mod],
    [AC_MSG_RESULT([no]); fsdp_fortran_why="$FC cannot compile and link 'use mpi' (is it MPI's mpifort?)"])
  AS_IF([test $fsdp_fortran = yes], [
    AC_MSG_CHECKING([whether MPI has the mpi_f08 module])
    AC_COMPILE_IFELSE([AC_LANG_SOURCE([[
      program t
      use mpi_f08
      type(MPI_Comm) :: c
      c = MPI_COMM_WORLD
      end program]])],
      [AC_MSG_RESULT([yes]); FSDP_FCFLAGS="-DFSDP_HAVE_MPI_F08"; fsdp_fortran_f08=", mpi_f08"],
      [AC_MSG_RESULT([no: integer communicators only]); fsdp_fortran_f08=""])
    # Warnings as for C; gfortran checks the standard too.
    AS_IF([test "x$ac_cv_fc_compiler_gnu" = xyes],
      [FSDP_FC_LINE_FLAGS=-ffree-line-length-none
       FSDP_FC_TRAP_FLAGS=-ffpe-trap=invalid,zero,overflow
       AS_IF([test "x$enable_warnings" = xyes], [FSDP_FCFLAGS="$FSDP_FCFLAGS -std=f2008 -Wall -Wextra"])
       AS_IF([test "x$enable_werror" = xyes], [FSDP_FCFLAGS="$FSDP_FCFLAGS -Werror"])])
  ])
  FCFLAGS=$fsdp_save_FCFLAGS
  AC_LANG_POP([Fortran])
])
AS_IF([test $fsdp_fortran = no && test "x$enable_fortran" = xyes],
  [AC_MSG_ERROR([--enable-fortran: $fsdp_fortran_why.  On Debian: apt-get install gfortran mpich libmpich-dev.])])
AS_IF([test $fsdp_fortran = yes], [fsdp_fortran_summary="yes ($FC$fsdp_fortran_f08)"],
      [fsdp_fortran_summary="no ($fsdp_fortran_why)"])
AC_SUBST([FSDP_FCFLAGS])
AC_SUBST([FSDP_FC_LINE_FLAGS])
AC_SUBST([FSDP_FC_TRAP_FLAGS])
AM_CONDITIONAL([FSDP_FORTRAN], [test $fsdp_fortran = yes])
])
