#!/bin/sh
# fsdp-train as a user runs it: the same loss curve (fp32 rounding apart) at
# W = 1, 2, 4 under every sharding strategy, with emulated nodes, other
# wrappings, and gradient accumulation for the same effective batch; HDF5
# regression and classification data; -init; progress and summary lines;
# and a clear error, a non-zero exit and no hang for each kind of bad input.
. "${srcdir:-.}/tests/testlib.sh"
train="$top_builddir/tools/fsdp-train"
h5data="$top_builddir/tests/h5data"
model="mlp:in=6,hidden=16,depth=3,out=2,act=tanh,norm=layernorm"
common="-model $model -steps 8 -lr 0.01 -log_every 0"


# same REF NAME: both logs have 8 steps whose losses agree within 1e-5 relative.
same() {
  awk -F, -v ref="$1" -v name="$2" '
    NR == FNR { if (FNR > 1) want[$1] = $2; next }
    FNR == 1 { if ($0 != "step,loss") { print "FAIL: " name ": header " $0; bad = 1 }; next }
    { n++; d = $2 - want[$1]; if (d < 0) d = -d; s = want[$1] < 0 ? -want[$1] : want[$1]
      if (!($1 in want) || d > 1e-5 * s + 1e-9) { print "FAIL: " name " step " $1 ": loss " $2 ", " ref " has " want[$1]; bad = 1 } }
    END { if (n != 8) { print "FAIL: " name " has " n " steps"; bad = 1 }; exit bad }' \
    "$fsdp_tmp/$1.csv" "$fsdp_tmp/$2.csv" || exit 1
}

# ------------------------------------------------------------------ loss curves
data="-data synthetic:n=256,seed=3 -batch 16"
train_run w1 1 $data
for s in full grad_op none; do
  train_run "w2_$s" 2 $data -fsdp_sharding_strategy $s
  same w1 "w2_$s"
done
for s in full grad_op none; do
  train_run "w4_$s" 4 $data -fsdp_sharding_strategy $s
  same w1 "w4_$s"
done
for s in hybrid hybrid_zero2; do # 2 emulated nodes of 2 ranks
  train_run "w4_$s" 4 $data -fsdp_sharding_strategy $s -fsdp_ranks_per_node 2
  same w1 "w4_$s"
done
# PyTorch's names select the same strategies; the progress header says the canonical one.
train_run w4_pytorch_name 4 $data -fsdp_sharding_strategy HYBRID_SHARD -fsdp_ranks_per_node 2 -log_every 8
same w4_hybrid w4_pytorch_name
expect_grep '^fsdp-train: 4 ranks, hybrid sharding, F = 2, 2 replicas' "$fsdp_tmp/w4_pytorch_name.out"
# A job's configuration in an options file: the program's options and libfsdp's.
cat >"$fsdp_tmp/job.opts" <<EOF
# 2 emulated nodes of 2 ranks, hybrid sharding
-data synthetic:n=256,seed=3 -batch 16
-fsdp_sharding_strategy hybrid_shard  -fsdp_ranks_per_node 2
EOF
train_run w4_options_file 4 -options_file "$fsdp_tmp/job.opts" -log_every 8
same w4_hybrid w4_options_file
expect_grep '^fsdp-train: 4 ranks, hybrid sharding, F = 2, 2 replicas; synthetic (n=256, seed=3)' "$fsdp_tmp/w4_options_file.out"
fsdp_run 1 "$train" -help >"$fsdp_tmp/help.out" 2>&1 || { cat "$fsdp_tmp/help.out"; echo "FAIL: fsdp-train -help"; exit 1; }
expect_grep "^  -fsdp_sharding_strategy <full> (one of full grad_op none hybrid hybrid_zero2): .*PyTorch's names full_shard, shard_grad_op, no_shard, hybrid_shard and hybrid_shard_zero2 (any case) are aliases" "$fsdp_tmp/help.out"
train_run w4_model 4 $data -fsdp_wrap model
same w1 w4_model
train_run w2_size 2 $data -fsdp_wrap size:300
same w1 w2_size
# Two micro-batches of 8 rows are the batch of 16.
train_run w2_accum 2 -data synthetic:n=256,seed=3 -batch 8 -grad_accum 2
same w1 w2_accum
train_run w4_accum 4 -data synthetic:n=256,seed=3 -batch 4 -grad_accum 4 -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2
same w1 w4_accum
# The loss log is real: the curve goes down, and another seed is another curve.
awk -F, 'NR == 2 { first = $2 } END { if (!($2 < first)) { print "FAIL: loss went from " first " to " $2; exit 1 } }' "$fsdp_tmp/w1.csv" || exit 1
train_run seed2 1 $data -seed 2
if cmp -s "$fsdp_tmp/w1.csv" "$fsdp_tmp/seed2.csv"; then echo "FAIL: -seed changed nothing"; exit 1; fi

# ------------------------------------------------------------------ progress and summary
fsdp_run 4 "$train" -model $model -data synthetic:n=256 -steps 6 -batch 16 -log_every 3 \
  -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2 >"$fsdp_tmp/progress" 2>&1 ||
  { cat "$fsdp_tmp/progress"; echo "FAIL: fsdp-train with progress lines"; exit 1; }
cat "$fsdp_tmp/progress"
expect_grep '^fsdp-train: 4 ranks, hybrid sharding, F = 2, 2 replicas; synthetic (n=256, seed=1)$' "$fsdp_tmp/progress"
expect_count 2 '^step      [36]/6  loss [0-9.]*e[-+][0-9]*  .* samples/s  .* ms/step  peak .*/rank  comm .* GB/s$' "$fsdp_tmp/progress"
expect_grep '^fsdp-train: 6 steps in .* s: .* ms/step, .* samples/s, final loss ' "$fsdp_tmp/progress"
expect_grep '^  parameters  .*sum(psi_i)/F$' "$fsdp_tmp/progress"
expect_grep '^  optimizer state  ' "$fsdp_tmp/progress"
# The rest, on the host: 256 rows of 6 + 2 floats, 4 of them per rank, their activations, the objects.
expect_grep '^  other .* data 8\.00 KiB + rows 128 B + activations .* + objects ' "$fsdp_tmp/progress"
summary_is_formula "$fsdp_tmp/progress"
# One unit (-fsdp_wrap model): one gradient buffer, and the formula says so.
fsdp_run 2 "$train" -model $model -data synthetic:n=64 -steps 2 -batch 8 -log_every 2 -fsdp_wrap model \
  >"$fsdp_tmp/one-unit" 2>&1 || { cat "$fsdp_tmp/one-unit"; echo "FAIL: fsdp-train -fsdp_wrap model"; exit 1; }
expect_grep '^  unsharded buffers .* + 1 max(psi_i)' "$fsdp_tmp/one-unit"
summary_is_formula "$fsdp_tmp/one-unit"
# Loading a text file holds its bytes and its tokens at once: with a small model that is the rest's peak, and
# the formula says so.
awk 'BEGIN { for (i = 0; i < 20000; i++) print "the quick brown fox jumps over the lazy dog" }' >"$fsdp_tmp/big.txt"
fsdp_run 2 "$train" -model gpt:vocab=256,ctx=8,dim=8,heads=2,layers=1 -data "text:$fsdp_tmp/big.txt" -steps 2 -batch 2 \
  -log_every 2 >"$fsdp_tmp/loading" 2>&1 || { cat "$fsdp_tmp/loading"; echo "FAIL: fsdp-train on a text file"; exit 1; }
expect_grep "^  other .* max(data .* + objects .*, loading's peak .*)\$" "$fsdp_tmp/loading"
summary_is_formula "$fsdp_tmp/loading"
# -log_every 0 is quiet.
[ ! -s "$fsdp_tmp/w1.out" ] || { cat "$fsdp_tmp/w1.out"; echo "FAIL: -log_every 0 printed something"; exit 1; }

# ------------------------------------------------------------------ bad input
# fail NAME PATTERN NP ARGS...: fsdp-train must fail (not hang) and say PATTERN.
fail() {
  name=$1 pattern=$2 np=$3
  shift 3
  if fsdp_run "$np" "$train" -log_every 0 "$@" >"$fsdp_tmp/$name.err" 2>&1; then
    cat "$fsdp_tmp/$name.err"; echo "FAIL: $name: fsdp-train succeeded"; exit 1
  fi
  rc=$?
  [ $rc -ne 124 ] || { echo "FAIL: $name: fsdp-train hung"; exit 1; }
  expect_grep "$pattern" "$fsdp_tmp/$name.err"
}
fail spec_key "model spec 'mlp:in=6,hidden=16,depth=3,out=2,colour=red': unknown key 'colour'" 2 \
  -model mlp:in=6,hidden=16,depth=3,out=2,colour=red -data synthetic
fail batch "-batch 10 is not divisible by the 4 ranks" 4 -model $model -data synthetic -batch 10
fail option "unknown option '-stpes'" 1 -model $model -stpes 3

# ------------------------------------------------------------------ HDF5 data and -init
"$h5data" data "$fsdp_tmp/reg.h5" 64 6 2
rc=$?
if [ $rc -eq 77 ]; then
  fail no_hdf5 "this libfsdp was built without HDF5; use -data synthetic" 2 -model $model -data "$fsdp_tmp/reg.h5"
  echo "built without HDF5: HDF5 data and -init not tested"
  exit 0
fi
[ $rc -eq 0 ] || { echo "FAIL: h5data"; exit 1; }
fail no_file "cannot open data file '$fsdp_tmp/none.h5'" 2 -model $model -data "$fsdp_tmp/none.h5"
"$h5data" labels "$fsdp_tmp/cls.h5" 64 6 3 || exit 1
"$h5data" data "$fsdp_tmp/wide.h5" 64 7 2 || exit 1
nonorm="mlp:in=6,hidden=16,depth=3,out=2,act=relu"
"$h5data" init "$fsdp_tmp/init.h5" 6 16 3 2 || exit 1
"$h5data" init "$fsdp_tmp/init-omit.h5" 6 16 3 2 omit=blocks.1.fc.bias || exit 1
"$h5data" init "$fsdp_tmp/init-shape.h5" 6 16 3 2 reshape=head.weight || exit 1

train_run reg1 1 -data "$fsdp_tmp/reg.h5" -batch 16
train_run reg4 4 -data "$fsdp_tmp/reg.h5" -batch 16 -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2
same reg1 reg4
# Classification: integer labels, cross-entropy; SGD with nesterov, cosine schedule, clipping.
sgd="-optimizer sgd -momentum 0.9 -nesterov -lr_schedule cosine -warmup_steps 2 -clip_grad_norm 0.5"
fsdp_run 1 "$train" -model mlp:in=6,hidden=16,depth=2,out=3 -data "$fsdp_tmp/cls.h5" -steps 8 -batch 16 $sgd \
  -log_every 0 -loss_log "$fsdp_tmp/cls1.csv" || { echo "FAIL: classification at W = 1"; exit 1; }
fsdp_run 2 "$train" -model mlp:in=6,hidden=16,depth=2,out=3 -data "$fsdp_tmp/cls.h5" -steps 8 -batch 16 $sgd \
  -log_every 0 -loss_log "$fsdp_tmp/cls2.csv" -fsdp_sharding_strategy grad_op || { echo "FAIL: classification at W = 2"; exit 1; }
same cls1 cls2
# -init replaces the initialization: the seed no longer matters, and W does not either.
train_run init_a 1 -model $nonorm -data "$fsdp_tmp/reg.h5" -batch 16 -init "$fsdp_tmp/init.h5" -seed 1
train_run init_b 2 -model $nonorm -data "$fsdp_tmp/reg.h5" -batch 16 -init "$fsdp_tmp/init.h5" -seed 2
same init_a init_b
train_run noinit 1 -model $nonorm -data "$fsdp_tmp/reg.h5" -batch 16 -seed 1
if cmp -s "$fsdp_tmp/init_a.csv" "$fsdp_tmp/noinit.csv"; then echo "FAIL: -init changed nothing"; exit 1; fi

fail shape "/x must be float \[N, 6\] for a model with in=6, not float \[64, 7\]" 2 -model $model -data "$fsdp_tmp/wide.h5"
fail labels "/y must be float \[64, 3\] (regression) or integer \[64\]" 2 -model mlp:in=6,hidden=4,depth=1,out=3 \
  -data "$fsdp_tmp/reg.h5"
fail init_missing "does not match the model: missing /params/blocks.1.fc.bias;" 2 -model $nonorm -data "$fsdp_tmp/reg.h5" \
  -init "$fsdp_tmp/init-omit.h5"
fail init_shape "wrong shape /params/head.weight (file \[3, 16\], model \[2, 16\])" 2 -model $nonorm -data "$fsdp_tmp/reg.h5" \
  -init "$fsdp_tmp/init-shape.h5"
fail init_extra "not in the model /params/blocks.2.fc.bias, /params/blocks.2.fc.weight;" 1 -model $nonorm -data "$fsdp_tmp/reg.h5" \
  -init "$fsdp_tmp/init.h5" -model mlp:in=6,hidden=16,depth=2,out=2
exit 0
