# FSDP_CHECK_BLAS: a CBLAS (OpenBLAS preferred) for the host layer library's GEMMs.
AC_DEFUN([FSDP_CHECK_BLAS], [
AC_ARG_WITH([blas],
  [AS_HELP_STRING([--with-blas@<:@=DIR@:>@], [CBLAS, OpenBLAS preferred, for host GEMMs (default: detect; required unless --without-blas)])],
  [], [with_blas=check])
fsdp_have_blas=no
fsdp_blas_summary="no (--without-blas)"
AS_IF([test "x$with_blas" != xno], [
  FSDP_DEP_FLAGS([BLAS], [blas], [openblas cblas], [-lopenblas])
  AC_MSG_CHECKING([for cblas_sgemm])
  fsdp_blas_tried=""
  # When nothing said where, fall back from OpenBLAS to a generic CBLAS.
  for fsdp_blas_extra in "" "-lcblas" "-lcblas -lblas" "-lblas"; do
    AS_IF([test -n "$fsdp_blas_extra"], [
      AS_IF([test $fsdp_dep_defaulted = no], [break])
      BLAS_LIBS="$fsdp_blas_extra"])
    fsdp_blas_tried="$fsdp_blas_tried '$BLAS_LIBS'"
    FSDP_DEP_TRY([BLAS], [[#include <cblas.h>]],
      [[float a = 1, b = 1, c = 0; cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);]],
      [fsdp_have_blas=yes])
    AS_IF([test $fsdp_have_blas = yes], [break])
  done
  AC_MSG_RESULT([$fsdp_have_blas])
  AS_IF([test $fsdp_have_blas = no], [
    fsdp_blas_where="$fsdp_blas_where (link flags tried:$fsdp_blas_tried) with cblas.h"
    FSDP_REQUIRED_DEP_MISSING([blas], [BLAS], [a CBLAS (cblas.h and cblas_sgemm)], [libopenblas-dev], [the host layer library])])
  AC_DEFINE([FSDP_HAVE_BLAS], [1], [Define to 1 when a CBLAS is available])
  FSDP_DEP_TRY([BLAS], [[char *openblas_get_config(void);]], [[return openblas_get_config() == 0;]],
    [AC_DEFINE([FSDP_HAVE_OPENBLAS_GET_CONFIG], [1], [Define to 1 when the BLAS is OpenBLAS])])
  FSDP_DEP_TRY([BLAS], [[void openblas_set_num_threads(int); int openblas_get_num_threads(void);]],
    [[openblas_set_num_threads(1); return openblas_get_num_threads() != 1;]],
    [AC_DEFINE([FSDP_HAVE_OPENBLAS_THREADS], [1], [Define to 1 when the BLAS is OpenBLAS with a thread count to set])])
  fsdp_blas_summary="yes ($BLAS_CFLAGS $BLAS_LIBS)"
])
AM_CONDITIONAL([FSDP_HAVE_BLAS], [test $fsdp_have_blas = yes])
])
