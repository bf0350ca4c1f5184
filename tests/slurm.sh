#!/bin/sh
# Slurm for real (doc/slurm.md): a private two-node cluster (tests/slurmlib.sh:
# munged, slurmctld, slurmd -N n1 and -N n2 on 127.0.0.1) runs
#   - fsdp-info under srun -N 2 -n 4: the Slurm ids, and the hybrid layout of
#     Slurm's two nodes, with nodes from MPI and from SLURM_NODEID;
#   - examples/slurm/fsdp-train.sbatch unchanged (parameters through the
#     environment), launched by srun and by mpiexec: each loss log is
#     byte-identical to the same job under mpiexec outside Slurm;
#   - pre-emption: scancel --signal=USR1 while it trains makes it save at the
#     next step and exit 0, the script requeues the job, and the restarted
#     run resumes and ends with the uninterrupted loss log;
#   - a job whose ranks are killed while it saves (SIGSTOP inside the save,
#     then SIGKILL: scancel's SIGCONT and SIGTERM would let the save finish)
#     leaves the previous checkpoint loadable, and the next run resumes from it.
# A job that can never start fails the test at once, naming Slurm's reason
# (tests/slurmlib.sh): checked here with a held job and a drained node.
# SKIP (77) only when Slurm is not installed or the machine has 1 CPU (each
# node runs 2 tasks).  Every daemon stops at exit.
. "${srcdir:-.}/tests/testlib.sh"
. "${srcdir:-.}/tests/slurmlib.sh"

slurm_start
top=$(cd "$top_builddir" && pwd)
src=$(cd "${srcdir:-.}" && pwd)
train="$top/tools/fsdp-train"
script="$src/examples/slurm/fsdp-train.sbatch"
export OPENBLAS_NUM_THREADS=1

# ---- fsdp-info: the Slurm ids and Slurm's nodes
for source in mpi slurm; do
  slurm_srun -N 2 -n 4 --mpi=pmi2 "$top/tools/fsdp-info" -fsdp_node_source $source \
    >"$fsdp_tmp/info" 2>&1 || { cat "$fsdp_tmp/info"; slurm_log_tail; echo "FAIL: srun fsdp-info"; exit 1; }
  expect_grep "^ShardGroup: 4 ranks on 2 nodes" "$fsdp_tmp/info"
  expect_grep "^  Slurm: job [0-9][0-9]*, step [0-9][0-9]*, nodes n\[1-2\]" "$fsdp_tmp/info"
  expect_grep "^  sharding factor F = 2 (shard domain node)" "$fsdp_tmp/info"
  expect_grep "^    0: 0,1$" "$fsdp_tmp/info"
  expect_grep "^    1: 2,3$" "$fsdp_tmp/info"
done
expect_grep "nodes of this group from SLURM_NODEID" "$fsdp_tmp/info"
echo "fsdp-info under srun: Slurm's ids, 2 nodes x 2 tasks in shard groups {0,1} {2,3}"

# ---- a job that cannot start fails at once, with its reason and the nodes'
# configuration: a held job (a reason that never clears), and a job that
# needs a drained node (one that could, but does not while nothing else runs)
t0=$(date +%s)
if slurm_srun -N 2 -n 4 --hold true >"$fsdp_tmp/held" 2>&1; then
  cat "$fsdp_tmp/held"; echo "FAIL: a held srun job ran"; exit 1
fi
expect_grep "^FAIL: job [0-9]* cannot be scheduled: PENDING, Reason=JobHeldUser" "$fsdp_tmp/held"
expect_grep "^  slurm.conf: NodeName=n1 .* CPUs=$slurm_cpus " "$fsdp_tmp/held"
scontrol update nodename=n2 state=drain reason="tests/slurm.sh"
if (FSDP_SLURM_PENDING=2 && slurm_srun -N 2 -n 4 true) >"$fsdp_tmp/drained" 2>&1; then
  cat "$fsdp_tmp/drained"; echo "FAIL: an srun job ran on a drained node"; exit 1
fi
expect_grep "^FAIL: job [0-9]* cannot be scheduled: PENDING, Reason=" "$fsdp_tmp/drained"
expect_grep "^  node n2: drained, $slurm_cpus CPUs, reason tests/slurm.sh" "$fsdp_tmp/drained"
scontrol update nodename=n2 state=resume
t=$(($(date +%s) - t0))
[ $t -le 30 ] || { echo "FAIL: the two unschedulable jobs took $t s to fail"; exit 1; }
echo "unschedulable jobs: a held one and one on a drained node failed in $t s, naming the reason and the nodes"

# ---- the batch script, unchanged, against mpiexec outside Slurm (with two
# emulated nodes of 2 ranks: the same hybrid layout, F = 2)
model="mlp:in=8,hidden=16,depth=2,out=2"
steps=40
common="STEPS=$steps CHECKPOINT_EVERY=10 MODEL=$model BATCH=16 FSDP_TRAIN=$train"
fsdp_run 4 "$train" -model "$model" -data synthetic -steps $steps -batch 16 -fsdp_sharding_strategy hybrid \
  -fsdp_ranks_per_node 2 -loss_log "$fsdp_tmp/reference.csv" >"$fsdp_tmp/reference.out" 2>&1 ||
  { cat "$fsdp_tmp/reference.out"; echo "FAIL: the reference run"; exit 1; }

# submit_script SCRIPT DIR [VAR=VALUE...]: the job id of SCRIPT run in DIR
# with these variables (through the environment: --export=NAME=VALUE splits
# at commas, which model specs have).
submit_script() {
  sbatch_script=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  env "$@" RUN_DIR="$dir" sbatch --parsable --export=ALL --chdir="$dir" --output="$dir/job.out" "$sbatch_script" ||
    { slurm_log_tail; exit 1; }
}
submit() { submit_script "$script" "$@"; }
# need_job JOB: an id, or the submission failed (an exit in $(...) leaves only the subshell)
need_job() { [ -n "$1" ] || { echo "FAIL: sbatch returned no job id"; slurm_log_tail; exit 1; }; }

# wait_completed JOB DIR: the job ends COMPLETED, or the test fails.
wait_completed() {
  slurm_wait "$1" COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY
  [ "$(slurm_state "$1")" = COMPLETED ] || { cat "$2/job.out"; slurm_log_tail; echo "FAIL: job $1 ended $(slurm_state "$1")"; exit 1; }
}

for launcher in srun mpiexec; do
  run="$fsdp_tmp/$launcher"
  job=$(submit "$run" $common LAUNCHER=$launcher)
  need_job "$job"
  wait_completed "$job" "$run"
  cmp "$run/loss.csv" "$fsdp_tmp/reference.csv" ||
    { cat "$run/job.out"; echo "FAIL: the sbatch ($launcher) loss log differs from mpiexec's"; exit 1; }
  echo "sbatch, $launcher: loss log byte-identical to mpiexec's ($steps steps)"
done

# ---- the in-situ examples' scripts: C, and Fortran (which checkpoints), as under mpiexec
fsdp_run 4 "$top/examples/heat-surrogate" -rounds 10 -verbose -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2 \
  >"$fsdp_tmp/heat.ref" 2>&1 || { cat "$fsdp_tmp/heat.ref"; exit 1; }
run="$fsdp_tmp/heat"
job=$(submit_script "$src/examples/slurm/heat-surrogate.sbatch" "$run" HEAT_SURROGATE="$top/examples/heat-surrogate" \
  ROUNDS=10 ARGS="-fsdp_sharding_strategy hybrid -verbose")
need_job "$job"
wait_completed "$job" "$run"
cmp "$run/job.out" "$fsdp_tmp/heat.ref" || { diff "$run/job.out" "$fsdp_tmp/heat.ref"; echo "FAIL: heat-surrogate.sbatch"; exit 1; }
echo "heat-surrogate.sbatch: the output of the same job under mpiexec, every round's loss to 17 digits"
if [ -x "$top/examples/fortran/heat_surrogate" ]; then
  run="$fsdp_tmp/heat-f"
  job=$(submit_script "$src/examples/slurm/heat-surrogate-fortran.sbatch" "$run" \
    HEAT_SURROGATE="$top/examples/fortran/heat_surrogate" ROUNDS=10 CHECKPOINT_EVERY=5 ARGS="-fsdp_sharding_strategy hybrid -verbose")
  need_job "$job"
  wait_completed "$job" "$run"
  grep -v '^heat-surrogate-fortran.sbatch: ' "$run/job.out" >"$fsdp_tmp/heat-f.out"
  cmp "$fsdp_tmp/heat-f.out" "$fsdp_tmp/heat.ref" ||
    { diff "$fsdp_tmp/heat-f.out" "$fsdp_tmp/heat.ref"; echo "FAIL: heat-surrogate-fortran.sbatch"; exit 1; }
  [ -f "$run/heat-surrogate.h5" ] || { echo "FAIL: heat-surrogate-fortran.sbatch wrote no checkpoint"; exit 1; }
  echo "heat-surrogate-fortran.sbatch: the C example's output, digit for digit, and a checkpoint"
else
  echo "note: built without Fortran: heat-surrogate-fortran.sbatch not run"
fi

# ---- pre-emption: SIGUSR1 from scancel, a save, a requeue, a resume
# The job must still train when the signal comes: 100 steps of about 1.5 ms
# were over before scancel's signal reached them (CI, once).
steps=4000
common="STEPS=$steps CHECKPOINT_EVERY=1000000 MODEL=$model BATCH=16 FSDP_TRAIN=$train"
fsdp_run 4 "$train" -model "$model" -data synthetic -steps $steps -batch 16 -fsdp_sharding_strategy hybrid \
  -fsdp_ranks_per_node 2 -loss_log "$fsdp_tmp/reference.csv" >"$fsdp_tmp/reference.out" 2>&1 || exit 1
run="$fsdp_tmp/preempt"
job=$(submit "$run" $common)
need_job "$job"
slurm_wait "$job" RUNNING
n=0
until [ "$(slurm_rows "$run/loss.csv")" -ge 10 ]; do
  n=$((n + 1))
  [ $n -lt $((FSDP_TEST_TIMEOUT * 5)) ] || { cat "$run/job.out"; echo "FAIL: the job never trained"; exit 1; }
  sleep 0.2
done
scancel --signal=USR1 "$job"
slurm_wait "$job" COMPLETED FAILED CANCELLED
# The script requeued itself: the same job runs again and resumes.
n=0
until [ "$(slurm_restarts "$job")" -ge 1 ] && [ "$(slurm_state "$job")" = COMPLETED ]; do
  slurm_check "$job"
  n=$((n + 1))
  [ $n -lt $((FSDP_TEST_TIMEOUT * 2)) ] || { cat "$run/job.out"; scontrol show job "$job"; echo "FAIL: the job was not requeued and completed"; exit 1; }
  sleep 0.5
done
cat "$run/job.out"
expect_grep "SIGUSR1 after step [0-9]*: checkpoint written; exiting" "$run/job.out"
expect_grep "requeueing job $job" "$run/job.out"
expect_grep "run 1 on n\[1-2\], 4 tasks, resuming from" "$run/job.out"
cmp "$run/loss.csv" "$fsdp_tmp/reference.csv" ||
  { echo "FAIL: the pre-empted and resumed job's loss log differs from an uninterrupted run's"; exit 1; }
echo "pre-emption: USR1, checkpoint, requeue, resume: loss log byte-identical to the uninterrupted run's"

# ---- the time limit: --signal=USR1@60 with --time=2.  slurmctld checks
# time limits every 30 s and signals at the first check that finds the job
# within sig_time + 30 s of its end (sbatch(1): "up to 60 seconds earlier"),
# so here between 30 and 60 s in.  The job saves, exits 0 and requeues
# itself, and the next run resumes.  (USR1@100 came 4 s in, on a machine
# busy with two other builds' tests, and killed a CUDA build's ranks while
# they were still loading their libraries, before main could catch it.)
# That run is stopped the same way, by hand, and the job cancelled; the loss
# log so far must be an uninterrupted run's of as many steps.
run="$fsdp_tmp/timelimit"
mkdir -p "$run"
submitted=$(date +%s)
job=$(env STEPS=1000000 CHECKPOINT_EVERY=1000000 MODEL="$model" BATCH=16 FSDP_TRAIN="$train" RUN_DIR="$run" \
  sbatch --parsable --export=ALL --chdir="$run" --output="$run/job.out" --time=2 --signal=USR1@60 "$script") ||
  { slurm_log_tail; exit 1; }
need_job "$job"
n=0
until [ "$(slurm_restarts "$job")" -ge 1 ] && grep -q "resuming from" "$run/job.out"; do
  slurm_check "$job"
  n=$((n + 1))
  [ $n -lt $((FSDP_TEST_TIMEOUT * 2)) ] || { cat "$run/job.out"; scontrol show job "$job"; echo "FAIL: no requeue"; exit 1; }
  sleep 0.5
done
first=$(sed -n 's/^fsdp-train: SIGUSR1 after step \([0-9]*\): checkpoint written; exiting$/\1/p' "$run/job.out")
[ -n "$first" ] || { cat "$run/job.out"; echo "FAIL: the time limit's SIGUSR1 did not stop the job at a step"; exit 1; }
signalled=$(($(stat -c %Y "$run/checkpoint.h5") - submitted)) # the only save before the requeue is the signal's
n=0
until [ "$(slurm_rows "$run/loss.csv")" -ge $((first + 10)) ]; do
  n=$((n + 1))
  [ $n -lt $((FSDP_TEST_TIMEOUT * 5)) ] || { cat "$run/job.out"; echo "FAIL: the resumed run did not train"; exit 1; }
  sleep 0.2
done
# Unless the second run's own time-limit signal came first (30 to 60 s in):
# a USR1 sent by hand to a third run still loading would kill it.
[ "$(slurm_restarts "$job")" -ge 2 ] || scancel --signal=USR1 "$job"
n=0
until [ "$(slurm_restarts "$job")" -ge 2 ]; do
  slurm_check "$job"
  n=$((n + 1))
  [ $n -lt $((FSDP_TEST_TIMEOUT * 2)) ] || { cat "$run/job.out"; echo "FAIL: no second requeue"; exit 1; }
  sleep 0.5
done
scancel "$job"
slurm_wait "$job" CANCELLED COMPLETED
steps_done=$(slurm_rows "$run/loss.csv")
fsdp_run 4 "$train" -model "$model" -data synthetic -steps "$steps_done" -batch 16 -fsdp_sharding_strategy hybrid \
  -fsdp_ranks_per_node 2 -loss_log "$fsdp_tmp/reference-tl.csv" >"$fsdp_tmp/reference.out" 2>&1 || exit 1
cmp "$run/loss.csv" "$fsdp_tmp/reference-tl.csv" ||
  { cat "$run/job.out"; echo "FAIL: the job stopped by its time limit's signal did not continue as an uninterrupted run"; exit 1; }
echo "time limit: USR1@60 of --time=2 stopped the job $signalled s after its submission, after step $first; requeued, it resumed: $steps_done steps byte-identical"

# ---- killed while saving: a larger model (3.2 M parameters with AdamW,
# 38 MB) writes a checkpoint every step.  When a save is under way, the test
# stops the ranks (SIGSTOP) and kills them (SIGKILL), as the OOM killer or a
# dying node would: the kill surely lands inside the save.  (scancel would
# not: slurmd sends SIGCONT and SIGTERM first, and the ranks may finish the
# save.)  srun then fails, and so does the job.  The half-written file never
# replaces the checkpoint: the next run resumes from the previous one.
run="$fsdp_tmp/killed"
big="mlp:in=64,hidden=1024,depth=4,out=8"
rm -rf "$run"
job=$(submit "$run" STEPS=1000000 CHECKPOINT_EVERY=1 MODEL="$big" BATCH=16 FSDP_TRAIN="$train")
need_job "$job"
slurm_wait "$job" RUNNING
ranks="fsdp-train .*-checkpoint $run/checkpoint.h5"
n=0
attempt=0
while :; do
  n=$((n + 1))
  [ $n -lt $((FSDP_TEST_TIMEOUT * 50)) ] || { cat "$run/job.out"; echo "FAIL: never stopped the job inside a save"; exit 1; }
  if [ -f "$run/checkpoint.h5" ] && [ -f "$run/checkpoint.h5.partial" ]; then
    attempt=$((attempt + 1))
    pkill -STOP -f "$ranks"
    # Stopped: a .partial still there is a save the kill will cut short.
    [ -f "$run/checkpoint.h5.partial" ] && break
    pkill -CONT -f "$ranks"
  fi
  sleep 0.02
done
pkill -KILL -f "$ranks"
slurm_wait "$job" CANCELLED COMPLETED FAILED
[ -f "$run/checkpoint.h5.partial" ] || { echo "FAIL: the killed save left no $run/checkpoint.h5.partial"; exit 1; }
ls -l "$run"
steps_done=$(slurm_rows "$run/loss.csv")
job=$(submit "$run" STEPS=$((steps_done + 3)) CHECKPOINT_EVERY=1000 MODEL="$big" BATCH=16 FSDP_TRAIN="$train")
need_job "$job"
wait_completed "$job" "$run"
expect_grep "resuming from $run/checkpoint.h5 at step [1-9]" "$run/job.out"
[ "$(slurm_rows "$run/loss.csv")" -eq $((steps_done + 3)) ] ||
  { cat "$run/job.out"; echo "FAIL: the run after the kill did not end at step $((steps_done + 3))"; exit 1; }
echo "killed during a save (caught on try $attempt): the previous checkpoint loaded, and the next run finished from it"
exit 0
