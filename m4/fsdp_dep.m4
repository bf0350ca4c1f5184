# FSDP_DEP_FLAGS(VARPREFIX, OPTNAME, PKG-CONFIG-MODULES, DEFAULT-LIBS)
# ---------------------------------------------------------------
# Decide VARPREFIX_CFLAGS and VARPREFIX_LIBS for one dependency, from (in order):
# an explicit --with-OPTNAME=DIR, the VARPREFIX_CFLAGS/VARPREFIX_LIBS variables,
# the first pkg-config module that exists, or DEFAULT-LIBS on the default paths.
# Sets fsdp_dep_defaulted=yes when nothing said where (DEFAULT-LIBS was used).
# Sets fsdp_OPTNAME_where to a phrase saying where we looked, for error messages.
AC_DEFUN([FSDP_DEP_FLAGS], [
AC_REQUIRE([FSDP_PROG_PKG_CONFIG])
AC_ARG_VAR([$1_CFLAGS], [C preprocessor flags for $2, overriding detection])
AC_ARG_VAR([$1_LIBS], [linker flags for $2, overriding detection])
fsdp_dep_dir=""
fsdp_dep_defaulted=no
AS_CASE([$with_$2],
  [yes|check|""], [],
  [no], [],
  [fsdp_dep_dir="$with_$2"])
AS_IF([test -n "$fsdp_dep_dir"], [
  AS_IF([test ! -d "$fsdp_dep_dir"],
    [AC_MSG_ERROR([--with-$2=$fsdp_dep_dir: no such directory (looked there for $2 headers in include/ and libraries in lib/ or lib64/)])])
  fsdp_dep_libdir="$fsdp_dep_dir/lib"
  AS_IF([test -d "$fsdp_dep_dir/lib64"], [fsdp_dep_libdir="$fsdp_dep_dir/lib64"])
  $1_CFLAGS="-I$fsdp_dep_dir/include"
  $1_LIBS="-L$fsdp_dep_libdir -Wl,-rpath,$fsdp_dep_libdir $4"
  fsdp_$2_where="headers in $fsdp_dep_dir/include, libraries ($4) in $fsdp_dep_libdir"
], [test -n "$$1_CFLAGS$$1_LIBS"], [
  fsdp_$2_where="$1_CFLAGS='$$1_CFLAGS' $1_LIBS='$$1_LIBS'"
], [
  fsdp_dep_found_pc=""
  AS_IF([test -n "$PKG_CONFIG"], [
    for fsdp_dep_mod in $3; do
      AS_IF([$PKG_CONFIG --exists "$fsdp_dep_mod" 2>/dev/null], [
        $1_CFLAGS=`$PKG_CONFIG --cflags "$fsdp_dep_mod"`
        $1_LIBS=`$PKG_CONFIG --libs "$fsdp_dep_mod"`
        fsdp_dep_found_pc="$fsdp_dep_mod"
        break
      ])
    done
  ])
  AS_IF([test -n "$fsdp_dep_found_pc"], [
    fsdp_$2_where="pkg-config module $fsdp_dep_found_pc ($$1_CFLAGS $$1_LIBS)"
  ], [
    $1_LIBS="$4"
    fsdp_dep_defaulted=yes
    fsdp_$2_where="pkg-config modules ($3) and the compiler's default paths with $4"
  ])
])
])

# FSDP_DEP_TRY(VARPREFIX, PROLOGUE, BODY, ACTION-IF-OK, ACTION-IF-NOT)
# Link a test program with VARPREFIX_CFLAGS and VARPREFIX_LIBS added.
AC_DEFUN([FSDP_DEP_TRY], [
fsdp_save_CPPFLAGS="$CPPFLAGS"; fsdp_save_LIBS="$LIBS"
CPPFLAGS="$CPPFLAGS $$1_CFLAGS"; LIBS="$$1_LIBS $LIBS"
AC_LINK_IFELSE([AC_LANG_PROGRAM([$2], [$3])], [$4], [$5])
CPPFLAGS="$fsdp_save_CPPFLAGS"; LIBS="$fsdp_save_LIBS"
])

AC_DEFUN([FSDP_PROG_PKG_CONFIG], [
AC_ARG_VAR([PKG_CONFIG], [path to pkg-config])
AC_PATH_PROGS([PKG_CONFIG], [pkg-config pkgconf], [])
])

# FSDP_REQUIRED_DEP_MISSING(OPTNAME, VARPREFIX, WHAT, DEBIAN-PACKAGE, FEATURE)
# A dependency that is on by default: not finding it stops configure unless the
# user said --without-OPTNAME, so a build never loses a feature silently.
AC_DEFUN([FSDP_REQUIRED_DEP_MISSING], [
AC_MSG_ERROR([$3 not found or not usable: looked for $fsdp_$1_where.
  On Debian: apt-get install $4.  Elsewhere: --with-$1=DIR, or $2_CFLAGS=... $2_LIBS=...
  on the configure command line.  To build without $5, pass --without-$1.
  Details of the failed test are in config.log.])
])
