#!/bin/sh
# tests/gpu/first-light.sh without a GPU, on this build tree (--build --host):
# its argument errors, the steps that need no GPU, each GPU step skipped with
# why, one summary line per step, and a failing step failing the run.
. "${srcdir:-.}/tests/testlib.sh"
fl="$srcdir/tests/gpu/first-light.sh"
nsteps=$("$fl" --list | wc -l)
[ "$nsteps" -ge 10 ] || { "$fl" --list; echo "FAIL: --list printed $nsteps steps"; exit 1; }

# refuses NAME PATTERN ARGS...: first-light.sh ARGS exits 2 saying PATTERN
refuses() {
  name=$1 pattern=$2
  shift 2
  rc=0
  "$fl" "$@" >"$fsdp_tmp/$name" 2>&1 || rc=$?
  [ $rc -eq 2 ] || { cat "$fsdp_tmp/$name"; echo "FAIL: first-light.sh $*: exit $rc, not 2"; exit 1; }
  expect_grep "$pattern" "$fsdp_tmp/$name"
}
refuses unknown "unknown argument '--frobnicate'" --frobnicate
refuses only "--only: no step 'nosuch'" --build "$top_builddir" --only host-train,nosuch
refuses nobundle "--bundle $fsdp_tmp/none: not a bundle" --bundle "$fsdp_tmp/none"
refuses both "exclude each other" --bundle "$fsdp_tmp/none" --build "$top_builddir"
refuses nobuild "--build $fsdp_tmp: no tools/fsdp-train" --build "$fsdp_tmp"

# The host part: every step has its line; a GPU step says it was skipped and why.
mkdir -p "$fsdp_tmp/out"
rc=0
OUT=$fsdp_tmp/out "$fl" --build "$top_builddir" --host >"$fsdp_tmp/host" 2>&1 || rc=$?
[ $rc -eq 0 ] || { cat "$fsdp_tmp/host" "$fsdp_tmp/out/first-light.log"; echo "FAIL: first-light.sh --host: exit $rc"; exit 1; }
s=$fsdp_tmp/out/summary.txt
expect_count "$nsteps" "" "$s"
expect_grep "^environment  *passed" "$s"
expect_grep "^host-train  *passed" "$s"
expect_grep "^bundle  *skipped (a build tree, not a bundle" "$s"
expect_count "$("$fl" --list | grep -c ' gpu ')" "skipped (--host)" "$s"
expect_grep "^=== host-train: passed" "$fsdp_tmp/out/first-light.log"
expect_grep "fsdp-train: peak memory per rank" "$fsdp_tmp/out/first-light.log"

# A step that fails is reported so, and the run's exit status says it.
rc=0
MPIEXEC=false OUT=$fsdp_tmp/out "$fl" --build "$top_builddir" --only host-train >"$fsdp_tmp/fail" 2>&1 || rc=$?
[ $rc -eq 1 ] || { cat "$fsdp_tmp/fail"; echo "FAIL: a failing step gave exit $rc, not 1"; exit 1; }
expect_grep "^host-train  *failed (exit 1: FAIL: fsdp-train host2 exited with 1)" "$fsdp_tmp/out/summary.txt"
echo "first-light-host: passed"
