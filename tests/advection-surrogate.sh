#!/bin/sh
# The in-situ convolutional example (TorchFort's pattern): a row-decomposed
# 2-D advection solver hands its snapshot pairs to the ranks with an
# all-to-all and trains a circular 3x3 convolution through the libfsdp API,
# at W = 4 with hybrid sharding over 2 emulated nodes; on an unseen initial
# condition the surrogate's error must be below a fifth of doing nothing's,
# and run in place of the solver for 20 steps from another one, its drift
# from the solver must stay below half of persistence's at every step printed.
# Its training pairs, written with -samples (parallel HDF5), are the solver's
# states in order, and train the same model again offline with fsdp-train, to
# the same losses.
. "${srcdir:-.}/tests/testlib.sh"
prog="$top_builddir/examples/advection-surrogate"
samples=
[ "$(fsdp_config_has HDF5)" = no ] || samples="-samples $fsdp_tmp/pairs.h5"
fsdp_run 4 "$prog" -rounds 20 -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2 $samples >"$fsdp_tmp/out" 2>&1 ||
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
if [ -z "$samples" ]; then
  echo "no -samples here: this build has no HDF5"
  if fsdp_run 2 "$prog" -rounds 1 -grid 8 -samples "$fsdp_tmp/pairs.h5" >"$fsdp_tmp/nohdf5" 2>&1; then
    cat "$fsdp_tmp/nohdf5"; echo "FAIL: -samples ran without HDF5"; exit 1
  fi
  expect_grep "advection-surrogate: -samples $fsdp_tmp/pairs.h5: libfsdp was built without HDF5" "$fsdp_tmp/nohdf5"
else
  # The file: 20 rounds x 4 steps x 4 ranks are 320 pairs, row k W + q rank q's k-th, so each round's 16 rows
  # are consecutive solver states: every y is the next row's x, bit for bit.
  expect_grep "^training pairs written to $fsdp_tmp/pairs.h5: /x and /y \\[320, 1, 32, 32\\]" "$fsdp_tmp/out"
  "$top_builddir/tests/h5data" chain "$fsdp_tmp/pairs.h5" 16 || { echo "FAIL: the pairs are not in the solver's order"; exit 1; }
  # fsdp-train at W = 4 hybrid takes rows 4s to 4s + 3 at step s, one per rank, as the example trained on them;
  # from the same default initialization and AdamW settings it is the same training, so its losses at steps 40
  # and 80 are the example's at rounds 10 and 20 (printed to 5 digits: within 1e-4 relative).
  fsdp_run 4 "$top_builddir/tools/fsdp-train" -model "cnn:grid=32x32,in=1,out=1,padding=circular" \
    -data "$fsdp_tmp/pairs.h5" -batch 4 -steps 80 -lr 3e-2 -weight_decay 0 -fsdp_sharding_strategy hybrid \
    -fsdp_ranks_per_node 2 -log_every 0 -loss_log "$fsdp_tmp/offline.csv" >"$fsdp_tmp/offline.out" 2>&1 ||
    { cat "$fsdp_tmp/offline.out"; echo "FAIL: fsdp-train on the example's pairs"; exit 1; }
  for r in 10 20; do
    want=$(sed -n "s|^round  $r/20  training loss ||p" "$fsdp_tmp/out")
    awk -F, -v s=$((4 * r)) -v want="$want" -v r=$r '$1 == s { got = $2 }
      END { d = got - want; if (d < 0) d = -d
            if (want == "" || got == "" || d > 1e-4 * want) {
              print "FAIL: fsdp-train on the pairs: loss " got " at step " s ", the example'"'"'s round " r ": " want; exit 1 } }' \
      "$fsdp_tmp/offline.csv" || exit 1
  done
  echo "offline: fsdp-train on the example's pairs gives its training losses ($want at step 80)"
  # A file that cannot be created stops the run before it trains.
  if fsdp_run 2 "$prog" -rounds 1 -grid 8 -samples "$fsdp_tmp/no/such/dir/pairs.h5" >"$fsdp_tmp/nofile" 2>&1; then
    cat "$fsdp_tmp/nofile"; echo "FAIL: -samples into a missing directory succeeded"; exit 1
  fi
  expect_grep "advection-surrogate: -samples $fsdp_tmp/no/such/dir/pairs.h5: HDF5 cannot create the file" "$fsdp_tmp/nofile"
  if grep -q "^round\|^surrogate error" "$fsdp_tmp/nofile"; then
    cat "$fsdp_tmp/nofile"; echo "FAIL: -samples into a missing directory: the run trained first"; exit 1
  fi
fi
# A grid the ranks do not divide is refused before anything starts.
if fsdp_run 4 "$prog" -grid 30 >"$fsdp_tmp/bad" 2>&1; then
  cat "$fsdp_tmp/bad"; echo "FAIL: a 30x30 grid ran on 4 ranks"; exit 1
fi
expect_grep "advection-surrogate: -rounds 30 must be >= 1, and -grid 30 >= 3 a multiple of the 4 ranks" "$fsdp_tmp/bad"
