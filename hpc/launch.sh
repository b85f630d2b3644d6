#!/bin/bash
# launch.sh — starts one of the workbook's programs on every rank of a batch
# job, the same way under SLURM, LSF and PBS. The job scripts in hpc/slurm,
# hpc/lsf and hpc/pbs call it; it can be called from any job script.
#
#   hpc/launch.sh PROGRAM [ARGS...]
#
# PROGRAM is smoke_test or a chapter's program (ch03_train, ch04_bench, ch04_train,
# ch05_train, ch06_train). What it does:
#   1. sources hpc/site.sh (the site's module loads and network settings);
#   2. reads the job from the scheduler's variables: nodes, ranks per node,
#      cores per rank, the host list, the job id;
#   3. chooses the device: CUDA when the job's node has GPUs (one rank per
#      GPU, selected by local rank), else the CPU;
#   4. chooses how to start the ranks (Note: [srun or mpirun]);
#   5. prints what it decided, then runs the program on every rank.
#
# Settings (environment variables; every one optional):
#   WORKBOOK_ROOT         the workbook's folder (default: the folder above this script)
#   WORKBOOK_BUILD        the build folder (default: build/cuda when GPUs are used and it exists, else build/default)
#   WORKBOOK_CODE         solution (default: the reference) or student (the chapters/ code)
#   WORKBOOK_DEVICE       auto (default), cpu or cuda
#   WORKBOOK_LAUNCHER     auto (default), srun or mpirun
#   WORKBOOK_SRUN_MPI     the srun --mpi plugin to try (default: pmix)
#   WORKBOOK_CPUS_PER_RANK  cores per rank under LSF (a host's slots / this = its ranks) and
#                         PBS (default: NCPUS / mpiprocs); SLURM reads --cpus-per-task
#   WORKBOOK_RANKS        ranks outside a batch job (default 1)
#   WORKBOOK_HOSTS        "hostA 4 hostB 4": the hosts and their ranks, in place of the
#                         LSF or PBS job's list (no scheduler: in place of this host)
#   WORKBOOK_ARGS         the program's arguments, in place of ARGS (bsub passes a job script
#                         no arguments; qsub only through -v or -F)
#   WORKBOOK_DRY_RUN=1    print the decisions and the command, run nothing
#
# Note: [srun or mpirun]
# srun starts the ranks itself, and MPI_Init learns who it is through PMIx
# or PMI-2, if the MPI library was built to speak the same one as SLURM. When
# it was not (a common failure on clusters), every rank starts MPI alone, as
# rank 0 of 1; the workbook's programs notice and say so. So under SLURM this
# script first runs a probe (smoke_test --check-launch, a few seconds) with
# srun --mpi=pmix, and uses srun only when the probe's ranks found each other;
# otherwise it uses mpirun, which starts its own daemons inside the job's
# allocation and needs nothing from the scheduler but the host list. Under
# LSF and PBS it uses mpirun with a hostfile written from the job's host
# list (an Open MPI built with LSF or PBS support reads the job itself and
# the hostfile agrees with it).
#
# Note: [no MASTER_ADDR]
# The workbook's programs bootstrap through MPI: rank 0 creates NCCL's id
# and MPI broadcasts it, so they need no address and no port. Tools that
# rendezvous over TCP (torchrun, torch.distributed's env://) do; this script
# exports MASTER_ADDR (the first host of the job) and MASTER_PORT (derived
# from the job id, so two jobs on one node do not collide) for them.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

say() { echo "launch: $*"; }
fail() { echo "launch: $*" >&2; exit 2; }

[ $# -ge 1 ] || fail "usage: hpc/launch.sh PROGRAM [ARGS...] (PROGRAM: smoke_test, ch03_train, ch04_bench, ch04_train, ch05_train, ch06_train)"
program=$1
shift
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=${WORKBOOK_ROOT:-$(dirname "$script_dir")}
[ -f "$root/hpc/launch.sh" ] || fail "WORKBOOK_ROOT=$root is not the workbook's folder (no hpc/launch.sh there)"

# shellcheck source=site.sh
source "$root/hpc/site.sh"

# ---- the job ------------------------------------------------------------------
hosts=()           # one entry per node
ranks_per_node=()  # ranks on each of them

# read_host_counts "hostA 4 hostB 4" NAME: fills hosts and ranks_per_node.
read_host_counts() {
  local pairs i
  read -r -a pairs <<< "$1"
  (( ${#pairs[@]} > 0 && ${#pairs[@]} % 2 == 0 )) || fail "$2='$1' is not 'host ranks host ranks ...'"
  for ((i = 0; i < ${#pairs[@]}; i += 2)); do
    hosts+=("${pairs[i]}")
    ranks_per_node+=("${pairs[i + 1]}")
  done
}

cpus_per_rank=${WORKBOOK_CPUS_PER_RANK:-1}
if [ -n "${SLURM_JOB_ID:-}" ]; then
  scheduler="SLURM job $SLURM_JOB_ID"
  job_id=$SLURM_JOB_ID
  # "node[07-08],gpu1" to one host per line: scontrol knows SLURM's syntax.
  nodelist=${SLURM_JOB_NODELIST:?SLURM_JOB_NODELIST is not set}
  if [[ $nodelist == *[* ]]; then
    expanded=$(scontrol show hostnames "$nodelist" 2>&1) ||
      fail "scontrol show hostnames '$nodelist' failed: $(echo "$expanded" | tail -n 1)"
  else
    expanded=${nodelist//,/$'\n'}
  fi
  mapfile -t hosts <<< "$expanded"
  # SLURM_TASKS_PER_NODE is "2(x3),1": 2 tasks on each of 3 nodes, then 1.
  tasks_per_node=${SLURM_TASKS_PER_NODE:-}
  if [ -z "$tasks_per_node" ]; then
    ntasks=${SLURM_NTASKS:?SLURM_NTASKS is not set: ask for tasks with --ntasks or --ntasks-per-node}
    (( ntasks % ${#hosts[@]} == 0 )) ||
      fail "$ntasks tasks do not divide evenly among ${#hosts[@]} nodes: use --ntasks-per-node"
    tasks_per_node="$(( ntasks / ${#hosts[@]} ))(x${#hosts[@]})"
  fi
  IFS=, read -r -a groups <<< "$tasks_per_node"
  for group in "${groups[@]}"; do
    if [[ $group =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
      for ((i = 0; i < BASH_REMATCH[2]; i++)); do ranks_per_node+=("${BASH_REMATCH[1]}"); done
    else
      ranks_per_node+=("$group")
    fi
  done
  [ ${#ranks_per_node[@]} -eq ${#hosts[@]} ] ||
    fail "SLURM_TASKS_PER_NODE='$tasks_per_node' does not name the ${#hosts[@]} nodes of SLURM_JOB_NODELIST"
  cpus_per_rank=${SLURM_CPUS_PER_TASK:-1}
elif [ -n "${LSB_JOBID:-}" ]; then
  scheduler="LSF job $LSB_JOBID"
  job_id=$LSB_JOBID
  # LSB_MCPU_HOSTS is "hostA 4 hostB 4": each host and the slots (ranks) on
  # it. (LSB_HOSTS says the same with one word per slot.)
  read_host_counts "${LSB_MCPU_HOSTS:?LSB_MCPU_HOSTS is not set}" LSB_MCPU_HOSTS
  # Slots are cores: with N cores per rank, a host's slots hold slots / N ranks.
  if (( cpus_per_rank > 1 )); then
    for ((i = 0; i < ${#ranks_per_node[@]}; i++)); do
      (( ranks_per_node[i] % cpus_per_rank == 0 )) ||
        fail "${hosts[i]} has ${ranks_per_node[i]} slots, not a multiple of WORKBOOK_CPUS_PER_RANK=$cpus_per_rank"
      ranks_per_node[i]=$(( ranks_per_node[i] / cpus_per_rank ))
    done
  fi
elif [ -n "${PBS_JOBID:-}" ]; then
  scheduler="PBS job $PBS_JOBID"
  job_id=${PBS_JOBID%%.*}
  # PBS_NODEFILE lists each host once per MPI process (mpiprocs) placed on it.
  [ -r "${PBS_NODEFILE:-}" ] || fail "PBS_NODEFILE='${PBS_NODEFILE:-}' is not a readable file"
  while read -r count host; do
    hosts+=("$host")
    ranks_per_node+=("$count")
  done < <(awk 'NF { if (!($1 in n)) order[++k] = $1; n[$1]++ } END { for (i = 1; i <= k; i++) print n[order[i]], order[i] }' "$PBS_NODEFILE")
  # PBS Pro sets NCPUS to a chunk's ncpus: shared by its mpiprocs ranks.
  if [ -z "${WORKBOOK_CPUS_PER_RANK:-}" ] && [[ ${NCPUS:-} =~ ^[0-9]+$ ]] && [ ${#ranks_per_node[@]} -gt 0 ]; then
    cpus_per_rank=$(( NCPUS / ranks_per_node[0] > 0 ? NCPUS / ranks_per_node[0] : 1 ))
  fi
else
  scheduler="no batch job"
  job_id=$$
  hosts=("$(hostname)")
  ranks_per_node=("${WORKBOOK_RANKS:-1}")
fi
if [ -n "${WORKBOOK_HOSTS:-}" ]; then
  # The site knows better (an LSF launch node listed first, say): its list wins.
  [ -z "${SLURM_JOB_ID:-}" ] || fail "WORKBOOK_HOSTS is for LSF, PBS and no scheduler; under SLURM ask sbatch for the nodes"
  hosts=()
  ranks_per_node=()
  read_host_counts "$WORKBOOK_HOSTS" WORKBOOK_HOSTS
fi
[ ${#hosts[@]} -ge 1 ] || fail "the job's host list is empty"
# The job id's digits ("1234.server", an array job's "12[3].server"), at most 9 of them.
job_number=${job_id//[^0-9]/}
job_number=${job_number:-0}
(( ${#job_number} <= 9 )) || job_number=${job_number:${#job_number}-9}
ranks=0
for count in "${ranks_per_node[@]}"; do
  [[ $count =~ ^[1-9][0-9]*$ ]] || fail "a host has '$count' ranks: not a positive number"
  ranks=$((ranks + count))
done
most_per_node=$(printf '%s\n' "${ranks_per_node[@]}" | sort -n | tail -n 1)
[[ $cpus_per_rank =~ ^[1-9][0-9]*$ ]] || fail "cores per rank '$cpus_per_rank' is not a positive number"

# ---- the device ---------------------------------------------------------------
device=${WORKBOOK_DEVICE:-auto}
gpus=0
if command -v nvidia-smi > /dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
fi
# A scheduler that gives the job some of a node's GPUs says which in
# CUDA_VISIBLE_DEVICES; without device cgroups nvidia-smi still lists all.
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  visible=${CUDA_VISIBLE_DEVICES//[[:space:]]/}
  if [ -z "$visible" ] || [ "$visible" = NoDevFiles ]; then gpus=0; else gpus=$(( $(tr -cd , <<< "$visible" | wc -c) + 1 )); fi
fi
case $device in
  auto) if [ "$gpus" -gt 0 ]; then device=cuda; else device=cpu; fi ;;
  cpu) ;;
  cuda) [ "$gpus" -gt 0 ] || fail "WORKBOOK_DEVICE=cuda, but this job sees no GPU on $(hostname) (nvidia-smi -L, CUDA_VISIBLE_DEVICES): ask the scheduler for GPUs (hpc/README.md)" ;;
  *) fail "WORKBOOK_DEVICE='$device': use auto, cpu or cuda" ;;
esac
if [ "$device" = cuda ]; then
  # One rank per GPU, chosen by local rank: a node with more ranks than GPUs
  # would put two ranks on one GPU, which NCCL refuses.
  [ "$most_per_node" -le "$gpus" ] ||
    fail "$most_per_node ranks per node, but $(hostname) has $gpus GPU(s): ask for as many ranks per node as GPUs"
  # Per-task binding shows each rank one GPU, as device 0; the workbook's ranks
  # take the GPU of their local rank, so rank 1 would find none.
  if [ -n "${SLURM_GPUS_PER_TASK:-}" ] || [[ ${SLURM_GPU_BIND:-} == *single* || ${SLURM_GPU_BIND:-} == *map_gpu* ]]; then
    fail "this job binds one GPU to each task (--gpus-per-task or --gpu-bind): ask for --gpus-per-node instead, so that each rank takes the GPU of its local rank (hpc/README.md, \"All ranks on GPU 0\")"
  fi
  [ "$most_per_node" -eq "$gpus" ] ||
    say "note: $most_per_node ranks per node on nodes with $gpus GPUs: $((gpus - most_per_node)) GPU(s) per node stay idle"
fi

# ---- the program --------------------------------------------------------------
if [ -z "${WORKBOOK_BUILD:-}" ]; then
  WORKBOOK_BUILD=$root/build/default
  [ "$device" = cuda ] && [ -d "$root/build/cuda" ] && WORKBOOK_BUILD=$root/build/cuda
fi
code=${WORKBOOK_CODE:-solution}
case $program in
  smoke_test) executable=$WORKBOOK_BUILD/bin/smoke_test ;;
  ch0[3-9]_* | ch1[0-3]_*)
    [[ $code =~ ^(solution|student)$ ]] || fail "WORKBOOK_CODE='$code': use solution or student"
    executable=$WORKBOOK_BUILD/bin/$code/$program ;;
  *) fail "'$program' is not a workbook program (smoke_test, or a program of Chapters 3 to 13: ch03_train, ch04_bench, ..., ch13_train)" ;;
esac
[ -x "$executable" ] ||
  fail "$executable is not built: in $root run 'cmake --preset $( [ "$device" = cuda ] && echo cuda || echo default ) && cmake --build --preset $( [ "$device" = cuda ] && echo cuda || echo default )' (hpc/README.md, step 2)"

arguments=("$@")
if [ -n "${WORKBOOK_ARGS:-}" ]; then
  read -r -a arguments <<< "$WORKBOOK_ARGS"
fi
# The device and the threads, unless the arguments already say.
case " ${arguments[*]-} " in *" --device "* | *" --device="*) ;; *) arguments+=(--device "$device") ;; esac
case " ${arguments[*]-} " in *" --threads "* | *" --threads="*) ;; *) arguments+=(--threads "$cpus_per_rank") ;; esac
export OMP_NUM_THREADS=$cpus_per_rank

# ---- rendezvous variables for other tools (Note: [no MASTER_ADDR]) -------------
export MASTER_ADDR=${hosts[0]}
export MASTER_PORT=$(( 20000 + 10#$job_number % 20000 ))

# ---- how to start the ranks (Note: [srun or mpirun]) --------------------------
launcher=${WORKBOOK_LAUNCHER:-auto}
srun_mpi=${WORKBOOK_SRUN_MPI:-pmix}
why=""
case $launcher in
  auto|srun|mpirun) ;;
  *) fail "WORKBOOK_LAUNCHER='$launcher': use auto, srun or mpirun" ;;
esac
[ "$launcher" != srun ] || [ -n "${SLURM_JOB_ID:-}" ] || fail "WORKBOOK_LAUNCHER=srun needs a SLURM job"
srun_command=(srun "--mpi=$srun_mpi" --ntasks="$ranks" --cpus-per-task="$cpus_per_rank" --kill-on-bad-exit=1)
if [ "$launcher" = auto ]; then
  launcher=mpirun
  why="not a SLURM job"
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    if ! plugins=$(srun --mpi=list 2>&1); then
      why="srun --mpi=list failed: $(echo "$plugins" | tail -n 1)"
    elif ! grep -qw "$srun_mpi" <<< "$plugins"; then
      why="this SLURM has no $srun_mpi plugin (srun --mpi=list)"
    elif [ "${WORKBOOK_DRY_RUN:-0}" = 1 ]; then
      why="dry run: the srun probe was not run"
    elif probe=$(timeout 120 "${srun_command[@]}" "$WORKBOOK_BUILD/bin/smoke_test" --check-launch --comm-timeout 60 2>&1); then
      launcher=srun
      why="the probe's $ranks ranks found each other through $srun_mpi"
    else
      why="srun --mpi=$srun_mpi did not start one MPI job (hpc/README.md, \"PMI mismatch\"): $(echo "$probe" | grep -m 1 -v '^srun: ' || echo "$probe" | head -n 1)"
    fi
  fi
fi

if [ "$launcher" = srun ]; then
  command=("${srun_command[@]}")
else
  # The flags below are Open MPI's (the workbook's MPI); MPICH's and Intel
  # MPI's mpirun take others. Its full path: Open MPI then finds itself
  # (orted) on the other nodes as it is here, like --prefix.
  mpirun_path=$(command -v mpirun) || fail "no mpirun on PATH: load the Open MPI the workbook was built with (hpc/site.sh)"
  "$mpirun_path" --version 2>&1 | grep -q "Open MPI" ||
    fail "$mpirun_path is not Open MPI's ($("$mpirun_path" --version 2>&1 | head -n 1)): load the Open MPI the workbook was built with (hpc/site.sh), or WORKBOOK_LAUNCHER=srun"
  command=("$mpirun_path" -np "$ranks" --bind-to none)
  # Open MPI starts its daemons on the other nodes with srun. From SLURM
  # 23.11 on, srun reads SLURM_CPUS_PER_TASK (and SLURM_TRES_PER_TASK)
  # again, and a daemon (with every rank it starts) would be confined to one
  # rank's cores.
  [ -z "${SLURM_JOB_ID:-}" ] || command=(env -u SLURM_CPUS_PER_TASK -u SLURM_TRES_PER_TASK "${command[@]}")
  # The same number of ranks on every node: placed per node. Otherwise the
  # hostfile's slots place them, node by node.
  if [ "$ranks" -eq $(( most_per_node * ${#hosts[@]} )) ]; then
    command+=(--map-by "ppr:$most_per_node:node")
  fi
  if [ -z "${SLURM_JOB_ID:-}" ]; then
    # Open MPI reads a SLURM allocation itself; for LSF and PBS (and no
    # scheduler) it gets a hostfile: each host and its ranks.
    hostfile=$(mktemp "${TMPDIR:-/tmp}/workbook-hosts.$job_number.XXXXXX")
    trap 'rm -f "$hostfile"' EXIT
    for ((i = 0; i < ${#hosts[@]}; i++)); do
      echo "${hosts[i]} slots=${ranks_per_node[i]}" >> "$hostfile"
    done
    command+=(--hostfile "$hostfile")
  fi
  # Open MPI passes the environment to the ranks on this node only; -x
  # passes these to every node.
  # With them the transports' settings a site may put in site.sh (UCX, libfabric,
  # PSM2, HCOLL, Open MPI's MCA). Not CUDA_VISIBLE_DEVICES: the scheduler sets
  # it on each node for that node.
  for name in $(compgen -e | grep -E '^(NCCL_|WORKBOOK_|UCX_|FI_|PSM2_|HCOLL_|OMPI_MCA_|OMP_NUM_THREADS$|MASTER_|LD_LIBRARY_PATH$|PATH$)' || true); do
    command+=(-x "$name")
  done
fi
command+=("$executable" ${arguments[@]+"${arguments[@]}"})

say "$scheduler: ${#hosts[@]} node(s), $ranks rank(s) (${ranks_per_node[*]} per node), $cpus_per_rank core(s) per rank, device $device"
say "hosts: ${hosts[*]}"
say "starts the ranks with $launcher${why:+ ($why)}"
say "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT (for other tools; the workbook's programs bootstrap through MPI)"
say "${command[*]}"
if [ -n "${hostfile:-}" ]; then say "hostfile $hostfile: $(tr '\n' ';' < "$hostfile")"; fi
[ "${WORKBOOK_DRY_RUN:-0}" = 1 ] && exit 0
# Not exec: the hostfile is removed when the ranks are done. The scheduler's
# signals (a time limit, scancel) reach mpirun and srun through the job's
# process group.
"${command[@]}"
