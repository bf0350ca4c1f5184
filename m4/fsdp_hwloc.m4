# FSDP_CHECK_HWLOC: hwloc 2.x, for node topology discovery (ShardGroup).
AC_DEFUN([FSDP_CHECK_HWLOC], [
AC_ARG_WITH([hwloc],
  [AS_HELP_STRING([--with-hwloc@<:@=DIR@:>@], [hwloc 2.x for topology discovery (default: detect; required unless --without-hwloc)])],
  [], [with_hwloc=check])
fsdp_have_hwloc=no
fsdp_hwloc_summary="no (--without-hwloc)"
AS_IF([test "x$with_hwloc" != xno], [
  FSDP_DEP_FLAGS([HWLOC], [hwloc], [hwloc], [-lhwloc])
  AC_MSG_CHECKING([for hwloc >= 2.0])
  FSDP_DEP_TRY([HWLOC], [[#include <hwloc.h>
#if HWLOC_API_VERSION < 0x00020000
#error hwloc 2.x is required
#endif]], [[hwloc_topology_t t; hwloc_topology_init(&t); hwloc_topology_destroy(t);]],
    [fsdp_have_hwloc=yes])
  AC_MSG_RESULT([$fsdp_have_hwloc])
  AS_IF([test $fsdp_have_hwloc = no],
    [FSDP_REQUIRED_DEP_MISSING([hwloc], [HWLOC], [hwloc 2.x], [libhwloc-dev], [topology-aware sharding groups])])
  AC_DEFINE([FSDP_HAVE_HWLOC], [1], [Define to 1 when hwloc is available])
  fsdp_hwloc_summary="yes ($HWLOC_CFLAGS $HWLOC_LIBS)"
])
AM_CONDITIONAL([FSDP_HAVE_HWLOC], [test $fsdp_have_hwloc = yes])
])
