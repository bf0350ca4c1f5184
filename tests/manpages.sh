#!/bin/sh
# Every function libfsdp exports has a man page generated from its header
# comment (make doc: doc/Doxyfile, tools/fsdp-man), with the sections in
# their fixed order, a collective line that says "Collective on ..." or "Not
# collective", and an errors section; every type, enum and macro of the
# public headers has a page; each Fortran name opens its C call's page; every
# public procedure of the Fortran module has a page, its C call's or its own
# (with the same collective line and errors); the pages render without a
# troff warning.  The symbols come from the built libraries (the module's
# generic names, which no library exports, from the module's source).
. "${srcdir:-.}/tests/testlib.sh"
man3="$top_builddir/doc/api/man3"
[ -f "$top_builddir/doc/api/stamp" ] || {
  echo "SKIP: no reference pages were built (configure found no doxygen or no python3)"
  exit 77
}
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm (binutils) is not installed"; exit 77; }
lib="$top_builddir/src/.libs/libfsdp.so"
if [ -f "$lib" ]; then
  nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sort -u >"$fsdp_tmp/functions"
else
  nm -g --defined-only "$top_builddir/src/.libs/libfsdp.a" | awk '$2 == "T" {print $3}' | sort -u >"$fsdp_tmp/functions"
fi
[ -s "$fsdp_tmp/functions" ] || { echo "FAIL: no functions found in libfsdp"; exit 1; }

status=0
fail() { echo "FAIL: $*"; status=1; }

# check_contract NAME PAGE SECTIONS: what every function's page has (C's or
# the Fortran module's own): the sections, a first COLLECTIVE paragraph that
# says which it is, and a non-empty ERRORS section.
check_contract() {
  for s in NAME SYNOPSIS DESCRIPTION COLLECTIVE ERRORS FORTRAN; do
    case " $3" in *" $s "*) ;; *) fail "$1: no $s section" ;; esac
  done
  coll=$(awk '/^\.SH COLLECTIVE/ {on = 1; next} /^\.SH/ {on = 0} on && !/^\./ {print; exit}' "$2")
  case "$coll" in
  "Collective on "* | "Not collective"*) ;;
  *) fail "$1: the collective line is '$coll', not 'Collective on ...' or 'Not collective...'" ;;
  esac
  errs=$(awk '/^\.SH ERRORS/ {on = 1; next} /^\.SH/ {on = 0} on && !/^\./' "$2" | wc -l)
  [ "$errs" -ge 1 ] || fail "$1: the ERRORS section is empty"
}

# The functions: their pages' sections, in order.
order='NAME SYNOPSIS DESCRIPTION COLLECTIVE ARGUMENTS ERRORS OPTIONS FORTRAN SEE ALSO'
nfortran=0
while read -r f; do
  p="$man3/$f.3"
  [ -f "$p" ] || { fail "$f is exported and has no page ($p)"; continue; }
  grep -q '^\.so ' "$p" && { fail "$f: its page is a link ($(cat "$p"))"; continue; }
  sections=$(sed -n 's/^\.SH //p' "$p" | tr '\n' ' ')
  # The sections must appear in the fixed order (ARGUMENTS, OPTIONS and SEE ALSO may be absent).
  echo "$sections" | awk -v order="$order" -v f="$f" '{
      n = split(order, want, " "); pos = 0
      for (i = 1; i <= NF; i++) {
        found = 0
        for (j = pos + 1; j <= n; j++) if (want[j] == $i) { pos = j; found = 1; break }
        if (!found) { print "FAIL: " f ": section " $i " out of order in: " $0; exit 1 }
      }
    }' || status=1
  check_contract "$f" "$p" "$sections"
  grep -q '(undocumented)' "$p" && fail "$f: no summary line"
  # The Fortran name, where there is one, opens this page.
  fname=$(sed -n 's/^\(integer \)\{0,1\}\(subroutine\|function\) \(fsdp_[a-z0-9_]*\)(.*/\3/p' "$p" | head -n 1)
  if [ -n "$fname" ]; then
    nfortran=$((nfortran + 1))
    grep -qx ".so man3/$f.3" "$man3/$fname.3" 2>/dev/null || fail "$f: $man3/$fname.3 does not open its page"
  fi
done <"$fsdp_tmp/functions"
nfunc=$(wc -l <"$fsdp_tmp/functions")

# The Fortran module's procedures: what libfsdpf exports (gfortran's
# __fsdp_MOD_ prefix) and the generic interfaces, which have no symbol.
flib="$top_builddir/fortran/.libs/libfsdpf.so"
[ -f "$flib" ] || flib="$top_builddir/fortran/.libs/libfsdpf.a"
nmodule=0 nown=0
if [ -f "$flib" ]; then
  {
    nm -g --defined-only "$flib" | awk '$2 == "T" {print $3}' | sed -n 's/^__fsdp_MOD_\(fsdp_[a-z0-9_]*\)$/\1/p'
    sed -n 's/^  interface \(fsdp_[a-z0-9_]*\) *$/\1/p' "$srcdir/fortran/fsdp.F90"
  } | sort -u >"$fsdp_tmp/procedures"
  nmodule=$(wc -l <"$fsdp_tmp/procedures")
  [ "$nmodule" -ge 100 ] || fail "only $nmodule procedures found in $flib"
  while read -r f; do
    p="$man3/$f.3"
    [ -f "$p" ] || { fail "$f is a procedure of the Fortran module and has no page"; continue; }
    grep -q '^\.so ' "$p" && continue # its C call's page (checked above)
    nown=$((nown + 1))
    sections=$(sed -n 's/^\.SH //p' "$p" | tr '\n' ' ')
    check_contract "$f" "$p" "$sections"
    grep -q "^\(integer \)\{0,1\}\(subroutine\|function\) $f(" "$p" || fail "$f: the synopsis does not declare $f"
  done <"$fsdp_tmp/procedures"
else
  echo "manpages: no Fortran module in this build; its pages not checked"
fi

# The types, enums and macros each public header defines.
headers="$srcdir/include/fsdp.h $srcdir/include/fsdp_nn.h $srcdir/include/fsdp_cuda.h"
{
  sed -n 's/^#define \([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' $headers | grep -v '^FSDP\(_NN\|_CUDA\)\{0,1\}_H$'
  sed -n 's/^typedef [^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\);.*/\1/p' $headers
  sed -n 's/^typedef [^(]*(\*\([A-Za-z_][A-Za-z0-9_]*\))(.*/\1/p' $headers
  sed -n 's/^} \([A-Za-z_][A-Za-z0-9_]*\);.*/\1/p' $headers
  sed -n 's/^typedef enum {.*} \([A-Za-z_][A-Za-z0-9_]*\);.*/\1/p' $headers
} | sort -u >"$fsdp_tmp/others"
ntypes=$(wc -l <"$fsdp_tmp/others")
[ "$ntypes" -ge 10 ] || fail "only $ntypes types and macros found in $headers"
while read -r t; do
  p="$man3/$t.3"
  [ -f "$p" ] || { fail "$t is defined in a public header and has no page"; continue; }
  grep -q '(undocumented)' "$p" && fail "$t: no summary line"
done <"$fsdp_tmp/others"

# Every link page points at a page that exists.
for l in $(grep -l '^\.so ' "$man3"/*.3); do
  target=$(sed -n 's/^\.so man3\///p' "$l")
  [ -f "$man3/$target" ] || fail "$l links to $target, which does not exist"
done

# The pages render cleanly.
if command -v groff >/dev/null 2>&1; then
  for p in $(grep -L '^\.so ' "$man3"/*.3); do
    w=$(groff -man -Tutf8 -ww -Wbreak -z "$p" 2>&1)
    [ -z "$w" ] || fail "$p: groff says: $w"
  done
else
  echo "manpages: groff is not installed; rendering not checked"
fi
[ -f "$top_builddir/doc/api/html/index.html" ] || fail "no HTML reference (doc/api/html/index.html)"

echo "manpages: $nfunc exported functions ($nfortran with a Fortran name), $nmodule Fortran procedures" \
  "($nown with a page of their own), $ntypes types and macros, $(ls "$man3" | wc -l) pages in all"
exit $status
