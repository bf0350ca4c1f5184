#!/bin/sh
# fsdp-info: the version, the backends and dependencies this build was
# configured with, and the process layout: on this machine, and on a shipped
# 2-socket 8-GPU topology compared line by line with an expected file.
. "${srcdir:-.}/tests/testlib.sh"
# The layouts below are this machine's, not a Slurm job's (make check inside
# an allocation would add a "Slurm:" line to the views, and a binding).
unset SLURM_JOB_ID SLURM_STEP_ID SLURM_JOB_NODELIST SLURM_RESTART_COUNT SLURM_CPU_BIND_TYPE SLURM_CPU_BIND_LIST
config="$top_builddir/src/include/fsdp_config.h"
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$config")
info="$top_builddir/tools/fsdp-info"
have_hwloc=no
grep -q '^#define FSDP_HAVE_HWLOC 1' "$config" && have_hwloc=yes

# The issue's example: 8 ranks as 2 nodes of 4, F = 4.
fsdp_run 8 "$info" -fsdp_ranks_per_node 4 -fsdp_sharding_factor 4 >"$fsdp_tmp/out" 2>"$fsdp_tmp/err" ||
  { cat "$fsdp_tmp/err"; echo "FAIL: fsdp-info exited with an error"; exit 1; }
cat "$fsdp_tmp/out"
expect_count 1 "^libfsdp $version\$" "$fsdp_tmp/out"
expect_grep '^  backends: host' "$fsdp_tmp/out"
expect_grep '^  MPI: .*(standard [34]\.[0-9]' "$fsdp_tmp/out"
expect_grep '^ShardGroup: 8 ranks on 2 nodes (emulated: -fsdp_ranks_per_node 4, block placement)$' "$fsdp_tmp/out"
expect_grep '^  2 shard groups of 4 ranks, within one node; 4 replicate groups of 2 ranks$' "$fsdp_tmp/out"
expect_grep '^    0: 0-3$' "$fsdp_tmp/out"
expect_grep '^    1: 4-7$' "$fsdp_tmp/out"
expect_count 2 '^  node [01] (.*): 4 ranks; ' "$fsdp_tmp/out"
for i in 0 1 2 3; do expect_grep "^    $i: $i,$((i + 4))\$" "$fsdp_tmp/out"; done
# One row per rank, in rank order: rank node local shard replicate device binding
awk '$1 ~ /^[0-9]+$/ && $3 ~ /\// {printf "%s %s %s %s %s;", $1, $2, $3, $4, $5}' "$fsdp_tmp/out" >"$fsdp_tmp/rows"
want="0 0 0/4 0:0 0:0;1 0 1/4 0:1 1:0;2 0 2/4 0:2 2:0;3 0 3/4 0:3 3:0;4 1 0/4 1:0 0:1;5 1 1/4 1:1 1:1;6 1 2/4 1:2 2:1;7 1 3/4 1:3 3:1;"
[ "$(cat "$fsdp_tmp/rows")" = "$want" ] || { echo "FAIL: rank rows are '$(cat "$fsdp_tmp/rows")', expected '$want'"; exit 1; }

# Groups made of whole nodes, and groups that cross node boundaries, are said so.
fsdp_run 4 "$info" -fsdp_ranks_per_node 2 -fsdp_sharding_factor 4 >"$fsdp_tmp/out" 2>&1
expect_grep '^  1 shard group of 4 ranks, over whole nodes; 4 replicate groups of 1 rank$' "$fsdp_tmp/out"
fsdp_run 6 "$info" -fsdp_ranks_per_node 4 -fsdp_sharding_factor 3 >"$fsdp_tmp/out" 2>&1
expect_grep '^  2 shard groups of 3 ranks, across node boundaries; 3 replicate groups of 2 ranks$' "$fsdp_tmp/out"

if [ $have_hwloc = yes ]; then
  expect_grep '^  hwloc: API 2\.' "$fsdp_tmp/out"
  # A fixed topology gives a fixed layout: every line of it as expected (the
  # host name and where the source tree lives aside).
  topo="$srcdir/tests/topologies/2socket-8gpu.xml"
  fsdp_run 8 "$info" -fsdp_topology "$topo" -fsdp_ranks_per_node 4 -fsdp_shard_domain package -fsdp_bind core \
    >"$fsdp_tmp/out" 2>"$fsdp_tmp/err" || { cat "$fsdp_tmp/err"; echo "FAIL: fsdp-info exited with an error"; exit 1; }
  sed -n '/^ShardGroup:/,$p' "$fsdp_tmp/out" | sed -e "s|XML file '.*tests/topologies/|XML file 'tests/topologies/|" \
    -e 's/^\(  node [0-9]* (\)[^)]*\()\)/\1HOST\2/' >"$fsdp_tmp/layout"
  diff -u "$srcdir/tests/fsdp-info-2socket-8gpu.expected" "$fsdp_tmp/layout" ||
    { echo "FAIL: the layout for tests/topologies/2socket-8gpu.xml differs from the expected file"; exit 1; }
  # hwloc's own HWLOC_XMLFILE works too, and the view says where the topology came from.
  # (HWLOC_COMPONENTS, which make check-valgrind sets, would make hwloc ignore it.)
  (unset HWLOC_COMPONENTS; HWLOC_XMLFILE="$topo" && export HWLOC_XMLFILE && fsdp_run 2 "$info") >"$fsdp_tmp/out" 2>&1
  expect_grep "^  topology: XML file '.*2socket-8gpu.xml' (HWLOC_XMLFILE); binding: none\$" "$fsdp_tmp/out"
  expect_grep '^  node 0 (.*): 2 ranks; 2 packages, 2 NUMA nodes, 16 cores, 16 PUs, 8 GPUs$' "$fsdp_tmp/out"
fi
if grep -q '^#define FSDP_HAVE_HDF5 1' "$config"; then expect_grep '^  HDF5: 1\.[0-9]*\.[0-9]* (parallel)$' "$fsdp_tmp/out"; fi
if grep -q '^#define FSDP_HAVE_OPENBLAS_GET_CONFIG 1' "$config"; then expect_grep '^  BLAS: OpenBLAS' "$fsdp_tmp/out"; fi
if grep -q '^#define FSDP_HAVE_CUDA 1' "$config"; then
  expect_grep '^  backends: host cuda$' "$fsdp_tmp/out"
  expect_grep '^  CUDA: runtime ' "$fsdp_tmp/out"
else
  expect_grep '^  CUDA: not built' "$fsdp_tmp/out"
fi
if grep -q '^#define FSDP_HAVE_NCCL 1' "$config"; then expect_grep '^  NCCL: 2\.' "$fsdp_tmp/out"; fi

# A bad layout is an error, and the job ends (test_shardgroup_errors checks that
# every rank raises it; here the first MPI_Abort may end a rank before it prints).
fsdp_run 4 "$info" -fsdp_sharding_factor 3 >"$fsdp_tmp/out" 2>&1 && { echo "FAIL: F = 3 on 4 ranks succeeded"; exit 1; }
expect_grep '^\[[0-3]\] FSDP ERROR: invalid argument: sharding factor 3 does not divide world size 4$' "$fsdp_tmp/out"

# An unknown option is reported, with the name it probably meant.
fsdp_run 1 "$info" -fsdp_log_veiw >"$fsdp_tmp/out" 2>&1
expect_grep 'fsdp_log_veiw (no value) (from the command line): did you mean -fsdp_log_view?' "$fsdp_tmp/out"
# fsdp-info has no options of its own: another word, or a malformed -fsdp_view, fails on every rank.
for args in "-foo" "-fsdp_view notabool"; do
  if fsdp_run 2 "$info" $args >"$fsdp_tmp/out" 2>&1; then cat "$fsdp_tmp/out"; echo "FAIL: fsdp-info $args exited 0"; exit 1; fi
done
fsdp_run 2 "$info" -foo >"$fsdp_tmp/out" 2>&1
expect_count 2 "^\[[01]\] FSDP ERROR: invalid option value: fsdp-info: unknown argument '-foo': fsdp-info takes libfsdp's -fsdp_\* options only" "$fsdp_tmp/out"
fsdp_run 2 "$info" -fsdp_view notabool >"$fsdp_tmp/out" 2>&1
expect_grep "option -fsdp_view: 'notabool' (from the command line) is not a boolean" "$fsdp_tmp/out"

# -fsdp_node_source slurm: nodes from each rank's SLURM_NODEID (two ranks,
# two ids: two nodes); a rank without a usable id, or ranks that disagree on
# the option, fail on every rank with the cause.
mpmd() { # ID1 SOURCE1 ID2 SOURCE2: rank 0 and rank 1 with these SLURM_NODEIDs and node sources
  timeout "$FSDP_TEST_TIMEOUT" $MPIEXEC $MPIEXEC_FLAGS -n 1 env SLURM_NODEID="$1" "$info" -fsdp_node_source "$2" \
    : -n 1 env SLURM_NODEID="$3" "$info" -fsdp_node_source "$4" >"$fsdp_tmp/out" 2>&1
}
mpmd 0 slurm 1 slurm || { cat "$fsdp_tmp/out"; echo "FAIL: -fsdp_node_source slurm"; exit 1; }
expect_grep "^ShardGroup: 2 ranks on 2 nodes" "$fsdp_tmp/out"
if mpmd 0 slurm abc slurm; then cat "$fsdp_tmp/out"; echo "FAIL: SLURM_NODEID=abc accepted"; exit 1; fi
expect_count 2 "^\[[01]\] FSDP ERROR: invalid option value: -fsdp_node_source slurm: SLURM_NODEID is not a node number on rank 1 " "$fsdp_tmp/out"
if mpmd 0 slurm 1 mpi; then cat "$fsdp_tmp/out"; echo "FAIL: ranks disagreeing on -fsdp_node_source went on"; exit 1; fi
expect_count 2 "^\[[01]\] FSDP ERROR: invalid argument: ranks disagree on the ShardGroup's -fsdp_node_source" "$fsdp_tmp/out"

# A task srun has bound (its environment says so) is not rebound by -fsdp_bind,
# on every rank, unless -fsdp_bind_force; and the Slurm ids are shown.
if [ $have_hwloc = yes ]; then
  if SLURM_CPU_BIND_TYPE=mask_cpu: SLURM_CPU_BIND_LIST=0x1,0x2 fsdp_run 2 "$info" -fsdp_bind core >"$fsdp_tmp/out" 2>&1; then
    cat "$fsdp_tmp/out"; echo "FAIL: -fsdp_bind rebound a task Slurm had bound"; exit 1
  fi
  expect_count 2 "^\[[01]\] FSDP ERROR: invalid option value: -fsdp_bind core: Slurm already bound this task (SLURM_CPU_BIND_TYPE=mask_cpu:, SLURM_CPU_BIND_LIST=0x1,0x2)" "$fsdp_tmp/out"
  SLURM_CPU_BIND_TYPE=none fsdp_run 1 "$info" -fsdp_bind core >"$fsdp_tmp/out" 2>&1 || { cat "$fsdp_tmp/out"; exit 1; }
  SLURM_CPU_BIND_TYPE=mask_cpu: SLURM_JOB_ID=77 SLURM_STEP_ID=3 SLURM_JOB_NODELIST='n[1-2]' \
    fsdp_run 1 "$info" -fsdp_bind core -fsdp_bind_force >"$fsdp_tmp/out" 2>&1 || { cat "$fsdp_tmp/out"; exit 1; }
  expect_grep "^  topology: this machine; binding: core" "$fsdp_tmp/out"
  expect_grep "^  Slurm: job 77, step 3, nodes n\[1-2\]; nodes of this group from MPI" "$fsdp_tmp/out"
fi
exit 0
