#!/bin/sh
# What an error does to a running job: print and go on (default), abort the
# whole job (-fsdp_on_error abort, FSDPCallAbort), or end main with the code.
# Nothing hangs: each job must end on its own within the test timeout.
. "${srcdir:-.}/tests/testlib.sh"
prog="$top_builddir/tests/test_abort"

# Default: rank 1 prints its traceback; both ranks go on and finish.
fsdp_run 2 "$prog" continue >"$fsdp_tmp/out" 2>"$fsdp_tmp/err" || { cat "$fsdp_tmp/err"; echo "FAIL: continue mode exited $?"; exit 1; }
expect_grep '^\[1\] FSDP ERROR: user error: rank 1 was told to fail$' "$fsdp_tmp/err"
expect_grep '^\[1\] FSDP ERROR: #1 fail_on_rank_one() at .*test_abort.c:[0-9]*$' "$fsdp_tmp/err"
expect_grep '^\[1\] FSDP ERROR: #2 step() at .*test_abort.c:[0-9]*$' "$fsdp_tmp/err"
expect_count 0 '^\[0\] FSDP ERROR' "$fsdp_tmp/err"
expect_grep '^rank 1 continues after error code [1-9][0-9]*$' "$fsdp_tmp/out"
expect_grep '^rank 0 continues after error code 0$' "$fsdp_tmp/out"

# -fsdp_on_error abort: the error is printed and the job dies at once.
rc=0
fsdp_run 2 "$prog" continue -fsdp_on_error abort >"$fsdp_tmp/out" 2>"$fsdp_tmp/err" || rc=$?
[ "$rc" -ne 0 ] || { echo "FAIL: -fsdp_on_error abort let the job succeed"; exit 1; }
[ "$rc" -ne 124 ] || { echo "FAIL: -fsdp_on_error abort hung"; exit 1; }
expect_grep '^\[1\] FSDP ERROR: user error: rank 1 was told to fail$' "$fsdp_tmp/err"
expect_count 0 '^rank 1 continues' "$fsdp_tmp/out"

# FSDPCallAbort in silent mode still prints the whole traceback before aborting.
if fsdp_run 2 "$prog" callabort -fsdp_on_error return >"$fsdp_tmp/out" 2>"$fsdp_tmp/err"; then
  echo "FAIL: FSDPCallAbort let the job succeed"; exit 1
fi
expect_grep '^\[1\] FSDP ERROR: user error: rank 1 was told to fail$' "$fsdp_tmp/err"
expect_grep '^\[1\] FSDP ERROR: #3 main() at .*test_abort.c:[0-9]*$' "$fsdp_tmp/err"

# FSDPCall in main: the traceback reaches main and the job fails, without hanging.
rc=0
fsdp_run 2 "$prog" main >"$fsdp_tmp/out" 2>"$fsdp_tmp/err" || rc=$?
[ "$rc" -ne 0 ] || { echo "FAIL: an error returned from main let the job succeed"; exit 1; }
[ "$rc" -ne 124 ] || { echo "FAIL: an error returned from main hung the job"; exit 1; }
expect_grep '^\[1\] FSDP ERROR: #3 main() at .*test_abort.c:[0-9]*$' "$fsdp_tmp/err"

# A job hung in a collective (rank 1 never joins) stops within seconds of a
# SIGTERM, naming the signal and the collective, not 600 s later at the watchdog.
for engine in thread nonblocking; do
  out="$fsdp_tmp/hang-$engine"
  fsdp_run 2 "$prog" hang -fsdp_comm_engine $engine -fsdp_signal_grace 1 >"$out" 2>&1 &
  job=$!
  i=0
  while ! grep -q "rank 0 waits in the all-gather" "$out" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
  sleep 0.5
  pids=$(for d in /proc/[0-9]*; do
    cmd=$( (tr '\0' ' ' <"$d/cmdline") 2>/dev/null) || continue
    case $cmd in *test_abort\ hang\ -fsdp_comm_engine\ $engine*) case ${cmd%% *} in *test_abort) echo "${d#/proc/}" ;; esac ;; esac
  done)
  [ -n "$pids" ] || { cat "$out"; echo "FAIL: $engine: no rank to signal"; exit 1; }
  t0=$(date +%s)
  kill -TERM $pids
  rc=0
  wait $job || rc=$?
  t1=$(date +%s)
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$out"; echo "FAIL: $engine: the hung job exited with $rc"; exit 1; }
  [ $((t1 - t0)) -lt 15 ] || { cat "$out"; echo "FAIL: $engine: the hung job took $((t1 - t0)) s to stop after SIGTERM"; exit 1; }
  expect_grep "^\[0\] libfsdp: signal 15 (SIGTERM) received while waiting for the AllGather of unit 'lonely' .*; it has not completed [0-9.]* s later (-fsdp_signal_grace 1) at step 0: another rank is not taking part in it. Aborting the job.$" "$out"
done
exit 0
