#!/bin/sh
# Checkpoints as a batch job uses them, through fsdp-train: a run stopped
# and resumed writes the same loss log, bit for bit, as one that never
# stopped (same W and strategy), and one within fp32 rounding at another W;
# SIGUSR1 and SIGTERM save at a step boundary and exit cleanly; a rank
# killed with SIGKILL in the middle of a save leaves the previous checkpoint
# loadable, and the next save removes the partial file; -export writes a
# parameters-only file that -init reads and -resume refuses; h5dump shows
# the documented structure.
. "${srcdir:-.}/tests/testlib.sh"
train="$top_builddir/tools/fsdp-train"
common="-model mlp:in=6,hidden=12,depth=2,out=2 -data synthetic:n=128,seed=5 -batch 8 -lr 0.01 -log_every 0"
rc=0
"$top_builddir/tests/h5data" >/dev/null 2>&1 || rc=$?
if [ $rc -eq 77 ]; then
  fsdp_run 1 "$train" $common -steps 1 -checkpoint "$fsdp_tmp/ck.h5" >"$fsdp_tmp/nohdf5.out" 2>&1 &&
    { echo "FAIL: -checkpoint without HDF5 succeeded"; exit 1; }
  expect_grep "fsdp-train: -checkpoint .*: this libfsdp was built without HDF5" "$fsdp_tmp/nohdf5.out"
  echo "built without HDF5: no checkpoints"
  exit 77
fi
for tool in h5dump h5ls; do
  command -v $tool >/dev/null || { echo "FAIL: $tool (Debian's hdf5-tools) is needed"; exit 1; }
done

# run NAME NP ARGS...: train, output in $fsdp_tmp/NAME.out
run() {
  name=$1 np=$2
  shift 2
  fsdp_run "$np" "$train" $common "$@" >"$fsdp_tmp/$name.out" 2>&1 ||
    { cat "$fsdp_tmp/$name.out"; echo "FAIL: fsdp-train $name exited with an error"; exit 1; }
}

# ------------------------------------------------------------------ resume
ck="$fsdp_tmp/ck.h5"
run whole 2 -steps 12 -loss_log "$fsdp_tmp/whole.csv"
# The stopped run checks every collective call (-fsdp_debug_collectives): it
# must not change a bit, nor stop a run whose ranks agree.
run first 2 -steps 5 -loss_log "$fsdp_tmp/resumed.csv" -checkpoint "$ck" -fsdp_debug_collectives
run second 2 -steps 12 -loss_log "$fsdp_tmp/resumed.csv" -resume "$ck" -fsdp_debug_collectives
cmp "$fsdp_tmp/whole.csv" "$fsdp_tmp/resumed.csv" ||
  { diff "$fsdp_tmp/whole.csv" "$fsdp_tmp/resumed.csv"; echo "FAIL: resuming at the same W changed the loss log"; exit 1; }
# At W = 1, and at W = 4 hybrid over two emulated nodes: fp32 rounding apart.
for w in 1 4; do
  cp "$fsdp_tmp/whole.csv" "$fsdp_tmp/w$w.csv"
  layout=
  [ $w -eq 4 ] && layout="-fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2"
  run "w$w" $w -steps 12 -loss_log "$fsdp_tmp/w$w.csv" -resume "$ck" $layout
  awk -F, 'NR == FNR { want[$1] = $2; next } FNR > 1 {
      n++; d = $2 - want[$1]; if (d < 0) d = -d
      if (d > 1e-5 * (want[$1] < 0 ? -want[$1] : want[$1])) { print "FAIL: step " $1 ": loss " $2 ", expected " want[$1]; bad = 1 } }
    END { if (n != 12) { print "FAIL: " n " steps"; bad = 1 }; exit bad }' "$fsdp_tmp/whole.csv" "$fsdp_tmp/w$w.csv" ||
    { echo "FAIL: resuming at W = $w"; exit 1; }
done

# ------------------------------------------------------------------ signals
# A long run, stopped by a signal once it has trained a few steps.
for sig in USR1 TERM; do
  log="$fsdp_tmp/sig$sig.csv"
  out="$fsdp_tmp/sig$sig.out"
  rm -f "$log"
  fsdp_run 2 "$train" $common -steps 1000000000 -loss_log "$log" -checkpoint "$fsdp_tmp/sig.h5" >"$out" 2>&1 &
  job=$!
  i=0
  while ! { [ -f "$log" ] && [ "$(wc -l <"$log")" -ge 4 ]; } && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  victim=$(rank_pid "$log")
  [ -n "$victim" ] || { cat "$out"; echo "FAIL: SIG$sig: no rank to signal"; exit 1; }
  kill -$sig "$victim" # one rank only: the ranks agree at the step boundary
  rc=0
  wait $job || rc=$?
  [ $rc -eq 0 ] || { cat "$out"; echo "FAIL: SIG$sig: fsdp-train exited with $rc"; exit 1; }
  expect_grep "^fsdp-train: SIG$sig after step [0-9]*: checkpoint written; exiting" "$out"
  step=$(sed -n "s/^fsdp-train: SIG$sig after step \([0-9]*\):.*/\1/p" "$out")
  last=$(tail -n 1 "$log" | cut -d, -f1)
  saved=$(h5dump -a /step "$fsdp_tmp/sig.h5" | sed -n 's/^ *(0): //p')
  [ "$step" = "$last" ] && [ "$step" = "$saved" ] ||
    { echo "FAIL: SIG$sig: stopped after step $step, the log ends at $last, the checkpoint has step $saved"; exit 1; }
done

# ------------------------------------------------------------------ a crash in the middle of a save
# The save at step 6 pauses after the parameters (the test hook); one rank is then killed.
export_file="$fsdp_tmp/final.h5"
FSDP_TEST_CHECKPOINT_PAUSE=60 fsdp_run 2 "$train" $common -steps 12 -resume "$ck" -checkpoint "$ck" \
  -checkpoint_every 3 >"$fsdp_tmp/crash.out" 2>&1 &
job=$!
i=0
while [ ! -e "$ck.partial.paused" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$ck.partial.paused" ] || { cat "$fsdp_tmp/crash.out"; echo "FAIL: the save never paused"; exit 1; }
victim=$(rank_pid "$ck -checkpoint_every 3")
[ -n "$victim" ] || { echo "FAIL: no rank to kill"; exit 1; }
kill -KILL "$victim"
wait $job && { echo "FAIL: the job survived SIGKILL of a rank"; exit 1; }
[ -e "$ck.partial" ] || { echo "FAIL: no partial file left by the killed save"; exit 1; }
# The previous checkpoint (step 5) is intact and loads; the next save clears the leftovers.
run after 2 -steps 6 -resume "$ck" -checkpoint "$ck" -export "$export_file" -log_every 1
expect_grep "resuming from .*ck.h5 at step 5, batch 5" "$fsdp_tmp/after.out"
expect_grep "ck.h5.partial', left by an interrupted save" "$fsdp_tmp/after.out"
[ ! -e "$ck.partial" ] || { echo "FAIL: the next save left $ck.partial"; exit 1; }
rm -f "$ck.partial.paused"

# ------------------------------------------------------------------ export, -init, and the structure
h5ls "$export_file" >"$fsdp_tmp/export.ls"
expect_grep "^params *Group" "$fsdp_tmp/export.ls"
if grep -q "^optim" "$fsdp_tmp/export.ls"; then echo "FAIL: -export wrote optimizer state"; exit 1; fi
run init 2 -steps 2 -init "$export_file"
fsdp_run 2 "$train" $common -steps 2 -resume "$export_file" >"$fsdp_tmp/noopt.out" 2>&1 &&
  { echo "FAIL: -resume accepted a parameters-only file"; exit 1; }
expect_grep "has parameters only (no /optim): load it without an optimizer" "$fsdp_tmp/noopt.out"

h5dump -H "$ck" >"$fsdp_tmp/ck.dump"
for attr in format format_version library_version creation_time step data_cursor rng_state world_size \
  sharding_strategy sharding_factor shard_group_layout rank_node_shard_replica; do
  expect_grep "^   ATTRIBUTE \"$attr\"" "$fsdp_tmp/ck.dump"
done
expect_grep '^   GROUP "params"' "$fsdp_tmp/ck.dump"
expect_grep '^      DATASET "blocks.1.fc.weight"' "$fsdp_tmp/ck.dump"
expect_grep 'DATASPACE  SIMPLE { ( 12, 12 ) / ( 12, 12 ) }' "$fsdp_tmp/ck.dump"
expect_grep '^         ATTRIBUTE "crc32c"' "$fsdp_tmp/ck.dump"
expect_grep '^   GROUP "optim"' "$fsdp_tmp/ck.dump"
for g in exp_avg exp_avg_sq; do expect_grep "^      GROUP \"$g\"" "$fsdp_tmp/ck.dump"; done
for attr in type step lr betas eps weight_decay; do expect_grep "^      ATTRIBUTE \"$attr\"" "$fsdp_tmp/ck.dump"; done
# A user reads a parameter as a plain array, without libfsdp.
h5dump -d /params/head.weight "$ck" >"$fsdp_tmp/head.dump"
expect_grep 'DATATYPE  H5T_IEEE_F32LE' "$fsdp_tmp/head.dump"
expect_grep 'DATASPACE  SIMPLE { ( 2, 12 ) / ( 2, 12 ) }' "$fsdp_tmp/head.dump"
exit 0
