# FSDP_CHECK_FFTW: FFTW 3's single-precision interface (libfftw3f), for the
# spectral convolutions of Fourier neural operators (fno: models).
AC_DEFUN([FSDP_CHECK_FFTW], [
AC_ARG_WITH([fftw],
  [AS_HELP_STRING([--with-fftw@<:@=DIR@:>@], [FFTW 3 (single precision) for Fourier neural operators (default: detect; required unless --without-fftw)])],
  [], [with_fftw=check])
fsdp_have_fftw=no
fsdp_fftw_summary="no (--without-fftw: fno: models are refused)"
AS_IF([test "x$with_fftw" != xno], [
  FSDP_DEP_FLAGS([FFTW], [fftw], [fftw3f], [-lfftw3f])
  AC_MSG_CHECKING([for FFTW 3 in single precision])
  FSDP_DEP_TRY([FFTW], [[#include <fftw3.h>]],
    [[float x[4] = {0}; fftwf_complex y[3];
      fftwf_plan p = fftwf_plan_dft_r2c_1d(4, x, y, FFTW_ESTIMATE); fftwf_execute(p); fftwf_destroy_plan(p);]],
    [fsdp_have_fftw=yes])
  AC_MSG_RESULT([$fsdp_have_fftw])
  AS_IF([test $fsdp_have_fftw = no],
    [FSDP_REQUIRED_DEP_MISSING([fftw], [FFTW], [FFTW 3 (single precision, libfftw3f)], [libfftw3-dev],
      [Fourier neural operators])])
  AC_DEFINE([FSDP_HAVE_FFTW], [1], [Define to 1 when FFTW 3 in single precision is available])
  fsdp_fftw_summary="yes ($FFTW_CFLAGS $FFTW_LIBS)"
])
AM_CONDITIONAL([FSDP_HAVE_FFTW], [test $fsdp_have_fftw = yes])
])
