#!/bin/sh
# libfsdp.so exports the public API and nothing else: every dynamic symbol it
# defines is declared FSDP_EXTERN in a public header of this build, and every
# such declaration is exported (a declared function nobody defined fails too).
. "${srcdir:-.}/tests/testlib.sh"
lib="$top_builddir/src/.libs/libfsdp.so"
[ -f "$lib" ] || { echo "SKIP: $lib does not exist (configured --disable-shared?)"; exit 77; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm (binutils) is not installed"; exit 77; }

headers="$srcdir/include/fsdp.h $srcdir/include/fsdp_nn.h"
grep -q '^#define FSDP_WITH_CUDA 1' "$top_builddir/include/fsdpconf.h" && headers="$headers $srcdir/include/fsdp_cuda.h"
# The name of each FSDP_EXTERN declaration: the identifier before its first '('.
sed -n 's/^FSDP_EXTERN [^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' $headers | sort -u >"$fsdp_tmp/declared"
nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sort -u >"$fsdp_tmp/exported"
echo "exports: $(wc -l <"$fsdp_tmp/exported") symbols exported, $(wc -l <"$fsdp_tmp/declared") declared FSDP_EXTERN"
[ -s "$fsdp_tmp/declared" ] || { echo "FAIL: no FSDP_EXTERN declarations found in $headers"; exit 1; }
comm -23 "$fsdp_tmp/exported" "$fsdp_tmp/declared" >"$fsdp_tmp/extra"
comm -13 "$fsdp_tmp/exported" "$fsdp_tmp/declared" >"$fsdp_tmp/missing"
status=0
if [ -s "$fsdp_tmp/extra" ]; then
  echo "FAIL: libfsdp.so exports symbols no public header declares FSDP_EXTERN (give them FSDP_EXTERN, or keep them hidden):"
  sed 's/^/  /' "$fsdp_tmp/extra"
  status=1
fi
if [ -s "$fsdp_tmp/missing" ]; then
  echo "FAIL: public headers declare functions libfsdp.so does not export:"
  sed 's/^/  /' "$fsdp_tmp/missing"
  status=1
fi
exit $status
