#!/bin/sh
# Layers point one way (doc/hacking.md):
#   tools -> io, plan -> optim, nn -> core -> comm -> device, topo -> sys -> include
# A file in src/F may use its own folder and the layers below F, nothing
# beside or above it.  Two checks, both on the real tree:
#   - #include "..." lines of every source and private header, resolved as
#     the compiler does (the file's folder, then src/include and include);
#   - the symbols each object file of libfsdp takes from the others (nm).
# Programs outside the library (tools, examples, benchmarks, tests) and the
# Fortran module's glue (fortran/) may include only the public headers.  Then the checker runs on a small tree
# with a violation in it, and must fail: a check that cannot fail checks
# nothing.
. "${srcdir:-.}/tests/testlib.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm (binutils) is not installed"; exit 77; }

# The layer of a folder; "" for folders the layering does not know.
rank_of() {
  case $1 in
  include) echo 0 ;; sys) echo 1 ;; device | topo) echo 2 ;; comm) echo 3 ;; core) echo 4 ;;
  nn | optim) echo 5 ;; io | plan) echo 6 ;; *) echo "" ;;
  esac
}

# allowed FROM TO: whether folder FROM may use folder TO
allowed() {
  [ "$1" = "$2" ] && return 0
  a=$(rank_of "$1") b=$(rank_of "$2")
  [ -n "$a" ] && [ -n "$b" ] && [ "$b" -lt "$a" ]
}

# The folder (layer name) of a path under TOP: src/F/... -> F, src/include and include -> include.
folder_of() { # TOP PATH
  rel=${2#"$1"/}
  case $rel in
  include/*) echo include ;;
  src/*/*) rel=${rel#src/}; echo "${rel%%/*}" ;;
  *) rel=${rel%%/*}; echo "$rel" ;;
  esac
}

# check_tree SRCDIR BUILDDIR: prints each violation, returns 1 if any.
check_tree() {
  top=$(realpath "$1") build=$(realpath "$2") bad=0
  out=$(mktemp) || return 2
  # -------- includes
  for f in "$top"/src/*/*.c "$top"/src/*/*.h "$top"/src/*/*.cu "$top"/src/*/*.cuh \
    "$top"/tools/*.c "$top"/examples/*.c "$top"/examples/*/*.F90 "$top"/benchmarks/*.c "$top"/benchmarks/*.h \
    "$top"/fortran/*.c "$top"/fortran/*.F90 "$top"/tests/*.c "$top"/tests/*.h "$top"/tests/*.F90; do
    [ -f "$f" ] || continue
    from=$(folder_of "$top" "$f")
    dir=$(dirname "$f")
    sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f" | while read -r inc; do
      target=""
      for d in "$dir" "$top/src/include" "$top/include" "$build/src/include" "$build/include"; do
        if [ -f "$d/$inc" ]; then target=$(realpath "$d/$inc"); break; fi
      done
      [ -n "$target" ] || continue # generated elsewhere or system: not a layer
      case $target in "$build"/*) to=$(folder_of "$build" "$target") ;; *) to=$(folder_of "$top" "$target") ;; esac
      case $from in
      tools | examples | benchmarks | tests | fortran)
        # outside the library: the public headers and the program's own folder
        case $target in "$top/include/"* | "$build/include/"* | "$(realpath "$dir")/"*) continue ;; esac
        # the tests may ask how this build was configured, and nothing else
        [ "$from" = tests ] && [ "$inc" = fsdp_config.h ] && continue
        # but for white-box tests of code with several CPU paths, each listed here with the source it compiles in
        case "${f#"$top"/}:$inc" in "tests/test_crc32c.c:../src/io/crc32c.c") continue ;; esac
        echo "layering: ${f#"$top"/} includes $inc, which is not a public header" >>"$out" ;;
      *)
        allowed "$from" "$to" ||
          echo "layering: ${f#"$top"/} ($from) includes $inc ($to): $from may use only the layers below it" >>"$out" ;;
      esac
    done
  done
  # -------- symbols: who defines what, then who takes what from whom
  defs=$(mktemp) || return 2
  objs=""
  for d in "$build"/src/*/; do
    o=$(ls "$d"*.o 2>/dev/null)
    [ -n "$o" ] || o=$(ls "$d".libs/*.o 2>/dev/null)
    objs="$objs $o"
  done
  for o in $objs; do
    nm -P --defined-only "$o" 2>/dev/null | awk -v f="$(folder_of "$build" "$o")" '$2 ~ /^[A-TV-Z]$/ {print $1, f}'
  done >"$defs"
  for o in $objs; do
    from=$(folder_of "$build" "$o")
    nm -P --undefined-only "$o" 2>/dev/null | awk '{print $1}' |
      awk -v from="$from" -v obj="${o#"$build"/}" 'NR == FNR {def[$1] = $2; next}
        ($1 in def) {print obj, from, $1, def[$1]}' "$defs" - |
      while read -r obj f sym to; do
        allowed "$f" "$to" ||
          echo "layering: $obj ($f) uses $sym, defined in $to: $f may use only the layers below it" >>"$out"
      done
  done
  [ -n "$objs" ] || echo "layering: no object files under $build/src: build the library first" >>"$out"
  [ -s "$out" ] && { cat "$out"; bad=1; }
  rm -f "$out" "$defs"
  return $bad
}

echo "layering: $srcdir against the objects in $top_builddir"
check_tree "$(cd "$srcdir" && pwd)" "$(cd "$top_builddir" && pwd)" || fail "a lower layer uses a higher one (above)"

# The checker itself: a tree where sys includes core's header and calls core.
tmp=$fsdp_tmp
mkdir -p "$tmp/top/src/sys" "$tmp/top/src/core" "$tmp/top/include" "$tmp/build/src/sys" "$tmp/build/src/core"
printf 'int high(void);\n' >"$tmp/top/src/core/coreimpl.h"
printf '#include "coreimpl.h"\nint high(void) { return 1; }\n' >"$tmp/top/src/core/high.c"
printf 'int low(void) { return 0; }\n' >"$tmp/top/src/sys/low.c"
${CC:-cc} -c -o "$tmp/build/src/core/high.o" "$tmp/top/src/core/high.c" || fail "cannot compile the checker's test tree"
${CC:-cc} -c -o "$tmp/build/src/sys/low.o" "$tmp/top/src/sys/low.c" || fail "cannot compile the checker's test tree"
check_tree "$tmp/top" "$tmp/build" >"$tmp/good.out" || { cat "$tmp/good.out"; fail "the checker refused a tree without violations"; }
printf '#include "../core/coreimpl.h"\nint low(void) { return high(); }\n' >"$tmp/top/src/sys/low.c"
${CC:-cc} -c -o "$tmp/build/src/sys/low.o" "$tmp/top/src/sys/low.c" || fail "cannot compile the checker's test tree"
if check_tree "$tmp/top" "$tmp/build" >"$tmp/bad.out"; then fail "the checker accepted sys calling core"; fi
cat "$tmp/bad.out"
grep -q 'src/sys/low.c (sys) includes ../core/coreimpl.h (core)' "$tmp/bad.out" || fail "the checker missed the include"
grep -q 'src/sys/low.o (sys) uses high, defined in core' "$tmp/bad.out" || fail "the checker missed the call"
echo "layering: the checker finds both violations in its test tree"
