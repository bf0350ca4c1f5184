#!/bin/sh
# The Fortran front end against C, bit for bit:
# - examples/fortran/byom (its own parameters, forward and backward in
#   Fortran) ends 3 AdamW steps with the same shards and gradient shards as
#   tests/byom.c, under full and hybrid sharding on 4 ranks (under
#   make check-valgrind it runs under valgrind too);
# - examples/fortran/heat_surrogate prints what examples/heat-surrogate.c
#   prints, digit for digit (every round's loss to 17 digits), at W = 2
#   (full) and W = 4 (hybrid);
# - examples/fortran/advection_surrogate (a convolution on fields gathered
#   by an all-to-all) prints what examples/advection-surrogate.c prints,
#   digit for digit, at W = 4 (hybrid);
# - a heat_surrogate job stopped after 10 rounds and restarted from its
#   checkpoint ends as the uninterrupted 20-round job does;
# - FSDPCallA prints the traceback down to the Fortran line and stops the job.
. "${srcdir:-.}/tests/testlib.sh"
fbyom="$top_builddir/examples/fortran/byom"
if [ ! -x "$fbyom" ]; then
  echo "SKIP: libfsdp was configured without Fortran (configure's summary says why)"
  exit 77
fi

# Fortran writes ES16.9E2 ("  1.234567890E-01"), C "%.9e": one spacing, one e.
normalize() { tr -s ' ' <"$1" | sed 's/^ //' | tr E e | sort; }

for strategy in "full" "hybrid -fsdp_ranks_per_node 2"; do
  # stderr apart: valgrind (make check-valgrind) writes its notes there.
  fsdp_run 4 $FSDP_TEST_WRAPPER "$fbyom" -steps 3 -fsdp_sharding_strategy $strategy >"$fsdp_tmp/f.out" 2>"$fsdp_tmp/err" ||
    { cat "$fsdp_tmp/f.out" "$fsdp_tmp/err"; echo "FAIL: byom.F90 ($strategy)"; exit 1; }
  fsdp_run 4 "$top_builddir/tests/byom" -steps 3 -fsdp_sharding_strategy $strategy >"$fsdp_tmp/c.out" 2>"$fsdp_tmp/err" ||
    { cat "$fsdp_tmp/c.out" "$fsdp_tmp/err"; echo "FAIL: byom.c ($strategy)"; exit 1; }
  normalize "$fsdp_tmp/f.out" >"$fsdp_tmp/f.sorted"
  sort "$fsdp_tmp/c.out" >"$fsdp_tmp/c.sorted"
  lines=$(wc -l <"$fsdp_tmp/c.sorted")
  [ "$lines" -gt 50 ] || { cat "$fsdp_tmp/c.out"; echo "FAIL: byom.c printed $lines lines"; exit 1; }
  if ! cmp -s "$fsdp_tmp/f.sorted" "$fsdp_tmp/c.sorted"; then
    diff "$fsdp_tmp/f.sorted" "$fsdp_tmp/c.sorted" | head -20
    echo "FAIL: byom: Fortran's shards and gradient shards after 3 steps differ from C's ($strategy)"
    exit 1
  fi
  echo "byom ($strategy): Fortran and C agree on all $lines shard and gradient elements"
done

# FSDPCallA at a program's top level: the traceback ends with the Fortran
# file and line, and the job stops with an error.
if fsdp_run 2 "$fbyom" -fsdp_sharding_strategy bogus >"$fsdp_tmp/out" 2>&1; then
  cat "$fsdp_tmp/out"; echo "FAIL: byom with a bad option exited 0"; exit 1
fi
expect_grep "option -fsdp_sharding_strategy: 'bogus'" "$fsdp_tmp/out"
expect_grep "FSDP ERROR: #[0-9] (Fortran)() at .*byom.F90:[0-9]" "$fsdp_tmp/out"
# ... and, between the C frames and that line, the module's call that failed.
expect_grep "FSDP ERROR: #[0-9] fsdp_context_set_from_options() at fsdp.F90" "$fsdp_tmp/out"

fheat="$top_builddir/examples/fortran/heat_surrogate"
cheat="$top_builddir/examples/heat-surrogate"
for run in "2 20 -verbose -fsdp_sharding_strategy full" "4 10 -verbose -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2"; do
  set -- $run
  np=$1 rounds=$2
  shift 2
  fsdp_run "$np" "$fheat" -rounds "$rounds" "$@" >"$fsdp_tmp/f.out" 2>&1 ||
    { cat "$fsdp_tmp/f.out"; echo "FAIL: heat_surrogate.F90 on $np ranks"; exit 1; }
  fsdp_run "$np" "$cheat" -rounds "$rounds" "$@" >"$fsdp_tmp/c.out" 2>&1 ||
    { cat "$fsdp_tmp/c.out"; echo "FAIL: heat-surrogate.c on $np ranks"; exit 1; }
  cat "$fsdp_tmp/f.out"
  expect_grep "^round  $rounds/$rounds  training loss " "$fsdp_tmp/f.out"
  expect_grep "^surrogate error " "$fsdp_tmp/f.out"
  expect_count "$rounds" "^round [0-9]* loss [0-9]" "$fsdp_tmp/f.out"
  if ! cmp -s "$fsdp_tmp/f.out" "$fsdp_tmp/c.out"; then
    diff "$fsdp_tmp/f.out" "$fsdp_tmp/c.out"
    echo "FAIL: heat_surrogate: Fortran's output differs from C's on $np ranks ($*)"
    exit 1
  fi
done

# The convolutional in-situ example: Fortran's output is C's.
hybrid4="-fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2"
fsdp_run 4 "$top_builddir/examples/fortran/advection_surrogate" -rounds 10 $hybrid4 >"$fsdp_tmp/fa.out" 2>&1 ||
  { cat "$fsdp_tmp/fa.out"; echo "FAIL: advection_surrogate.F90 on 4 ranks"; exit 1; }
fsdp_run 4 "$top_builddir/examples/advection-surrogate" -rounds 10 $hybrid4 >"$fsdp_tmp/ca.out" 2>&1 ||
  { cat "$fsdp_tmp/ca.out"; echo "FAIL: advection-surrogate.c on 4 ranks"; exit 1; }
cat "$fsdp_tmp/fa.out"
expect_grep "^surrogate error " "$fsdp_tmp/fa.out"
cmp -s "$fsdp_tmp/fa.out" "$fsdp_tmp/ca.out" ||
  { diff "$fsdp_tmp/fa.out" "$fsdp_tmp/ca.out"; echo "FAIL: advection_surrogate: Fortran's output differs from C's"; exit 1; }

# Checkpoint and restart: 10 rounds, then a new job resumes at round 11.
ck="$fsdp_tmp/heat.h5"
fsdp_run 2 "$fheat" -rounds 20 >"$fsdp_tmp/whole.out" 2>&1 || { cat "$fsdp_tmp/whole.out"; exit 1; }
fsdp_run 2 "$fheat" -rounds 10 -checkpoint "$ck" >"$fsdp_tmp/part1.out" 2>&1 || { cat "$fsdp_tmp/part1.out"; exit 1; }
[ -f "$ck" ] || { echo "FAIL: no checkpoint $ck after 10 rounds"; exit 1; }
fsdp_run 2 "$fheat" -rounds 20 -checkpoint "$ck" -restart >"$fsdp_tmp/part2.out" 2>&1 ||
  { cat "$fsdp_tmp/part2.out"; exit 1; }
cat "$fsdp_tmp/part2.out"
expect_grep "^restarted from .* after round 10$" "$fsdp_tmp/part2.out"
expect_count 1 "^round " "$fsdp_tmp/part2.out"
grep -v '^restarted from' "$fsdp_tmp/part2.out" >"$fsdp_tmp/resumed.out"
grep -v '^round  10/' "$fsdp_tmp/whole.out" >"$fsdp_tmp/whole-tail.out"
if ! cmp -s "$fsdp_tmp/resumed.out" "$fsdp_tmp/whole-tail.out"; then
  diff "$fsdp_tmp/resumed.out" "$fsdp_tmp/whole-tail.out"
  echo "FAIL: the restarted job does not end as the uninterrupted one"
  exit 1
fi
echo "restart: rounds 11-20 from the checkpoint end as the uninterrupted job"
exit 0
