#!/bin/sh
# Options that must agree across ranks, given to one rank only (an MPMD
# launch: fsdp-train with the option : fsdp-train without it), end the job at
# set-up with an error on every rank that names the option, both values and
# the ranks; nothing hangs (each job has 60 s) and no checkpoint is started.
# Options that may differ train.  doc/options.md, "Settings that must agree".
. "${srcdir:-.}/tests/testlib.sh"
train="$(cd "$top_builddir" && pwd)/tools/fsdp-train"
common="-model mlp:in=16,hidden=32,depth=2,out=4 -data synthetic:n=256 -batch 16 -steps 4 -log_every 0"

# mpmd NAME "OPTIONS OF RANK 0" "OPTIONS OF RANK 1" [ENV OF RANK 0]
mpmd() {
  name=$1 zero=$2 one=$3 env0=${4:-FSDP_TEST_UNUSED=1}
  # shellcheck disable=SC2086
  timeout -k 30 60 $MPIEXEC $MPIEXEC_FLAGS -n 1 -env ${env0%%=*} "${env0#*=}" "$train" $common $zero : \
    -n 1 "$train" $common $one >"$fsdp_tmp/$name.out" 2>&1
  rc=$?
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$fsdp_tmp/$name.out"; echo "FAIL: $name: the job hung"; exit 1; }
}

# refused NAME PATTERN "OPTIONS OF RANK 0" "OPTIONS OF RANK 1" [ENV OF RANK 0]: both ranks say PATTERN.
refused() {
  name=$1 pattern=$2
  shift 2
  mpmd "$name" "$@"
  [ $rc -ne 0 ] || { cat "$fsdp_tmp/$name.out"; echo "FAIL: $name: the job ran with ranks that disagree"; exit 1; }
  for r in 0 1; do expect_grep "^\[$r\] FSDP ERROR: .*$pattern" "$fsdp_tmp/$name.out"; done
  expect_count 0 "SIGUSR1\|signal_grace\|watchdog" "$fsdp_tmp/$name.out"
  echo "$name: refused on both ranks"
}

# The two an adversarial battery found hanging.
refused check_finite \
  "FSDPContextSetUp: -fsdp_check_finite differs across ranks: rank 0 has false, rank 1 has true; every rank must give the same" \
  "-fsdp_check_finite false" ""
refused checkpoint_io "FSDPContextSetUp: -fsdp_checkpoint_io differs across ranks: rank 0 has auto, rank 1 has independent" \
  "-checkpoint $fsdp_tmp/ck.h5 -checkpoint_every 1" \
  "-checkpoint $fsdp_tmp/ck.h5 -checkpoint_every 1 -fsdp_checkpoint_io independent"
[ ! -e "$fsdp_tmp/ck.h5" ] && [ ! -e "$fsdp_tmp/ck.h5.partial" ] ||
  { ls -l "$fsdp_tmp"; echo "FAIL: a checkpoint was started"; exit 1; }

# More of the context's, through the command line.
refused comm_engine "-fsdp_comm_engine differs across ranks: rank 0 has auto, rank 1 has sync" "" "-fsdp_comm_engine sync"
refused wait "-fsdp_wait differs across ranks: rank 0 has poll, rank 1 has auto" "-fsdp_wait poll" ""
refused strategy "-fsdp_sharding_strategy differs across ranks: rank 0 has full, rank 1 has grad_op" "" \
  "-fsdp_sharding_strategy shard_grad_op"
refused two "-fsdp_limit_all_gathers differs across ranks: rank 0 has 2, rank 1 has 1; -fsdp_checkpoint_strict differs across ranks: rank 0 has true, rank 1 has false" \
  "" "-fsdp_limit_all_gathers 1 -fsdp_checkpoint_strict false"
# The ShardGroup's, by name (binding needs hwloc; without it a bind is refused for that).
if grep -q '^#define FSDP_HAVE_HWLOC 1' "$top_builddir/src/include/fsdp_config.h"; then
  refused bind "ranks disagree on the ShardGroup's -fsdp_bind: rank 0 has core, rank 1 has none" "-fsdp_bind core" ""
else
  refused bind "-fsdp_bind core needs hwloc, and this libfsdp was built without it" "-fsdp_bind core" ""
fi
# FSDPFinalize's reports are collective: compared in FSDPInitialize.
refused log_view "FSDPInitialize: -fsdp_log_view differs across ranks: rank 0 has false, rank 1 has true" "" "-fsdp_log_view"
refused options_left "FSDPInitialize: -fsdp_options_left differs across ranks: rank 0 has false, rank 1 has true" \
  "-fsdp_options_left false" ""
refused log_trace "FSDPInitialize: -fsdp_log_trace differs across ranks: rank 0 has a file, rank 1 has none" \
  "-fsdp_log_trace $fsdp_tmp/trace.json" ""
# A malformed option in one rank's FSDP_OPTIONS: the other rank hears of it instead of going on alone.
mpmd env_options "" "" "FSDP_OPTIONS=-fsdp_on_error abrot"
[ $rc -ne 0 ] || { cat "$fsdp_tmp/env_options.out"; echo "FAIL: env_options: the job ran"; exit 1; }
expect_grep "^\[0\] FSDP ERROR: .*option -fsdp_on_error: 'abrot' (from FSDP_OPTIONS)" "$fsdp_tmp/env_options.out"
expect_grep "^\[1\] FSDP ERROR: .*on rank 0: option -fsdp_on_error: 'abrot' (from FSDP_OPTIONS)" "$fsdp_tmp/env_options.out"
echo "env_options: a bad FSDP_OPTIONS on rank 0 is reported on both ranks"

# What each rank may set alone trains.
mpmd may_differ "-loss_log $fsdp_tmp/loss.csv -fsdp_collective_timeout 100 -fsdp_signal_grace 2 -fsdp_simd generic -fsdp_blas_threads 1 -fsdp_memory_limit none -fsdp_on_error abort -fsdp_log_view_units" \
  "-loss_log $fsdp_tmp/loss.csv"
[ $rc -eq 0 ] || { cat "$fsdp_tmp/may_differ.out"; echo "FAIL: may_differ: the job failed"; exit 1; }
expect_count 1 "^4," "$fsdp_tmp/loss.csv"
echo "may_differ: timeouts, SIMD path, BLAS threads, memory limit, error mode, per-unit events: trained"
