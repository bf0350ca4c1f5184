# clusterlib.sh: real nodes on one machine, for tests and benchmarks (doc/cluster.md).
#
# cluster_up N [RATE] makes nodes node0 .. node<N-1>.  Each is a network, UTS
# and mount namespace: its own hostname, its own interfaces and its own
# /dev/shm (a tmpfs), so that to MPI and hwloc it is another host.  Each
# node's eth0 is one end of a veth pair whose other end is a port of a
# bridge, the switch, in a namespace of its own; RATE (tc's units: 1gbit,
# 200mbit) shapes both directions of every link with a token bucket (tbf).
# Addresses come from 198.18.0.0/15 (RFC 2544: for benchmarking network
# devices) and exist only inside these namespaces; the host's interfaces,
# addresses, routes and firewall are never touched, and /etc/hosts is
# replaced inside the nodes alone (a bind mount in their mount namespaces).
# The file systems are the machine's: every node sees the same /tmp, as a
# cluster's nodes see the same scratch directory.
#
#   cluster_shape RATE                every link at RATE from now on
#   cluster_boot_ids own|shared       the nodes' own boot ids (the default), or
#                                     the machine's (see below)
#   cluster_exec NODE CMD [ARGS...]   run a command inside a node ($cluster_dir/in
#                                     NODE CMD [ARGS...] too, for timeout and the like)
#   cluster_mpiexec [ARGS...]         MPICH's mpiexec (FSDP_TEST_TIMEOUT), started in node0, with
#                                     a launcher that starts each node's proxy
#                                     inside that node (hydra's -launcher-exec,
#                                     which hydra calls as it would call ssh)
#   cluster_job OUT DONE ARGS...      cluster_mpiexec ARGS >OUT, tolerating a
#                                     hang in MPI_Finalize after DONE (below)
#   cluster_pids NODE                 the processes running inside the node
#                                     (jobs: mpiexec, proxies, ranks)
#   cluster_kill_jobs                 SIGKILL to every job's processes in the nodes
#   cluster_link_bytes NODE           bytes the node's link carried, both
#                                     directions (the switch port's counters)
#   cluster_link_counters NODE        those bytes and the frames that carried
#                                     them (cluster_frame_header bytes of each
#                                     are headers)
#   cluster_link NODE up|down         the node's link (its switch port) up or
#                                     down: a cable pulled, a switch port failed
#   cluster_down                      remove everything (an EXIT, INT, TERM
#                                     and HUP trap calls it too)
#   cluster_leftovers                 print what is left of this cluster
#   cluster_need                      SKIP (exit 77), saying why, where a test
#                                     cannot or must not make a cluster (below)
#   cluster_skip_reason               why no cluster can be made here (empty
#                                     when one can): root, ip, tc, unshare,
#                                     nsenter and MPICH's hydra
#
# Each node also has its own boot id (/proc/sys/kernel/random/boot_id, a bind
# mount).  UCX, MPICH's transport between nodes here, joined processes of
# different nodes by shared memory while they saw the same boot id (a job of
# 150,280 parameters, full sharding, 2 nodes: 32 KB over the link); with one
# per node it takes TCP over the links.  Known here (MPICH 4.0.2, UCX 1.13):
# with TCP between nodes, MPI_Finalize often does not return (one rank spins
# in UCX's progress, the others wait in PMI's barrier; openucx/ucx#8738):
# cluster_job stops such a job once it has done its work and printed its
# last line.  cluster_boot_ids shared gives the nodes the machine's boot id
# again, for jobs whose bytes need not cross the links.

cluster_prefix="fc$$-"
cluster_dir=
cluster_nodes=0
cluster_holders=

# cluster_need: SKIP (77), saying why, where a test cannot make its cluster
# (cluster_skip_reason), FSDP_SKIP_CLUSTER gives a reason, or under
# FSDP_TEST_WRAPPER (valgrind would not reach the jobs in the nodes).
cluster_need() {
  why=
  if [ -n "${FSDP_SKIP_CLUSTER:-}" ]; then
    why="FSDP_SKIP_CLUSTER: $FSDP_SKIP_CLUSTER"
  elif [ -n "${FSDP_TEST_WRAPPER:-}" ]; then
    why="the cluster's jobs do not run under FSDP_TEST_WRAPPER; make check runs this test"
  else
    why=$(cluster_skip_reason)
  fi
  [ -z "$why" ] || { echo "SKIP: $why"; exit 77; }
}

cluster_skip_reason() {
  if [ "$(id -u)" -ne 0 ]; then echo "the cluster's namespaces need root (uid $(id -u))"; return; fi
  for t in ip tc unshare nsenter; do
    command -v "$t" >/dev/null 2>&1 || { echo "$t is not installed (iproute2, util-linux)"; return; }
  done
  "${MPIEXEC:-mpiexec}" -info 2>/dev/null | grep -q 'HYDRA' ||
    { echo "${MPIEXEC:-mpiexec} is not MPICH's hydra (-launcher-exec starts ranks inside nodes)"; return; }
  if ! ip netns add "${cluster_prefix}probe" 2>/dev/null; then
    echo "ip netns add fails here (no network namespaces)"
    return
  fi
  tc -n "${cluster_prefix}probe" qdisc add dev lo root tbf rate 1mbit burst 32kb latency 400ms 2>/dev/null ||
    echo "tc cannot add a tbf qdisc here (the kernel's sch_tbf)"
  ip netns del "${cluster_prefix}probe"
}

cluster_up() {
  n=$1 rate=${2:-}
  cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/fsdp-cluster.XXXXXX") || return 1
  trap 'cluster_down; [ -z "${fsdp_tmp:-}" ] || rm -rf "$fsdp_tmp"' EXIT
  case $- in *i*) ;; *) trap 'exit 1' INT TERM HUP ;; esac # an interactive shell keeps its Ctrl-C
  sw="${cluster_prefix}sw"
  ip netns add "$sw" && ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || return 1
  printf '127.0.0.1 localhost\n' >"$cluster_dir/hosts"
  i=0
  while [ $i -lt "$n" ]; do
    printf '198.18.0.%d node%d\n' $((10 + i)) $i >>"$cluster_dir/hosts"
    i=$((i + 1))
  done
  i=0
  while [ $i -lt "$n" ]; do
    ns="${cluster_prefix}n$i" port="${cluster_prefix}p$i"
    ip netns add "$ns" || return 1
    cluster_nodes=$((i + 1))
    # made inside the namespaces: no link ever exists in the host's
    ip -n "$ns" link add eth0 type veth peer name "$port" netns "$sw" &&
      ip -n "$sw" link set "$port" master br0 up &&
      ip -n "$ns" addr add "198.18.0.$((10 + i))/24" dev eth0 &&
      ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || return 1
    # The node's holder: its UTS and mount namespaces live as long as it does.
    # Its /sys is the node's (its own interfaces under /sys/class/net) with
    # the machine's cgroups, where mounted (slurmd needs them), moved over
    # from the old one: ip netns exec would drop them.
    mkdir "$cluster_dir/node$i.cgroup" || return 1
    cg="'$cluster_dir/node$i.cgroup'"
    nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private sh -c \
      "hostname node$i && mount -t tmpfs -o size=25% tmpfs /dev/shm &&
       if mountpoint -q /sys/fs/cgroup; then mount --rbind /sys/fs/cgroup $cg; fi && mount -t sysfs sysfs /sys &&
       if mountpoint -q $cg; then mount --move $cg /sys/fs/cgroup; fi &&
       mount --bind '$cluster_dir/hosts' /etc/hosts &&
       cat /proc/sys/kernel/random/uuid >'$cluster_dir/node$i.boot_id' &&
       mount --bind '$cluster_dir/node$i.boot_id' /proc/sys/kernel/random/boot_id && echo ready >'$cluster_dir/node$i.ready' && exec sleep 2147483647" \
      </dev/null >"$cluster_dir/node$i.holder.log" 2>&1 &
    echo $! >"$cluster_dir/node$i.pid"
    cluster_holders="$cluster_holders $!"
    i=$((i + 1))
  done
  i=0
  while [ $i -lt "$n" ]; do
    tries=0
    while [ ! -f "$cluster_dir/node$i.ready" ]; do
      tries=$((tries + 1))
      [ $tries -le 100 ] || { echo "cluster: node$i did not start:"; cat "$cluster_dir/node$i.holder.log"; return 1; }
      sleep 0.1
    done
    i=$((i + 1))
  done
  [ -z "$rate" ] || cluster_shape "$rate" || return 1
  # in NODE CMD [ARGS...]: a program, where a shell function cannot go
  # (timeout, hydra), runs a command inside a node, in the caller's directory.
  cat >"$cluster_dir/in" <<EOF
#!/bin/sh
node=\$1
shift
pid=\$(cat "$cluster_dir/\$node.pid") || { echo "cluster: no node \$node" >&2; exit 1; }
exec nsenter -t "\$pid" -n -u -m --wd="\$PWD" -- "\$@"
EOF
  # hydra calls this as it calls ssh: [options] HOST COMMAND.
  cat >"$cluster_dir/nodeexec" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case \$1 in -*) shift ;; *) break ;; esac; done
host=\$1
shift
exec "$cluster_dir/in" "\$host" sh -c "\$*"
EOF
  chmod +x "$cluster_dir/in" "$cluster_dir/nodeexec"
}

# cluster_boot_ids own|shared: whether the processes started from now on see
# their node's own boot id (the default) or the machine's.
cluster_boot_ids() {
  i=0
  while [ $i -lt "$cluster_nodes" ]; do
    if [ "$1" = shared ]; then
      cluster_exec "node$i" umount /proc/sys/kernel/random/boot_id || return 1
    else
      cluster_exec "node$i" mount --bind "$cluster_dir/node$i.boot_id" /proc/sys/kernel/random/boot_id || return 1
    fi
    i=$((i + 1))
  done
}

# cluster_shape RATE: every link at RATE (tc's units), each direction: the
# node's egress and the switch's egress towards the node, a token bucket.
cluster_shape() {
  shape_rate=$1 i=0
  while [ $i -lt "$cluster_nodes" ]; do
    for at in "${cluster_prefix}n$i eth0" "${cluster_prefix}sw ${cluster_prefix}p$i"; do
      set -- $at
      tc -n "$1" qdisc replace dev "$2" root tbf rate "$shape_rate" burst 32kb latency 400ms || return 1
    done
    i=$((i + 1))
  done
}

cluster_exec() { "$cluster_dir/in" "$@"; }

cluster_mpiexec() {
  hosts=node0
  i=1
  while [ $i -lt "$cluster_nodes" ]; do
    hosts="$hosts,node$i"
    i=$((i + 1))
  done
  # In the background and waited for, so that a signal's trap runs at once
  # (a shell runs traps only between foreground commands).
  timeout -k 10 "${FSDP_TEST_TIMEOUT:-300}" "$cluster_dir/in" node0 \
    "${MPIEXEC:-mpiexec}" -launcher ssh -launcher-exec "$cluster_dir/nodeexec" -hosts "$hosts" "$@" &
  wait $!
}

# cluster_job OUT DONE ARGS...: cluster_mpiexec ARGS >OUT 2>&1 within
# $cluster_job_timeout seconds (60).  MPICH's UCX over TCP sometimes never
# returns from MPI_Finalize (doc/cluster.md; openucx/ucx#8738): a job that
# printed DONE (an extended regular expression for what the program prints
# last, after its work and its own finalization) and then did not end within
# $cluster_finalize_grace seconds (5) is stopped, counts as done, says so,
# and adds to cluster_finalize_hangs; any other failure, a hang before DONE
# included, is the job's.
cluster_job() {
  out=$1 marker=$2
  shift 2
  : >"$out" || return 1 # no marker left from an earlier job
  FSDP_TEST_TIMEOUT=${cluster_job_timeout:-60} cluster_mpiexec "$@" >"$out" 2>&1 &
  job=$! done_at= stopped=
  while kill -0 $job 2>/dev/null; do
    if [ -z "$done_at" ]; then
      ! grep -Eq "$marker" "$out" || done_at=$(date +%s)
    elif [ $(($(date +%s) - done_at)) -ge "${cluster_finalize_grace:-5}" ]; then
      # Not through mpiexec: the ranks hung in MPI_Finalize ignore a TERM
      # (fsdp-train's handler only notes it), and timeout's KILL 10 s later
      # would leave them behind.
      cluster_kill_jobs
      stopped=1
      break
    fi
    sleep 0.2
  done
  wait $job
  rc=$?
  [ $rc -ne 0 ] || return 0
  if { [ -n "$stopped" ] || [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && grep -Eq "$marker" "$out"; then
    echo "note: $out: MPI_Finalize did not return within ${cluster_finalize_grace:-5} s of the job's end (UCX's TCP teardown)"
    cluster_finalize_hangs=$((${cluster_finalize_hangs:-0} + 1))
    return 0
  fi
  return $rc
}

# cluster_pids NODE: what runs inside the node (mpiexec, hydra's proxies,
# the ranks) but its holder.
cluster_pids() {
  holder=$(cat "$cluster_dir/$1.pid")
  for pid in $(ip netns pids "${cluster_prefix}n${1#node}"); do
    [ "$pid" = "$holder" ] || echo "$pid"
  done
}

# cluster_kill_jobs: SIGKILL to everything cluster_pids lists, in every node.
cluster_kill_jobs() {
  i=0
  while [ $i -lt "$cluster_nodes" ]; do
    pids=$(cluster_pids "node$i")
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null
    i=$((i + 1))
  done
}

cluster_link_bytes() { cluster_link_counters "$1" | cut -d' ' -f1; }

# cluster_link_counters NODE: "BYTES FRAMES", both directions, from the
# counters of NODE's port on the switch.  Every frame carries
# cluster_frame_header bytes of headers, so BYTES - cluster_frame_header x
# FRAMES is what the frames carried: the TCP payload.  A shaped link (tbf)
# splits the kernel's 64 KB segments into frames of the MTU, 1,448 bytes of
# payload each, and every frame's acknowledgement has headers alone; both
# are in BYTES.
cluster_frame_header=66 # Ethernet 14, IPv4 20, TCP 20 plus its timestamps option 12
cluster_link_counters() {
  i=${1#node}
  s="/sys/class/net/${cluster_prefix}p$i/statistics"
  ip netns exec "${cluster_prefix}sw" sh -c \
    "echo \$((\$(cat $s/rx_bytes) + \$(cat $s/tx_bytes))) \$((\$(cat $s/rx_packets) + \$(cat $s/tx_packets)))"
}

# Up again, every node also forgets the neighbours it failed to resolve while
# the link was down (a host retries them seconds later; hydra's proxy would
# not wait).
cluster_link() {
  ip -n "${cluster_prefix}sw" link set "${cluster_prefix}p${1#node}" "$2" || return 1
  [ "$2" = up ] || return 0
  i=0
  while [ $i -lt "$cluster_nodes" ]; do
    ip -n "${cluster_prefix}n$i" neigh flush all || return 1
    i=$((i + 1))
  done
}

cluster_down() {
  if [ -n "$cluster_holders" ]; then
    kill -9 $cluster_holders 2>/dev/null
    wait $cluster_holders 2>/dev/null # reaped quietly: no "Killed" from the shell
  fi
  cluster_holders= # reaped: their pids may be another process's from now on
  i=0
  while [ $i -lt "$cluster_nodes" ]; do
    ns="${cluster_prefix}n$i"
    # What else ran inside the node, then the namespace.
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null
    # Deleting the name does not end what still runs inside: noted for cluster_leftovers.
    sleep 0.2
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      cluster_survivors="${cluster_survivors:-}$pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)) in node$i
"
    done
    ip netns del "$ns" 2>/dev/null
    i=$((i + 1))
  done
  ip netns del "${cluster_prefix}sw" 2>/dev/null
  cluster_nodes=0
  [ -z "$cluster_dir" ] || rm -rf "$cluster_dir"
  cluster_dir=
  trap - INT TERM HUP
}

cluster_leftovers() {
  ip netns list | grep "^$cluster_prefix"
  ip -o link show | grep "$cluster_prefix"
  [ -z "${cluster_survivors:-}" ] || printf 'process %s' "$cluster_survivors"
}
