#!/bin/sh
# fsdp-train under conditions that used to lose work silently or fail late:
# a loss log on a full file system ends the job on every rank with the path
# and the reason; one output under two spellings, or inside another's
# temporary, is refused; an output (or its temporary, or an older checkpoint
# kept) that is a FIFO, a device or a directory is refused before the first
# step; outputs that are symbolic links are written at their targets, and a
# link into a missing directory says so; -resume with another -seed (token
# data), -batch, -grad_accum or -data is refused by name; -generate and
# -prompt are checked before the first step; llm.c headers are checked;
# -data text:DIR and malformed synthetic specs are named; SIGINT checkpoints
# and exits like SIGTERM.
# FSDP_TRAIN=PATH runs the checks on another build of fsdp-train.
. "${srcdir:-.}/tests/testlib.sh"
train="${FSDP_TRAIN:-$top_builddir/tools/fsdp-train}"
case $train in /*) ;; *) train="$(pwd)/$train" ;; esac # one test runs in another directory
mlp="mlp:in=16,hidden=32,depth=2,out=4"
gpt="gpt:vocab=256,ctx=8,dim=16,heads=2,layers=1"
common="-model $mlp -data synthetic:n=256 -batch 16 -steps 3 -log_every 0"
FSDP_TEST_TIMEOUT=60 # everything here ends in seconds; a hang is a failure
hdf5=false
grep -q '^#define FSDP_HAVE_HDF5 1' "$top_builddir/src/include/fsdp_config.h" && hdf5=true

w="$(cd "$fsdp_tmp" && pwd -P)/w" # as fsdp-train resolves it: no symbolic link in it
mkdir "$w" || exit 1

# ok NAME NP ARGS...: fsdp-train succeeds; its output in $fsdp_tmp/NAME.out.
ok() {
  name=$1 np=$2
  shift 2
  fsdp_run "$np" "$train" "$@" >"$fsdp_tmp/$name.out" 2>&1 ||
    { cat "$fsdp_tmp/$name.out"; echo "FAIL: $name: fsdp-train exited with an error"; exit 1; }
}

# ------------------------------------------------------------------ 2: a loss log on a full file system
# A 48 KiB tmpfs in a private mount namespace (root; or a user namespace
# otherwise), so nothing is left mounted whatever happens to the test.  No
# checkpoint is written there: the loss log's own writes are what is tested.
full="$fsdp_tmp/full"
mkdir "$full"
if fsdp_mount_ns; then
  cat >"$fsdp_tmp/full.sh" <<EOF
mount -t tmpfs -o size=48k fsdp-test "$full" || exit 3
i=0
while dd if=/dev/zero of="$full/fill\$i" bs=4096 count=1 2>/dev/null; do i=\$((i + 1)); done
# Full: the header cannot be written.
timeout $FSDP_TEST_TIMEOUT $MPIEXEC $MPIEXEC_FLAGS -n 2 "$train" $common -steps 5 -loss_log "$full/none.csv" >"$fsdp_tmp/full.out" 2>&1
echo \$? >"$fsdp_tmp/full.rc"
rm -f "$full/none.csv" "$full/fill0"
# One page free: the log fills up a few hundred steps in.
timeout $FSDP_TEST_TIMEOUT $MPIEXEC $MPIEXEC_FLAGS -n 2 "$train" $common -steps 2000 -loss_log "$full/l.csv" >"$fsdp_tmp/fills.out" 2>&1
echo \$? >"$fsdp_tmp/fills.rc"
cp "$full/l.csv" "$fsdp_tmp/fills.csv"
EOF
  $fsdp_ns sh "$fsdp_tmp/full.sh"
  rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: the full file system's script failed ($rc)"; exit 1; }
  for case in full fills; do
    rc=$(cat "$fsdp_tmp/$case.rc")
    [ "$rc" -ne 0 ] || { cat "$fsdp_tmp/$case.out"; echo "FAIL: $case: a loss log on a full file system, and exit 0"; exit 1; }
    [ "$rc" -ne 124 ] || { cat "$fsdp_tmp/$case.out"; echo "FAIL: $case: hung"; exit 1; }
  done
  expect_count 2 "fsdp-train: -loss_log '$full/none.csv': cannot write it: No space left on device" "$fsdp_tmp/full.out"
  expect_count 2 "fsdp-train: -loss_log '$full/l.csv': writing the row of step [0-9]* failed on rank 0: No space left on device" "$fsdp_tmp/fills.out"
  # Every rank stopped at the same step, after the last row that was written whole.
  stop=$(sed -n 's/.*writing the row of step \([0-9]*\) failed.*/\1/p' "$fsdp_tmp/fills.out" | sort -u)
  [ "$(echo "$stop" | wc -l)" -eq 1 ] && [ "$stop" -gt 100 ] ||
    { cat "$fsdp_tmp/fills.out"; echo "FAIL: the ranks stopped at steps '$stop'"; exit 1; }
  grep -q "^$((stop - 1)),[0-9]" "$fsdp_tmp/fills.csv" || { echo "FAIL: the log lacks step $((stop - 1))"; exit 1; }
else
  echo "SKIP (part): cannot mount a tmpfs in a private mount namespace here ($fsdp_ns_why), so no full file system to test the loss log on"
fi

# ------------------------------------------------------------------ 4: outputs that are not regular files
mkfifo "$w/fifo" || exit 1
refused fifo_log "fsdp-train: -loss_log '$w/fifo': is a FIFO (named pipe), not a regular file" 2 $common -loss_log "$w/fifo"
# Devices: checked read-only.  -data synthetic:n=0 would stop any build before
# it wrote an output, so that not even a broken check replaces /dev/null.
refused dev_log "fsdp-train: -loss_log '/dev/null': is a character device, not a regular file" 1 \
  $common -loss_log /dev/null -data synthetic:n=0
ln -s /dev/full "$w/full.csv"
refused dev_link "fsdp-train: -loss_log '$w/full.csv' (a symbolic link to '/dev/full'): is a character device, not a regular file" 1 \
  $common -loss_log "$w/full.csv" -data synthetic:n=0
rm "$w/full.csv"
if $hdf5; then
  refused fifo_export "fsdp-train: -export '$w/fifo': is a FIFO (named pipe), not a regular file" 2 $common -export "$w/fifo"
  refused fifo_checkpoint "fsdp-train: -checkpoint '$w/fifo': is a FIFO (named pipe), not a regular file" 1 $common -checkpoint "$w/fifo"
  refused dev_export "fsdp-train: -export '/dev/null': is a character device, not a regular file" 2 \
    $common -export /dev/null -data synthetic:n=0
  refused dev_checkpoint "fsdp-train: -checkpoint '/dev/full': is a character device, not a regular file" 1 \
    $common -checkpoint /dev/full -data synthetic:n=0
  mv "$w/fifo" "$w/ck.h5.partial"
  refused fifo_partial "fsdp-train: the temporary '$w/ck.h5.partial' of -checkpoint '$w/ck.h5' is a FIFO (named pipe), not a regular file" 2 \
    $common -checkpoint "$w/ck.h5"
  mv "$w/ck.h5.partial" "$w/ck.h5.2"
  refused fifo_kept "fsdp-train: '$w/ck.h5.2', where -fsdp_checkpoint_keep 3 keeps an older -checkpoint of '$w/ck.h5', is a FIFO (named pipe), not a regular file" 1 \
    $common -checkpoint "$w/ck.h5" -fsdp_checkpoint_keep 3
  mv "$w/ck.h5.2" "$w/e.h5.partial"
  refused fifo_export_partial "fsdp-train: the temporary '$w/e.h5.partial' of -export '$w/e.h5' is a FIFO (named pipe), not a regular file" 1 \
    $common -export "$w/e.h5"
  rm "$w/e.h5.partial"
  ok base 2 $common -checkpoint "$w/base.h5" -loss_log "$w/base.csv"
  mkfifo "$w/base.csv.resume"
  refused fifo_resume "fsdp-train: the temporary '$w/base.csv.resume' of -loss_log '$w/base.csv' is a FIFO (named pipe), not a regular file" 2 \
    $common -steps 4 -resume "$w/base.h5" -loss_log "$w/base.csv"
  rm "$w/base.csv.resume"
fi
rm -f "$w/fifo"

# ------------------------------------------------------------------ 3: one file under two spellings
if $hdf5; then
  (cd "$w" && refused spelling "fsdp-train: -checkpoint 'same.h5' and -loss_log './same.h5' are the same file '$w/same.h5'" 2 \
    $common -loss_log ./same.h5 -checkpoint same.h5) || exit 1
  mkdir "$w/c4"
  ln -s c4 "$w/D"
  refused dotdot "fsdp-train: -export '$w/D/e.h5' and -loss_log '$w/D/../c4/e.h5' are the same file '$w/c4/e.h5'" 2 \
    $common -loss_log "$w/D/../c4/e.h5" -export "$w/D/e.h5"
  # The save renames its temporary over the checkpoint: a loss log there would vanish.
  refused temporary "fsdp-train: the temporary '$w/a.h5.partial' of -checkpoint '$w/a.h5' and -loss_log '$w/c4/../a.h5.partial' are the same file" 2 \
    $common -checkpoint "$w/a.h5" -loss_log "$w/c4/../a.h5.partial"
  rm "$w/D"
  rmdir "$w/c4"
fi

# ------------------------------------------------------------------ 7: symbolic links
# A link to a file yet to be created: the log is written there, the link stays.
ln -s new.csv "$w/link.csv"
ok link_new 2 $common -loss_log "$w/link.csv"
[ -L "$w/link.csv" ] && [ "$(wc -l <"$w/new.csv")" -eq 4 ] ||
  { ls -l "$w"; echo "FAIL: -loss_log through a link to a new file"; exit 1; }
rm "$w/link.csv" "$w/new.csv"
ln -s "$w/missing/run.csv" "$w/dangling.csv"
refused link_missing_dir "fsdp-train: -loss_log '$w/dangling.csv': is a symbolic link to '$w/missing/run.csv', whose directory '$w/missing' does not exist" 2 \
  $common -loss_log "$w/dangling.csv"
rm "$w/dangling.csv"
ln -s loop1 "$w/loop2"
ln -s loop2 "$w/loop1"
refused link_loop "fsdp-train: -loss_log '$w/loop1': more than 40 symbolic links lead on from it (a loop?)" 1 \
  $common -loss_log "$w/loop1"
rm "$w/loop1" "$w/loop2"
if $hdf5; then
  # A checkpoint through a link to an existing one: the target is replaced, the link stays.
  ln -s base.h5 "$w/ck-link.h5"
  ok link_ck 2 $common -steps 5 -resume "$w/base.h5" -checkpoint "$w/ck-link.h5"
  [ -L "$w/ck-link.h5" ] || { ls -l "$w"; echo "FAIL: the checkpoint replaced its symbolic link"; exit 1; }
  [ "$(h5dump -a /step "$w/base.h5" | sed -n 's/^ *(0): //p')" = 5 ] || { echo "FAIL: the link's target is not at step 5"; exit 1; }
  rm "$w/ck-link.h5"
fi

# ------------------------------------------------------------------ 9: -resume continues the same run
if $hdf5; then
  # What the checkpoint records: rng_state = seed, data hash, batch, micro-batches.
  h5dump -a /rng_state "$w/base.h5" >"$fsdp_tmp/rng.txt"
  expect_grep "(0): 0, [0-9]*, 16, 1$" "$fsdp_tmp/rng.txt"
  cp "$w/base.csv" "$w/base.before"
  refused resume_batch "fsdp-train: -resume $w/base.h5 was written with -batch 16; this run has -batch 32: " 2 \
    $common -steps 8 -batch 32 -resume "$w/base.h5" -loss_log "$w/base.csv"
  refused resume_accum "fsdp-train: -resume $w/base.h5 was written with -grad_accum 1; this run has -grad_accum 2: " 2 \
    $common -steps 8 -grad_accum 2 -resume "$w/base.h5" -loss_log "$w/base.csv"
  refused resume_data "fsdp-train: -resume $w/base.h5 was written with other training data than this run's -data synthetic:n=128 " 2 \
    $common -steps 8 -data synthetic:n=128 -resume "$w/base.h5" -loss_log "$w/base.csv"
  cmp -s "$w/base.csv" "$w/base.before" || { echo "FAIL: a refused resume changed the loss log"; exit 1; }
  # The seed does not choose an MLP's rows: another one resumes.
  ok resume_mlp_seed 2 $common -steps 7 -seed 9 -resume "$w/base.h5"
  # Token windows are drawn by the seed.
  head -c 4000 "${srcdir:-.}/README.md" >"$w/text.txt"
  gcommon="-model $gpt -data text:$w/text.txt -batch 4 -log_every 0"
  ok gpt_base 2 $gcommon -steps 2 -seed 1 -checkpoint "$w/g.h5"
  refused resume_seed "fsdp-train: -resume $w/g.h5 was written with -seed 1; this run has -seed 2: the seed draws the token windows" 2 \
    $gcommon -steps 4 -seed 2 -resume "$w/g.h5"
  # Nothing left to train (only -generate): another seed samples other tokens.
  ok generate_seed 1 $gcommon -steps 2 -seed 2 -resume "$w/g.h5" -generate 4 -prompt "The "
  expect_grep "tokens sampled at temperature 1 (seed 2)" "$fsdp_tmp/generate_seed.out"
  ok resume_same 2 $gcommon -steps 3 -seed 1 -resume "$w/g.h5"
  rm "$w/g.h5" "$w/base.h5" "$w/base.csv" "$w/base.before" "$w/text.txt"
fi

# ------------------------------------------------------------------ 10: -generate and -prompt before the first step
# uint16 tokens 0 .. 249, twice over: a flat file of 500 tokens.
i=0
while [ $i -lt 500 ]; do printf "\\$(printf %o $((i % 250)))\\000"; i=$((i + 1)); done >"$w/tok.bin"
tcommon="-model $gpt -data tokens:$w/tok.bin -batch 4 -steps 3 -log_every 0"
refused generate_mlp "fsdp-train: -generate 5 needs a gpt: model, not $mlp" 2 $common -generate 5 -loss_log "$w/g.csv"
refused prompt_vocab "fsdp-train: -prompt '1 999 2': with -data tokens: it is token ids separated by spaces, each in \[0, 256); '999 2' is not one" 2 \
  $tcommon -generate 3 -prompt "1 999 2" -loss_log "$w/g.csv"
refused prompt_text "fsdp-train: -prompt 'abc': with -data tokens: it is token ids separated by spaces, each in \[0, 256); 'abc' is not one" 2 \
  $tcommon -generate 3 -prompt abc -loss_log "$w/g.csv"

# ------------------------------------------------------------------ 11: llm.c token files
le32() { printf "\\$(printf %o $(($1 & 255)))\\$(printf %o $((($1 >> 8) & 255)))\\$(printf %o $((($1 >> 16) & 255)))\\$(printf %o $((($1 >> 24) & 255)))"; }
# llmc FILE MAGIC VERSION COUNT: a 1024-byte header, then the 500 tokens of tok.bin.
llmc() { { le32 "$2"; le32 "$3"; le32 "$4"; head -c 1012 /dev/zero; cat "$w/tok.bin"; } >"$1"; }
llmc "$w/good.bin" 20240520 1 500
ok llmc_good 2 $tcommon -data "tokens:$w/good.bin" -log_every 3
expect_grep "; $w/good.bin (500 tokens)" "$fsdp_tmp/llmc_good.out"
llmc "$w/count.bin" 20240520 1 100000
refused llmc_count "fsdp-train: -data tokens:$w/count.bin: '$w/count.bin': llm.c header\[2\], the number of tokens, is 100000, but 1000 bytes follow the 1024-byte header (500 uint16 tokens)" 2 \
  $tcommon -data "tokens:$w/count.bin"
llmc "$w/v99.bin" 20240520 99 500
refused llmc_version "fsdp-train: -data tokens:$w/v99.bin: '$w/v99.bin': llm.c header\[1\], the version, is 99: fsdp-train reads version 1 (uint16 tokens)" 2 \
  $tcommon -data "tokens:$w/v99.bin"
llmc "$w/v2.bin" 20240520 2 250
refused llmc_v2 "llm.c header\[1\], the version, is 2: fsdp-train reads version 1" 1 $tcommon -data "tokens:$w/v2.bin"
llmc "$w/llama3.bin" 20240801 7 250
refused llmc_llama3 "fsdp-train: -data tokens:$w/llama3.bin: '$w/llama3.bin' is llm.c's LLaMA 3 format (header\[0\], the magic, is 20240801: uint32 tokens)" 1 \
  $tcommon -data "tokens:$w/llama3.bin"
rm "$w"/*.bin

# ------------------------------------------------------------------ 12: data specs
mkdir "$w/dir"
refused text_dir "fsdp-train: -data text:$w/dir: '$w/dir' is a directory, not a regular file" 2 \
  -model $gpt -data "text:$w/dir" -batch 4 -steps 1
rmdir "$w/dir"
refused synthetic_empty "fsdp-train: -data synthetic:n=16,,seed=1: item 2 is empty" 2 $common -data synthetic:n=16,,seed=1
refused synthetic_trailing "fsdp-train: -data synthetic:n=16,: item 2 is empty" 1 $common -data synthetic:n=16,
refused synthetic_twice "fsdp-train: -data synthetic:n=16,n=32: n is given twice" 1 $common -data synthetic:n=16,n=32
refused synthetic_space "fsdp-train: -data synthetic:n= 16: n= 16: n must be a positive integer" 1 $common -data "synthetic:n= 16"

# ------------------------------------------------------------------ 13: SIGINT, as SIGTERM
log="$w/sigint.csv"
ck=
$hdf5 && ck="-checkpoint $w/sigint.h5"
fsdp_run 2 "$train" $common -steps 1000000000 -loss_log "$log" $ck >"$fsdp_tmp/sigint.out" 2>&1 &
job=$!
i=0
while ! { [ -f "$log" ] && [ "$(wc -l <"$log")" -ge 4 ]; } && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
victim=$(rank_pid "$log")
[ -n "$victim" ] || { cat "$fsdp_tmp/sigint.out"; echo "FAIL: SIGINT: no rank to signal"; exit 1; }
kill -INT "$victim" # one rank only: the ranks agree at the step boundary
rc=0
wait $job || rc=$?
[ $rc -eq 0 ] || { cat "$fsdp_tmp/sigint.out"; echo "FAIL: SIGINT: fsdp-train exited with $rc"; exit 1; }
if $hdf5; then
  expect_grep "^fsdp-train: SIGINT after step [0-9]*: checkpoint written; exiting" "$fsdp_tmp/sigint.out"
  step=$(sed -n "s/^fsdp-train: SIGINT after step \([0-9]*\):.*/\1/p" "$fsdp_tmp/sigint.out")
  saved=$(h5dump -a /step "$w/sigint.h5" | sed -n 's/^ *(0): //p')
  [ "$step" = "$(tail -n 1 "$log" | cut -d, -f1)" ] && [ "$step" = "$saved" ] ||
    { echo "FAIL: SIGINT: stopped after step $step, the log ends at $(tail -n 1 "$log"), the checkpoint has step $saved"; exit 1; }
else
  expect_grep "^fsdp-train: SIGINT after step [0-9]*: no -checkpoint given, nothing saved; exiting" "$fsdp_tmp/sigint.out"
fi
exit 0
