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
# - FSDPCallA prints the traceback down to the Fortran line and stops the job;
# - examples/fortran/surrogate, doc/fortran.md's complete program (the doc
#   shows the file as it is): the layout it sets (hybrid, two emulated
#   nodes), the loss falling, the parameter it reads back between steps is
#   the checkpoint's (read with h5dump, without libfsdp), and the training
#   state's step is the optimizer's.
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

# doc/fortran.md's complete program, which the page shows verbatim.
fsurr=$(cd "$top_builddir" && pwd)/examples/fortran/surrogate
src=$srcdir/examples/fortran/surrogate.F90
awk '/^```fortran$/ { block = ""; inside = 1; next }
     /^```$/ && inside { if (block ~ /^! The complete program of doc\/fortran.md/) printf "%s", block; inside = 0; next }
     inside { block = block $0 "\n" }' "$srcdir/doc/fortran.md" >"$fsdp_tmp/doc.F90"
cmp -s "$fsdp_tmp/doc.F90" "$src" ||
  { diff "$fsdp_tmp/doc.F90" "$src" | head; echo "FAIL: doc/fortran.md's complete program is not $src"; exit 1; }
(cd "$fsdp_tmp" && fsdp_run 4 "$fsurr") >"$fsdp_tmp/s.out" 2>&1 ||
  { cat "$fsdp_tmp/s.out"; echo "FAIL: examples/fortran/surrogate on 4 ranks"; exit 1; }
cat "$fsdp_tmp/s.out"
expect_grep "^layout: 4 ranks on 2 nodes, parameters sharded over 2 ranks and replicated 2 times$" "$fsdp_tmp/s.out"
expect_grep "^loaded: step 20, data cursor 1280, head.weight differs from the saved by 0.00E+00$" "$fsdp_tmp/s.out"
awk '/^step +10 / { l10 = $4 } /^step +20 / { l20 = $4; s20 = $6 }
     END { if (!(l20 + 0 < l10 + 0)) { print "FAIL: the loss did not fall: " l10 " then " l20; exit 1 } }' "$fsdp_tmp/s.out" || exit 1
# The checkpoint, read without libfsdp: the step the program left alone is the
# optimizer's, and head.weight is what the program read back at step 20.
ck="$fsdp_tmp/surrogate.h5"
[ "$(h5dump -a /step "$ck" | sed -n 's/^ *(0): //p')" = 20 ] || { h5dump -a /step "$ck"; echo "FAIL: /step is not 20"; exit 1; }
h5dump -m %.9e -d /params/head.weight "$ck" | sed -n '/DATA {/,/}/p' | tr ',' '\n' |
  sed -n 's/.*): *\(.*e[-+].*\)/\1/p' >"$fsdp_tmp/head.txt"   # the values (not the checksum attribute's)
expect_count 32 "e" "$fsdp_tmp/head.txt"
awk -v out="$fsdp_tmp/s.out" 'BEGIN { while ((getline line < out) > 0) if (line ~ /^step +20 /) { split(line, f, " +"); want = f[6] } }
     { sum += $1 }
     END { d = sum - want; if (d < 0) d = -d
           if (d > 1e-6) { printf "FAIL: head.weight sums to %.9e in the checkpoint, %s read back\n", sum, want; exit 1 }
           printf "surrogate: the checkpoint holds the head.weight read back (sum %.9e)\n", sum }' "$fsdp_tmp/head.txt" || exit 1

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
