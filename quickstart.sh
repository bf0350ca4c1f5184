#!/bin/sh
# libfsdp quick start on a Debian machine.
#   ./quickstart.sh          install what is missing, build, run the demo job on 4 ranks
#   ./quickstart.sh check    install what is missing, build, run make check
#   ./quickstart.sh gpt      install what is missing, build, train a character-level GPT for a few
#                            minutes on the licence texts in /usr/share/common-licenses, then sample it
# The build goes to ./build; extra configure flags come from FSDP_CONFIGURE_FLAGS.
set -e
cd "$(dirname "$0")"
top=$(pwd)
what=${1:-demo}
case $what in
demo | check | gpt) ;;
*) echo "usage: $0 [check | gpt]" >&2; exit 2 ;;
esac

packages="gcc make autoconf automake libtool pkg-config gfortran mpich libmpich-dev hwloc libhwloc-dev libhdf5-mpich-dev hdf5-tools libopenblas-dev libfftw3-dev"
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "quickstart: installing$missing"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi

# make -j: the machine's CPUs.  Not nproc, which follows OMP_NUM_THREADS
# (1 in many users' shells) and would build on one core.
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
[ -x configure ] || ./autogen.sh >/dev/null
mkdir -p build
cd build
[ -f Makefile ] || "$top/configure" $FSDP_CONFIGURE_FLAGS
make -j"$jobs"

if [ "$what" = demo ]; then
  echo
  # The main job: 4 ranks as 2 emulated nodes, hybrid sharding, synthetic data.
  # One BLAS thread per rank: the ranks already share the cores.
  OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
  export OPENBLAS_NUM_THREADS
  set -- -model mlp:in=16,hidden=128,depth=4,out=4,act=gelu,norm=layernorm -data synthetic \
    -steps 300 -batch 64 -lr 3e-3 -lr_schedule cosine -warmup_steps 20 -log_every 25 \
    -fsdp_sharding_strategy hybrid -fsdp_ranks_per_node 2 -loss_log loss.csv
  echo "quickstart: mpiexec -n 4 build/tools/fsdp-train $*"
  mpiexec -n 4 ./tools/fsdp-train "$@"
  echo "quickstart: the loss curve is in build/loss.csv"
  exit 0
fi

if [ "$what" = gpt ]; then
  echo
  # Text every Debian system has (base-files), a byte per token.
  cat /usr/share/common-licenses/* >licences.txt
  set -- -model gpt:vocab=256,ctx=64,dim=128,heads=4,layers=4 -data text:licences.txt \
    -steps 2000 -batch 32 -lr 3e-3 -lr_schedule cosine -warmup_steps 100 -clip_grad_norm 1.0 \
    -log_every 200 -loss_log gpt-loss.csv -checkpoint gpt.h5 -generate 300 -prompt "The licensee " -temperature 0.8
  echo "quickstart: mpiexec -n 2 build/tools/fsdp-train $*"
  mpiexec -n 2 ./tools/fsdp-train "$@"
  echo "quickstart: the loss curve is in build/gpt-loss.csv, the model in build/gpt.h5; more text from it:"
  echo "  mpiexec -n 2 build/tools/fsdp-train -model gpt:vocab=256,ctx=64,dim=128,heads=4,layers=4 \\"
  echo "      -data text:build/licences.txt -steps 2000 -resume build/gpt.h5 -log_every 0 -generate 500 -prompt 'You '"
  exit 0
fi

status=0
make -j"$jobs" check || status=$?
[ $status -eq 0 ] || cat test-suite.log
passed=$(cat tests/*.trs | grep -c '^:test-result: PASS' || true)
failed=$(cat tests/*.trs | grep -c '^:test-result: \(FAIL\|ERROR\|XPASS\)' || true)
skipped=$(cat tests/*.trs | grep -c '^:test-result: SKIP' || true)
echo "check: $passed passed, $failed failed, $skipped skipped"
exit $status
