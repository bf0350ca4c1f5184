#!/bin/sh
# fsdp-train never loses work or trains on nonsense: outputs that cannot be
# written are refused before the first step, with nothing written; NaN in the
# data, a diverging loss and a NaN checkpoint each stop the job with a named
# error and no checkpoint of that state; ranks given different fsdp-train
# options (an MPMD launch) fail in seconds, naming the option; a resume from
# a damaged checkpoint leaves the loss log as it was; a signal during
# start-up ends the job cleanly.
. "${srcdir:-.}/tests/testlib.sh"
train="$top_builddir/tools/fsdp-train"
h5data="$top_builddir/tests/h5data"
model="mlp:in=4,hidden=8,depth=1,out=2"
common="-model $model -data synthetic:n=64 -batch 8 -steps 3 -log_every 0"
FSDP_TEST_TIMEOUT=60 # everything here ends in seconds; a hang is a failure

# The jobs' files go in $w; their output in $fsdp_tmp.
w="$fsdp_tmp/w"
mkdir "$w" || exit 1

# ------------------------------------------------------------------ outputs, before the first step
refused no_dir "fsdp-train: -loss_log '$w/none/run.csv': cannot create it: No such file or directory" 2 \
  $common -loss_log "$w/none/run.csv"
# Checkpoints and exports need HDF5 (without it, fsdp-train refuses them at once).
if grep -q '^#define FSDP_HAVE_HDF5 1' "$top_builddir/src/include/fsdp_config.h"; then
  mkdir "$w/dir.h5"
  refused unwritable "fsdp-train: -checkpoint '/proc/fsdp-test.h5': cannot create it: " 2 $common -checkpoint /proc/fsdp-test.h5
  refused directory "fsdp-train: -checkpoint '$w/dir.h5': is a directory" 2 $common -checkpoint "$w/dir.h5"
  [ ! -e "$w/dir.h5.partial" ] || { echo "FAIL: a refused -checkpoint DIR left DIR.partial"; exit 1; }
  refused export_dir "fsdp-train: -export '$w/dir.h5': is a directory" 1 $common -export "$w/dir.h5"
  refused same_outputs "fsdp-train: -checkpoint '$w/x' and -loss_log '$w/x' are the same file" 1 \
    $common -checkpoint "$w/x" -loss_log "$w/x"
  mkdir "$w/ck.h5.1"
  refused rotation "'$w/ck.h5.1', where -fsdp_checkpoint_keep 3 keeps an older -checkpoint of '$w/ck.h5', is a directory" 1 \
    $common -checkpoint "$w/ck.h5" -fsdp_checkpoint_keep 3
  rmdir "$w/ck.h5.1"
fi

# ------------------------------------------------------------------ ranks given different options
# mpmd NAME PATTERN ARGS_RANK0 -- ARGS_RANK1
mpmd() {
  name=$1 pattern=$2 a=$3 b=$4
  if timeout 60 $MPIEXEC $MPIEXEC_FLAGS -n 1 "$train" $a : -n 1 "$train" $b >"$fsdp_tmp/$name.err" 2>&1; then
    cat "$fsdp_tmp/$name.err"; echo "FAIL: $name: an MPMD job with different options ran"; exit 1
  fi
  rc=$?
  [ $rc -ne 124 ] || { cat "$fsdp_tmp/$name.err"; echo "FAIL: $name: hung"; exit 1; }
  expect_grep "$pattern" "$fsdp_tmp/$name.err"
}
mpmd mpmd_batch "option -batch differs across ranks: rank 0 has 8, rank 1 has 16" "$common" "$common -batch 16"
mpmd mpmd_steps "option -steps differs across ranks: rank 0 has 3, rank 1 has 4" "$common" "$common -steps 4"
mpmd mpmd_lr "option -lr differs across ranks: rank 0 has 0.001 (the default), rank 1 has 0.002" "$common" "$common -lr 0.002"
mpmd mpmd_checkpoint "option -checkpoint differs across ranks: rank 0 has '' (the default), rank 1 has '$w/m.h5'" \
  "$common" "$common -checkpoint $w/m.h5"
[ ! -e "$w/m.h5" ] || { echo "FAIL: the MPMD job wrote a checkpoint"; exit 1; }

# ------------------------------------------------------------------ non-finite values
"$h5data" data "$w/nan.h5" 64 4 2 nan=5,3
rc=$?
if [ $rc -eq 77 ]; then
  echo "built without HDF5: NaN data, checkpoints of NaN and damaged checkpoints not tested"
  exit 0
fi
[ $rc -eq 0 ] || { echo "FAIL: h5data"; exit 1; }
refused nan_data "fsdp-train: -data $w/nan.h5: /x\[5, 3\] is nan: training data must be finite" 2 \
  -model $model -data "$w/nan.h5" -batch 8 -steps 3 -log_every 0
# With the check off, the job trains on and exits 0 (here a ReLU zeroes the NaN row).
fsdp_run 2 "$train" -model $model -data "$w/nan.h5" -batch 8 -steps 3 -log_every 3 -fsdp_check_finite false \
  >"$fsdp_tmp/nan_off.out" 2>&1 || { cat "$fsdp_tmp/nan_off.out"; echo "FAIL: -fsdp_check_finite false did not train"; exit 1; }
expect_grep "^step      3/3  loss" "$fsdp_tmp/nan_off.out"

# A diverging run stops at the first non-finite loss: no update of that step, no checkpoint of it.
if fsdp_run 2 "$train" $common -steps 50 -optimizer sgd -lr 1e30 -checkpoint "$w/div.h5" \
  -loss_log "$w/div.csv" >"$fsdp_tmp/div.err" 2>&1; then
  cat "$fsdp_tmp/div.err"; echo "FAIL: -lr 1e30 trained to the end"; exit 1
fi
expect_grep "fsdp-train: step [0-9]*: the loss is -\{0,1\}\(nan\|inf\): training stopped before this step's update" "$fsdp_tmp/div.err"
[ ! -e "$w/div.h5" ] || { echo "FAIL: a diverged run wrote a checkpoint"; exit 1; }
stopped=$(sed -n "s/.*fsdp-train: step \([0-9]*\): the loss is.*/\1/p" "$fsdp_tmp/div.err" | head -n 1)
rows=$(($(wc -l <"$w/div.csv") - 1))
[ "$rows" -eq $((stopped - 1)) ] || { echo "FAIL: stopped at step $stopped, but the loss log has $rows rows"; exit 1; }
awk -F, 'NR > 1 && ($2 == "nan" || $2 == "-nan" || $2 == "inf") { exit 1 }' "$w/div.csv" ||
  { echo "FAIL: the loss log holds a non-finite loss"; exit 1; }

# A checkpoint of NaN state (written with the check off) is refused on load, naming the dataset.
fsdp_run 2 "$train" -model $model -data "$w/nan.h5" -batch 8 -steps 3 -log_every 0 -fsdp_check_finite false \
  -checkpoint "$w/nanck.h5" >"$fsdp_tmp/nanck.out" 2>&1 || { cat "$fsdp_tmp/nanck.out"; exit 1; }
refused nan_resume "FSDPContextLoad: '$w/nanck.h5': /params/[a-z0-9.]*\[[0-9]*\] is -\{0,1\}nan: the file holds non-finite values" 2 \
  $common -steps 6 -resume "$w/nanck.h5"

# ------------------------------------------------------------------ a damaged checkpoint keeps the loss log
fsdp_run 2 "$train" $common -steps 4 -checkpoint "$w/good.h5" -loss_log "$w/keep.csv" \
  >"$fsdp_tmp/good.out" 2>&1 || { cat "$fsdp_tmp/good.out"; exit 1; }
cp "$w/keep.csv" "$w/keep.before"
# The root attribute step, damaged where HDF5 stores it (the reproduction: it resumed at step 0).
cp "$w/good.h5" "$w/bad.h5"
printf '\001' | dd of="$w/bad.h5" bs=1 seek=600 conv=notrunc 2>/dev/null
refused damaged_resume "'$w/bad.h5' is damaged" 2 $common -steps 8 -resume "$w/bad.h5" -loss_log "$w/keep.csv"
cmp -s "$w/keep.csv" "$w/keep.before" || { echo "FAIL: a refused resume changed the loss log"; exit 1; }

# ------------------------------------------------------------------ a signal during start-up
# The hook pauses every rank after MPI start-up; the handlers were installed before it.
marker="$fsdp_tmp/startup"
FSDP_TEST_STARTUP_PAUSE=30 FSDP_TEST_STARTUP_MARKER="$marker" fsdp_run 2 "$train" $common -steps 5 \
  -checkpoint "$w/sig.h5" >"$fsdp_tmp/startup.out" 2>&1 &
job=$!
i=0
while [ ! -e "$marker" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$marker" ] || { cat "$fsdp_tmp/startup.out"; echo "FAIL: start-up never paused"; exit 1; }
# Every rank, as Slurm's scancel --signal and --signal=SIG@TIME do.
victims=$(for d in /proc/[0-9]*; do
  cmd=$( (tr '\0' ' ' <"$d/cmdline") 2>/dev/null) || continue
  case ${cmd%% *} in *fsdp-train) case $cmd in *"$w/sig.h5"*) echo "${d#/proc/}" ;; esac ;; esac
done)
[ "$(echo $victims | wc -w)" -eq 2 ] || { echo "FAIL: expected 2 ranks to signal, found '$victims'"; exit 1; }
t0=$(date +%s)
kill -TERM $victims
rc=0
wait $job || rc=$?
t1=$(date +%s)
[ $rc -eq 0 ] || { cat "$fsdp_tmp/startup.out"; echo "FAIL: SIGTERM during start-up: exit $rc"; exit 1; }
[ $((t1 - t0)) -lt 20 ] || { echo "FAIL: SIGTERM during start-up took $((t1 - t0)) s"; exit 1; }
expect_grep "^fsdp-train: SIGTERM during start-up, before step 1: exiting; nothing to save" "$fsdp_tmp/startup.out"
[ ! -e "$w/sig.h5" ] || { echo "FAIL: a job stopped in start-up wrote a checkpoint"; exit 1; }
exit 0
