# slurmlib.sh: a private Slurm cluster for the tests, sourced after testlib.sh.
# slurm_start starts munged, slurmctld and two slurmd daemons (nodes n1 and
# n2, each with this machine's CPUs) from Debian's slurm-wlm, with every
# file (keys, sockets, state, spool, logs) under $fsdp_tmp/slurm and every
# port on the loopback address; the machine's own Slurm and munge
# configuration are neither read nor changed.  The daemons run as the
# invoking user; an EXIT trap cancels the cluster's jobs and stops them.
# Commands then reach this cluster through SLURM_CONF.

slurm_dir="$fsdp_tmp/slurm"

slurm_need() {
  for c in munged slurmctld slurmd sbatch srun scontrol squeue scancel; do
    command -v "$c" >/dev/null 2>&1 && continue
    [ -x "/usr/sbin/$c" ] && continue
    echo "SKIP: Slurm is not installed ($c not found; Debian: apt-get install slurm-wlm munge)"
    exit 77
  done
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
  for pidfile in "$slurm_dir"/slurmd-n1.pid "$slurm_dir"/slurmd-n2.pid "$slurm_dir"/slurmctld.pid "$slurm_dir"/munged.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null
    n=0
    while kill -0 "$pid" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.2; n=$((n + 1)); done
    kill -9 "$pid" 2>/dev/null
  done
  # Anything the cluster started that is still there (a step daemon, a task
  # whose daemon died first): its environment names this cluster's files.
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = $$ ] && continue
    grep -qs "$slurm_dir" "$d/environ" && kill -9 "$pid" 2>/dev/null
  done
  unset SLURM_CONF
}

slurm_start() {
  slurm_need
  # Run inside a real job or cluster, the commands would reach it: forget it.
  for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
  mkdir -p "$slurm_dir/state" "$slurm_dir/spool-n1" "$slurm_dir/spool-n2" || exit 99
  trap 'slurm_stop; rm -rf "$fsdp_tmp"' EXIT
  trap 'exit 1' INT TERM HUP
  head -c 1024 /dev/urandom >"$slurm_dir/munge.key" && chmod 400 "$slurm_dir/munge.key"
  # munged refuses root unless forced; it is ours alone (its own key and socket).
  munged --force --key-file="$slurm_dir/munge.key" --socket="$slurm_dir/munge.sock" \
    --pid-file="$slurm_dir/munged.pid" --log-file="$slurm_dir/munged.log" --seed-file="$slurm_dir/munged.seed" ||
    { echo "FAIL: munged did not start"; slurm_log_tail; exit 1; }
  base=$((20000 + $$ % 20000))
  ctld=$(slurm_free_port "$base")
  p1=$(slurm_free_port $((ctld + 1)))
  p2=$(slurm_free_port $((p1 + 1)))
  cpus=$(nproc)
  user=$(id -un)
  host=$(hostname)
  cat >"$slurm_dir/slurm.conf" <<EOF
# A two-node test cluster on 127.0.0.1 (tests/slurmlib.sh).
ClusterName=fsdptest
SlurmctldHost=$host(127.0.0.1)
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
# SIGKILL right after SIGTERM: tests/slurm.sh kills a job while it saves.
KillWait=0
NodeName=n1 NodeAddr=127.0.0.1 NodeHostname=$host Port=$p1 CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 NodeHostname=$host Port=$p2 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  SLURM_CONF="$slurm_dir/slurm.conf"
  export SLURM_CONF
  slurm_started=yes
  slurmctld -c -i -f "$SLURM_CONF" || { echo "FAIL: slurmctld did not start"; slurm_log_tail; exit 1; }
  for n in n1 n2; do
    slurmd -f "$SLURM_CONF" -N "$n" || { echo "FAIL: slurmd -N $n did not start"; slurm_log_tail; exit 1; }
  done
  n=0
  until [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -eq 2 ]; do
    n=$((n + 1))
    [ $n -lt 60 ] || { echo "FAIL: the two nodes never became idle"; sinfo -N; slurm_log_tail; exit 1; }
    sleep 0.5
  done
  echo "slurm: slurmctld on 127.0.0.1:$ctld, slurmd n1:$p1 n2:$p2, $cpus CPUs each ($slurm_dir)"
}

# slurm_state JOBID: the job's state (PENDING, RUNNING, COMPLETED, ...).
slurm_state() {
  scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}

# slurm_wait JOBID STATE... : wait (at most FSDP_TEST_TIMEOUT s) until the
# job is in one of the states; fails the test otherwise.
slurm_wait() {
  job=$1
  shift
  t=0
  while :; do
    s=$(slurm_state "$job")
    for want in "$@"; do [ "$s" = "$want" ] && return 0; done
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
