# slurmlib.sh: a private Slurm cluster for the tests, sourced after testlib.sh.
# slurm_start starts munged, slurmctld and two slurmd daemons (nodes n1 and
# n2, each with this machine's $slurm_cpus CPUs) from Debian's slurm-wlm, with every
# file (keys, sockets, state, spool, logs) under $fsdp_tmp/slurm and every
# port on the loopback address (slurm_start nodes: one slurmd in each node
# of tests/clusterlib.sh's cluster, below); the machine's own Slurm and munge
# configuration are neither read nor changed.  The daemons run as the
# invoking user; an EXIT trap cancels the cluster's jobs and stops them.
# Commands then reach this cluster through SLURM_CONF.  A job that can never
# be scheduled (it asks for more CPUs than the nodes have, say) fails the test
# within about a minute, naming Slurm's reason (slurm_wait, slurm_srun),
# instead of waiting for the test's timeout.

slurm_dir="$fsdp_tmp/slurm"
# The machine's CPUs, which slurmd finds and each node offers.  Never nproc:
# it follows OMP_NUM_THREADS, and with OMP_NUM_THREADS=1 (in many users'
# shells) each node would offer 1 CPU and srun -N 2 -n 4 could never start.
slurm_cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null) || slurm_cpus=$(grep -c '^processor' /proc/cpuinfo)
# Seconds a job may stay PENDING, while no other job of the cluster runs, on a
# reason that could clear (Resources, ReqNodeNotAvail, ...) before the test
# calls it unschedulable.  The cluster schedules every second.
: "${FSDP_SLURM_PENDING:=30}"

# slurm_need: SKIP (77), saying why, unless Slurm's jobs can run here: Slurm
# is installed, FSDP_SKIP_SLURM gives no reason, no FSDP_TEST_WRAPPER
# (valgrind would not reach Slurm's jobs; the plain make check runs them),
# and 2 CPUs at least (each node runs 2 tasks).
slurm_need() {
  if [ -n "${FSDP_SKIP_SLURM:-}" ]; then
    echo "SKIP: FSDP_SKIP_SLURM: $FSDP_SKIP_SLURM"
    exit 77
  fi
  if [ -n "${FSDP_TEST_WRAPPER:-}" ]; then
    echo "SKIP: Slurm's jobs do not run under FSDP_TEST_WRAPPER; make check runs this test"
    exit 77
  fi
  for c in munged slurmctld slurmd sbatch srun scontrol squeue scancel; do
    command -v "$c" >/dev/null 2>&1 && continue
    [ -x "/usr/sbin/$c" ] && continue
    echo "SKIP: Slurm is not installed ($c not found; Debian: apt-get install slurm-wlm munge)"
    exit 77
  done
  if [ "$slurm_cpus" -lt 2 ]; then
    echo "SKIP: each node runs 2 tasks, and this machine has $slurm_cpus CPU (getconf _NPROCESSORS_ONLN)"
    exit 77
  fi
  PATH=$PATH:/usr/sbin
  export PATH
}

# A TCP port at or after $1 that no socket on this machine uses (the local
# addresses in /proc/net/tcp*; POSIX sh has no /dev/tcp).
slurm_free_port() {
  p=$1
  while grep -qi ":$(printf %04X "$p") " /proc/net/tcp /proc/net/tcp6 2>/dev/null; do p=$((p + 1)); done
  echo "$p"
}

slurm_log_tail() {
  for f in "$slurm_dir"/*.log; do
    [ -f "$f" ] || continue
    echo "---- $f (last 15 lines)"
    tail -n 15 "$f"
  done
}

slurm_started=no
slurm_stop() {
  # Only this test's cluster: an inherited SLURM_CONF names someone else's.
  if [ $slurm_started = yes ]; then
    # Jobs first, so that no task outlives the cluster.
    scancel --full --quiet --user="$(id -un)" 2>/dev/null
    n=0
    while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $n -lt 30 ]; do sleep 1; n=$((n + 1)); done
  fi
  for pidfile in "$slurm_dir"/slurmd-*.pid "$slurm_dir"/slurmctld.pid "$slurm_dir"/munged.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null
    n=0
    while kill -0 "$pid" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.2; n=$((n + 1)); done
    kill -9 "$pid" 2>/dev/null
    rm -f "$pidfile" # stopped: a later call must not signal whoever has that pid then
  done
  # Anything the cluster started that is still there (a step daemon, a task
  # whose daemon died first): its environment names this cluster's files.
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = $$ ] && continue
    grep -qs "$slurm_dir" "$d/environ" && kill -9 "$pid" 2>/dev/null
  done
  unset SLURM_CONF
  # slurm_start nodes' commands inside node0
  [ -z "$slurm_in" ] || unset -f sinfo squeue scontrol scancel sbatch srun
  slurm_in=
}

# slurm_start [nodes]: without an argument, two nodes n1 and n2 on
# 127.0.0.1, each a slurmd of this machine.  With "nodes": one slurmd inside
# each node of tests/clusterlib.sh's cluster (cluster_up first), named as
# the node (node0, node1, ...) at the node's address, and slurmctld inside
# node0; the nodes' own network namespaces, so Slurm's default ports.  The
# host cannot reach the nodes' addresses: sinfo, squeue, scontrol, scancel,
# sbatch and srun become shell functions that run them inside node0, and
# slurm_srun runs srun there.  Two partitions then, over every node, for
# pre-emption (PreemptType=preempt/partition_prio, PreemptMode=REQUEUE):
# "low", the default, whose jobs "high"'s jobs pre-empt, with a GraceTime
# of 30 s between SIGTERM and SIGKILL; a job has its nodes to itself
# (OverSubscribe=EXCLUSIVE: with CR_Core, NO would still let two jobs share
# a node's cores on a machine with more than 2).
slurm_in=
slurm_start() {
  slurm_need
  # Run inside a real job or cluster, the commands would reach it: forget it.
  for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
  mkdir -p "$slurm_dir/state" || exit 99
  if [ "${1:-}" = nodes ]; then
    trap 'slurm_stop; cluster_down; rm -rf "$fsdp_tmp"' EXIT
    slurm_in="$cluster_dir/in node0"
    for c in sinfo squeue scontrol scancel sbatch srun; do
      eval "$c() { \"\$cluster_dir/in\" node0 $c \"\$@\"; }"
    done
  else
    slurm_in=
    trap 'slurm_stop; rm -rf "$fsdp_tmp"' EXIT
  fi
  trap 'exit 1' INT TERM HUP
  head -c 1024 /dev/urandom >"$slurm_dir/munge.key" && chmod 400 "$slurm_dir/munge.key"
  # munged refuses root unless forced; it is ours alone (its own key and
  # socket, a file that every node's daemons reach through the shared /tmp).
  munged --force --key-file="$slurm_dir/munge.key" --socket="$slurm_dir/munge.sock" \
    --pid-file="$slurm_dir/munged.pid" --log-file="$slurm_dir/munged.log" --seed-file="$slurm_dir/munged.seed" ||
    { echo "FAIL: munged did not start"; slurm_log_tail; exit 1; }
  cpus=$slurm_cpus
  user=$(id -un)
  if [ -n "$slurm_in" ]; then
    ctld=6817
    slurm_nodes=
    nodes=
    i=0
    while [ $i -lt "$cluster_nodes" ]; do
      slurm_nodes="$slurm_nodes node$i"
      nodes="${nodes}NodeName=node$i NodeAddr=198.18.0.$((10 + i)) NodeHostname=node$i CPUs=$cpus State=UNKNOWN
"
      i=$((i + 1))
    done
    all=$(echo $slurm_nodes | tr ' ' ,)
    ctld_host="node0(198.18.0.10)"
    kill_wait=30
    partitions="PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=low Nodes=$all Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=30 OverSubscribe=EXCLUSIVE
PartitionName=high Nodes=$all MaxTime=INFINITE State=UP PriorityTier=2 OverSubscribe=EXCLUSIVE"
  else
    base=$((20000 + $$ % 20000))
    ctld=$(slurm_free_port "$base")
    p1=$(slurm_free_port $((ctld + 1)))
    p2=$(slurm_free_port $((p1 + 1)))
    host=$(hostname)
    slurm_nodes="n1 n2"
    nodes="NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=$host Port=$p1 CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=$host Port=$p2 CPUs=$cpus State=UNKNOWN
"
    ctld_host="$host(127.0.0.1)"
    # SIGKILL right after SIGTERM: tests/slurm.sh kills a job while it saves.
    kill_wait=0
    partitions="PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
  fi
  for n in $slurm_nodes; do mkdir -p "$slurm_dir/spool-$n" || exit 99; done
  cat >"$slurm_dir/slurm.conf" <<EOF
# A test cluster (tests/slurmlib.sh).
ClusterName=fsdptest
SlurmctldHost=$ctld_host
SlurmctldPort=$ctld
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also how long a requeued job waits before it may start again.
AuthInfo=socket=$slurm_dir/munge.sock,cred_expire=5
StateSaveLocation=$slurm_dir/state
SlurmdSpoolDir=$slurm_dir/spool-%n
SlurmctldPidFile=$slurm_dir/slurmctld.pid
SlurmdPidFile=$slurm_dir/slurmd-%n.pid
SlurmctldLogFile=$slurm_dir/slurmctld.log
SlurmdLogFile=$slurm_dir/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
MailProg=/bin/true
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
MinJobAge=600
KillWait=$kill_wait
$nodes$partitions
EOF
  SLURM_CONF="$slurm_dir/slurm.conf"
  export SLURM_CONF
  slurm_started=yes
  $slurm_in slurmctld -c -i -f "$SLURM_CONF" || { echo "FAIL: slurmctld did not start"; slurm_log_tail; exit 1; }
  for n in $slurm_nodes; do
    # (slurm_start nodes: inside the node)
    ${slurm_in:+$cluster_dir/in $n} slurmd -f "$SLURM_CONF" -N "$n" ||
      { echo "FAIL: slurmd -N $n did not start"; slurm_log_tail; exit 1; }
  done
  count=$(echo $slurm_nodes | wc -w)
  n=0
  until [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq "$count" ]; do
    n=$((n + 1))
    [ $n -lt 60 ] || { echo "FAIL: the $count nodes never became idle"; sinfo -N; slurm_log_tail; exit 1; }
    sleep 0.5
  done
  echo "slurm: slurmctld at $ctld_host:$ctld, slurmd on" $slurm_nodes", $cpus CPUs each ($slurm_dir)"
}

# slurm_state JOBID: the job's state (PENDING, RUNNING, COMPLETED, ...).
slurm_state() {
  scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# slurm_restarts JOBID: how many times the job was requeued (0 before the first).
slurm_restarts() {
  r=$(scontrol show job "$1" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
  echo "${r:-0}"
}

# slurm_rows CSV: a job's loss log's rows so far (0 before it exists).
slurm_rows() {
  if [ -f "$1" ]; then echo $(($(wc -l <"$1") - 1)); else echo 0; fi
}

# Pending reasons that waiting cannot clear on this cluster: the job asks for
# more than the partition or its nodes have in slurm.conf, or is held.
slurm_never="PartitionConfig PartitionNodeLimit PartitionTimeLimit BadConstraints JobHeldAdmin JobHeldUser"
slurm_never="$slurm_never DependencyNeverSatisfied InvalidAccount InvalidQOS AssocMaxCpuPerJobLimit"
slurm_pend_job="" slurm_pend_since=""

# slurm_stuck JOBID: true, with the reason, the job's request and the nodes on
# stdout, when the job is PENDING and cannot start: at once on a reason in
# $slurm_never; on any other reason but BeginTime (a requeued job's short
# wait) once the job has pended FSDP_SLURM_PENDING s with no other job of
# the cluster running, since only the end of another job could let it start.
slurm_stuck() {
  info=$(scontrol show job "$1" 2>/dev/null)
  state=$(echo "$info" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  reason=$(echo "$info" | sed -n 's/.* Reason=\([^ ]*\).*/\1/p')
  [ "$state" = PENDING ] || { slurm_pend_job=""; return 1; }
  case " $slurm_never " in
  *" ${reason%%,*} "*) ;;
  *)
    now=$(date +%s)
    [ "$slurm_pend_job" = "$1" ] || { slurm_pend_job=$1 slurm_pend_since=$now; }
    others=$(squeue -h -t RUNNING,COMPLETING,CONFIGURING,SUSPENDED -o %i 2>/dev/null | grep -vx "$1")
    if [ -n "$others" ] || [ "$reason" = BeginTime ]; then slurm_pend_since=$now; fi
    [ $((now - slurm_pend_since)) -ge "$FSDP_SLURM_PENDING" ] || return 1
    ;;
  esac
  echo "FAIL: job $1 cannot be scheduled: PENDING, Reason=$reason"
  echo "$info" | grep -E '^ *(NumNodes|TRES|Partition)=' | sed 's/^ */  job: /'
  sed -n 's/^\(NodeName=.*\)/  slurm.conf: \1/p; s/^\(PartitionName=.*\)/  slurm.conf: \1/p' "$SLURM_CONF"
  sinfo -N -h -o '  node %N: %T, %c CPUs, reason %E' 2>/dev/null | sort -u
  return 0
}

# slurm_srun ARGS...: srun ARGS (at most FSDP_TEST_TIMEOUT s); when its job
# cannot be scheduled, the job is cancelled, slurm_stuck's report goes to
# stderr, and it returns 1 (srun itself waits for as long as the job pends).
slurm_srun_n=0
slurm_srun() {
  slurm_srun_n=$((slurm_srun_n + 1))
  name="fsdp-test-srun-$$-$slurm_srun_n"
  timeout "$FSDP_TEST_TIMEOUT" $slurm_in srun --job-name="$name" "$@" &
  srun_pid=$!
  while kill -0 "$srun_pid" 2>/dev/null; do
    id=$(squeue -h -n "$name" -o %i 2>/dev/null | head -n 1)
    if [ -n "$id" ] && slurm_stuck "$id" >&2; then
      scancel "$id"
      wait "$srun_pid"
      return 1
    fi
    sleep 0.5
  done
  wait "$srun_pid"
}

# slurm_check JOBID: fail the test at once if the job cannot be scheduled
# (for loops that wait on a job's progress).
slurm_check() {
  if slurm_stuck "$1"; then
    slurm_log_tail
    exit 1
  fi
}

# slurm_wait JOBID STATE... : wait (at most FSDP_TEST_TIMEOUT s) until the
# job is in one of the states; fails the test otherwise, and at once when
# the job cannot be scheduled (slurm_stuck).
slurm_wait() {
  job=$1
  shift
  t=0
  while :; do
    s=$(slurm_state "$job")
    for want in "$@"; do [ "$s" = "$want" ] && return 0; done
    slurm_check "$job"
    t=$((t + 1))
    if [ $t -gt $((FSDP_TEST_TIMEOUT * 2)) ]; then
      echo "FAIL: job $job is $s, not $* after $FSDP_TEST_TIMEOUT s"
      scontrol show job "$job"
      slurm_log_tail
      exit 1
    fi
    sleep 0.5
  done
}
