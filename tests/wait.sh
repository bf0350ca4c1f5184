#!/bin/sh
# -fsdp_wait: a node with more ranks than CPUs (here two ranks that may only
# run on CPU 0) makes waits sleep between tests, -fsdp_view says so and why,
# the option overrides it, and how a rank waits does not change a result.
# With fewer than 2 CPUs per rank, collectives run on the nonblocking engine
# instead of a communication thread, unless -fsdp_comm_engine says otherwise.
. "${srcdir:-.}/tests/testlib.sh"
train="$top_builddir/tools/fsdp-train"
command -v taskset >/dev/null || { echo "SKIP: no taskset (util-linux) to confine the ranks to one CPU"; exit 77; }
args="-model mlp:in=8,hidden=32,depth=2,out=2 -data synthetic:n=256 -steps 12 -batch 16 -log_every 0 -fsdp_view"

one_cpu() { (MPIEXEC="taskset -c 0 $MPIEXEC" && fsdp_run "$@"); }

one_cpu 2 "$train" $args -loss_log "$fsdp_tmp/auto.csv" >"$fsdp_tmp/auto.out" 2>&1 ||
  { cat "$fsdp_tmp/auto.out"; echo "FAIL: two ranks on one CPU"; exit 1; }
expect_grep "^ *\[0\] waits sleep: 2 ranks on 1 CPU of this node (oversubscribed)" "$fsdp_tmp/auto.out"
expect_grep "^ *\[1\] waits sleep: 2 ranks on 1 CPU of this node (oversubscribed)" "$fsdp_tmp/auto.out"
expect_grep "^ *overlap: nonblocking engine (fewer than 2 CPUs per rank on a node)," "$fsdp_tmp/auto.out"

one_cpu 2 "$train" $args -fsdp_wait poll -fsdp_comm_engine thread -loss_log "$fsdp_tmp/poll.csv" \
  >"$fsdp_tmp/poll.out" 2>&1 || { cat "$fsdp_tmp/poll.out"; echo "FAIL: -fsdp_wait poll"; exit 1; }
expect_grep "^ *\[0\] waits poll: 2 ranks on 1 CPU of this node (oversubscribed)" "$fsdp_tmp/poll.out"
expect_grep "^ *overlap: thread engine," "$fsdp_tmp/poll.out"
cmp "$fsdp_tmp/auto.csv" "$fsdp_tmp/poll.csv" ||
  { echo "FAIL: the loss log of sleeping waits on the nonblocking engine differs from polling on a thread's"; exit 1; }

# One rank has every CPU of the machine to itself: it polls.
cpus=$(taskset -c -p $$ | sed 's/.*: //' | awk -F, '{n = 0; for (i = 1; i <= NF; i++) { split($i, r, "-"); n += (r[2] == "" ? 1 : r[2] - r[1] + 1) } print n}')
fsdp_run 1 "$train" $args >"$fsdp_tmp/one.out" 2>&1 || { cat "$fsdp_tmp/one.out"; echo "FAIL: one rank"; exit 1; }
expect_grep "^ *\[0\] waits poll: 1 rank on $cpus CPUs\? of this node\$" "$fsdp_tmp/one.out"
if [ "$cpus" -ge 2 ]; then expect_grep "^ *overlap: thread engine," "$fsdp_tmp/one.out"; fi
# OMP_NUM_THREADS=1, which many users' shells export, sets OpenBLAS's threads
# (as OpenBLAS itself reads it), never the node's CPUs: the rank still polls
# on all $cpus of them, on the thread engine.
(unset OPENBLAS_NUM_THREADS && OMP_NUM_THREADS=1 && export OMP_NUM_THREADS && fsdp_run 1 "$train" $args) \
  >"$fsdp_tmp/omp.out" 2>&1 || { cat "$fsdp_tmp/omp.out"; echo "FAIL: one rank with OMP_NUM_THREADS=1"; exit 1; }
expect_grep "^ *\[0\] waits poll: 1 rank on $cpus CPUs\? of this node\$" "$fsdp_tmp/omp.out"
if [ "$cpus" -ge 2 ]; then expect_grep "^ *overlap: thread engine," "$fsdp_tmp/omp.out"; fi
expect_grep "^ *host GEMMs: 1 BLAS thread per rank (the environment's)" "$fsdp_tmp/omp.out"

rc=0
fsdp_run 2 "$train" $args -fsdp_wait nap >"$fsdp_tmp/bad.out" 2>&1 || rc=$?
[ $rc -ne 0 ] || { echo "FAIL: -fsdp_wait nap was accepted"; exit 1; }
expect_grep "fsdp_wait.*nap" "$fsdp_tmp/bad.out"
# OpenBLAS threads: each rank's share of its node's CPUs unless the
# environment or -fsdp_blas_threads says (mpitest sets OPENBLAS_NUM_THREADS=1).
(unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS && one_cpu 2 "$train" $args) >"$fsdp_tmp/blas.out" 2>&1 ||
  { cat "$fsdp_tmp/blas.out"; echo "FAIL: BLAS threads fitted to the node"; exit 1; }
expect_grep "^ *host GEMMs: 1 BLAS thread per rank (the CPUs per rank on this node)" "$fsdp_tmp/blas.out"
(unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS && fsdp_run 1 "$train" $args) >"$fsdp_tmp/blas1.out" 2>&1 ||
  { cat "$fsdp_tmp/blas1.out"; echo "FAIL: BLAS threads of one rank"; exit 1; }
if [ "$cpus" -gt 1 ]; then
  expect_grep "^ *host GEMMs: $cpus BLAS threads per rank (the CPUs per rank on this node)" "$fsdp_tmp/blas1.out"
fi
(OPENBLAS_NUM_THREADS=1 && export OPENBLAS_NUM_THREADS && fsdp_run 1 "$train" $args) >"$fsdp_tmp/blasenv.out" 2>&1 ||
  { cat "$fsdp_tmp/blasenv.out"; echo "FAIL: OPENBLAS_NUM_THREADS=1"; exit 1; }
expect_grep "^ *host GEMMs: 1 BLAS thread per rank (the environment's)" "$fsdp_tmp/blasenv.out"
# OpenBLAS ignores 0 and an empty value (and starts a thread per CPU): so does the fitting; GOTO_NUM_THREADS counts.
(unset OMP_NUM_THREADS && OPENBLAS_NUM_THREADS=0 && export OPENBLAS_NUM_THREADS && one_cpu 2 "$train" $args) \
  >"$fsdp_tmp/blaszero.out" 2>&1 || { cat "$fsdp_tmp/blaszero.out"; echo "FAIL: OPENBLAS_NUM_THREADS=0"; exit 1; }
expect_grep "^ *host GEMMs: 1 BLAS thread per rank (the CPUs per rank on this node)" "$fsdp_tmp/blaszero.out"
(unset OPENBLAS_NUM_THREADS OMP_NUM_THREADS && GOTO_NUM_THREADS=1 && export GOTO_NUM_THREADS &&
  fsdp_run 1 "$train" $args) >"$fsdp_tmp/blasgoto.out" 2>&1 ||
  { cat "$fsdp_tmp/blasgoto.out"; echo "FAIL: GOTO_NUM_THREADS=1"; exit 1; }
expect_grep "^ *host GEMMs: 1 BLAS thread per rank (the environment's)" "$fsdp_tmp/blasgoto.out"
fsdp_run 1 "$train" $args -fsdp_blas_threads 3 >"$fsdp_tmp/blasopt.out" 2>&1 ||
  { cat "$fsdp_tmp/blasopt.out"; echo "FAIL: -fsdp_blas_threads 3"; exit 1; }
expect_grep "^ *host GEMMs: 3 BLAS threads per rank (-fsdp_blas_threads)" "$fsdp_tmp/blasopt.out"
echo "two ranks on one CPU sleep on the nonblocking engine, -fsdp_wait poll -fsdp_comm_engine thread override it with the same losses, one rank on $cpus CPUs polls, with OMP_NUM_THREADS=1 too; BLAS threads follow the node, the environment and -fsdp_blas_threads"
exit 0
