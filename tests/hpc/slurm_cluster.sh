#!/bin/bash
# slurm_cluster.sh — a real single-node SLURM cluster for the hpc tests, in a
# temporary directory: munged, slurmctld and slurmd on this machine, with a
# generated slurm.conf, non-default ports, and nothing written outside it.
#
#   source tests/hpc/slurm_cluster.sh
#   slurm_cluster_start DIR    # DIR: an empty directory; exports SLURM_CONF
#   ...sbatch, squeue...
#   slurm_cluster_stop  DIR    # stops the daemons (also after a crash: it reads their pid files)
#
# Note: [why these settings]
# proctrack/linuxproc and task/none need no cgroups, which a container or a
# CI machine may not offer; the daemons run as the current user (root in
# CI), so SlurmUser and SlurmdUser are that user; the ports (16817, 16818)
# and the munge socket are private to this cluster, so a site's real SLURM
# on the same machine is never touched.

slurm_cluster_start() {
  local dir=$1
  local node cpus memory_mb user
  node=$(hostname -s)
  cpus=$(nproc)
  memory_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
  user=$(id -un)
  local port
  for port in 16817 16818; do
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
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=60 State=UP OverSubscribe=NO
CONF
  export SLURM_CONF=$dir/slurm.conf

  slurmctld -i || { echo "slurm_cluster: slurmctld did not start (see $dir/log/slurmctld.log)" >&2; return 1; }
  slurmd || { echo "slurm_cluster: slurmd did not start (see $dir/log/slurmd.log)" >&2; return 1; }

  # Ready when the node takes jobs (idle), within 30 s.
  local waited=0 state=""
  while [ $waited -lt 60 ]; do
    state=$(sinfo -h -N -o '%t' 2> /dev/null | head -n 1) || true
    [ "$state" = "idle" ] && return 0
    sleep 0.5
    waited=$((waited + 1))
  done
  echo "slurm_cluster: the node is '$state', not idle, after 30 s" >&2
  tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2
  return 1
}

slurm_cluster_stop() {
  local dir=$1 pid_file pid name
  [ -d "$dir" ] || return 0
  if [ -f "$dir/slurm.conf" ]; then
    # Jobs first, while slurmd can still end their steps (at most 15 s).
    SLURM_CONF=$dir/slurm.conf scancel --quiet --user="$(id -un)" 2> /dev/null || true
    for _ in $(seq 30); do
      [ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h 2> /dev/null)" ] && break
      sleep 0.5
    done
  fi
  for pid_file in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$pid_file" ] || continue
    pid=$(cat "$pid_file")
    # A pid file left by a run that was killed may name another process by now.
    name=$(cat "/proc/$pid/comm" 2> /dev/null) || continue
    case $name in slurmd | slurmctld | munged) ;; *) continue ;; esac
    kill "$pid" 2> /dev/null || continue
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.3
    done
    kill -9 "$pid" 2> /dev/null || true
  done
}
