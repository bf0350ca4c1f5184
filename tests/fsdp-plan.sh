#!/bin/sh
# fsdp-plan (issue 41): its table and choice; the choice, as an options file,
# runs fsdp-train, whose -fsdp_view shows the memory plan the planner
# predicted; a budget nothing fits exits 1 naming the least memory and what
# dominates it; the job's shape from the ranks it runs on and from a Slurm
# allocation's environment; the probe's rates; its argument errors.
. "${srcdir:-.}/tests/testlib.sh"
plan="$top_builddir/tools/fsdp-plan"
train="$top_builddir/tools/fsdp-train"
unset SLURM_JOB_NUM_NODES SLURM_NTASKS_PER_NODE SLURM_TASKS_PER_NODE
model=mlp:in=16,hidden=64,depth=3,out=4,norm=layernorm

# Given shape and rates: a header, a row per candidate, the choice and its memory.
"$plan" -model "$model" -nodes 1 -ranks_per_node 2 -batch 32 -flops 1e10 -intra_bw 1e9 -latency 1e-5 \
  -options_out "$fsdp_tmp/plan.opts" >"$fsdp_tmp/out" 2>"$fsdp_tmp/err" ||
  { cat "$fsdp_tmp/out" "$fsdp_tmp/err"; echo "FAIL: fsdp-plan exited with an error"; exit 1; }
cat "$fsdp_tmp/out"
expect_grep "^FSDPPlan: model '$model', [0-9]* parameters" "$fsdp_tmp/out"
expect_grep '^  job: 1 node x 2 ranks (W = 2), from FSDPPlanSetJob; 32 rows per step; optimizer adamw$' "$fsdp_tmp/out"
expect_grep '^  rates (given): compute 10 GFLOP/s per rank, intra-node 1 GB/s, inter-node unknown, latency 10 us$' \
  "$fsdp_tmp/out"
# W = 2: full, grad_op and none (no hybrid below W), 2 wrappings, 1, 2, 4 or 8 micro-batches (32 = 2 x 16), 2 ways.
expect_count 48 '^ *[0-9][0-9]* \(full\|grad_op\|none\) ' "$fsdp_tmp/out"
expect_count 1 '^  choice: -fsdp_sharding_strategy ' "$fsdp_tmp/out"
# Candidate 0 is the choice; the rows are in predicted-step order.
row0=$(awk '$1 == "0" {print $2, $6, $8, $5}' "$fsdp_tmp/out")
set -- $row0
ckpt=false; [ "$3" = on ] && ckpt=true
expect_grep "^  choice: -fsdp_sharding_strategy $1 -fsdp_wrap $4 -fsdp_activation_checkpointing $ckpt -batch $((32 / $2)) -grad_accum $2\$" \
  "$fsdp_tmp/out"
awk '$1 ~ /^[0-9]+$/ {print $(NF-1)}' "$fsdp_tmp/out" | sort -c -g ||
  { echo "FAIL: the candidates are not in predicted-step order"; exit 1; }
[ "$(tail -n 1 "$fsdp_tmp/plan.opts")" = "$(sed -n 's/^  choice: //p' "$fsdp_tmp/out")" ] ||
  { cat "$fsdp_tmp/plan.opts"; echo "FAIL: -options_out does not hold the choice"; exit 1; }

# Rates print in units that keep them readable, never with an exponent.
"$plan" -model "$model" -nodes 2 -ranks_per_node 1 -flops 1.5e12 -intra_bw 999.7 -inter_bw 2e15 -latency 0.0125 \
  >"$fsdp_tmp/rates" 2>&1 || { cat "$fsdp_tmp/rates"; echo "FAIL: fsdp-plan with large rates"; exit 1; }
expect_grep '^  rates (given): compute 1.5 TFLOP/s per rank, intra-node 1 kB/s, inter-node 2 PB/s, latency 12.5 ms$' \
  "$fsdp_tmp/rates"

# The choice runs, and the job's memory plan is the predicted one.
fsdp_run 2 "$train" -model "$model" -steps 2 -log_every 0 -options_file "$fsdp_tmp/plan.opts" -fsdp_view \
  >"$fsdp_tmp/train" 2>&1 || { cat "$fsdp_tmp/train"; echo "FAIL: fsdp-train with the chosen options"; exit 1; }
sh "${srcdir:-.}/tests/plan-matches-view.sh" "$fsdp_tmp/out" "$fsdp_tmp/train" || exit 1

# The bytes a rank sends in its shard group per step (the table's shard MB)
# are what fsdp-train's all-gathers and reduce-scatters move (-fsdp_log_view:
# the unsharded bytes, of which a rank sends (F-1)/F), without views: with
# block wrapping backward gathers again all but the last units forward ran,
# which the context's parameter buffers (2, or -fsdp_limit_all_gathers)
# still hold; a tied GPT gathers its embedding's unit again for the head;
# micro-batches gather each, and reduce once a step.
# check_bytes MODEL K CKPT LIMIT [fsdp-train options...]
check_bytes() {
  m=$1 k=$2 ckpt=$3 limit=$4
  shift 4
  "$plan" -model "$m" -nodes 1 -ranks_per_node 4 -batch 32 -memory none -flops 1e10 -intra_bw 1e9 -latency 1e-5 \
    -fsdp_shm_views false -fsdp_limit_all_gathers "$limit" >"$fsdp_tmp/bytes.plan" 2>&1 ||
    { cat "$fsdp_tmp/bytes.plan"; echo "FAIL: fsdp-plan, 4 ranks, $m"; exit 1; }
  fsdp_run 4 "$train" -model "$m" "$@" -steps 3 -batch $((32 / k)) -grad_accum "$k" -log_every 0 \
    -fsdp_sharding_strategy full -fsdp_wrap block -fsdp_activation_checkpointing $([ "$ckpt" = on ] && echo true || echo false) \
    -fsdp_shm_views false -fsdp_limit_all_gathers "$limit" -fsdp_log_view >"$fsdp_tmp/bytes.train" 2>&1 ||
    { cat "$fsdp_tmp/bytes.train"; echo "FAIL: fsdp-train, full sharding over 4 ranks, $m"; exit 1; }
  predicted=$(awk -v k="$k" -v c="$ckpt" '$2 == "full" && $3 == 4 && $5 == "block" && $6 == k && $8 == c {print $16; exit}' \
    "$fsdp_tmp/bytes.plan")
  moved=$(awk '$1 == "AllGather" || $1 == "ReduceScatter" {b += $7} END {printf "%.3f", b / 3 * 3 / 4 / 1e6}' \
    "$fsdp_tmp/bytes.train")
  [ -n "$predicted" ] && awk -v p="$predicted" -v m="$moved" 'BEGIN {exit !(p > 0 && (p - m) ^ 2 < (1e-3 * p) ^ 2)}' ||
    { grep -E '^(AllGather|ReduceScatter) ' "$fsdp_tmp/bytes.train"
      echo "FAIL: $m, K = $k, checkpointing $ckpt, limit $limit: fsdp-plan predicted a rank sends $predicted MB a step in its shard group; fsdp-train's collectives moved $moved MB"; exit 1; }
}
for i in 1 2 3 4 5 6 7 8; do cat "${srcdir:-.}/README.md"; done >"$fsdp_tmp/text.txt"
check_bytes mlp:in=64,hidden=512,depth=4,out=8 1 off 0
check_bytes mlp:in=64,hidden=512,depth=4,out=8 2 on 1
check_bytes gpt:vocab=256,ctx=16,dim=32,heads=2,layers=2,tied=1 1 off 0 -data "text:$fsdp_tmp/text.txt"

# Nothing fits: exit 1, the least memory, its layout and its largest part, on stderr.
if "$plan" -model "$model" -nodes 2 -ranks_per_node 2 -batch 32 -memory 10K >"$fsdp_tmp/out" 2>"$fsdp_tmp/err"; then
  echo "FAIL: fsdp-plan chose a layout within 10 KiB"; exit 1
fi
cat "$fsdp_tmp/err"
expect_grep "fsdp-plan: FSDPPlanGetChoice: model '$model' fits no layout within the budget of 10.00 KiB per rank at W = 4 (2 nodes x 2): the least any layout needs is .* per rank (strategy full, F = 4, .*), of which .* \(is\|are\) " "$fsdp_tmp/err"
expect_grep '^  choice: none fits the budget; the least any layout needs is ' "$fsdp_tmp/out"
expect_count 0 '^.* yes$' "$fsdp_tmp/out"

# The shape of a Slurm allocation, planned from its batch script before srun.
SLURM_JOB_NUM_NODES=3 SLURM_TASKS_PER_NODE='4(x3)' "$plan" -model "$model" -batch 24 -memory none >"$fsdp_tmp/out" 2>&1 ||
  { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan in an allocation"; exit 1; }
expect_grep '^  job: 3 nodes x 4 ranks (W = 12), from the Slurm allocation' "$fsdp_tmp/out"
expect_grep '^ *[0-9][0-9]* hybrid  *2  *6 ' "$fsdp_tmp/out"

# The shape of nodes given as an hwloc topology: a rank per core, the budget its memory shared by them.
synthetic='pack:2 numa:1(memory=3GB) core:4 pu:2'
if grep -q '^#define FSDP_HAVE_HWLOC 1' "$top_builddir/src/include/fsdp_config.h"; then
  "$plan" -model "$model" -topology "$synthetic" -nodes 2 -batch 32 >"$fsdp_tmp/out" 2>&1 ||
    { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -topology"; exit 1; }
  expect_grep "^  job: 2 nodes x 8 ranks (W = 16), from FSDPPlanSetJob, a rank per core of the topology of synthetic '$synthetic' (2 packages, 2 NUMA nodes, 8 cores, 16 PUs, 0 GPUs);" \
    "$fsdp_tmp/out"
  # 2 x 3 GB (hwloc's synthetic GB are 10^9 bytes) over 8 ranks.
  expect_grep "^  memory budget per rank: 715.26 MiB (the topology's 5.59 GiB of physical memory shared by 8 ranks)$" \
    "$fsdp_tmp/out"
  expect_grep '^ *[0-9][0-9]* hybrid  *8  *2 ' "$fsdp_tmp/out"
  # The same node as lstopo writes it on a compute node; -ranks_per_node overrides its cores, not its memory.
  if command -v lstopo-no-graphics >/dev/null 2>&1; then
    lstopo-no-graphics --input "$synthetic" --of xml "$fsdp_tmp/node.xml" ||
      { echo "FAIL: lstopo could not write the XML"; exit 1; }
    "$plan" -model "$model" -topology "$fsdp_tmp/node.xml" -ranks_per_node 2 -batch 32 >"$fsdp_tmp/out" 2>&1 ||
      { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -topology FILE"; exit 1; }
    expect_grep '^  job: 1 node x 2 ranks (W = 2), from FSDPPlanSetJob;' "$fsdp_tmp/out"
    expect_grep "^  memory budget per rank: 2.79 GiB (the topology's 5.59 GiB of physical memory shared by 2 ranks)$" \
      "$fsdp_tmp/out"
  fi
  # Planning for GPUs: a rank per GPU, each with its GPU's memory (the XML's H100s carry 80 GiB as
  # hwloc's CUDA backend writes it); more ranks than GPUs share them; the cores again on the host.
  gpus="${srcdir:-.}/tests/topologies/2socket-8gpu.xml"
  "$plan" -model "$model" -topology "$gpus" -nodes 2 -batch 32 -fsdp_device cuda >"$fsdp_tmp/out" 2>&1 ||
    { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -topology with GPUs"; exit 1; }
  expect_grep "^  job: 2 nodes x 8 ranks (W = 16), from FSDPPlanSetJob, a rank per GPU of the topology of XML file '.*2socket-8gpu.xml' (2 packages, 2 NUMA nodes, 16 cores, 16 PUs, 8 GPUs);" \
    "$fsdp_tmp/out"
  expect_grep "^  memory budget per rank: 80.00 GiB (the topology's GPUs: 80.00 GiB each, 1 rank on each)\$" "$fsdp_tmp/out"
  expect_grep '^ *[0-9][0-9]* hybrid  *8  *2 ' "$fsdp_tmp/out"
  "$plan" -model "$model" -topology "$gpus" -ranks_per_node 16 -batch 32 -fsdp_device cuda >"$fsdp_tmp/out" 2>&1 ||
    { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -topology with GPUs, -ranks_per_node 16"; exit 1; }
  expect_grep '^  job: 1 node x 16 ranks (W = 16), from FSDPPlanSetJob;' "$fsdp_tmp/out"
  expect_grep "^  memory budget per rank: 40.00 GiB (the topology's GPUs: 80.00 GiB each, 2 ranks on each)\$" "$fsdp_tmp/out"
  "$plan" -model "$model" -topology "$gpus" -batch 32 >"$fsdp_tmp/out" 2>&1 ||
    { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -topology with GPUs, on the host"; exit 1; }
  expect_grep "^  job: 1 node x 16 ranks (W = 16), from a rank per core of the topology of XML file " "$fsdp_tmp/out"
  expect_grep "^  memory budget per rank: .* (the topology's .* of physical memory shared by 16 ranks)\$" "$fsdp_tmp/out"
  "$plan" -model "$model" -topology "${srcdir:-.}/tests/topologies/2socket-2gpu.xml" -batch 32 -fsdp_device cuda \
    >"$fsdp_tmp/out" 2>&1 || { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -topology, GPUs of unknown memory"; exit 1; }
  expect_grep '^  job: 1 node x 2 ranks (W = 2), from a rank per GPU of the topology of ' "$fsdp_tmp/out"
  expect_grep "^  memory budget per rank: none (a GPU's memory is unknown: the topology does not give it; lstopo writes it where hwloc has its CUDA backend)\$" \
    "$fsdp_tmp/out"
  "$plan" -model "$model" -topology "$synthetic" -batch 32 -fsdp_device cuda >"$fsdp_tmp/out" 2>&1 ||
    { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -topology without GPUs, on GPUs"; exit 1; }
  expect_grep '^  job: 1 node x 8 ranks (W = 8), from a rank per core of the topology of ' "$fsdp_tmp/out"
  expect_grep "^  memory budget per rank: none (a GPU's memory is unknown: the topology has no GPUs)\$" "$fsdp_tmp/out"
  "$plan" -model "$model" -topology "$fsdp_tmp/none.xml" >"$fsdp_tmp/out" 2>&1 &&
    { echo "FAIL: a missing topology file was accepted"; exit 1; }
  expect_grep "FSDPPlanSetTopology '$fsdp_tmp/none.xml': no such file" "$fsdp_tmp/out"
else
  "$plan" -model "$model" -topology "$synthetic" >"$fsdp_tmp/out" 2>&1 &&
    { echo "FAIL: -topology was accepted without hwloc"; exit 1; }
  expect_grep "FSDPPlanSetTopology '$synthetic' needs hwloc, and this libfsdp was built without it" "$fsdp_tmp/out"
fi

# On the job itself, with its rates measured: the ranks it runs on, rates known, every step predicted.
fsdp_run 2 "$plan" -model "$model" -batch 32 -probe >"$fsdp_tmp/out" 2>&1 ||
  { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -probe"; exit 1; }
expect_grep '^  job: 1 node x 2 ranks (W = 2), from the planner.s communicator' "$fsdp_tmp/out"
expect_grep '^  rates (measured by FSDPPlanProbe): compute [0-9.]* [kMGT]*FLOP/s per rank, intra-node [0-9.]* [kMGT]*B/s, inter-node unknown, latency [0-9.]* [um]*s$' \
  "$fsdp_tmp/out"
expect_count 0 '^ *[0-9][0-9]* .* - *yes$' "$fsdp_tmp/out"
# The collectives were timed for both group sizes, and stand for the rates on this job.
expect_grep '^  collectives (timed by FSDPPlanProbe on 1 node x 2 ranks, every group at once; ms for a rank.s shard of the sizes shown): the comm column sums them over each candidate.s collectives$' \
  "$fsdp_tmp/out"
expect_grep '^    F = 1 ([0-9.]* KiB, [0-9.]* KiB, [0-9.]* MiB): all-reduce across 2 replicas [0-9.e+-]*, [0-9.e+-]*, [0-9.e+-]*$' "$fsdp_tmp/out"
# F = 2 is the node's 2 ranks: its all-gathers and reduce-scatters run in the node's shared memory, as the
# job's would (-fsdp_shm_reduce); with -fsdp_shm_reduce false, through MPI.
expect_grep '^    F = 2 ([0-9.]* KiB, [0-9.]* KiB, [0-9.]* MiB): all-gather in node shared memory [0-9.e+-]*, [0-9.e+-]*, [0-9.e+-]*; reduce-scatter in node shared memory [0-9.e+-]*, [0-9.e+-]*, [0-9.e+-]*$' \
  "$fsdp_tmp/out"
fsdp_run 2 "$plan" -model "$model" -batch 32 -probe -fsdp_shm_reduce false >"$fsdp_tmp/mpi.out" 2>&1 ||
  { cat "$fsdp_tmp/mpi.out"; echo "FAIL: fsdp-plan -probe -fsdp_shm_reduce false"; exit 1; }
expect_grep '^    F = 2 ([0-9.]* KiB, [0-9.]* KiB, [0-9.]* MiB): all-gather [0-9.e+-]*, [0-9.e+-]*, [0-9.e+-]*; reduce-scatter [0-9.e+-]*, [0-9.e+-]*, [0-9.e+-]*$' \
  "$fsdp_tmp/mpi.out"
# The model itself was timed, and every row's compute is those times scaled: a line through the two
# passes for each micro-batch, 4/3 of it under checkpointing, and the optimizer's step over 1/F.
expect_grep "^  the model's step (measured by FSDPPlanProbe, unsharded, every rank at once): forward and backward [0-9.]* ms for [0-9]* rows\?, [0-9.]* ms for [0-9]*; the optimizer [0-9.]* ms for all [0-9]* parameters; " \
  "$fsdp_tmp/out"
awk '/^  the model.s step \(measured/ {
       for (i = 1; i <= NF; i++) {
         if ($i == "backward") { t0 = $(i + 1); n0 = $(i + 4) }
         if ($i == "rows," || $i == "row,") { t1 = $(i + 1); n1 = $(i + 4) + 0 }
         if ($i == "optimizer") o = $(i + 1)
       }
       per = n1 > n0 ? (t1 - t0) / (n1 - n0) : t1 / n1; if (per <= 0) per = t1 / n1
       fixed = t1 - per * n1; if (fixed < 0) fixed = 0
     }
     $1 ~ /^[0-9]+$/ && $(NF) == "yes" {
       want = ($6 * fixed + $6 * $7 * per) * ($8 == "on" ? 4 / 3 : 1) + o / $3; got = $(NF - 3)
       if (got - want > 0.01 * want + 0.01 || want - got > 0.01 * want + 0.01) {
         printf "FAIL: candidate %s: compute %s ms, the timed passes give %.4g ms\n", $1, got, want; bad = 1
       }
       rows++
     }
     END { if (!t1 || !rows) { print "FAIL: no timing or no candidates"; bad = 1 }; exit bad }' "$fsdp_tmp/out" ||
  { cat "$fsdp_tmp/out"; exit 1; }
# A GPU job planned where no GPU is (a login node): the probe measures the links, but neither the model nor
# a compute rate (the host's GEMMs are not the GPU's), and says why.
if ! nvidia-smi -L >/dev/null 2>&1; then
  fsdp_run 2 "$plan" -model "$model" -batch 32 -memory 1G -probe -fsdp_device cuda >"$fsdp_tmp/out" 2>&1 ||
    { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -probe -fsdp_device cuda without a GPU"; exit 1; }
  expect_grep "^  rates (measured by FSDPPlanProbe): compute unknown per rank, intra-node [0-9.]* [kMG]*B/s" \
    "$fsdp_tmp/out"
  expect_grep "^  the model's step: not timed (-fsdp_device is a GPU's, but a rank sees no GPU)" "$fsdp_tmp/out"
fi
# A model too large for the budget's half is not timed, and says so.
fsdp_run 2 "$plan" -model "$model" -batch 32 -memory 64K -probe >"$fsdp_tmp/out" 2>&1
expect_grep "^  the model's step: not timed (its parameters, gradients and optimizer state pass 1 GiB or half the budget)" \
  "$fsdp_tmp/out"

# Mistakes are named.
"$plan" -model "$model" -bogus 3 >"$fsdp_tmp/out" 2>&1 && { echo "FAIL: an unknown option was accepted"; exit 1; }
expect_grep "fsdp-plan: unknown option '-bogus'" "$fsdp_tmp/out"
"$plan" -batch 8 >"$fsdp_tmp/out" 2>&1 && { echo "FAIL: no -model was accepted"; exit 1; }
expect_grep 'fsdp-plan: -model SPEC is required' "$fsdp_tmp/out"
"$plan" -model "$model" -memory 12Q >"$fsdp_tmp/out" 2>&1 && { echo "FAIL: -memory 12Q was accepted"; exit 1; }
expect_grep "fsdp_plan_memory '12Q': expected auto, none, or a number of bytes" "$fsdp_tmp/out"
"$plan" -help >"$fsdp_tmp/out" 2>&1 || { cat "$fsdp_tmp/out"; echo "FAIL: fsdp-plan -help"; exit 1; }
expect_grep '^  -ranks_per_node ' "$fsdp_tmp/out"
expect_grep 'fsdp_plan_inter_bw' "$fsdp_tmp/out"
echo "fsdp-plan: ok"
