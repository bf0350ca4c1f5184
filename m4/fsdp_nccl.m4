# FSDP_CHECK_NCCL: NCCL for intra-node collectives on GPUs.  Needs CUDA; looked
# for beside the CUDA toolkit unless --with-nccl=DIR says where.
AC_DEFUN([FSDP_CHECK_NCCL], [
AC_ARG_WITH([nccl],
  [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@], [NCCL for GPU collectives (default: detect beside CUDA)])],
  [], [with_nccl=check])
fsdp_have_nccl=no
fsdp_nccl_summary="no"
AS_IF([test "x$with_nccl" = xno], [fsdp_nccl_summary="no (--without-nccl)"],
      [test $fsdp_have_cuda = no], [
  AS_IF([test "x$with_nccl" != xcheck],
    [AC_MSG_ERROR([--with-nccl needs the CUDA toolkit, which was not found (see --with-cuda)])])
  fsdp_nccl_summary="no (needs CUDA)"
], [
  AS_CASE([$with_nccl],
    [yes|check], [fsdp_nccl_dir="$CUDA_HOME_DIR"],
    [fsdp_nccl_dir="$with_nccl"])
  fsdp_nccl_libdir="$fsdp_nccl_dir/lib64"
  AS_IF([test -d "$fsdp_nccl_libdir"], [], [fsdp_nccl_libdir="$fsdp_nccl_dir/lib"])
  NCCL_CFLAGS="-I$fsdp_nccl_dir/include $CUDA_CFLAGS"
  NCCL_LIBS="-L$fsdp_nccl_libdir -Wl,-rpath,$fsdp_nccl_libdir -lnccl $CUDA_LIBS"
  AC_MSG_CHECKING([for NCCL])
  FSDP_DEP_TRY([NCCL], [[#include <nccl.h>]], [[int v; ncclGetVersion(&v);]], [fsdp_have_nccl=yes])
  AC_MSG_RESULT([$fsdp_have_nccl])
  AS_IF([test $fsdp_have_nccl = no], [
    AS_IF([test "x$with_nccl" != xcheck],
      [AC_MSG_ERROR([--with-nccl was given but NCCL was not found: looked for $fsdp_nccl_dir/include/nccl.h and libnccl in $fsdp_nccl_libdir])])
    NCCL_CFLAGS=""; NCCL_LIBS=""
    fsdp_nccl_summary="no (not found in $fsdp_nccl_dir)"
  ], [
    NCCL_CFLAGS="-I$fsdp_nccl_dir/include"
    NCCL_LIBS="-L$fsdp_nccl_libdir -Wl,-rpath,$fsdp_nccl_libdir -lnccl"
    AC_DEFINE([FSDP_HAVE_NCCL], [1], [Define to 1 when NCCL is available])
    fsdp_nccl_summary="yes ($NCCL_CFLAGS $NCCL_LIBS)"
  ])
])
AC_SUBST([NCCL_CFLAGS])
AC_SUBST([NCCL_LIBS])
AS_IF([test $fsdp_have_nccl = yes], [FSDP_WITH_NCCL=1], [FSDP_WITH_NCCL=0])
AC_SUBST([FSDP_WITH_NCCL])
AM_CONDITIONAL([FSDP_HAVE_NCCL], [test $fsdp_have_nccl = yes])
])
