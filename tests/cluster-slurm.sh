#!/bin/sh
# Slurm on real nodes (doc/cluster.md, "Slurm on the nodes"): the 2 nodes of
# tests/clusterlib.sh, a slurmd inside each (tests/slurmlib.sh, slurm_start
# nodes), slurmctld and the Slurm commands inside node0.  Slurm's traffic
# (slurmctld, slurmd, srun, PMI's exchange) crosses the links:
#   - srun -N 2 -n 4 --mpi=pmi2 fsdp-info: Slurm's nodes are node[0-1], and
#     the nodes MPI finds are the same two, 2 tasks each, with the hybrid
#     groups inside them;
#   - pre-emption across the nodes: examples/slurm/fsdp-train.sbatch (2
#     nodes x 2 tasks, hybrid) runs in partition "low"; a job of partition
#     "high" that needs both nodes pre-empts it: Slurm sends SIGTERM (a
#     GraceTime of 30 s before SIGKILL), the ranks save at the next step and
#     exit, Slurm requeues the job, runs the high job, then runs the training
#     job again on the two nodes; it resumes from the checkpoint, and its
#     loss log is the one of a run never interrupted.
# MPI's own bytes between the nodes take shared memory here (the nodes see
# the machine's boot id, cluster_boot_ids shared): over UCX's TCP every srun
# job hung in MPI_Finalize after its work (3 of 3 fsdp-info runs,
# 2026-11-28; doc/cluster.md), and a job that never ends is never requeued
# or completed.  tests/cluster.sh checks MPI over the links.
# SKIP (77) where no cluster can be made (tests/cluster.sh's reasons) or
# Slurm is not installed.
. "${srcdir:-.}/tests/testlib.sh"
. "${srcdir:-.}/tests/clusterlib.sh"
. "${srcdir:-.}/tests/slurmlib.sh"

cluster_need
slurm_need
top=$(cd "$top_builddir" && pwd)
src=$(cd "${srcdir:-.}" && pwd)
train="$top/tools/fsdp-train"
w=$fsdp_tmp
export OPENBLAS_NUM_THREADS=1

cluster_up 2 || { echo "FAIL: the cluster did not come up"; exit 1; }
cluster_boot_ids shared || { echo "FAIL: cannot give the nodes the machine's boot id"; exit 1; }
slurm_start nodes

# ---- srun across the nodes: Slurm's nodes are the ones MPI finds
slurm_srun -N 2 -n 4 --mpi=pmi2 "$top/tools/fsdp-info" >"$w/info" 2>&1 ||
  { cat "$w/info"; slurm_log_tail; echo "FAIL: srun fsdp-info on the 2 nodes"; exit 1; }
expect_grep "^ShardGroup: 4 ranks on 2 nodes" "$w/info"
expect_grep "^  Slurm: job [0-9][0-9]*, step [0-9][0-9]*, nodes node\[0-1\]; nodes of this group from MPI" "$w/info"
expect_grep "^  node 0 (node0): 2 ranks" "$w/info"
expect_grep "^  node 1 (node1): 2 ranks" "$w/info"
expect_grep "^    0: 0,1$" "$w/info"
expect_grep "^    1: 2,3$" "$w/info"
echo "srun -N 2 -n 4 on node0 and node1: MPI finds Slurm's 2 nodes, shard groups {0,1} {2,3}"

# ---- pre-emption by a job of a higher partition
model="mlp:in=8,hidden=16,depth=2,out=2"
steps=5000 # steps of about 1.5 ms here: SIGTERM comes hundreds of steps after step 20
fsdp_run 4 "$train" -model "$model" -data synthetic -steps $steps -batch 16 -fsdp_sharding_strategy hybrid \
  -fsdp_ranks_per_node 2 -loss_log "$w/reference.csv" >"$w/reference.out" 2>&1 ||
  { cat "$w/reference.out"; echo "FAIL: the uninterrupted run"; exit 1; }
run="$w/preempt"
mkdir -p "$run"
# Through the environment: --export=NAME=VALUE splits at the model's commas.
# (Exported in a subshell, not by env, which would run the host's sbatch,
# outside the nodes, instead of the function.)
train_job=$(
  STEPS=$steps CHECKPOINT_EVERY=100000 MODEL=$model BATCH=16 FSDP_TRAIN=$train RUN_DIR=$run
  export STEPS CHECKPOINT_EVERY MODEL BATCH FSDP_TRAIN RUN_DIR
  sbatch --parsable --export=ALL --chdir="$run" --output="$run/job.out" "$src/examples/slurm/fsdp-train.sbatch"
)
[ -n "$train_job" ] || { slurm_log_tail; echo "FAIL: sbatch returned no job id"; exit 1; }
slurm_wait "$train_job" RUNNING
n=0
until [ "$(slurm_rows "$run/loss.csv")" -ge 20 ]; do
  slurm_check "$train_job"
  n=$((n + 1))
  [ $n -lt $((FSDP_TEST_TIMEOUT * 5)) ] || { cat "$run/job.out"; echo "FAIL: the job never trained"; exit 1; }
  sleep 0.2
done
high_job=$(sbatch --parsable --partition=high -N 2 -n 4 --chdir="$w" --output="$w/high.out" --wrap 'srun hostname | sort')
[ -n "$high_job" ] || { slurm_log_tail; echo "FAIL: sbatch of the high job returned no job id"; exit 1; }
slurm_wait "$high_job" COMPLETED FAILED CANCELLED
[ "$(slurm_state "$high_job")" = COMPLETED ] || { scontrol show job "$high_job"; slurm_log_tail; echo "FAIL: the high job"; exit 1; }
n=0
until [ "$(slurm_restarts "$train_job")" -ge 1 ] && [ "$(slurm_state "$train_job")" = COMPLETED ]; do
  slurm_check "$train_job"
  if [ "$(slurm_restarts "$train_job")" -eq 0 ] && [ "$(slurm_state "$train_job")" = COMPLETED ]; then
    cat "$run/job.out"
    echo "FAIL: the training job ended before job $high_job pre-empted it (its $steps steps are too few for this machine?)"
    exit 1
  fi
  n=$((n + 1))
  [ $n -lt $((FSDP_TEST_TIMEOUT * 2)) ] ||
    { cat "$run/job.out"; scontrol show job "$train_job"; slurm_log_tail; echo "FAIL: the pre-empted job was not requeued and completed"; exit 1; }
  sleep 0.5
done
cat "$run/job.out"
printf 'node0\nnode0\nnode1\nnode1\n' | cmp - "$w/high.out" || { cat "$w/high.out"; echo "FAIL: the high job's tasks"; exit 1; }
# The test sends no signal: this SIGTERM is Slurm's, pre-empting the job.
expect_grep "STEP $train_job.0 ON node0 CANCELLED AT" "$run/job.out"
saved=$(sed -n 's/^fsdp-train: SIGTERM after step \([0-9]*\): checkpoint written; exiting$/\1/p' "$run/job.out")
[ -n "$saved" ] || { echo "FAIL: the pre-emption's SIGTERM did not make the ranks save"; exit 1; }
# The script requeues the job as the ranks exit, within the grace time;
# Slurm does not requeue it a second time.
expect_grep "stopped after step $saved of $steps; requeueing job $train_job" "$run/job.out"
[ "$(slurm_restarts "$train_job")" -eq 1 ] || { scontrol show job "$train_job"; echo "FAIL: the job ran $(slurm_restarts "$train_job") + 1 times, not 2"; exit 1; }
expect_grep "run 1 on node\[0-1\], 4 tasks, resuming from" "$run/job.out"
expect_grep "resuming from $run/checkpoint.h5 at step $saved" "$run/job.out"
cmp "$run/loss.csv" "$w/reference.csv" ||
  { echo "FAIL: the pre-empted and resumed job's loss log differs from an uninterrupted run's"; exit 1; }
# The high job ran while the training job waited: it ended before the training job's last run started.
high_end=$(scontrol show job "$high_job" | sed -n 's/.* EndTime=\([^ ]*\).*/\1/p')
last_start=$(scontrol show job "$train_job" | sed -n 's/.* StartTime=\([^ ]*\).*/\1/p')
[ "$(printf '%s\n%s\n' "$high_end" "$last_start" | sort | head -n 1)" = "$high_end" ] ||
  { echo "FAIL: the high job ended at $high_end, after the requeued job's start at $last_start"; exit 1; }
echo "pre-emption across 2 nodes: job $high_job (partition high) pre-empted job $train_job, whose ranks saved at step $saved;"
echo "  requeued, it resumed on node[0-1] at $last_start (the high job ended at $high_end): loss log byte-identical ($steps steps)"

slurm_stop
slurm_started=no
cluster_down
left=$(cluster_leftovers)
[ -z "$left" ] || { echo "FAIL: left behind:"; echo "$left"; exit 1; }
echo "PASS: Slurm on 2 nodes: srun across them, pre-emption, requeue and resume; nothing left"
