#!/bin/sh
# Real nodes on one machine (tests/clusterlib.sh, doc/cluster.md): 2 nodes, then 4,
# each a network, UTS and mount namespace with its own hostname and /dev/shm,
# joined by veth links through a bridge, with MPICH's inter-node transport on
# TCP over those links.  Nothing here is emulated:
#   - each node has its own hostname and /dev/shm;
#   - fsdp-info at W = 4 (2 ranks per node) finds the 2 nodes from MPI alone
#     (no -fsdp_ranks_per_node), and the hybrid groups follow them;
#   - fsdp-train at W = 4 on the 2 nodes, every strategy: the loss log of the
#     layout emulated on one host, -fsdp_view names each group's path, and
#     the bytes across a link are the paper's volumes for the collectives
#     that cross it (all-gathers and reduce-scatters for full sharding, the
#     replicate all-reduce alone for hybrid, the all-reduce over all ranks
#     with no sharding): the payload, the counted bytes less every frame's
#     headers, within 6% for MPI's start-up and its own headers;
#   - fsdp-train at W = 2, one rank per node, full sharding: the same, with
#     -fsdp_ranks_per_node 1;
#   - a checkpoint saved on the 2 nodes resumes on 1 node (2 ranks) and on 4
#     nodes (one rank each) with the loss log the same resume gives on one
#     host, and fsdp-info finds the 4 nodes;
#   - faults: node1's ranks killed (the job ends at once), then node1's link
#     down in the middle of a step (the ranks name the collective each waits
#     for after -fsdp_collective_timeout, and every rank ends); each time the run
#     resumes from the last complete checkpoint, and ends with the loss log
#     of a run never interrupted;
#   - on links shaped to 20 Mbit/s (tc tbf) the same job gives the same loss
#     log and takes at least the time its bytes need on the link;
#   - everything the cluster made is gone afterwards.
# SKIP (77) where no cluster can be made (not root, no iproute2, an mpiexec
# that is not MPICH's hydra, no network namespaces or tbf), saying which.
. "${srcdir:-.}/tests/testlib.sh"
. "${srcdir:-.}/tests/clusterlib.sh"

cluster_need
top=$(cd "$top_builddir" && pwd)
info="$top/tools/fsdp-info"
train="$top/tools/fsdp-train"
w=$fsdp_tmp

cluster_up 2 || { echo "FAIL: the cluster did not come up"; exit 1; }

# Each node is another host: its hostname, and a /dev/shm the others do not see.
[ "$(cluster_exec node0 hostname)" = node0 ] && [ "$(cluster_exec node1 hostname)" = node1 ] ||
  { echo "FAIL: the nodes' hostnames are $(cluster_exec node0 hostname) and $(cluster_exec node1 hostname)"; exit 1; }
cluster_exec node0 touch /dev/shm/fsdp-cluster-test || { echo "FAIL: cannot write node0's /dev/shm"; exit 1; }
cluster_exec node0 test -e /dev/shm/fsdp-cluster-test || { echo "FAIL: node0 does not see its /dev/shm"; exit 1; }
if cluster_exec node1 test -e /dev/shm/fsdp-cluster-test || test -e /dev/shm/fsdp-cluster-test; then
  echo "FAIL: node0's /dev/shm is visible outside node0"; exit 1
fi

# What each program prints last before MPI_Finalize (cluster_job): fsdp-info
# its rank table's last row (rank 3: both its jobs have 4 ranks), fsdp-train
# -fsdp_log_view its allocation count.
info_done='^ +3 +[0-9]+ +[0-9]+/[0-9]+ '
train_done='^  allocations: [0-9]+, frees: [0-9]+'

# check_link_bytes WHAT VOLUME COUNTERS OUT: the link's payload (both
# directions, from the switch port's counters: bytes less each frame's
# headers, cluster_link_counters) is the predicted volume plus at most 6%:
# MPI's start-up and its messages' own headers.  VOLUME is an awk expression
# in u and b, the bytes per rank -fsdp_log_view counted in OUT: u the
# unsharded units of the all-gathers and reduce-scatters, b the all-reduces'
# buffers.  COUNTERS: "BYTES FRAMES" the job added.
check_link_bytes() {
  predicted=$(awk '/^(AllGather|ReduceScatter) /{u += $(NF-2)} /^AllReduce /{b += $(NF-2)}
    END{printf "%.0f", '"$2"'}' "$4")
  set -- "$1" "$2" $3 "$4"
  payload=$(($3 - cluster_frame_header * $4))
  ratio=$(awk -v l="$payload" -v p="$predicted" 'BEGIN{printf "%.3f", (p > 0 ? l / p : 0)}')
  echo "$1: payload across node1's link: predicted $predicted, measured $payload ($ratio; $3 bytes in $4 frames)"
  awk -v r="$ratio" 'BEGIN{exit !(r >= 1 && r <= 1.06)}' ||
    { cat "$5"; echo "FAIL: $1: the link's payload is not the collectives' volume plus a few percent"; return 1; }
}
# counters_since "BYTES FRAMES": what node1's link counters added since then
counters_since() {
  set -- $1 $(cluster_link_counters node1)
  echo "$(($3 - $1)) $(($4 - $2))"
}
# fsdp-info: the nodes from MPI alone; hybrid groups within each node.
cluster_job "$w/info.out" "$info_done" -ppn 2 -n 4 "$info" ||
  { cat "$w/info.out"; echo "FAIL: fsdp-info across the nodes"; exit 1; }
expect_grep '^ShardGroup: 4 ranks on 2 nodes' "$w/info.out"
expect_grep '^  node 0 (node0): 2 ranks' "$w/info.out"
expect_grep '^  node 1 (node1): 2 ranks' "$w/info.out"
expect_grep '^    0: 0,1$' "$w/info.out"
expect_grep '^    1: 2,3$' "$w/info.out"

model=mlp:in=32,hidden=128,depth=3,out=4
args="-model $model -steps 10 -batch 32 -log_every 5 -fsdp_log_view"
# W = 4 on the 2 nodes, every strategy: the loss log of the layout emulated
# on one host, byte for byte.  A shard group within a node reduces through
# the node's shared memory (hybrid, hybrid_zero2); one that spans the nodes
# (full, grad_op) through MPI, as -fsdp_view says.  Emulated nodes share one
# machine's memory, so the emulated run of a spanning group is told to use
# MPI too (-fsdp_shm_reduce false): left to shared memory, its sums come in
# another order (1.1e-8 relative in the loss, measured 2026-11-27).
#
# The bytes across node1's link, against the paper's volumes from what the
# library counts (-fsdp_log_view's bytes per rank: the unsharded unit U of an
# all-gather or reduce-scatter, the buffer B of an all-reduce).  A shard
# group across the nodes (full, grad_op): each rank receives the other
# node's two shards, U/2, and sends its own to the other node's two ranks,
# U/2 (MPICH's recursive doubling and halving at these sizes exchange exactly
# that with the rank 2 away), so node1's 2 ranks move 2 U across the link per
# collective.  Hybrid: the shard groups stay in the nodes and only the
# replicate all-reduce crosses, between rank pairs {0,2} and {1,3}: each
# rank sends and receives B, 4 B in all.  No sharding: MPICH's all-reduce
# over the 4 ranks (Rabenseifner's at these sizes: recursive halving, then
# doubling) exchanges a quarter of B with the rank 2 away in each half, so
# each rank sends and receives B/2: 2 B in all.  (MPICH takes Rabenseifner's
# from 2,048 bytes; this model's smallest unit, the output layer, has 2,064.)
for s in full grad_op hybrid hybrid_zero2 none; do
  case $s in full | grad_op) path='reduce-scatter: MPI' emulate='-fsdp_shm_reduce false' ;;
  none) path= emulate= ;;
  *) path='reduce-scatter: node shared memory' emulate= ;;
  esac
  before=$(cluster_link_counters node1)
  cluster_job "$w/w4-nodes-$s.out" "$train_done" -ppn 2 -n 4 "$train" $args -fsdp_view -fsdp_sharding_strategy $s \
    -loss_log "$w/w4-nodes-$s.csv" || { cat "$w/w4-nodes-$s.out"; echo "FAIL: fsdp-train $s at W = 4 on 2 nodes"; exit 1; }
  link=$(counters_since "$before")
  [ -z "$path" ] || expect_grep "^  $path" "$w/w4-nodes-$s.out"
  fsdp_run 4 "$train" $args -fsdp_sharding_strategy $s -fsdp_ranks_per_node 2 $emulate -loss_log "$w/w4-emulated-$s.csv" \
    >"$w/w4-emulated-$s.out" 2>&1 || { cat "$w/w4-emulated-$s.out"; echo "FAIL: fsdp-train $s at W = 4 emulated"; exit 1; }
  cmp "$w/w4-nodes-$s.csv" "$w/w4-emulated-$s.csv" ||
    { paste -d' ' "$w/w4-nodes-$s.csv" "$w/w4-emulated-$s.csv"; echo "FAIL: $s at W = 4: the loss logs differ"; exit 1; }
  case $s in full | grad_op) volume='2 * u' ;; hybrid | hybrid_zero2) volume='4 * b' ;; none) volume='2 * b' ;; esac
  check_link_bytes "$s at W = 4 on 2 nodes" "$volume" "$link" "$w/w4-nodes-$s.out" || exit 1
done

# Containers of one host: nodes that see the machine's boot id, as the
# containers or network namespaces of one host do, share its CPUs, though
# each is a node to MPI.  -fsdp_view counts the 4 ranks on the machine's
# CPUs, and where they are more than the CPUs the waits sleep (the nodes'
# own boot ids, above, hide that they share this machine, as separate
# hosts would).
cluster_boot_ids shared || { echo "FAIL: cannot give the nodes the machine's boot id"; exit 1; }
cluster_job "$w/machine.out" "$train_done" -ppn 2 -n 4 "$train" $args -fsdp_view ||
  { cat "$w/machine.out"; echo "FAIL: fsdp-train on nodes that share the machine's boot id"; exit 1; }
cluster_boot_ids own || { echo "FAIL: cannot give the nodes their own boot ids again"; exit 1; }
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
if [ "$cpus" -lt 4 ]; then load="waits sleep: 4 ranks on $cpus CPUs\\? of this machine (2 nodes on one kernel: containers or namespaces of a host) (oversubscribed)"
else load="waits poll: 4 ranks on $cpus CPUs of this machine (2 nodes on one kernel: containers or namespaces of a host)"
fi
for r in 0 1 2 3; do expect_grep "^ *\\[$r\\] $load\$" "$w/machine.out"; done
echo "nodes on one kernel: $(grep '^ *\[0\] waits' "$w/machine.out" | sed 's/^ *//')"

# One rank per node from here: training across the link against the same
# layout emulated on one host (full sharding; the other strategies ran at
# W = 4 above).
before=$(cluster_link_counters node1)
cluster_job "$w/nodes-full.out" "$train_done" -n 2 "$train" $args -fsdp_sharding_strategy full -loss_log "$w/nodes-full.csv" ||
  { cat "$w/nodes-full.out"; echo "FAIL: fsdp-train full on 2 nodes"; exit 1; }
link=$(counters_since "$before")
fsdp_run 2 "$train" $args -fsdp_sharding_strategy full -fsdp_ranks_per_node 1 -loss_log "$w/emulated-full.csv" \
  >"$w/emulated-full.out" 2>&1 || { cat "$w/emulated-full.out"; echo "FAIL: fsdp-train full emulated"; exit 1; }
cmp "$w/nodes-full.csv" "$w/emulated-full.csv" ||
  { paste -d' ' "$w/nodes-full.csv" "$w/emulated-full.csv"; echo "FAIL: full at W = 2: the loss logs differ"; exit 1; }
# Over F = 2 ranks each sends and receives half of an all-gather's or
# reduce-scatter's unit, over R = 2 ranks the whole of an all-reduce's
# buffer; one rank per node, so all of it crosses node1's link.
check_link_bytes "full at W = 2 on 2 nodes" 'u + 2 * b' "$link" "$w/nodes-full.out" || exit 1

# A checkpoint saved on the 2 nodes (one rank each) and resumed on 1 node
# (2 ranks there), through the file system they share: the resumed loss log
# is the one the same resume gives on one host; on 4 nodes below.
cluster_job "$w/ck.out" "$train_done" -n 2 "$train" $args -fsdp_sharding_strategy full -checkpoint "$w/ck.h5" ||
  { cat "$w/ck.out"; echo "FAIL: fsdp-train -checkpoint on 2 nodes"; exit 1; }
resume="-model $model -steps 16 -batch 32 -log_every 4 -fsdp_sharding_strategy full -resume $w/ck.h5"
cluster_exec node0 timeout -k 10 "${FSDP_TEST_TIMEOUT:-300}" "${MPIEXEC:-mpiexec}" -n 2 "$train" $resume \
  -loss_log "$w/resume-1node.csv" >"$w/resume-1node.out" 2>&1 ||
  { cat "$w/resume-1node.out"; echo "FAIL: resuming on 1 node (2 ranks)"; exit 1; }
fsdp_run 2 "$train" $resume -fsdp_ranks_per_node 2 -loss_log "$w/resume-1node-emulated.csv" \
  >"$w/resume-1node-emulated.out" 2>&1 || { cat "$w/resume-1node-emulated.out"; echo "FAIL: resuming on one host"; exit 1; }
expect_grep "resuming from $w/ck.h5 at step 10" "$w/resume-1node.out"
cmp "$w/resume-1node.csv" "$w/resume-1node-emulated.csv" ||
  { paste -d' ' "$w/resume-1node.csv" "$w/resume-1node-emulated.csv"; echo "FAIL: resumed on 1 node: the loss logs differ"; exit 1; }
[ "$(tail -n 1 "$w/resume-1node.csv" | cut -d, -f1)" = 16 ] ||
  { cat "$w/resume-1node.csv"; echo "FAIL: resumed on 1 node: the loss log does not reach step 16"; exit 1; }
echo "checkpoint: saved on 2 nodes (one rank each), resumed on 1 node (2 ranks): the loss log of the same layout on one host"

# Faults, one after the other in one training run of 60 steps (hybrid
# sharding at W = 4, a checkpoint every 20 steps), each once the loss log
# has the row of the step after a checkpoint, so in the middle of a step:
#   1. node1's ranks are killed (kill -9) after step 21: hydra sees them die
#      and ends the job at once, the ranks on node0 included;
#   2. resumed from step 20, node1's link goes down after step 41: the ranks'
#      watchdogs name the collective each waits for after
#      -fsdp_collective_timeout (5 s) and abort the job.  On node0 hydra
#      ends the ranks (the first to abort may end the other before it
#      speaks).  On node1, cut off from mpiexec, MPI_Abort waits for hydra's
#      answer, which cannot come: each rank exits by itself 10 s later and
#      says so.  Each rank's stderr goes to a file in the shared /tmp, since
#      node1's output cannot reach mpiexec;
#   3. with the link back up, resumed from step 40 to the end: the loss log
#      (each resume replaces the rows after its checkpoint) is the one of a
#      run never interrupted.
printf '#!/bin/sh\nexec "$@" 2>"$FAULT_DIR/rank$PMI_RANK.err"\n' >"$w/rank-stderr"
chmod +x "$w/rank-stderr"
ck="$w/fault.h5"
fault="-model $model -batch 32 -steps 60 -log_every 20 -checkpoint_every 20 -fsdp_sharding_strategy hybrid"
fault_timeout=5
# fault_job OUT ARGS...: the job in the background ($job), each rank's stderr in $w/rank<r>.err
fault_job() {
  out=$1
  shift
  rm -f "$w"/rank*.err
  FSDP_TEST_TIMEOUT=90 cluster_mpiexec -ppn 2 -n 4 -genv FAULT_DIR "$w" "$w/rank-stderr" "$train" $fault -checkpoint "$ck" \
    -fsdp_collective_timeout $fault_timeout -loss_log "$w/fault.csv" "$@" >"$out" 2>&1 &
  job=$!
}
# in_step OUT STEP: wait until the loss log has STEP's row (rank 0 writes it
# when the step ends, and flushes it)
in_step() {
  tries=0
  until grep -q "^$2," "$w/fault.csv" 2>/dev/null; do
    kill -0 $job 2>/dev/null && [ $tries -lt 600 ] ||
      { cat "$1" "$w"/rank*.err; echo "FAIL: the job ended or took 60 s before step $2, the fault's"; exit 1; }
    tries=$((tries + 1))
    sleep 0.05
  done
  ! grep -q 'libfsdp watchdog' "$w"/rank*.err 2>/dev/null ||
    { cat "$w"/rank*.err; echo "FAIL: the watchdog fired before the fault"; exit 1; }
}
# node_ranks NODE: the node's processes that run fsdp-train (its ranks; on
# node0 mpiexec too, whose command line names it)
node_ranks() { for p in $(cluster_pids "$1"); do ! grep -q fsdp-train "/proc/$p/cmdline" 2>/dev/null || echo "$p"; done; }
# until_gone LIMIT WHAT: wait until the job and every rank on both nodes are gone, at most LIMIT s
until_gone() {
  while kill -0 $job 2>/dev/null || [ -n "$(node_ranks node0)$(node_ranks node1)" ]; do
    [ $(($(date +%s) - fault_at)) -le "$1" ] ||
      { cat "$w/fault-$2.out" "$w"/rank*.err; echo "FAIL: ranks still running $1 s after $2"; exit 1; }
    sleep 0.2
  done
  gone=$(($(date +%s) - fault_at))
}

fault_job "$w/fault-kill.out"
in_step "$w/fault-kill.out" 21
kill -9 $(node_ranks node1)
fault_at=$(date +%s)
until_gone 10 kill
wait $job && { cat "$w/fault-kill.out"; echo "FAIL: the job succeeded with node1's ranks killed"; exit 1; }
echo "node1's ranks killed: the job ended (hydra: $(grep -o 'BAD TERMINATION[A-Z ]*' "$w/fault-kill.out")), every rank gone $gone s after"

fault_job "$w/fault-link.out" -resume "$ck"
in_step "$w/fault-link.out" 41
cluster_link node1 down
fault_at=$(date +%s)
# the timeout, the fallback's 10 s and 15 s to spare
until_gone $((fault_timeout + 25)) link
cluster_link node1 up
cluster_kill_jobs # hydra's proxy on node1, if it is still there
wait $job && { cat "$w/fault-link.out"; echo "FAIL: the job succeeded with node1's link down"; exit 1; }
expect_grep "resuming from $ck at step 20" "$w/fault-link.out"
named() {
  grep -Eq "^\\[$1\\] libfsdp watchdog: .* has not completed after [0-9.]+ s \\(-fsdp_collective_timeout $fault_timeout\\) at step (4[1-9]|5[0-9]); another rank" "$w/rank$1.err"
}
for r in 2 3; do
  named $r && grep -q "^\\[$r\\] libfsdp: MPI_Abort has not ended this process within 10 s" "$w/rank$r.err" ||
    { cat "$w/fault-link.out" "$w"/rank*.err; echo "FAIL: rank $r on node1 did not name the collective it waited for and exit by itself"; exit 1; }
done
named 0 || named 1 || { cat "$w/fault-link.out" "$w"/rank*.err; echo "FAIL: no rank on node0 named the collective it waited for"; exit 1; }
echo "node1's link down: the ranks named the collective each waited for (-fsdp_collective_timeout $fault_timeout), all gone $gone s after:"
cat "$w"/rank*.err

cluster_job "$w/fault-resume.out" "$train_done" -ppn 2 -n 4 "$train" $fault -checkpoint "$ck" -resume "$ck" -fsdp_log_view \
  -loss_log "$w/fault.csv" || { cat "$w/fault-resume.out"; echo "FAIL: resuming after the faults"; exit 1; }
expect_grep "resuming from $ck at step 40" "$w/fault-resume.out"
fsdp_run 4 "$train" $fault -checkpoint "$w/fault-ref.h5" -fsdp_ranks_per_node 2 -loss_log "$w/fault-ref.csv" \
  >"$w/fault-ref.out" 2>&1 || { cat "$w/fault-ref.out"; echo "FAIL: the uninterrupted run"; exit 1; }
cmp "$w/fault.csv" "$w/fault-ref.csv" ||
  { paste -d' ' "$w/fault.csv" "$w/fault-ref.csv"; echo "FAIL: after the faults and the resumes, the loss log is not the uninterrupted run's"; exit 1; }
echo "faults: resumed from step 40 with the link back up: the loss log of the uninterrupted run"

# A shaped link: 20 Mbit/s each way.  Full sharding's step now waits for
# its bytes: the run takes at least what the link needs to carry them (a
# lower bound, which a busy machine cannot break).
cluster_shape 20mbit || { echo "FAIL: tc could not shape the links"; exit 1; }
before=$(cluster_link_bytes node1)
start=$(date +%s.%N)
cluster_job "$w/shaped.out" "$train_done" -n 2 "$train" $args -fsdp_sharding_strategy full -loss_log "$w/shaped.csv" ||
  { cat "$w/shaped.out"; echo "FAIL: fsdp-train on the shaped link"; exit 1; }
end=$(date +%s.%N)
link=$(($(cluster_link_bytes node1) - before))
cmp "$w/shaped.csv" "$w/nodes-full.csv" || { echo "FAIL: the shaped link changed the loss log"; exit 1; }
awk -v l="$link" -v t0="$start" -v t1="$end" 'BEGIN{need = l / 2 * 8 / 20e6;
  printf "shaped: %d bytes across node1'"'"'s link at 20 Mbit/s each way: at least %.2f s; the job took %.2f s\n", l, need, t1 - t0;
  exit !(t1 - t0 >= need)}' || { echo "FAIL: the job was faster than its link allows: the link is not shaped"; exit 1; }

# 4 nodes, one rank each: fsdp-info finds them from MPI alone, and the
# checkpoint saved on 2 nodes resumes at W = 4 with the loss log of the same
# resume on one host (4 emulated nodes; the shard group spans them, so MPI
# reduces there too: -fsdp_shm_reduce false).
cluster_down
cluster_up 4 || { echo "FAIL: a cluster of 4 nodes did not come up"; exit 1; }
cluster_job "$w/info-4nodes.out" "$info_done" -n 4 "$info" ||
  { cat "$w/info-4nodes.out"; echo "FAIL: fsdp-info on 4 nodes"; exit 1; }
expect_grep '^ShardGroup: 4 ranks on 4 nodes$' "$w/info-4nodes.out"
expect_grep '^  node 3 (node3): 1 rank;' "$w/info-4nodes.out"
cluster_job "$w/resume-4nodes.out" "$train_done" -n 4 "$train" $resume -fsdp_log_view -loss_log "$w/resume-4nodes.csv" ||
  { cat "$w/resume-4nodes.out"; echo "FAIL: resuming on 4 nodes"; exit 1; }
fsdp_run 4 "$train" $resume -fsdp_ranks_per_node 1 -fsdp_shm_reduce false -loss_log "$w/resume-4nodes-emulated.csv" \
  >"$w/resume-4nodes-emulated.out" 2>&1 || { cat "$w/resume-4nodes-emulated.out"; echo "FAIL: resuming at W = 4 on one host"; exit 1; }
expect_grep "resuming from $w/ck.h5 at step 10" "$w/resume-4nodes.out"
cmp "$w/resume-4nodes.csv" "$w/resume-4nodes-emulated.csv" ||
  { paste -d' ' "$w/resume-4nodes.csv" "$w/resume-4nodes-emulated.csv"; echo "FAIL: resumed on 4 nodes: the loss logs differ"; exit 1; }
echo "checkpoint: saved on 2 nodes, resumed on 4 nodes (one rank each): the loss log of the same layout on one host"

[ -z "${cluster_finalize_hangs:-}" ] || echo "note: $cluster_finalize_hangs jobs did not return from MPI_Finalize after their work"
cluster_down
left=$(cluster_leftovers)
[ -z "$left" ] || { echo "FAIL: left behind:"; echo "$left"; exit 1; }
echo "PASS: 2 and 4 nodes, fsdp-info and training across them, a checkpoint resumed on 1 and on 4 nodes; nothing left"
