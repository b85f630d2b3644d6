#!/bin/bash
# slurm_cluster.sh — a real SLURM cluster for the hpc tests and for an
# instructor's practice (`workbook cluster up --slurm`), in a directory of its own: munged, slurmctld and slurmd, with a generated slurm.conf,
# non-default ports, and nothing written outside it. On this machine (one
# node), or on the emulated cluster's nodes (hpc/cluster.sh): slurmctld on
# wbnode1 and one slurmd in each node's namespaces.
#
#   source hpc/slurm_cluster.sh
#   slurm_cluster_start DIR [CLUSTER_SH]  # DIR: an empty directory; exports SLURM_CONF
#   slurm_client sbatch ...               # a client command, where it reaches slurmctld
#   slurm_cluster_stop  DIR               # stops the daemons (also after a crash: it reads their pid files)
#
# Note: [why these settings]
# proctrack/linuxproc and task/none need no cgroups, which a container or a
# CI machine may not offer; the daemons run as the current user (root in
# CI), so SlurmUser and SlurmdUser are that user; the ports (16817, 16818)
# and the munge socket are private to this cluster, so a site's real SLURM
# on the same machine is never touched.
#
# Note: [one slurmd per emulated node]
# SLURM runs one slurmd per host; the emulated nodes are hosts to it: each
# slurmd runs in its node's namespaces (its own address and hostname, which
# it finds its NodeName by), and the per-node files (spool, pid, log) are
# named by node (%n). munged stays on this machine: its socket is a file, and
# files are shared by every namespace. The client commands reach slurmctld
# on wbnode1's address, so they run on a node too (slurm_client); jobs
# submitted there inherit the node's Open MPI settings (cluster.sh exec).

# slurm_client COMMAND...: a SLURM client command run where slurmctld is reachable.
slurm_client() {
  if [ -n "${SLURM_CLUSTER_EXEC:-}" ]; then
    # shellcheck disable=SC2086  # the prefix's words
    $SLURM_CLUSTER_EXEC "$@"
  else
    "$@"
  fi
}

slurm_cluster_start() {
  local dir=$1 cluster_sh=${2:-}
  local node cpus memory_mb user nodes=1 k
  node=$(hostname -s)
  # GNU nproc answers OMP_NUM_THREADS when it is set (a shell's or a job's
  # OpenMP setting): a node of 1 CPU then, where a 2-task job waits forever.
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  user=$(id -un)
  local control="$node(127.0.0.1)" node_lines="NodeName=$node NodeAddr=127.0.0.1" partition_nodes=$node
  local per_node_files="SlurmdSpoolDir=$dir/spool
SlurmdPidFile=$dir/slurmd.pid
SlurmdLogFile=$dir/log/slurmd.log"
  export SLURM_CLUSTER_EXEC=""
  if [ -n "$cluster_sh" ]; then
    # Note [one slurmd per emulated node]
    nodes=$(sed -n 's/^nodes=//p' /run/workbook-cluster/state)
    control="wbnode1(10.99.0.1)"
    node_lines=""
    for ((k = 1; k <= nodes; ++k)); do
      node_lines+="NodeName=wbnode$k NodeAddr=10.99.0.$k"$'\n'
    done
    partition_nodes="wbnode[1-$nodes]"
    per_node_files="SlurmdSpoolDir=$dir/spool/%n
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmdLogFile=$dir/log/slurmd-%n.log
TmpFS=$dir/tmp/%n"
    export SLURM_CLUSTER_EXEC="$cluster_sh exec wbnode1"
  fi
  memory_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 / nodes ))
  local port
  for port in 16817 16818; do
    [ -z "$cluster_sh" ] || break  # the nodes' ports are the nodes' own
    if (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then
      echo "slurm_cluster: port $port is taken (a test cluster left running? pgrep -a slurm)" >&2
      return 1
    fi
  done
  mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"
  chmod 700 "$dir/munge"

  # munge: a fresh key, a private socket.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
         --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
         --seed-file="$dir/munge/seed" || { echo "slurm_cluster: munged did not start" >&2; return 1; }

  cat > "$dir/slurm.conf" <<CONF
ClusterName=workbook-test
SlurmctldHost=$control
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/log/slurmctld.log
$per_node_files
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
SchedulerType=sched/builtin
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
NodeName=DEFAULT CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
$node_lines
PartitionName=debug Nodes=$partition_nodes Default=YES MaxTime=60 State=UP OverSubscribe=NO
CONF
  export SLURM_CONF=$dir/slurm.conf

  if [ -z "$cluster_sh" ]; then
    slurmctld -i || { echo "slurm_cluster: slurmctld did not start (see $dir/log/slurmctld.log)" >&2; return 1; }
    slurmd || { echo "slurm_cluster: slurmd did not start (see $dir/log/slurmd.log)" >&2; return 1; }
  else
    for ((k = 1; k <= nodes; ++k)); do mkdir -p "$dir/spool/wbnode$k" "$dir/tmp/wbnode$k"; done
    "$cluster_sh" exec wbnode1 slurmctld -i ||
      { echo "slurm_cluster: slurmctld did not start on wbnode1 (see $dir/log/slurmctld.log)" >&2; return 1; }
    for ((k = 1; k <= nodes; ++k)); do
      "$cluster_sh" exec "wbnode$k" slurmd -N "wbnode$k" ||
        { echo "slurm_cluster: slurmd did not start on wbnode$k (see $dir/log/slurmd-wbnode$k.log)" >&2; return 1; }
    done
  fi

  # Ready when every node takes jobs (idle), within 30 s.
  local waited=0 states=""
  while [ $waited -lt 60 ]; do
    states=$(slurm_client sinfo -h -N -o '%t' 2> /dev/null | sort -u | tr '\n' ' ') || true
    [ "$states" = "idle " ] && return 0
    sleep 0.5
    waited=$((waited + 1))
  done
  echo "slurm_cluster: the nodes are '$states', not idle, after 30 s" >&2
  tail -n 20 "$dir"/log/slurm*.log >&2
  return 1
}

slurm_cluster_stop() {
  local dir=$1 pid_file pid name
  [ -d "$dir" ] || return 0
  if [ -f "$dir/slurm.conf" ]; then
    # Jobs first, while slurmd can still end their steps (at most 15 s).
    SLURM_CONF=$dir/slurm.conf slurm_client scancel --quiet --user="$(id -un)" 2> /dev/null || true
    for _ in $(seq 30); do
      [ -z "$(SLURM_CONF=$dir/slurm.conf slurm_client squeue -h 2> /dev/null)" ] && break
      sleep 0.5
    done
  fi
  for pid_file in "$dir"/slurmd*.pid "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$pid_file" ] || continue
    pid=$(cat "$pid_file")
    # A pid file left by a run that was killed may name another process by now.
    name=$(cat "/proc/$pid/comm" 2> /dev/null) || continue
    case $name in slurmd | slurmctld | munged) ;; *) continue ;; esac
    kill "$pid" 2> /dev/null || continue
    for _ in $(seq 30); do
      slurm_cluster_alive "$pid" || break
      sleep 0.1
    done
    kill -9 "$pid" 2> /dev/null || true
  done
}

# Whether process PID still runs. A daemon that has exited stays a zombie
# until init reaps it, which some inits do only every few seconds (2 s on a
# Firecracker VM: each daemon seemed to take 2 s to stop); kill -0 counts
# zombies, /proc/PID/stat says Z.
slurm_cluster_alive() {
  local state
  state=$(sed -n 's/^.*) \([A-Za-z]\) .*$/\1/p' "/proc/$1/stat" 2> /dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}
