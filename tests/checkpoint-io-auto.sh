#!/bin/sh
# -fsdp_checkpoint_io auto (the default) takes POSIX transfers (no MPI-IO)
# where a node has more ranks than CPUs (2 ranks bound to one CPU here), and
# otherwise collective MPI-IO saves with independent loads (1 rank; 2 ranks
# sharding) or collective loads where replicas read the same bytes (2 ranks,
# strategy none), and -fsdp_view says which and why; a mode given is kept,
# and says so.  The checkpoints saved either way resume (one chunked and
# compressed too), and a POSIX save of 2 ranks loads through MPI-IO and back.
# (doc/overlap.md, "Checkpoint I/O on an oversubscribed node".)
. "${srcdir:-.}/tests/testlib.sh"
train="$(cd "$top_builddir" && pwd)/tools/fsdp-train"
common="-model mlp:in=16,hidden=32,depth=2,out=4 -data synthetic:n=256 -batch 16 -log_every 0 -fsdp_view"

fsdp_need_hdf5
command -v taskset >/dev/null || { echo "SKIP: no taskset to put 2 ranks on one CPU"; exit 77; }
cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//') # the first CPU this shell may use

# run NAME NP CPUS [ARGS...]: on CPUS (a taskset list; "" for this shell's), save at
# steps 1 and 2, then resume for a third.
run() {
  name=$1 np=$2 cpus=$3
  shift 3
  pin=""
  [ -z "$cpus" ] || pin="taskset -c $cpus"
  timeout -k 30 "$FSDP_TEST_TIMEOUT" $pin $MPIEXEC $MPIEXEC_FLAGS -n "$np" "$train" $common -steps 2 \
    -checkpoint "$fsdp_tmp/$name.h5" -checkpoint_every 1 "$@" >"$fsdp_tmp/$name.out" 2>&1 ||
    { cat "$fsdp_tmp/$name.out"; echo "FAIL: $name"; exit 1; }
  timeout -k 30 "$FSDP_TEST_TIMEOUT" $pin $MPIEXEC $MPIEXEC_FLAGS -n "$np" "$train" $common -steps 3 \
    -resume "$fsdp_tmp/$name.h5" -loss_log "$fsdp_tmp/$name.csv" "$@" >"$fsdp_tmp/$name-resume.out" 2>&1 ||
    { cat "$fsdp_tmp/$name-resume.out"; echo "FAIL: $name: resume"; exit 1; }
  expect_count 1 "^3," "$fsdp_tmp/$name.csv"
}

run over 2 "$cpu"
expect_grep "^  checkpoint I/O: posix transfers (auto: a node has more ranks than CPUs" "$fsdp_tmp/over.out"
expect_grep "^  \[1\] waits sleep: 2 ranks on 1 CPU of this node (oversubscribed)" "$fsdp_tmp/over.out"
echo "2 ranks on 1 CPU: POSIX transfers, and the checkpoint resumes"

run one 1 ""
expect_grep "^  checkpoint I/O: collective saves, independent loads (auto: no node has more ranks than CPUs; each rank reads bytes no other rank reads" "$fsdp_tmp/one.out"
echo "1 rank: collective saves, independent loads"

# The CPUs this shell may use (its affinity, as the library counts them):
# nproc follows OMP_NUM_THREADS, which users often set to 1.
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
if [ "$cpus" -ge 2 ]; then
  run shard 2 ""
  expect_grep "^  checkpoint I/O: collective saves, independent loads (auto: no node has more ranks than CPUs; each rank" "$fsdp_tmp/shard-resume.out"
  # The same checkpoint chunked and compressed (h5repack): its datasets load
  # collectively within the independent load, and resume to the same step 3.
  if command -v h5repack >/dev/null; then
    h5repack -f GZIP=1 "$fsdp_tmp/shard.h5" "$fsdp_tmp/shard-gzip.h5" || { echo "FAIL: h5repack"; exit 1; }
    fsdp_run 2 "$train" $common -steps 3 -resume "$fsdp_tmp/shard-gzip.h5" -loss_log "$fsdp_tmp/shard-gzip.csv" \
      >"$fsdp_tmp/shard-gzip.out" 2>&1 || { cat "$fsdp_tmp/shard-gzip.out"; echo "FAIL: the chunked checkpoint"; exit 1; }
    [ "$(grep '^3,' "$fsdp_tmp/shard-gzip.csv")" = "$(grep '^3,' "$fsdp_tmp/shard.csv")" ] ||
      { echo "FAIL: the chunked checkpoint resumed to another step 3"; exit 1; }
    echo "the checkpoint chunked and compressed by h5repack loads, to the same step 3"
  else
    echo "(no h5repack (Debian: hdf5-tools): a chunked checkpoint's load not checked)"
  fi
  run replicas 2 "" -fsdp_sharding_strategy none
  expect_grep "^  checkpoint I/O: collective transfers (auto: no node has more ranks than CPUs; replicas read the same bytes" "$fsdp_tmp/replicas-resume.out"
  echo "2 ranks on 2 CPUs: independent loads when sharded, collective ones with replicas"
else
  echo "(2 ranks on 2 CPUs not checked: this shell has $cpus CPU)"
fi

run given 2 "$cpu" -fsdp_checkpoint_io collective
expect_grep "^  checkpoint I/O: collective transfers (-fsdp_checkpoint_io)" "$fsdp_tmp/given.out"
echo "2 ranks on 1 CPU, -fsdp_checkpoint_io collective: kept"

# Across modes: the POSIX save loads through MPI-IO and the MPI-IO save
# through POSIX, and each resumed job logs the same third step.
cross() {
  name=$1 from=$2
  shift 2
  fsdp_run 2 "$train" $common -steps 3 -resume "$fsdp_tmp/$from.h5" -loss_log "$fsdp_tmp/$name.csv" "$@" \
    >"$fsdp_tmp/$name.out" 2>&1 || { cat "$fsdp_tmp/$name.out"; echo "FAIL: $name"; exit 1; }
}
cross over-collective over -fsdp_checkpoint_io collective
cross given-posix given -fsdp_checkpoint_io posix
expect_grep "^  checkpoint I/O: posix transfers (-fsdp_checkpoint_io)" "$fsdp_tmp/given-posix.out"
want=$(grep '^3,' "$fsdp_tmp/over.csv")
for name in given over-collective given-posix; do
  got=$(grep '^3,' "$fsdp_tmp/$name.csv")
  [ "$got" = "$want" ] || { echo "FAIL: $name resumed to step 3 as '$got', the POSIX save's own resume as '$want'"; exit 1; }
done
echo "POSIX and MPI-IO checkpoints load either way, to the same step 3: $want"
