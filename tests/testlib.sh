# testlib.sh: helpers for shell tests, sourced by tests/*.sh (run by tests/mpitest).
: "${MPIEXEC:=mpiexec}"
: "${FSDP_TEST_TIMEOUT:=300}"
: "${top_builddir:=.}"

# fsdp_run NP PROGRAM [ARGS...]: launch an MPI job, with the test timeout;
# a job the timeout ended returns 124.
fsdp_run() {
  np=$1
  shift
  fsdp_run_start=$(date +%s)
  # -k: a job that catches SIGTERM (fsdp-train saves on it) and hangs still
  # ends, by SIGKILL, and timeout then returns 137: still a timeout.
  timeout -k 30 "$FSDP_TEST_TIMEOUT" $MPIEXEC $MPIEXEC_FLAGS -n "$np" "$@"
  fsdp_run_rc=$?
  if [ $fsdp_run_rc -eq 137 ] && [ $(($(date +%s) - fsdp_run_start)) -ge "$FSDP_TEST_TIMEOUT" ]; then fsdp_run_rc=124; fi
  return $fsdp_run_rc
}

# expect_grep PATTERN FILE: fail the test unless FILE has a line matching PATTERN.
expect_grep() {
  if ! grep -q -e "$1" "$2"; then
    echo "FAIL: expected a line matching '$1' in:" >&2
    sed 's/^/  | /' "$2" >&2
    exit 1
  fi
}

# expect_count N PATTERN FILE: exactly N lines of FILE match PATTERN.
expect_count() {
  got=$(grep -c -e "$2" "$3")
  if [ "$got" -ne "$1" ]; then
    echo "FAIL: expected $1 lines matching '$2', found $got in:" >&2
    sed 's/^/  | /' "$3" >&2
    exit 1
  fi
}

# refused NAME PATTERN NP ARGS...: $train (fsdp-train) fails (not hangs), each of
# the NP ranks says PATTERN, no file in the test's folder $w is created,
# changed or removed, and no step ran.
refused() {
  name=$1 pattern=$2 np=$3
  shift 3
  before=$(ls -lA --time-style=full-iso "$w")
  if fsdp_run "$np" "$train" "$@" >"$fsdp_tmp/$name.err" 2>&1; then
    cat "$fsdp_tmp/$name.err"; echo "FAIL: $name: fsdp-train succeeded"; exit 1
  fi
  rc=$?
  [ $rc -ne 124 ] || { cat "$fsdp_tmp/$name.err"; echo "FAIL: $name: fsdp-train hung"; exit 1; }
  expect_count "$np" "$pattern" "$fsdp_tmp/$name.err"
  after=$(ls -lA --time-style=full-iso "$w")
  [ "$before" = "$after" ] || { printf 'FAIL: %s: the refused job changed files:\n%s\n---\n%s\n' "$name" "$before" "$after"; exit 1; }
  if grep -q '^step \|checkpoint .* written' "$fsdp_tmp/$name.err"; then
    cat "$fsdp_tmp/$name.err"; echo "FAIL: $name: the refused job trained"; exit 1
  fi
}

# fsdp_need_hdf5: SKIP (77) the test in a build without HDF5, where there are
# no checkpoints to test.
fsdp_need_hdf5() {
  "$top_builddir/tests/h5data" >/dev/null 2>&1
  [ $? -ne 77 ] || { echo "SKIP: built without HDF5: no checkpoints"; exit 77; }
}

# fsdp_need_torch: SKIP (77) when FSDP_SKIP_TORCH gives a reason, or without a python3 that has torch, h5py and numpy
# (the PyTorch references) or a libfsdp without HDF5 (fsdp-train -init reads
# the reference's parameters); sets $python.
fsdp_need_torch() {
  python=
  [ -z "${FSDP_SKIP_TORCH:-}" ] || { echo "SKIP: FSDP_SKIP_TORCH: $FSDP_SKIP_TORCH"; exit 77; }
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import torch, h5py, numpy' 2>/dev/null; then python=$p && break; fi
  done
  [ -n "$python" ] || { echo "SKIP: no python3 with torch and h5py (Debian: apt-get install python3-torch python3-h5py)"; exit 77; }
  [ "$(fsdp_config_has HDF5)" = yes ] ||
    { echo "SKIP: libfsdp built without HDF5: fsdp-train -init cannot read the reference's parameters"; exit 77; }
}

# fsdp_config_has NAME: yes when this build has FSDP_HAVE_NAME, else no.
fsdp_config_has() {
  if grep -q "^#define FSDP_HAVE_$1 1" "$top_builddir/src/include/fsdp_config.h"; then echo yes; else echo no; fi
}

# curves_agree REF NAME STEPS: the loss logs $fsdp_tmp/REF.csv and NAME.csv
# have STEPS steps each whose losses agree within 1e-4 relative.
curves_agree() {
  awk -F, -v ref="$1" -v name="$2" -v steps="$3" '
    NR == FNR { if (FNR > 1) want[$1] = $2; next }
    FNR == 1 { next }
    { n++; d = ($2 - want[$1]) / want[$1]; if (d < 0) d = -d; if (d > worst) worst = d
      if (!($1 in want) || d > 1e-4) { print "FAIL: " name " step " $1 ": loss " $2 ", " ref " has " want[$1]; bad = 1 } }
    END { if (n != steps) { print "FAIL: " name " has " n " steps, not " steps; bad = 1 }
          if (!bad) printf "%s matches %s: largest relative difference %.2g\n", name, ref, worst; exit bad }' \
    "$fsdp_tmp/$1.csv" "$fsdp_tmp/$2.csv" || exit 1
}

# fsdp_mount_ns: whether this user can mount in a private mount namespace
# (`unshare -m` as root, a user namespace `unshare -r -m` otherwise): mounts
# made there are gone with it, and the machine's never change.  Sets $fsdp_ns
# to the command; on failure $fsdp_ns_why says why.
fsdp_mount_ns() {
  if [ "$(id -u)" -eq 0 ]; then fsdp_ns="unshare -m --propagation private"
  else fsdp_ns="unshare -r -m --propagation private"; fi
  mkdir -p "$fsdp_tmp/ns-probe"
  $fsdp_ns sh -c "mount -t tmpfs fsdp-probe '$fsdp_tmp/ns-probe'" 2>"$fsdp_tmp/ns-probe.err" && return 0
  fsdp_ns_why="$fsdp_ns: $(cat "$fsdp_tmp/ns-probe.err")"
  return 1
}

# rank_pid TEXT: one rank of the job whose command line has TEXT (a unique
# path): tests send signals to a rank, as Slurm's --signal does.
rank_pid() {
  for d in /proc/[0-9]*; do
    cmd=$( (tr '\0' ' ' <"$d/cmdline") 2>/dev/null) || continue
    case ${cmd%% *} in
    *fsdp-train) case $cmd in *"$1"*) echo "${d#/proc/}"; return ;; esac ;;
    esac
  done
}

# summary_is_formula FILE: in fsdp-train's summary in FILE, each of the six
# memory categories' peak equals its formula, "other" (data set + a
# micro-batch's rows + their activations + what the objects held before the
# first step) included: the steps allocated nothing else.
summary_is_formula() {
  awk '/^  (parameters|gradients|optimizer state|unsharded buffers|communication staging|other) / {
         for (i = 1; i <= NF && $i !~ /^[0-9.]+$/; i++) ;
         n++; if ($i " " $(i + 1) != $(i + 2) " " $(i + 3)) { print "FAIL: peak is not the formula: " $0; bad = 1 } }
       END { if (n != 6) { print "FAIL: " n " memory rows in the summary, not 6"; bad = 1 }; exit bad }' "$1" ||
    { cat "$1"; exit 1; }
}

# train_run NAME NP ARGS...: fsdp-train ($train, with the script's $common
# options) on NP ranks, its loss log in $fsdp_tmp/NAME.csv and its output in
# $fsdp_tmp/NAME.out; an error fails the test and shows the output.
train_run() {
  name=$1 np=$2
  shift 2
  fsdp_run "$np" "$train" $common -loss_log "$fsdp_tmp/$name.csv" "$@" >"$fsdp_tmp/$name.out" 2>&1 ||
    { cat "$fsdp_tmp/$name.out"; echo "FAIL: fsdp-train $name exited with an error"; exit 1; }
}

fsdp_tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsdp-test.XXXXXX") || exit 99
trap 'rm -rf "$fsdp_tmp"' EXIT

