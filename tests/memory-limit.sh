#!/bin/sh
# A memory plan that cannot fit is refused at set-up, on every rank, naming
# the plan's categories and the limit with where it comes from, before
# anything is allocated and well before the kernel could kill the job:
#   - a model planned at four times this machine's memory (issue 35's MLP at
#     W = 1 and GPT at W = 2, sized to the machine): physical memory shared by the
#     node's ranks; each refusal takes seconds at most, and is timed;
#   - RLIMIT_AS (ulimit -v): what it leaves of the address space; a small
#     model still trains under a modest limit (3 GiB: a rank's libraries take
#     more than 1 GiB of address space before set-up);
#   - a cgroup's memory limit (v1 memory.limit_in_bytes, v2 memory.max),
#     shared by the node's ranks: faked on a tmpfs over /sys/fs/cgroup in a
#     private mount namespace (the machine's cgroups never change);
#   - -fsdp_memory_limit none lets a plan through, a size is a limit.
# The refused jobs run under a ulimit -v just above the machine's memory, so
# that a build without the check fails to allocate instead of swapping the
# machine to death.
. "${srcdir:-.}/tests/testlib.sh"
train="$(cd "$top_builddir" && pwd)/tools/fsdp-train"
mlp="-data synthetic:n=256 -batch 16 -steps 2 -log_every 0"

# refused NAME PATTERN NP ARGS...: the job fails, every rank names the plan and PATTERN.
refused() {
  name=$1 pattern=$2 np=$3
  shift 3
  t0=$(date +%s.%N)
  FSDP_TEST_TIMEOUT=120 fsdp_run "$np" "$train" "$@" >"$fsdp_tmp/$name.out" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  [ $rc -ne 124 ] || { cat "$fsdp_tmp/$name.out"; echo "FAIL: $name: the job hung"; exit 1; }
  [ $rc -ne 0 ] || { cat "$fsdp_tmp/$name.out"; echo "FAIL: $name: a plan above the limit was not refused"; exit 1; }
  r=0
  while [ $r -lt "$np" ]; do
    expect_grep "^\[$r\] FSDP ERROR: out of memory: FSDPContextSetUp: the memory plan needs .* per rank (parameter shards .*, gradient shards .*, unsharded buffers .*, communication staging .*; the optimizer's state and the model's activations come on top), but this rank can have at most .*$pattern.*: nothing was allocated" \
      "$fsdp_tmp/$name.out"
    r=$((r + 1))
  done
  seconds=$(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}')
  # Launch and MPI's start included, on a busy machine: a job that allocated first would take far longer.
  awk -v s="$seconds" 'BEGIN {exit !(s < 20)}' || { echo "FAIL: $name: refused after $seconds s"; exit 1; }
  echo "$name: refused on $np rank(s) in $seconds s (launch included): $(grep -o 'needs [^(]*' "$fsdp_tmp/$name.out" | head -1)"
}

if [ -z "${FSDP_CGROUP_INSIDE:-}" ]; then
  phys_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
  [ -n "$phys_kib" ] || { echo "SKIP: no MemTotal in /proc/meminfo"; exit 77; }

  # Planned at about four times the machine: an F = 1 MLP of depth 4 plans 36 hidden^2 bytes.
  hidden=$(awk -v k="$phys_kib" 'BEGIN {printf "%d", sqrt(k * 1024 / 9)}')
  # A GPT of 8 layers has 96 dim^2 parameters: their fp32 bytes, 4 times the machine.
  dim=$(awk -v k="$phys_kib" 'BEGIN {printf "%d", int(sqrt(k * 1024 / 96) / 16) * 16}')
  head -c 3000 /dev/zero | tr '\0' 'a' >"$fsdp_tmp/text"
  (
    ulimit -v $((phys_kib + 1048576)) # a build without the check fails its allocations
    refused mlp-w1 "of physical memory shared by 1 rank on this node" 1 \
      -model "mlp:in=16,hidden=$hidden,depth=4,out=4" $mlp
    refused gpt-w2 "of physical memory shared by 2 ranks on this node" 2 \
      -model "gpt:vocab=256,ctx=256,dim=$dim,heads=16,layers=8" -data "text:$fsdp_tmp/text" -batch 2 -steps 1
  ) || exit 1

  # RLIMIT_AS: 3 GiB of address space, of which MPI (UCX's shared memory),
  # OpenBLAS and the libraries take more than 1 GiB before set-up, cannot hold
  # a 6.68 GiB plan; a small model trains under it.
  if [ $((phys_kib / 2)) -gt 3145728 ]; then
    (
      ulimit -v 3145728
      refused rlimit "RLIMIT_AS (ulimit -v) is 3.00 GiB, of which this process uses .*" 2 \
        -model mlp:in=16,hidden=16000,depth=4,out=4 $mlp
      fsdp_run 2 "$train" -model mlp:in=16,hidden=128,depth=4,out=4 $mlp -loss_log "$fsdp_tmp/small.csv" \
        >"$fsdp_tmp/small.out" 2>&1 || { cat "$fsdp_tmp/small.out"; echo "FAIL: a small model under ulimit -v 3 GiB"; exit 1; }
    ) || exit 1
    expect_count 1 "^2," "$fsdp_tmp/small.csv"
    echo "a small model trains under ulimit -v 3 GiB"
  else
    echo "RLIMIT_AS not checked: $((phys_kib / 1024)) MiB of memory for 2 ranks is less than the 3 GiB limit each"
  fi

  # The override: none lets the plan through (its model trains), a size refuses it.
  refused override "64.00 KiB (-fsdp_memory_limit)" 2 -model mlp:in=16,hidden=128,depth=4,out=4 $mlp \
    -fsdp_memory_limit 64K
  fsdp_run 2 "$train" -model mlp:in=16,hidden=128,depth=4,out=4 $mlp -fsdp_memory_limit none -fsdp_view \
    >"$fsdp_tmp/none.out" 2>&1 || { cat "$fsdp_tmp/none.out"; echo "FAIL: -fsdp_memory_limit none"; exit 1; }
  expect_grep "^    limit (rank 0) *none *-fsdp_memory_limit none" "$fsdp_tmp/none.out"
  fsdp_run 2 "$train" -model mlp:in=16,hidden=128,depth=4,out=4 $mlp -fsdp_view >"$fsdp_tmp/auto.out" 2>&1 ||
    { cat "$fsdp_tmp/auto.out"; echo "FAIL: the default limit refused a small model"; exit 1; }
  expect_grep "^    limit (rank 0) .* of physical memory shared by 2 ranks on this node" "$fsdp_tmp/auto.out"
  echo "-fsdp_memory_limit: none lets the plan through, 64K refuses it; -fsdp_view shows the limit"

  # The cgroup limits, in a private mount namespace.
  if ! fsdp_mount_ns; then
    echo "cgroup limits not checked: cannot mount a tmpfs in a private mount namespace ($fsdp_ns_why)"
    exit 0
  fi
  FSDP_CGROUP_INSIDE=1 $fsdp_ns sh "$0" "$@"
  exit
fi

# Inside the namespace: this process's cgroups, faked on a tmpfs.
v1=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
v2=$(awk -F: '$1 == "0" && $2 == "" {print $3}' /proc/self/cgroup)
mount -t tmpfs tmpfs /sys/fs/cgroup || { echo "FAIL: mount a tmpfs over /sys/fs/cgroup"; exit 1; }
trap 'umount /sys/fs/cgroup 2>/dev/null; rm -rf "$fsdp_tmp"' EXIT
model="-model mlp:in=16,hidden=8000,depth=4,out=4"

if [ -n "$v1" ]; then
  mkdir -p "/sys/fs/cgroup/memory$v1"
  echo 9223372036854771712 >/sys/fs/cgroup/memory/memory.limit_in_bytes # the root: unlimited
  echo 536870912 >"/sys/fs/cgroup/memory$v1/memory.limit_in_bytes"
  refused cgroup-v1 "256.00 MiB (the memory limit of cgroup /sys/fs/cgroup/memory${v1%/}, 512.00 MiB, shared by 2 ranks on this node)" \
    2 $model $mlp
  rm -rf /sys/fs/cgroup/memory
fi
if [ -n "$v2" ]; then
  # The limit of a cgroup above this one counts too.
  mkdir -p "/sys/fs/cgroup$v2"
  echo max >"/sys/fs/cgroup${v2%/}/memory.max"
  echo 314572800 >/sys/fs/cgroup/memory.max
  refused cgroup-v2 "150.00 MiB (the memory limit of cgroup /sys/fs/cgroup, 300.00 MiB, shared by 2 ranks on this node)" \
    2 $model $mlp
fi
[ -n "$v1$v2" ] || echo "cgroup limits not checked: /proc/self/cgroup names no memory cgroup"
