#!/bin/sh
# The shard group's reduce-scatter and all-gather through node shared memory
# (-fsdp_shm_reduce, doc/overlap.md): on by default when the shard group
# shares a node, as -fsdp_view says, and the same training as MPI's
# collectives.  An all-gather is a copy either way, and with two ranks per
# shard group a sum is a + b either way, so the loss logs are byte-identical:
# W = 2 on each engine, W = 4 in hybrid groups of 2, and with -grad_accum 3,
# whose accumulating units hold more gradient buffers than planned and
# reduce those through MPI (fsdp-train's summary counts both kinds), also
# between bf16 all-gathers, which MPI runs.  In bf16 the parameters travel in place through
# MPI while the gradients still take shared memory.  With four ranks the
# order of the sums differs from MPICH's: the losses agree within 1e-6.
# Views (-fsdp_shm_views, the default with fp32 parameters): each unit's
# parameters are kept once on the node and gathered in place, so a step runs
# one all-gather and one reduce-scatter per unit (backward finds every unit
# from forward), the memory is the views' formula, and the training is the
# same as gathering into buffers, full and grad_op.
. "${srcdir:-.}/tests/testlib.sh"
train="$top_builddir/tools/fsdp-train"
common="-model mlp:in=8,hidden=48,depth=3,out=2,act=gelu,norm=layernorm -data synthetic:n=512 -steps 20 -batch 32 -log_every 20"

same() {
  cmp "$fsdp_tmp/$1.csv" "$fsdp_tmp/$2.csv" ||
    { paste -d' ' "$fsdp_tmp/$1.csv" "$fsdp_tmp/$2.csv" | head; echo "FAIL: $1 and $2 trained differently"; exit 1; }
}

# used NAME: fsdp-train's summary says every collective of rank 0 ran in
# shared memory (W = 2: they are all the shard group's); none: none did.
used() { expect_grep "^fsdp-train: rank 0 ran \([1-9][0-9]*\) of \1 collectives in node shared memory\$" "$fsdp_tmp/$1.out"; }
none() { expect_count 0 "in node shared memory" "$fsdp_tmp/$1.out"; }

train_run w2 2 -fsdp_view
expect_grep "^ *reduce-scatter: node shared memory (.*); all-gather: into views: .*(-fsdp_shm_views)\$" "$fsdp_tmp/w2.out"
used w2
# 20 steps of 4 units: 160 collectives, no all-gather in backward.
expect_grep "^fsdp-train: rank 0 ran 160 of 160 collectives in node shared memory\$" "$fsdp_tmp/w2.out"
expect_grep "^  unsharded buffers .* sum(psi_i)/F + 2 max(psi_i), views\$" "$fsdp_tmp/w2.out"
train_run w2-copies 2 -fsdp_view -fsdp_shm_views false
expect_grep "^ *reduce-scatter: node shared memory (.*); all-gather: node shared memory\$" "$fsdp_tmp/w2-copies.out"
expect_grep "^  unsharded buffers .* (L + 2) max(psi_i), L = 2\$" "$fsdp_tmp/w2-copies.out"
same w2 w2-copies
train_run grad-op 2 -fsdp_sharding_strategy grad_op -fsdp_view
expect_grep "all-gather: into views" "$fsdp_tmp/grad-op.out"
expect_grep "^fsdp-train: rank 0 ran 160 of 160 collectives in node shared memory\$" "$fsdp_tmp/grad-op.out"
train_run grad-op-mpi 2 -fsdp_sharding_strategy grad_op -fsdp_shm_reduce false
same grad-op grad-op-mpi
train_run w2-mpi 2 -fsdp_view -fsdp_shm_reduce false
expect_grep "^ *reduce-scatter: MPI; all-gather: MPI\$" "$fsdp_tmp/w2-mpi.out"
none w2-mpi
same w2 w2-mpi
for engine in thread nonblocking sync; do
  train_run "w2-$engine" 2 -fsdp_comm_engine $engine
  used "w2-$engine"
  same w2 "w2-$engine"
done
# Units holding gradients without sync grow the pool beyond the window:
# those reduce-scatters go through MPI, on every rank alike.
train_run accum 2 -grad_accum 3
expect_grep "^fsdp-train: rank 0 ran [1-9][0-9]* of [0-9]* collectives in node shared memory, and [1-9][0-9]* through MPI instead" "$fsdp_tmp/accum.out"
train_run accum-mpi 2 -grad_accum 3 -fsdp_shm_reduce false
same accum accum-mpi
# MPI's in-place bf16 all-gathers between the shared-memory reduce-scatters
# and their MPI fallbacks: every rank must start them in the same order.
for prefetch in pre post; do
  train_run "mixed-$prefetch" 2 -fsdp_param_dtype bf16 -fsdp_reduce_dtype fp32 -grad_accum 3 \
    -fsdp_comm_engine nonblocking -fsdp_backward_prefetch $prefetch
  train_run "mixed-$prefetch-mpi" 2 -fsdp_param_dtype bf16 -fsdp_reduce_dtype fp32 -grad_accum 3 \
    -fsdp_comm_engine nonblocking -fsdp_backward_prefetch $prefetch -fsdp_shm_reduce false
  same "mixed-$prefetch" "mixed-$prefetch-mpi"
done
train_run bf16 2 -fsdp_param_dtype bf16 -fsdp_reduce_dtype fp32 -fsdp_view
expect_grep "^ *reduce-scatter: node shared memory (.*); all-gather: MPI\$" "$fsdp_tmp/bf16.out"
train_run bf16-mpi 2 -fsdp_param_dtype bf16 -fsdp_reduce_dtype fp32 -fsdp_shm_reduce false
same bf16 bf16-mpi
train_run hybrid 4 -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2 -fsdp_view
expect_grep "^ *reduce-scatter: node shared memory" "$fsdp_tmp/hybrid.out"
train_run hybrid-mpi 4 -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2 -fsdp_shm_reduce false
same hybrid hybrid-mpi
train_run w4 4
train_run w4-mpi 4 -fsdp_shm_reduce false
awk -F, 'NR == FNR { if (FNR > 1) want[$1] = $2; next }
  FNR > 1 { n++; d = $2 - want[$1]; if (d < 0) d = -d; if (d > 1e-6 * want[$1]) bad++ }
  END { if (n != 20 || bad) { printf "FAIL: W = 4: %d of %d steps differ by more than 1e-6\n", bad, n; exit 1 } }' \
  "$fsdp_tmp/w4-mpi.csv" "$fsdp_tmp/w4.csv" || exit 1
echo "shared-memory collectives: W = 2 (views and copies, grad_op, three engines, -grad_accum 3, bf16) and hybrid groups of 2 train as MPI's, W = 4 within 1e-6"
exit 0
