# FSDP_CHECK_HDF5: parallel HDF5 (MPI-IO), for sharded checkpoints.
# A serial HDF5 is refused: the checkpoint writer needs collective MPI-IO.
AC_DEFUN([FSDP_CHECK_HDF5], [
AC_ARG_WITH([hdf5],
  [AS_HELP_STRING([--with-hdf5@<:@=DIR@:>@], [parallel HDF5 for checkpoints (default: detect; required unless --without-hdf5)])],
  [], [with_hdf5=check])
fsdp_have_hdf5=no
fsdp_hdf5_summary="no (--without-hdf5)"
AS_IF([test "x$with_hdf5" != xno], [
  FSDP_DEP_FLAGS([HDF5], [hdf5], [hdf5-mpich hdf5-mpi hdf5-openmpi hdf5], [-lhdf5])
  AC_MSG_CHECKING([for HDF5])
  fsdp_hdf5_usable=no
  FSDP_DEP_TRY([HDF5], [[#include <hdf5.h>]], [[hid_t f = H5Fopen("x.h5", H5F_ACC_RDONLY, H5P_DEFAULT); H5Fclose(f);]],
    [fsdp_hdf5_usable=yes])
  AC_MSG_RESULT([$fsdp_hdf5_usable])
  AS_IF([test $fsdp_hdf5_usable = no],
    [FSDP_REQUIRED_DEP_MISSING([hdf5], [HDF5], [HDF5], [libhdf5-mpich-dev], [checkpoints])])
  AC_MSG_CHECKING([whether HDF5 is built for parallel I/O (H5_HAVE_PARALLEL)])
  FSDP_DEP_TRY([HDF5], [[#include <hdf5.h>
#ifndef H5_HAVE_PARALLEL
#error serial HDF5
#endif]], [[hid_t p = H5Pcreate(H5P_FILE_ACCESS); H5Pset_fapl_mpio(p, MPI_COMM_WORLD, MPI_INFO_NULL); H5Pclose(p);]],
    [fsdp_have_hdf5=yes])
  AC_MSG_RESULT([$fsdp_have_hdf5])
  AS_IF([test $fsdp_have_hdf5 = no],
    [AC_MSG_ERROR([the HDF5 found ($fsdp_hdf5_where) is a serial build: H5_HAVE_PARALLEL is not defined or H5Pset_fapl_mpio does not link.
  libfsdp writes checkpoints collectively with MPI-IO and needs HDF5 built with MPI (parallel HDF5).
  On Debian: apt-get install libhdf5-mpich-dev.  Elsewhere: --with-hdf5=DIR of a parallel build,
  or --without-hdf5 to build without checkpoints.])])
  AC_DEFINE([FSDP_HAVE_HDF5], [1], [Define to 1 when parallel HDF5 is available])
  fsdp_hdf5_summary="yes ($HDF5_CFLAGS $HDF5_LIBS)"
])
AM_CONDITIONAL([FSDP_HAVE_HDF5], [test $fsdp_have_hdf5 = yes])
AS_IF([test $fsdp_have_hdf5 = yes], [FSDP_WITH_HDF5=1], [FSDP_WITH_HDF5=0])
AC_SUBST([FSDP_WITH_HDF5])
])
