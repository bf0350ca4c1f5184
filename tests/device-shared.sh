#!/bin/sh
# Several ranks on one GPU: NCCL refuses a device twice in a communicator, so
# the shard group falls back to MPI through pinned host staging, with a
# warning that says why, and the results still equal the host backend's
# (test_device's comparisons, run with every rank on GPU 0).  fsdp-train
# with -fsdp_device cuda then trains on that GPU, and its losses follow the
# host's run within 1e-4 (SGD, fp32 GEMMs: -fsdp_tf32 false).  Without a GPU:
# SKIP, after checking that -fsdp_device cuda says why it cannot run.
. "${srcdir:-.}/tests/testlib.sh"
train="$top_builddir/tools/fsdp-train"
rc=0
fsdp_run 1 "$top_builddir/tests/test_device" >"$fsdp_tmp/probe" 2>&1 || rc=$?
if [ $rc -eq 77 ]; then
  rc=0
  fsdp_run 2 "$train" -model mlp:in=4,hidden=8,depth=1,out=2 -steps 1 -fsdp_device cuda >"$fsdp_tmp/nogpu" 2>&1 || rc=$?
  [ $rc -ne 0 ] || { echo "FAIL: fsdp-train -fsdp_device cuda succeeded without a GPU"; exit 1; }
  expect_grep "no CUDA device is visible\|built without CUDA" "$fsdp_tmp/nogpu"
  echo "no GPU visible: the shared-GPU fallback is not exercised"
  exit 77
fi
[ $rc -eq 0 ] || { cat "$fsdp_tmp/probe"; echo "FAIL: test_device on one rank"; exit 1; }
rc=0
CUDA_VISIBLE_DEVICES=0 fsdp_run 4 "$top_builddir/tests/test_device" >"$fsdp_tmp/shared" 2>&1 || rc=$?
[ $rc -eq 0 ] || { cat "$fsdp_tmp/shared"; echo "FAIL: test_device with 4 ranks on one GPU"; exit 1; }
expect_grep "libfsdp WARNING: .*both use GPU .*NCCL refuses a GPU twice.*through MPI with host staging" "$fsdp_tmp/shared"
expect_grep "test_device: all passed" "$fsdp_tmp/shared"
model=mlp:in=6,hidden=32,depth=2,out=3,act=gelu,norm=layernorm
for device in host cuda; do
  rc=0
  CUDA_VISIBLE_DEVICES=0 fsdp_run 2 "$train" -model $model -steps 30 -batch 32 -optimizer sgd -lr 0.05 \
    -momentum 0.9 -log_every 10 -fsdp_device $device -fsdp_tf32 false -loss_log "$fsdp_tmp/$device.csv" \
    >"$fsdp_tmp/$device" 2>&1 || rc=$?
  [ $rc -eq 0 ] || { cat "$fsdp_tmp/$device"; echo "FAIL: fsdp-train -fsdp_device $device"; exit 1; }
done
expect_grep "peak GPU memory per rank" "$fsdp_tmp/cuda"
# Step by step, the two runs' losses agree, and training made progress.
paste -d, "$fsdp_tmp/host.csv" "$fsdp_tmp/cuda.csv" | awk -F, '
  NR > 1 { d = $2 - $4; if (d < 0) d = -d; if (d > 1e-4 * $2) { print "FAIL: step " $1 ": host loss " $2 ", cuda loss " $4; bad = 1 } }
  NR == 2 { first = $4 } END { if (!(last < 0.9 * first)) { print "FAIL: the cuda loss went from " first " to " last; bad = 1 }; exit bad }
  { last = $4 }' || exit 1
