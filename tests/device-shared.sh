#!/bin/sh
# Several ranks on one GPU: NCCL refuses a device twice in a communicator, so
# the shard group falls back to MPI through pinned host staging, with a
# warning that says why, and the results still equal the host backend's
# (test_device's comparisons, run with every rank on GPU 0).  fsdp-train
# with -fsdp_device cuda says what the backend does not cover yet.  Without
# a GPU: SKIP, after checking that -fsdp_device cuda says why it cannot run.
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
rc=0
CUDA_VISIBLE_DEVICES=0 fsdp_run 2 "$train" -model mlp:in=4,hidden=8,depth=1,out=2 -steps 1 -fsdp_device cuda \
  >"$fsdp_tmp/train" 2>&1 || rc=$?
[ $rc -ne 0 ] || { echo "FAIL: fsdp-train -fsdp_device cuda ran, but the layer library is host-only"; exit 1; }
expect_grep "the layer library runs on the host only so far" "$fsdp_tmp/train"
