#!/bin/sh
# The in-situ convolutional example (TorchFort's pattern): a row-decomposed
# 2-D advection solver hands its snapshot pairs to the ranks with an
# all-to-all and trains a circular 3x3 convolution through the libfsdp API,
# at W = 4 with hybrid sharding over 2 emulated nodes; on an unseen initial
# condition the surrogate's error must be below a fifth of doing nothing's,
# and run in place of the solver for 20 steps from another one, its drift
# from the solver must stay below half of persistence's at every step printed.
. "${srcdir:-.}/tests/testlib.sh"
prog="$top_builddir/examples/advection-surrogate"
fsdp_run 4 "$prog" -rounds 20 -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2 >"$fsdp_tmp/out" 2>&1 ||
  { cat "$fsdp_tmp/out"; echo "FAIL: advection-surrogate on 4 ranks"; exit 1; }
cat "$fsdp_tmp/out"
expect_grep "^round  20/20  training loss " "$fsdp_tmp/out"
awk '/^surrogate error/ { found = 1; s = $3 + 0; p = $6 + 0
       if (!(s < p / 5)) { print "FAIL: surrogate error " s " is not below a fifth of persistence " p; exit 1 } }
     END { if (!found) { print "FAIL: no error line"; exit 1 } }' "$fsdp_tmp/out" || exit 1
awk '/^rollout step/ { n++; t = $3 + 0; s = $6 + 0; p = $9 + 0
       if (!(s < p / 2)) { print "FAIL: rollout step " t ": surrogate error " s " is not below half of persistence " p; bad = 1 } }
     END { if (n != 5 || t != 20) { print "FAIL: " n " rollout lines, the last at step " t ", not 5 up to step 20"; bad = 1 }
           exit bad }' "$fsdp_tmp/out" || exit 1
# A grid the ranks do not divide is refused before anything starts.
if fsdp_run 4 "$prog" -grid 30 >"$fsdp_tmp/bad" 2>&1; then
  cat "$fsdp_tmp/bad"; echo "FAIL: a 30x30 grid ran on 4 ranks"; exit 1
fi
expect_grep "advection-surrogate: -rounds 30 must be >= 1, and -grid 30 >= 3 a multiple of the 4 ranks" "$fsdp_tmp/bad"
