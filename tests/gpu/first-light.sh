#!/usr/bin/env bash
# first-light.sh: libfsdp's GPU checks in one command, for a GPU machine that
# has none of this project's Debian packages (doc/cuda.md, "First light").
#
#   tests/gpu/first-light.sh [--bundle DIR|FILE.tar.xz | --build DIR] [--host] [--only STEP,...] [--list]
#     --bundle   what tools/gpu-bundle made (default: gpu-bundle, else
#                gpu-bundle.tar.xz, in the source tree); a .tar.xz is unpacked
#                into $TMPDIR
#     --build    a build tree instead of a bundle (make check uses its own),
#                with the machine's own mpiexec
#     --host     only the steps that need no GPU; the others are skipped
#     --only     only these steps (names as --list prints them)
#     --list     the steps, in order, and what each needs
#
# Each step runs under its own timeout; its output goes to
# $OUT/first-light.log when OUT is set (else into a folder the script names),
# and one summary line per step ends the run (also $OUT/summary.txt):
# passed, failed, or skipped with why.  Exit status: 0 when no step failed.
# The CUDA runtime, cuBLAS and NCCL are the machine's: the toolkit's folder
# (CUDA_HOME, /usr/local/cuda) or the Python wheels' (nvidia/*/lib).
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
self=$src/tests/gpu/first-light.sh

# name | timeout in seconds | needs (host, gpu) | what
steps="environment|60|host|versions: GPU, driver, CUDA runtime, cuBLAS, NCCL; fsdp-info
bundle|60|host|every program finds its libraries (CUDA's aside)
host-train|120|host|the bundle's mpiexec runs fsdp-train at W = 2 on the host: the MLP (BLAS) to a checkpoint (HDF5) and on from it, the FNO (FFTW)
host-tests|120|host|the bundle's host tests: FSDP, the Fortran module, test_device (its host-side checks)
test_device|180|gpu|tests/test_device: host and GPU contexts side by side, bit for bit
test_nn_device|180|gpu|tests/test_nn_device: the layer library on the GPU against the host; GPU checkpoints
device-shared|240|gpu|tests/device-shared.sh: 2 and 4 ranks on one GPU (MPI path), fsdp-train cuda vs host
mlp-gpu-vs-host|120|gpu|fsdp-train MLP, AdamW, fp32 without TF32: GPU loss curve against the host's
mixed-precision|120|gpu|fsdp-train MLP, bf16 and fp16 parameters: GPU against the host's
checkpoint|120|gpu|a checkpoint written from GPU memory at W = 2, resumed on the host at W = 1
gpt-gpu-vs-host|150|gpu|fsdp-train GPT on the GPU against the host: untied, then -generate; tied at W = 2 with activation checkpointing; bf16 refused
plan-gpu|150|gpu|fsdp-plan -probe on the GPU, the MLP at W = 1 and 2, the GPT at W = 1: the model timed there; the choice runs, its memory plan the predicted one and each GPU category peaks at it; predicted and measured step
bench-device|180|gpu|benchmarks/bench-device: the MLP step on the GPU, fp32, TF32, bf16
log-view|60|gpu|fsdp-train -fsdp_log_view on the GPU: where the step of the vs-pytorch MLP goes
vs-pytorch|240|gpu|benchmarks/vs-pytorch --device cuda: the MLP against PyTorch on the same GPU: step time, loss curve, memory
vs-pytorch-gpt|240|gpu|benchmarks/vs-pytorch --device cuda: the GPT of issue 40 against PyTorch's on the same GPU
sanitizer|240|gpu|test_nn_device and a GPT's steps under compute-sanitizer (memcheck): no invalid access in libfsdp's kernels"

# program NAME: the ELF file of a built program (a build tree's libtool wrapper
# keeps it in .libs/), for ldd
program() {
  local d=$top_builddir/$(dirname "$1") b
  b=$(basename "$1")
  if [ -f "$d/.libs/$b" ]; then echo "$d/.libs/$b"; else echo "$d/$b"; fi
}

usage() { sed -n '4,14p' "$self" | sed 's/^# \{0,1\}//'; }
die() { echo "first-light: $*" >&2; exit 2; }

# ---------------------------------------------------------------- one step
# Run by the driver below as "first-light.sh --step NAME", under timeout, with
# the environment it exported.  Exit 0 passed, 77 skipped (the last line says
# why), anything else failed.
common_mlp="-model mlp:in=64,hidden=256,depth=3,out=8,act=gelu,norm=layernorm -batch 64 -steps 40 -log_every 10"

# train NAME NP ARGS...: fsdp-train into $w/NAME.out, its losses in $w/NAME.csv
train() {
  local name=$1 np=$2
  shift 2
  echo "+ mpiexec -n $np fsdp-train $* -loss_log $w/$name.csv"
  timeout -k 10 100 $MPI -n "$np" "$top_builddir/tools/fsdp-train" "$@" -loss_log "$w/$name.csv" >"$w/$name.out" 2>&1
  local rc=$?
  cat "$w/$name.out"
  [ $rc -eq 0 ] || { echo "FAIL: fsdp-train $name exited with $rc"; exit 1; }
}

# compare A B TOL: step by step, |loss_A - loss_B| <= TOL * |loss_A|, and B's loss fell
compare() {
  echo "+ compare $1 $2: relative tolerance $3"
  paste -d, "$w/$1.csv" "$w/$2.csv" | awk -F, -v tol="$3" '
    NR > 1 { d = $2 - $4; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2); if (r > worst) worst = r
             if (r > tol) { print "FAIL: step " $1 ": " a " " $2 ", " b " " $4; bad = 1 }
             if (NR == 2) first = $4; last = $4; n++ }
    END { if (n == 0) { print "FAIL: no losses"; exit 1 }
          printf "worst relative difference %.3g over %d steps; loss %g -> %g\n", worst, n, first, last
          if (!(last < 0.9 * first)) { print "FAIL: the loss went from " first " to " last; bad = 1 }
          exit bad }' a="$1" b="$2"
}

# gpu_peaks_at_formula FILE: in fsdp-train's summary, each GPU memory category with a
# formula peaked at it (the activations and the batch, "other", have none)
gpu_peaks_at_formula() {
  awk '/^fsdp-train: peak GPU memory per rank/ { on = 1; next }
       on && /^  (parameters|gradients|optimizer state|unsharded buffers|communication staging) / {
         for (i = 1; i <= NF && $i !~ /^[0-9.]+$/; i++) ;
         n++; if ($i " " $(i + 1) != $(i + 2) " " $(i + 3)) { print "FAIL: GPU peak is not the formula: " $0; bad = 1 } }
       END { if (n != 5) { print "FAIL: " n " GPU memory rows with a formula, not 5"; bad = 1 }
             else print "GPU memory: the 5 categories with a formula peak at it"; exit bad }' "$1"
}

# have FEATURE: the build has it (HDF5, FFTW, CUDA, NCCL: fsdp_config.h)
have() { grep -q "^#define FSDP_HAVE_$1 1" "$top_builddir/src/include/fsdp_config.h"; }

run_step() {
  w=$FIRST_LIGHT_WORK/$1
  mkdir -p "$w"
  cd "$w" || exit 1
  case $1 in
  environment)
    echo "host: $(uname -n), $(uname -r), $(getconf _NPROCESSORS_ONLN) CPUs"
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv
      nvidia-smi | sed -n 's/.*\(CUDA Version: [0-9.]*\).*/driver supports \1/p'
    else
      echo "nvidia-smi: not found"
    fi
    echo "CUDA libraries (from $FIRST_LIGHT_CUDA_FROM):"
    for lib in $(ldd "$(program tools/fsdp-train)" | awk '/libcudart|libcublas|libnccl|libcuda\./ { print $1 }'); do
      path=$(ldd "$(program tools/fsdp-train)" | awk -v l="$lib" '$1 == l { print $3 }')
      echo "  $lib => $path${path:+ ($(basename "$(readlink -f "$path")"))}"
    done
    echo "MPI: $(command -v "$MPIEXEC"): $($MPIEXEC --version 2>&1 | sed -n 's/^ *Version: *//p' | head -1)"
    timeout 30 $MPI -n 1 "$top_builddir/tools/fsdp-info" || { echo "FAIL: fsdp-info: exit $?"; exit 1; }
    ;;
  bundle)
    if [ -n "${FSDP_BUNDLE:-}" ]; then
      "$src/tools/gpu-bundle" --out "$FSDP_BUNDLE" --check || exit 1
    else
      echo "SKIP: a build tree, not a bundle ($top_builddir)"; exit 77
    fi
    ;;
  host-train)
    # (A build tree may lack HDF5 or FFTW; a bundle has both.)
    ckpt=
    ! have HDF5 || ckpt="-checkpoint $w/ckpt.h5"
    train host2 2 $common_mlp -optimizer adamw -lr 1e-3 -fsdp_device host $ckpt
    awk -F, 'NR == 2 { f = $2 } { l = $2 } END { if (!(l < 0.9 * f)) { print "FAIL: loss " f " -> " l; exit 1 } }' "$w/host2.csv" || exit 1
    if [ -n "$ckpt" ]; then
      train resume 2 $common_mlp -steps 45 -optimizer adamw -lr 1e-3 -fsdp_device host -resume "$w/ckpt.h5"
      grep -q "resuming from .* at step 40" "$w/resume.out" || { echo "FAIL: fsdp-train did not resume at step 40"; exit 1; }
    fi
    ! have FFTW || train fno 2 -model fno:grid=16x12,in=2,out=1,width=6,modes=4,layers=2 -steps 3 -batch 8 -log_every 3
    ;;
  host-tests)
    [ -n "${FSDP_BUNDLE:-}" ] || { echo "SKIP: a build tree: its make check runs these"; exit 77; }
    for t in test_fsdp_toy test_fortran_api test_device; do
      [ -x "$top_builddir/tests/$t" ] || { echo "FAIL: the bundle has no tests/$t"; exit 1; }
      rc=0
      sh "$top_builddir/tests/mpitest" "$top_builddir/tests/$t" || rc=$?
      # Without a GPU test_device checks its errors, then skips: a pass here.
      [ $rc -eq 0 ] || { [ $rc -eq 77 ] && [ $t = test_device ]; } || { echo "FAIL: $t: exit $rc"; exit 1; }
    done
    ;;
  test_device | test_nn_device)
    sh "$top_builddir/tests/mpitest" "$top_builddir/tests/$1"
    ;;
  device-shared)
    sh "$top_builddir/tests/mpitest" "$src/tests/device-shared.sh"
    ;;
  mlp-gpu-vs-host)
    # fp32 GEMMs on both (no TF32): the curves differ by the order of sums only.
    train host 1 $common_mlp -optimizer adamw -lr 1e-3 -fsdp_device host
    train cuda 1 $common_mlp -optimizer adamw -lr 1e-3 -fsdp_device cuda -fsdp_tf32 false -fsdp_view
    compare host cuda 1e-4 || exit 1
    gpu_peaks_at_formula "$w/cuda.out" || exit 1
    ;;
  mixed-precision)
    # The same policy on both backends: the kernels round as the host loops do,
    # the GEMMs (bf16/fp16 inputs, fp32 sums) differ in order only.
    for dt in bf16 fp16; do
      train host-$dt 1 $common_mlp -optimizer adamw -lr 1e-3 -fsdp_device host -fsdp_param_dtype $dt
      train cuda-$dt 1 $common_mlp -optimizer adamw -lr 1e-3 -fsdp_device cuda -fsdp_param_dtype $dt
      compare host-$dt cuda-$dt 1e-2 || exit 1
    done
    ;;
  checkpoint)
    train save 2 $common_mlp -optimizer adamw -lr 1e-3 -fsdp_device cuda -fsdp_tf32 false -checkpoint "$w/ckpt.h5"
    [ -s "$w/ckpt.h5" ] || { echo "FAIL: no checkpoint written"; exit 1; }
    train resume 1 $common_mlp -steps 50 -optimizer adamw -lr 1e-3 -fsdp_device host -resume "$w/ckpt.h5"
    grep -q "resuming from .* at step 40" "$w/resume.out" || { echo "FAIL: fsdp-train did not resume at step 40"; exit 1; }
    ;;
  gpt-gpu-vs-host)
    # fp32 GEMMs on both (no TF32); the GPU adds wte's gradient atomically, in
    # no fixed order, so the curves differ by the order of sums only.
    gpt="-data text:$src/README.md -batch 8 -steps 30 -log_every 10 -optimizer adamw -lr 1e-3"
    spec=gpt:vocab=256,ctx=32,dim=64,heads=4,layers=2
    gen="-generate 24 -prompt The -temperature 1"
    train host 1 -model $spec $gpt -fsdp_device host $gen
    train cuda 1 -model $spec $gpt -fsdp_device cuda -fsdp_tf32 false $gen
    compare host cuda 1e-4 || exit 1
    # -generate after training, sampled with the same seed: the GPU's logits, copied to the host, give the host's text.
    grep -A1 "after the prompt:" "$w/host.out" >"$w/host.gen"
    grep -A1 "after the prompt:" "$w/cuda.out" >"$w/cuda.gen"
    [ -s "$w/cuda.gen" ] && cmp -s "$w/host.gen" "$w/cuda.gen" ||
      { echo "FAIL: -generate on the GPU: '$(tail -1 "$w/cuda.gen")', on the host: '$(tail -1 "$w/host.gen")'"; exit 1; }
    echo "generated on both: $(tail -1 "$w/cuda.gen")"
    # Tied head, two ranks sharing the GPU (the MPI path), activation checkpointing.
    train host-tied 2 -model $spec,tied=1 $gpt -fsdp_device host
    train cuda-tied 2 -model $spec,tied=1 $gpt -fsdp_device cuda -fsdp_tf32 false -fsdp_activation_checkpointing
    compare host-tied cuda-tied 1e-4 || exit 1
    # 16-bit parameters are refused on the GPU, by name.
    echo "+ mpiexec -n 1 fsdp-train -model $spec $gpt -fsdp_device cuda -fsdp_param_dtype bf16 (refused)"
    if timeout -k 10 60 $MPI -n 1 "$top_builddir/tools/fsdp-train" -model $spec $gpt -fsdp_device cuda \
      -fsdp_param_dtype bf16 >"$w/bf16.out" 2>&1; then
      cat "$w/bf16.out"; echo "FAIL: the GPT on the GPU with bf16 parameters was not refused"; exit 1
    fi
    grep -q "on the GPU take fp32 parameters, not bf16" "$w/bf16.out" || { cat "$w/bf16.out"; echo "FAIL: no reason given"; exit 1; }
    ;;
  plan-gpu)
    # The planner on the GPU (doc/fsdp-plan.md, "On GPUs"): the probe times the model on each rank's GPU,
    # the choice runs, and -fsdp_view's memory plan is the predicted one; the step, predicted and measured.
    mlp=mlp:in=1024,hidden=4096,depth=4,out=64,act=gelu,norm=layernorm
    for job in "mlp 1 $mlp 1024" "mlp 2 $mlp 1024" "gpt 1 gpt:vocab=256,ctx=64,dim=128,heads=4,layers=4 16"; do
      set -- $job
      name=$1$2 np=$2 model=$3 batch=$4 data=
      [ $1 = gpt ] && data="-data text:$src/README.md"
      echo "+ mpiexec -n $np fsdp-plan -model $model -batch $batch -memory 16G -probe -fsdp_device cuda -fsdp_tf32 false"
      timeout -k 10 100 $MPI -n $np "$top_builddir/tools/fsdp-plan" -model $model -batch $batch -memory 16G -probe \
        -fsdp_device cuda -fsdp_tf32 false -options_out "$w/$name.opts" >"$w/$name.plan" 2>&1
      rc=$?
      sed -n '1,12p;/^  choice:/,$p' "$w/$name.plan"
      [ $rc -eq 0 ] || { echo "FAIL: fsdp-plan ($name) exited with $rc"; exit 1; }
      grep -q "^  the model's step (measured by FSDPPlanProbe, .*, each on its GPU)" "$w/$name.plan" ||
        { echo "FAIL: the probe did not time the model on the GPU ($name)"; exit 1; }
      train $name $np -model $model $data -steps 30 -log_every 10 -optimizer adamw -lr 1e-3 -fsdp_device cuda \
        -fsdp_tf32 false -options_file "$w/$name.opts" -fsdp_view
      sh "$src/tests/plan-matches-view.sh" "$w/$name.plan" "$w/$name.out" || { echo "($name)"; exit 1; }
      gpu_peaks_at_formula "$w/$name.out" || exit 1
      step=$(awk '$1 == "0" { print $(NF - 1) }' "$w/$name.plan")
      ran=$(sed -n 's/^step *30\/30 .* \([0-9.]*\) ms\/step .*/\1/p' "$w/$name.out")
      awk -v p="$step" -v m="$ran" -v job="$name" 'BEGIN {
        if (!(p > 0 && m > 0)) { printf "FAIL: %s: no step time (predicted %s, measured %s)\n", job, p, m; exit 1 }
        printf "%s: the choice'"'"'s step predicted %.3g ms, measured %.3g ms (steps 21 to 30): %.3f\n", job, p, m, p / m }' ||
        exit 1
    done
    ;;
  bench-device)
    # The GPU settings only: the host's fp32 step at this size takes seconds on one thread.
    timeout -k 10 170 $MPI -n 1 "$top_builddir/benchmarks/bench-device" \
      -fsdp_bench_hidden 4096 -fsdp_bench_depth 8 -fsdp_bench_batch 2048 -fsdp_bench_host false
    ;;
  log-view)
    # Where a GPU step's time goes: the vs-pytorch MLP, -fsdp_log_view's events.
    train big 1 -model mlp:in=1024,hidden=4096,depth=4,out=64,act=gelu,norm=layernorm -batch 1024 -steps 30 \
      -log_every 10 -optimizer adamw -lr 1e-3 -fsdp_device cuda -fsdp_tf32 false -fsdp_log_view
    ;;
  vs-pytorch)
    py=python3
    LD_LIBRARY_PATH=$FIRST_LIGHT_CUDA_DIRS $py -c "import torch, h5py, numpy; assert torch.cuda.is_available()" 2>/dev/null ||
      { echo "SKIP: $py has no torch with CUDA, h5py and numpy"; exit 77; }
    # PyTorch with the machine's libraries only (the bundle's OpenSSL, zlib, ...
    # are older than what its wheels expect); fsdp-train's ranks get the bundle's.
    mpi="env LD_LIBRARY_PATH=$LD_LIBRARY_PATH $MPI"
    LD_LIBRARY_PATH=$FIRST_LIGHT_CUDA_DIRS FSDP_TRAIN=$top_builddir/tools/fsdp-train \
      $py "$src/benchmarks/vs-pytorch" --device cuda --mpiexec "$mpi" \
      --model mlp:in=1024,hidden=4096,depth=4,out=64,act=gelu,norm=layernorm --batch 1024 --steps 30 --rounds 3
    ;;
  vs-pytorch-gpt)
    LD_LIBRARY_PATH=$FIRST_LIGHT_CUDA_DIRS python3 -c "import torch, h5py, numpy; assert torch.cuda.is_available()" \
      2>/dev/null || { echo "SKIP: python3 has no torch with CUDA, h5py and numpy"; exit 77; }
    LD_LIBRARY_PATH=$FIRST_LIGHT_CUDA_DIRS FSDP_TRAIN=$top_builddir/tools/fsdp-train \
      python3 "$src/benchmarks/vs-pytorch" --device cuda --mpiexec "env LD_LIBRARY_PATH=$LD_LIBRARY_PATH $MPI" \
      --model gpt:vocab=256,ctx=64,dim=128,heads=4,layers=4 --batch 16 --steps 30 --rounds 3
    ;;
  sanitizer)
    cs=
    for c in compute-sanitizer "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"; do
      command -v "$c" >/dev/null && { cs=$(command -v "$c"); break; }
    done
    [ -n "$cs" ] || { echo "SKIP: no compute-sanitizer (CUDA_HOME/bin, PATH)"; exit 77; }
    FSDP_TEST_WRAPPER="$cs --tool memcheck --error-exitcode 99 --print-limit 20" \
      sh "$top_builddir/tests/mpitest" "$top_builddir/tests/test_nn_device" || exit 1
    # The GPT's kernels (embedding, attention's softmax), tied head, a few steps.
    echo "+ compute-sanitizer fsdp-train -model gpt:... -fsdp_device cuda"
    timeout -k 10 150 $MPI -n 1 "$cs" --tool memcheck --error-exitcode 99 --print-limit 20 \
      "$top_builddir/tools/fsdp-train" -model gpt:vocab=256,ctx=16,dim=32,heads=2,layers=1,tied=1 \
      -data "text:$src/README.md" -batch 4 -steps 3 -log_every 3 -fsdp_device cuda
    ;;
  *) echo "first-light: no step '$1'"; exit 2 ;;
  esac
}

if [ "${1:-}" = --step ]; then
  run_step "$2"
  exit $?
fi

# ----------------------------------------------------------------- driver
bundle= build= host_only=no only=
while [ $# -gt 0 ]; do
  case $1 in
  --bundle) [ $# -ge 2 ] || die "--bundle needs a folder or a .tar.xz"; bundle=$2; shift 2 ;;
  --build) [ $# -ge 2 ] || die "--build needs a build folder"; build=$2; shift 2 ;;
  --host) host_only=yes; shift ;;
  --only) [ $# -ge 2 ] || die "--only needs step names (see --list)"; only=$2; shift 2 ;;
  --list) echo "$steps" | awk -F'|' '{ printf "%-16s %-4s %4s s  %s\n", $1, $3, $2, $4 }'; exit 0 ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -z "$bundle" ] || [ -z "$build" ] || die "--bundle and --build exclude each other"
for s in $(echo "$only" | tr ',' ' '); do
  echo "$steps" | cut -d'|' -f1 | grep -qx -- "$s" || die "--only: no step '$s' (see --list)"
done

if [ -z "$build" ] && [ -z "$bundle" ]; then
  if [ -d "$src/gpu-bundle/lib" ]; then bundle=$src/gpu-bundle
  elif [ -f "$src/gpu-bundle.tar.xz" ]; then bundle=$src/gpu-bundle.tar.xz
  else die "no bundle: run tools/gpu-bundle first, or give --bundle or --build"; fi
fi
case $bundle in
"") [ -f "$build/tools/fsdp-train" ] || die "--build $build: no tools/fsdp-train there" ;;
*.tar.xz) [ -f "$bundle" ] || die "--bundle $bundle: no such file" ;;
*) [ -f "$bundle/env.sh" ] || die "--bundle $bundle: not a bundle (no env.sh)" ;;
esac
# The steps split their command lines into words.
case "$src ${bundle:-$build} ${TMPDIR:-/tmp} ${OUT:-}" in
*[[:space:]]*[[:space:]]*[[:space:]]*[[:space:]]*)
  die "a path with a space (source '$src', bundle or build '${bundle:-$build}', TMPDIR, OUT): not supported" ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/first-light.XXXXXX") || die "cannot make a folder in ${TMPDIR:-/tmp}"
# On every exit: the unpacked bundle goes; the logs stay unless OUT has them.
# A run stopped from outside still ends its summary.
finish() {
  if [ -n "${summary:-}" ] && [ -f "$summary.tmp" ]; then
    echo "(stopped from outside during a step: the steps after it did not run)" >>"$summary.tmp"
    mv "$summary.tmp" "$summary"
  fi
  rm -rf "$work/unpacked"
  [ -z "${OUT:-}" ] || rm -rf "$work"
}
trap finish EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
if [ -n "$bundle" ]; then
  case $bundle in
  *.tar.xz)
    mkdir -p "$work/unpacked"
    if command -v xz >/dev/null; then tar -C "$work/unpacked" -xJf "$bundle" || die "cannot unpack $bundle"
    else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$bundle" "$work/unpacked" ||
      die "cannot unpack $bundle (no xz, and python3 could not)"; fi
    bundle=$(find "$work/unpacked" -mindepth 2 -maxdepth 2 -name env.sh -printf '%h\n' | head -1)
    [ -n "$bundle" ] || die "no env.sh in the archive" ;;
  *) bundle=$(cd "$bundle" && pwd) ;;
  esac
  FSDP_BUNDLE=$bundle
  # shellcheck source=/dev/null
  . "$bundle/env.sh"
  top_builddir=$bundle
  MPIEXEC=$bundle/bin/mpiexec
else
  top_builddir=$(cd "$build" && pwd)
  MPIEXEC=${MPIEXEC:-mpiexec}
fi
# The launcher as the steps call it, with the flags make check's tests take (mpitest).
MPI="$MPIEXEC ${MPIEXEC_FLAGS:-}"

# The machine's CUDA libraries: the soname each program needs, looked for in the
# toolkit's folders, then in the Python wheels (nvidia/<part>/lib).
cuda_dirs="${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib"
for py in python3 /opt/torch/.venv/bin/python3; do
  command -v "$py" >/dev/null || continue
  # (Without the bundle's libraries, older than the ones the wheels were built for.)
  for site in $(LD_LIBRARY_PATH= $py -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    cuda_dirs="$cuda_dirs $(ls -d "$site"/nvidia/*/lib "$site"/nvidia/cu*/lib 2>/dev/null | tr '\n' ' ')"
  done
done
found_from= cuda_found_dirs=
for lib in $(ldd "$(program tools/fsdp-train)" 2>/dev/null | awk '/libcudart|libcublas|libnccl/ { print $1 }'); do
  for d in $cuda_dirs; do
    if [ -e "$d/$lib" ]; then
      case ":${LD_LIBRARY_PATH:-}:" in *":$d:"*) ;; *) LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d ;; esac
      found_from="$found_from $lib:$d"
      case ":$cuda_found_dirs:" in *":$d:"*) ;; *) cuda_found_dirs=${cuda_found_dirs:+$cuda_found_dirs:}$d ;; esac
      break
    fi
  done
done
export LD_LIBRARY_PATH FSDP_BUNDLE top_builddir MPIEXEC MPI
export FIRST_LIGHT_CUDA_DIRS=$cuda_found_dirs srcdir=$src FIRST_LIGHT_WORK=$work FIRST_LIGHT_CUDA_FROM="${found_from:- the default paths of the loader}"
export OPENBLAS_NUM_THREADS=1 FSDP_TEST_TIMEOUT=150

gpu=yes gpu_why=
if [ $host_only = yes ]; then gpu=no gpu_why="--host"
elif ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then gpu=no gpu_why="no GPU (nvidia-smi sees none)"
fi

log_dir=${OUT:-$work}
log=$log_dir/first-light.log
summary=$log_dir/summary.txt
: >"$log"
: >"$summary.tmp"
echo "first-light: $(date -u '+%Y-%m-%d %H:%M UTC'), steps' output in $log"
start=$(date +%s)
failed=0
while IFS='|' read -r name limit needs what; do
  if [ -n "$only" ] && ! echo ",$only," | grep -q ",$name,"; then continue; fi
  t0=$(date +%s)
  if [ "$needs" = gpu ] && [ $gpu = no ]; then
    result="skipped ($gpu_why)"
  else
    echo "first-light: $name ($what)"
    { echo "=== $name: $what"; } >>"$log"
    timeout -k 10 "$limit" "$self" --step "$name" >"$work/$name.log" 2>&1 </dev/null
    rc=$?
    cat "$work/$name.log" >>"$log"
    case $rc in
    0) result=passed ;;
    77) result="skipped ($(grep -v '^+ ' "$work/$name.log" | tail -1 | sed 's/^SKIP: //'))" ;;
    124 | 137) result="failed (no result after $limit s)"; failed=$((failed + 1)) ;;
    *) result="failed (exit $rc: $(grep -m1 'FAIL' "$work/$name.log" || tail -1 "$work/$name.log"))"; failed=$((failed + 1)) ;;
    esac
    echo "=== $name: $result ($(($(date +%s) - t0)) s)" >>"$log"
  fi
  printf '%-16s %s (%d s)\n' "$name" "$result" $(($(date +%s) - t0)) >>"$summary.tmp"
done <<EOF
$steps
EOF
mv "$summary.tmp" "$summary"
echo "first-light: summary ($(($(date +%s) - start)) s in all):"
sed 's/^/  /' "$summary"
[ -n "${OUT:-}" ] || echo "first-light: logs kept in $work"
[ $failed -eq 0 ]
