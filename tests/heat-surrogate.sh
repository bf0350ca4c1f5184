#!/bin/sh
# The in-situ example: a domain-decomposed solver trains its surrogate
# through the libfsdp API; the surrogate must beat doing nothing (the
# persistence baseline) by a wide margin on an unseen initial condition.
. "${srcdir:-.}/tests/testlib.sh"
prog="$top_builddir/examples/heat-surrogate"
for run in "3 -fsdp_sharding_strategy full" "4 -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2"; do
  set -- $run
  np=$1
  shift
  fsdp_run "$np" "$prog" -rounds 40 "$@" >"$fsdp_tmp/out" 2>&1 ||
    { cat "$fsdp_tmp/out"; echo "FAIL: heat-surrogate on $np ranks"; exit 1; }
  cat "$fsdp_tmp/out"
  expect_grep '^round  40/40  training loss ' "$fsdp_tmp/out"
  awk '/^surrogate error/ { found = 1; s = $3 + 0; p = $6 + 0
         if (!(s < p / 3)) { print "FAIL: surrogate error " s " is not below a third of persistence " p; exit 1 } }
       END { if (!found) { print "FAIL: no error line"; exit 1 } }' "$fsdp_tmp/out" || exit 1
done
exit 0
