#!/bin/sh
# -fsdp_log_trace: a 2-rank fsdp-train run writes one Chrome trace (JSON)
# with a process per rank, the compute and communication threads, each
# unit's forward and backward, the collectives, the waits and the optimizer;
# an unwritable path is an error that names it.
. "${srcdir:-.}/tests/testlib.sh"
train="$top_builddir/tools/fsdp-train"
trace="$fsdp_tmp/trace.json"
args="-model mlp:in=8,hidden=32,depth=2,out=2,act=gelu,norm=layernorm -data synthetic:n=256 -steps 3 -batch 16 -log_every 0"

fsdp_run 2 "$train" $args -fsdp_log_trace "$trace" >"$fsdp_tmp/out" 2>&1 || { cat "$fsdp_tmp/out"; echo "FAIL: the traced run"; exit 1; }
[ -s "$trace" ] || { echo "FAIL: no trace written"; exit 1; }
head -n 1 "$trace" | grep -q '^{"displayTimeUnit": "ms", "traceEvents": \[' || { echo "FAIL: not a trace:"; head -3 "$trace"; exit 1; }
tail -n 1 "$trace" | grep -q '^\]}$' || { echo "FAIL: the trace does not end its array"; tail -3 "$trace"; exit 1; }
for r in 0 1; do
  expect_grep "\"process_name\", \"ph\": \"M\", \"pid\": $r, \"args\": {\"name\": \"rank $r\"}" "$trace"
  expect_grep "\"thread_name\", \"ph\": \"M\", \"pid\": $r, \"tid\": 1, \"args\": {\"name\": \"communication\"}" "$trace"
  # Three steps: each unit's forward and backward three times on each rank.
  for unit in blocks.0 blocks.1 root; do
    expect_count 3 "\"name\": \"forward $unit\", \"ph\": \"X\", \"pid\": $r, \"tid\": 0," "$trace"
    expect_count 3 "\"name\": \"backward $unit\", \"ph\": \"X\", \"pid\": $r, \"tid\": 0," "$trace"
    expect_grep "\"name\": \"ReduceScatter $unit\", \"ph\": \"X\", \"pid\": $r, \"tid\": 1," "$trace"
  done
  expect_grep "\"name\": \"AllGather blocks.0\", \"ph\": \"X\", \"pid\": $r, \"tid\": 1, \"ts\": [0-9.]*, \"dur\": [0-9.]*, \"args\": {\"bytes\": [1-9]" "$trace"
  expect_count 3 "\"name\": \"OptimizerStep\", \"ph\": \"X\", \"pid\": $r, \"tid\": 0," "$trace"
  expect_grep "\"name\": \"GEMM\", \"ph\": \"X\", \"pid\": $r, \"tid\": 0," "$trace"
done
if grep -q '"dur": -' "$trace"; then echo "FAIL: a span of negative length"; exit 1; fi

rc=0
fsdp_run 2 "$train" $args -fsdp_log_trace "$fsdp_tmp/no/such/dir/t.json" >"$fsdp_tmp/bad" 2>&1 || rc=$?
[ $rc -eq 1 ] || { cat "$fsdp_tmp/bad"; echo "FAIL: an unwritable trace path ended fsdp-train with $rc, not 1"; exit 1; }
expect_grep "fsdp_log_trace: cannot write '$fsdp_tmp/no/such/dir/t.json'" "$fsdp_tmp/bad"
echo "trace: $(grep -c '"ph": "X"' "$trace") spans of 2 ranks; an unwritable path fails with its name"
exit 0
