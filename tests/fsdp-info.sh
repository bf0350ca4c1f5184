#!/bin/sh
# fsdp-info on 4 ranks: the version, the backends and dependencies this build
# was configured with, and one line per rank in rank order.
. "${srcdir:-.}/tests/testlib.sh"
config="$top_builddir/src/include/fsdp_config.h"
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$config")

fsdp_run 4 "$top_builddir/tools/fsdp-info" >"$fsdp_tmp/out" 2>"$fsdp_tmp/err" || { cat "$fsdp_tmp/err"; echo "FAIL: fsdp-info exited with an error"; exit 1; }
cat "$fsdp_tmp/out"
expect_count 1 "^libfsdp $version\$" "$fsdp_tmp/out"
expect_grep '^  backends: host' "$fsdp_tmp/out"
expect_grep '^  MPI: .*(standard [34]\.[0-9]' "$fsdp_tmp/out"
expect_grep '^ranks: 4$' "$fsdp_tmp/out"
# One line per rank, in rank order.
grep '^  rank [0-9] of 4 on ' "$fsdp_tmp/out" | sed 's/^  rank \([0-9]\).*/\1/' | tr -d '\n' >"$fsdp_tmp/order"
[ "$(cat "$fsdp_tmp/order")" = "0123" ] || { echo "FAIL: rank lines in order '$(cat "$fsdp_tmp/order")', expected 0123"; exit 1; }

if grep -q '^#define FSDP_HAVE_HWLOC 1' "$config"; then expect_grep '^  hwloc: API 2\.' "$fsdp_tmp/out"; fi
if grep -q '^#define FSDP_HAVE_HDF5 1' "$config"; then expect_grep '^  HDF5: 1\.[0-9]*\.[0-9]* (parallel)$' "$fsdp_tmp/out"; fi
if grep -q '^#define FSDP_HAVE_OPENBLAS_GET_CONFIG 1' "$config"; then expect_grep '^  BLAS: OpenBLAS' "$fsdp_tmp/out"; fi
if grep -q '^#define FSDP_HAVE_CUDA 1' "$config"; then
  expect_grep '^  backends: host cuda$' "$fsdp_tmp/out"
  expect_grep '^  CUDA: runtime ' "$fsdp_tmp/out"
else
  expect_grep '^  CUDA: not built' "$fsdp_tmp/out"
fi
if grep -q '^#define FSDP_HAVE_NCCL 1' "$config"; then expect_grep '^  NCCL: 2\.' "$fsdp_tmp/out"; fi

# An unknown option is reported, with the name it probably meant.
fsdp_run 1 "$top_builddir/tools/fsdp-info" -fsdp_log_veiw >"$fsdp_tmp/out" 2>&1
expect_grep 'fsdp_log_veiw (no value) (from the command line): did you mean -fsdp_log_view?' "$fsdp_tmp/out"
exit 0
