#!/bin/sh
# A checkpoint on a full disk (a 48 KiB tmpfs, mounted in a private mount
# namespace: the machine's mounts never change) ends the job with a named
# error on every rank, instead of hanging in HDF5's collective I/O, and the
# previous checkpoint stays in place and loads:
#   - W = 2 and W = 1, collective, independent and POSIX transfers: the save
#     at step 4 finds no room (its checkpoint at step 2 fills most of the disk);
#   - a disk that fills during the save (the test hook skips the room check):
#     every rank's write fails and names it, or HDF5 leaves ranks in its
#     collectives and the rank whose write failed ends the job with its
#     message after -fsdp_collective_timeout; with POSIX transfers (no
#     collective I/O) every rank returns the error.
# As root the namespace is `unshare -m`; otherwise a user namespace
# (`unshare -r -m`); SKIP only where the kernel allows neither.
. "${srcdir:-.}/tests/testlib.sh"
train="$(cd "$top_builddir" && pwd)/tools/fsdp-train"
common="-model mlp:in=16,hidden=32,depth=2,out=4 -data synthetic:n=256 -batch 16 -log_every 0"

fsdp_need_hdf5

if [ -z "${FSDP_FULL_DISK_INSIDE:-}" ]; then
  fsdp_mount_ns || { echo "SKIP: cannot mount a tmpfs in a private mount namespace ($fsdp_ns_why)"; exit 77; }
  FSDP_FULL_DISK_INSIDE=1 $fsdp_ns sh "$0" "$@"
  exit
fi

# Inside the namespace: a 48 KiB disk at $disk, gone with the namespace.
disk="$fsdp_tmp/disk"
mkdir -p "$disk" && mount -t tmpfs -o size=48k tmpfs "$disk" || { echo "FAIL: mount the tmpfs"; exit 1; }
trap 'umount "$disk" 2>/dev/null; rm -rf "$fsdp_tmp"' EXIT

# full NAME NP ARGS...: the job must fail (not hang: the test timeout is 120 s) with its error on every rank.
full() {
  name=$1 np=$2
  shift 2
  rm -f "$disk"/*
  FSDP_TEST_TIMEOUT=120 fsdp_run "$np" "$train" $common -steps 4 -checkpoint "$disk/ck.h5" -checkpoint_every 2 \
    "$@" >"$fsdp_tmp/$name.out" 2>&1
  rc=$?
  [ $rc -ne 124 ] || { cat "$fsdp_tmp/$name.out"; echo "FAIL: $name: the job hung on the full disk"; exit 1; }
  [ $rc -ne 0 ] || { cat "$fsdp_tmp/$name.out"; echo "FAIL: $name: the job succeeded on a full disk"; exit 1; }
  # The checkpoint of step 2 is in place, and a job resumes from it.
  fsdp_run 1 "$train" $common -steps 3 -resume "$disk/ck.h5" -loss_log "$fsdp_tmp/$name.csv" \
    >"$fsdp_tmp/$name-resume.out" 2>&1 ||
    { cat "$fsdp_tmp/$name-resume.out"; echo "FAIL: $name: the previous checkpoint does not load"; exit 1; }
  expect_count 1 "^3," "$fsdp_tmp/$name.csv"
  expect_count 0 "^2," "$fsdp_tmp/$name.csv"
}

for io in collective independent posix; do
  full "w2-$io" 2 -fsdp_checkpoint_io $io
  for r in 0 1; do
    expect_grep "^\[$r\] FSDP ERROR: .*FSDPContextSave: no room for '$disk/ck.h5.partial': No space left on device" \
      "$fsdp_tmp/w2-$io.out"
  done
  echo "W = 2, $io: no room found before writing, named on both ranks; the step-2 checkpoint resumes"
done
full w1 1
expect_grep "^\[0\] FSDP ERROR: .*no room for .*No space left on device" "$fsdp_tmp/w1.out"
echo "W = 1: the same"

# The disk fills while HDF5 writes: where the write fails decides whether every
# rank's collective write fails (each names it) or HDF5 leaves a rank in a
# collective (the watch on the save ends the job after 3 s); both happen.
FSDP_TEST_CHECKPOINT_UNRESERVED=1 full filling 2 -fsdp_collective_timeout 3
expect_count 0 "Segmentation" "$fsdp_tmp/filling.out"
if grep -q "libfsdp watchdog: FSDPContextSave: cannot write .*No space left on device.*has not ended on every rank 3 s" \
  "$fsdp_tmp/filling.out"; then
  echo "a disk that fills during the save: the rank whose write failed ends the job with its message after 3 s"
else
  for r in 0 1; do
    expect_grep "^\[$r\] FSDP ERROR: .*cannot write .*No space left on device" "$fsdp_tmp/filling.out"
  done
  echo "a disk that fills during the save: every rank's write failed, and each names it"
fi

# POSIX transfers have no collective I/O to be left in: a write that fails
# is agreed, and every rank returns it.
FSDP_TEST_CHECKPOINT_UNRESERVED=1 full filling-posix 2 -fsdp_checkpoint_io posix
for r in 0 1; do
  expect_grep "^\[$r\] FSDP ERROR: .*No space left on device" "$fsdp_tmp/filling-posix.out"
done
echo "a disk that fills during a POSIX save: every rank returns the error"
