#!/bin/sh
# Which calls are collective is true, not just written (issue 39): each
# public function's @collective line in the headers (what its man page says)
# is handed to tests/test_collectives, which makes the call on rank 0 alone
# under -fsdp_debug_collectives.  A call documented "Collective on ..." must
# return a named error instead of waiting forever or succeeding; a call
# documented "Not collective" must succeed.  Every documented function must
# have a case; the few that cannot run on one rank say why.
. "${srcdir:-.}/tests/testlib.sh"
prog="$top_builddir/tests/test_collectives"
[ -x "$prog" ] || { echo "FAIL: $prog was not built"; exit 1; }
[ -z "${FSDP_TEST_WRAPPER:-}" ] || { echo "SKIP: its collective cases leave their checks pending (not for valgrind)"; exit 77; }

headers="$srcdir/include/fsdp.h $srcdir/include/fsdp_nn.h"
grep -q '^#define FSDP_WITH_CUDA 1' "$top_builddir/include/fsdpconf.h" && headers="$headers $srcdir/include/fsdp_cuda.h"
# "collective NAME" or "local NAME" for each FSDP_EXTERN function, from the
# @collective line of the doc comment just before it.
awk '
  /\/\*\*/ { doc = ""; indoc = 1 }
  indoc { doc = doc " " $0 }
  /\*\// { indoc = 0 }
  /^FSDP_EXTERN/ {
    line = $0; sub(/\(.*/, "", line); n = split(line, w, /[ *]+/)
    kind = "undocumented"
    if (doc ~ /@collective[ \t]+Collective on /) kind = "collective"
    else if (doc ~ /@collective[ \t]+Not collective/) kind = "local"
    print kind, w[n]; doc = ""
  }' $headers >"$fsdp_tmp/list"
status=0
if grep '^undocumented' "$fsdp_tmp/list"; then echo "FAIL: functions above have no @collective line"; status=1; fi
grep -v '^undocumented' "$fsdp_tmp/list" >"$fsdp_tmp/cases"
ncoll=$(grep -c '^collective' "$fsdp_tmp/cases")
nlocal=$(grep -c '^local' "$fsdp_tmp/cases")
[ "$ncoll" -ge 20 ] && [ "$nlocal" -ge 100 ] || { echo "FAIL: only $ncoll collective and $nlocal local functions found in $headers"; exit 1; }

fsdp_run 2 "$prog" -list "$fsdp_tmp/cases" -dir "$fsdp_tmp" -fsdp_debug_collectives -fsdp_collective_timeout 1 \
  -fsdp_options_left false >"$fsdp_tmp/out" 2>"$fsdp_tmp/err"
rc=$?
cat "$fsdp_tmp/out"
[ $rc -eq 0 ] || { echo "FAIL: test_collectives exited with $rc"; cat "$fsdp_tmp/err"; exit 1; }
grep -q '^done: ' "$fsdp_tmp/out" || { echo "FAIL: test_collectives did not finish"; cat "$fsdp_tmp/err"; exit 1; }
grep -q 'FAIL' "$fsdp_tmp/out" && status=1
[ "$(grep -c '^mismatch .*: ok' "$fsdp_tmp/out")" -eq 2 ] || { echo "FAIL: a collective mismatch was not reported on both ranks"; status=1; }
# Each documented function has its line; only a build without HDF5 may say unsupported (the checkpoint calls).
while read -r kind name; do
  grep -q "^\($kind\|exempt\|unsupported\) $name: " "$fsdp_tmp/out" || { echo "FAIL: no result for $kind $name"; status=1; }
done <"$fsdp_tmp/cases"
if grep -q '^unsupported' "$fsdp_tmp/out"; then
  if grep -q '^#define FSDP_HAVE_HDF5 1' "$top_builddir/src/include/fsdp_config.h"; then
    echo "FAIL: unsupported in a build with HDF5"; status=1
  fi
  grep '^unsupported' "$fsdp_tmp/out" | grep -v '^unsupported FSDPContext\(Save\|Load\): ' && status=1
fi
echo "collectives: $ncoll documented collective, $nlocal not collective;" \
  "$(grep -c ': ok' "$fsdp_tmp/out") behaved as documented, $(grep -c '^exempt' "$fsdp_tmp/out") exempt"
exit $status
