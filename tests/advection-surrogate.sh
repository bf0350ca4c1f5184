#!/bin/sh
# The in-situ convolutional example (TorchFort's pattern): a row-decomposed
# 2-D advection solver hands its snapshot pairs to the ranks with an
# all-to-all and trains a circular 3x3 convolution through the libfsdp API,
# at W = 4 with hybrid sharding over 2 emulated nodes; on an unseen initial
# condition the surrogate's error must be below a fifth of doing nothing's.
. "${srcdir:-.}/tests/testlib.sh"
prog="$top_builddir/examples/advection-surrogate"
fsdp_run 4 "$prog" -rounds 20 -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2 >"$fsdp_tmp/out" 2>&1 ||
  { cat "$fsdp_tmp/out"; echo "FAIL: advection-surrogate on 4 ranks"; exit 1; }
cat "$fsdp_tmp/out"
expect_grep "^round  20/20  training loss " "$fsdp_tmp/out"
awk '/^surrogate error/ { found = 1; s = $3 + 0; p = $6 + 0
       if (!(s < p / 5)) { print "FAIL: surrogate error " s " is not below a fifth of persistence " p; exit 1 } }
     END { if (!found) { print "FAIL: no error line"; exit 1 } }' "$fsdp_tmp/out" || exit 1
# A grid the ranks do not divide is refused before anything starts.
if fsdp_run 4 "$prog" -grid 30 >"$fsdp_tmp/bad" 2>&1; then
  cat "$fsdp_tmp/bad"; echo "FAIL: a 30x30 grid ran on 4 ranks"; exit 1
fi
expect_grep "advection-surrogate: -rounds 30 must be >= 1, and -grid 30 >= 3 a multiple of the 4 ranks" "$fsdp_tmp/bad"
