# FSDP_CHECK_CUDA: the CUDA toolkit (nvcc, cudart, cuBLAS).  Optional: by default
# it is used when found in $CUDA_HOME, $CUDA_PATH or /usr/local/cuda; an explicit
# --with-cuda that cannot be met is an error.
AC_DEFUN([FSDP_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [CUDA toolkit for the device backend (default: detect in CUDA_HOME, CUDA_PATH, /usr/local/cuda)])],
  [], [with_cuda=check])
fsdp_have_cuda=no
fsdp_cuda_summary="no"
NVCC=""
AS_CASE([$with_cuda],
  [no], [fsdp_cuda_summary="no (--without-cuda)"],
  [yes|check], [fsdp_cuda_candidates="$CUDA_HOME $CUDA_PATH /usr/local/cuda"],
  [fsdp_cuda_candidates="$with_cuda"])
AS_IF([test "x$with_cuda" != xno], [
  AC_MSG_CHECKING([for the CUDA toolkit (nvcc, cudart, cublas)])
  fsdp_cuda_looked=""
  for fsdp_cuda_dir in $fsdp_cuda_candidates; do
    fsdp_cuda_looked="$fsdp_cuda_looked $fsdp_cuda_dir"
    AS_IF([test -x "$fsdp_cuda_dir/bin/nvcc" && test -f "$fsdp_cuda_dir/include/cuda_runtime.h"], [
      fsdp_cuda_libdir="$fsdp_cuda_dir/lib64"
      AS_IF([test -d "$fsdp_cuda_libdir"], [], [fsdp_cuda_libdir="$fsdp_cuda_dir/lib"])
      CUDA_CFLAGS="-I$fsdp_cuda_dir/include"
      CUDA_LIBS="-L$fsdp_cuda_libdir -Wl,-rpath,$fsdp_cuda_libdir -lcublas -lcudart"
      FSDP_DEP_TRY([CUDA], [[#include <cuda_runtime.h>
#include <cublas_v2.h>]], [[int v; cudaRuntimeGetVersion(&v); cublasHandle_t h; cublasCreate(&h); (void)cublasGetStatusString(CUBLAS_STATUS_SUCCESS);]],
        [fsdp_have_cuda=yes; NVCC="$fsdp_cuda_dir/bin/nvcc"; CUDA_HOME_DIR="$fsdp_cuda_dir"])
    ])
    AS_IF([test $fsdp_have_cuda = yes], [break])
  done
  AC_MSG_RESULT([$fsdp_have_cuda])
  AS_IF([test $fsdp_have_cuda = no], [
    CUDA_CFLAGS=""; CUDA_LIBS=""
    AS_IF([test "x$with_cuda" != xcheck],
      [AC_MSG_ERROR([--with-cuda was given but no usable CUDA toolkit was found: looked in$fsdp_cuda_looked
  for bin/nvcc, include/cuda_runtime.h, include/cublas_v2.h and lib64/libcudart, libcublas.])])
    fsdp_cuda_summary="no (not found in$fsdp_cuda_looked)"
  ], [
    AC_DEFINE([FSDP_HAVE_CUDA], [1], [Define to 1 when the CUDA backend is built])
    fsdp_cuda_summary="yes ($NVCC)"
  ])
])
# Device code: SASS for each listed architecture, plus PTX of the newest one so
# that later GPUs can JIT it.
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=LIST], [comma-separated GPU architectures for device code, each sm_XY (default: sm_80,sm_90; PTX of the last one is added)])],
  [], [with_cuda_arch="sm_80,sm_90"])
NVCC_ARCHFLAGS=""
AS_IF([test $fsdp_have_cuda = yes], [
  fsdp_cuda_last=""
  for fsdp_arch in `echo "$with_cuda_arch" | tr ',' ' '`; do
    AS_CASE([$fsdp_arch],
      [sm_[[0-9]][[0-9]]|sm_[[0-9]][[0-9]][[0-9]]|sm_[[0-9]][[0-9]]a|sm_[[0-9]][[0-9]][[0-9]]a], [],
      [AC_MSG_ERROR([--with-cuda-arch: '$fsdp_arch' is not a GPU architecture of the form sm_XY (as in sm_80,sm_90)])])
    fsdp_cc=`echo $fsdp_arch | sed 's/^sm_//'`
    NVCC_ARCHFLAGS="$NVCC_ARCHFLAGS -gencode=arch=compute_$fsdp_cc,code=sm_$fsdp_cc"
    fsdp_cuda_last=$fsdp_cc
  done
  AS_IF([test -z "$fsdp_cuda_last"], [AC_MSG_ERROR([--with-cuda-arch needs at least one architecture, as in sm_90])])
  NVCC_ARCHFLAGS="$NVCC_ARCHFLAGS -gencode=arch=compute_$fsdp_cuda_last,code=compute_$fsdp_cuda_last"
  AC_MSG_CHECKING([whether $NVCC compiles for $with_cuda_arch])
  cat >conftest.cu <<_FSDP_EOF
__global__ void k(float *x) { x[[threadIdx.x]] = 1.0f; }
int main(void) { return 0; }
_FSDP_EOF
  AS_IF([$NVCC $NVCC_ARCHFLAGS -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([$NVCC cannot compile for --with-cuda-arch=$with_cuda_arch (see config.log)])])
  rm -f conftest.cu conftest.$OBJEXT
  fsdp_cuda_summary="$fsdp_cuda_summary, $with_cuda_arch + PTX"
])
AC_SUBST([NVCC_ARCHFLAGS])
AC_SUBST([CUDA_CFLAGS])
AC_SUBST([CUDA_LIBS])
AC_SUBST([NVCC])
AC_SUBST([CUDA_HOME_DIR])
AS_IF([test $fsdp_have_cuda = yes], [FSDP_WITH_CUDA=1], [FSDP_WITH_CUDA=0])
AC_SUBST([FSDP_WITH_CUDA])
AM_CONDITIONAL([FSDP_HAVE_CUDA], [test $fsdp_have_cuda = yes])
])
