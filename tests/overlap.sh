#!/bin/sh
# The watchdog: rank 1 skips unit c's all-gather, so rank 0 waits in it for
# ever.  With -fsdp_collective_timeout 2 the job must die within the timeout
# plus a few seconds, on every engine, with a diagnostic that names the
# operation, the unit, the bytes and the step.
. "${srcdir:-.}/tests/testlib.sh"
prog="$top_builddir/tests/test_fsdp_overlap"

# Waits that sleep between tests (-fsdp_wait sleep) are watched alike.
for setting in "thread poll" "nonblocking poll" "thread sleep" "nonblocking sleep"; do
  set -- $setting
  engine="$1 ($2)"
  start=$(date +%s)
  rc=0
  FSDP_TEST_TIMEOUT=60 fsdp_run 2 "$prog" hang -fsdp_collective_timeout 2 -fsdp_comm_engine $1 -fsdp_wait $2 \
    >"$fsdp_tmp/out" 2>"$fsdp_tmp/err" || rc=$?
  [ "$rc" -ne 0 ] || { echo "FAIL: $engine: a rank that skipped a collective let the job succeed"; exit 1; }
  elapsed=$(( $(date +%s) - start ))
  [ "$rc" -ne 124 ] || { echo "FAIL: $engine: the watchdog did not end the job in 60 s"; exit 1; }
  expect_grep "^\[0\] libfsdp watchdog: the AllGather of unit 'c' (256 B, on a communicator of 2 ranks) has not completed after [2-9]\.[0-9] s (-fsdp_collective_timeout 2) at step 0" "$fsdp_tmp/err"
  expect_grep "Aborting the job" "$fsdp_tmp/err"
  [ "$elapsed" -le 15 ] || { echo "FAIL: $engine: the job took $elapsed s to die with a 2 s timeout"; exit 1; }
  echo "$engine: the watchdog ended the job in $elapsed s (exit code $rc)"
done

# The default timeout (600 s) is on, and 0 turns it off: the job then hangs
# until something else ends it (here, timeout 8).
rc=0
FSDP_TEST_TIMEOUT=8 fsdp_run 2 "$prog" hang -fsdp_collective_timeout 0 >"$fsdp_tmp/out" 2>"$fsdp_tmp/err" || rc=$?
[ "$rc" -eq 124 ] || { echo "FAIL: with the watchdog off the job ended with $rc, not by the timeout"; cat "$fsdp_tmp/err"; exit 1; }
expect_count 0 "libfsdp watchdog" "$fsdp_tmp/err"
exit 0
