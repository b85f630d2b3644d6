#!/bin/bash
# test_lsf_pbs_jobs.sh SOURCE BUILD — runs hpc/lsf's and hpc/pbs's job scripts
# with the variables their scheduler sets (job id, host list, submit folder),
# writing the output files the scheduler would, so that each script's body
# starts its ranks on this machine under mpirun; then checks those files:
#   LSF: smoke.lsf, ch05.lsf (short);  PBS: smoke.pbs, ch04.pbs and ch06.pbs (short);
#   launch.sh with no scheduler (WORKBOOK_RANKS=2);
#   and every 2-node script, dry run, with a two-host list.
# CTest runs it through tests/hpc/outside_a_job.sh: no scheduler variables but the ones it fakes.
set -euo pipefail
trap 'echo "FAILED: line $LINENO of ${BASH_SOURCE[0]}: $BASH_COMMAND" >&2' ERR
export WORKBOOK_SOURCE=$1
build=$2
# shellcheck source=tests/hpc/job_checks.sh
source "$WORKBOOK_SOURCE/tests/hpc/job_checks.sh"

jobs=$(mktemp -d /tmp/workbook-jobs.XXXXXX)
trap 'rm -rf "$jobs"' EXIT
cd "$jobs"
export WORKBOOK_BUILD=$build
host=$(hostname)

# lsf JOBID SCRIPT [VAR=VALUE...]: as LSF runs a job on one host with 2 slots;
# its output in wb-NAME-JOBID.out and .err (the scripts' -o and -e).
lsf() {
  local id=$1 script=$2 name
  shift 2
  name=$(basename "$script" .lsf)
  env "$@" LSB_JOBID="$id" LSB_JOBNAME="wb-$name" LSB_MCPU_HOSTS="$host 2" LSB_HOSTS="$host $host" \
    LSB_DJOB_NUMPROC=2 LS_SUBCWD="$WORKBOOK_SOURCE" timeout 120 bash "$script" > "wb-$name-$id.out" 2> "wb-$name-$id.err" ||
    job_failed "$script (LSF job $id) failed" "wb-$name-$id.out" "wb-$name-$id.err"
}

# pbs JOBID SCRIPT [VAR=VALUE...]: as PBS runs a job on one host with
# mpiprocs=2; its output in wb-NAME.oJOBID and .eJOBID (PBS's own names).
printf '%s\n%s\n' "$host" "$host" > "$jobs/nodefile"
pbs() {
  local id=$1 script=$2 name
  shift 2
  name=$(basename "$script" .pbs)
  env "$@" PBS_JOBID="$id.pbs-server" PBS_JOBNAME="wb-$name" PBS_NODEFILE="$jobs/nodefile" PBS_ENVIRONMENT=PBS_BATCH \
    PBS_O_WORKDIR="$WORKBOOK_SOURCE" timeout 120 bash "$script" > "wb-$name.o$id" 2> "wb-$name.e$id" ||
    job_failed "$script (PBS job $id) failed" "wb-$name.o$id" "wb-$name.e$id"
}

lsf 101 "$WORKBOOK_SOURCE/hpc/lsf/smoke.lsf"
check_smoke wb-smoke-101.out wb-smoke-101.err 2
expect_line wb-smoke-101.out "^launch: LSF job 101: 1 node\\(s\\), 2 rank\\(s\\)" wb-smoke-101.out wb-smoke-101.err
lsf 102 "$WORKBOOK_SOURCE/hpc/lsf/ch05.lsf" \
  WORKBOOK_ARGS="--norm both --epochs 2 --batch 16 --train-samples 320 --test-samples 200 --json $jobs/ch05.jsonl"
check_training wb-ch05-102.out wb-ch05-102.err "$jobs/ch05.jsonl" 2

pbs 201 "$WORKBOOK_SOURCE/hpc/pbs/smoke.pbs"
check_smoke wb-smoke.o201 wb-smoke.e201 2
expect_line wb-smoke.o201 "^launch: PBS job 201.pbs-server: 1 node\\(s\\), 2 rank\\(s\\)" wb-smoke.o201 wb-smoke.e201
pbs 202 "$WORKBOOK_SOURCE/hpc/pbs/ch04.pbs" WORKBOOK_ARGS="--max-bytes 1048576 --rounds 1"
expect_line wb-ch04.o202 "^ +1048576 +262144 +float " wb-ch04.o202 wb-ch04.e202
echo "ok: ch04's bandwidth table on 2 ranks (wb-ch04.o202)"
pbs 203 "$WORKBOOK_SOURCE/hpc/pbs/ch06.pbs" \
  WORKBOOK_ARGS="--method lars --batch 64 --micro-batch 16 --epochs 2 --train-samples 512 --test-samples 200 --json $jobs/ch06.jsonl"
check_training wb-ch06.o203 wb-ch06.e203 "$jobs/ch06.jsonl" 2

# No scheduler at all: launch.sh on a workstation, WORKBOOK_RANKS ranks.
WORKBOOK_RANKS=2 timeout 120 "$WORKBOOK_SOURCE/hpc/launch.sh" smoke_test --iterations 3 > local.out 2> local.err ||
  job_failed "hpc/launch.sh smoke_test without a scheduler failed" local.out local.err
check_smoke local.out local.err 2

# The 2-node scripts, dry: two hosts with two ranks each.
printf 'nodeA\nnodeA\nnodeB\nnodeB\n' > "$jobs/nodefile2"
for script in "$WORKBOOK_SOURCE"/hpc/lsf/*-2nodes.lsf "$WORKBOOK_SOURCE"/hpc/pbs/*-2nodes.pbs; do
  out=$jobs/$(basename "$script").dry
  if [[ $script == *.lsf ]]; then
    scheduler_variables=(LSB_JOBID=301 LSB_MCPU_HOSTS="nodeA 2 nodeB 2" LS_SUBCWD="$WORKBOOK_SOURCE")
  else
    scheduler_variables=(PBS_JOBID=301.pbs-server PBS_NODEFILE="$jobs/nodefile2" PBS_O_WORKDIR="$WORKBOOK_SOURCE")
  fi
  env WORKBOOK_DRY_RUN=1 "${scheduler_variables[@]}" bash "$script" > "$out" 2>&1 ||
    job_failed "$script (dry run) failed" "$out" "$out"
  expect_line "$out" "^launch: (LSF|PBS) job 301.*: 2 node\\(s\\), 4 rank\\(s\\) \\(2 2 per node\\), 1 core\\(s\\) per rank" "$out" "$out"
  expect_line "$out" "^launch: /[^ ]*/mpirun -np 4 --bind-to none --map-by ppr:2:node --hostfile .* $build/bin/" "$out" "$out"
  expect_line "$out" "^launch: hostfile .*: nodeA slots=2;nodeB slots=2;$" "$out" "$out"
done
echo "ok: the 2-node LSF and PBS scripts would start 4 ranks on nodeA and nodeB"

# Uneven hosts (the hostfile's slots place the ranks), a PBS array job's id,
# and a site's own host list in place of LSF's.
out=$jobs/uneven.dry
env WORKBOOK_DRY_RUN=1 PBS_JOBID='12[3].pbs-server' PBS_O_WORKDIR="$WORKBOOK_SOURCE" PBS_NODEFILE="$jobs/nodefile2" \
  WORKBOOK_HOSTS="nodeC 4 nodeD 2" bash "$WORKBOOK_SOURCE/hpc/pbs/smoke-2nodes.pbs" > "$out" 2>&1 ||
  job_failed "a dry run with WORKBOOK_HOSTS failed" "$out" "$out"
expect_line "$out" "^launch: PBS job 12\\[3\\].pbs-server: 2 node\\(s\\), 6 rank\\(s\\) \\(4 2 per node\\)" "$out" "$out"
expect_line "$out" "^launch: /[^ ]*/mpirun -np 6 --bind-to none --hostfile " "$out" "$out"
expect_line "$out" "^launch: hostfile .*: nodeC slots=4;nodeD slots=2;$" "$out" "$out"
expect_line "$out" "^launch: MASTER_ADDR=nodeC MASTER_PORT=20123 " "$out" "$out"
echo "ok: uneven hosts, an array job's id, WORKBOOK_HOSTS"

# LSF slots are cores: 4 slots per host at 2 cores per rank are 2 ranks per host.
out=$jobs/cores.dry
env WORKBOOK_DRY_RUN=1 LSB_JOBID=302 LSB_MCPU_HOSTS="nodeA 4 nodeB 4" LS_SUBCWD="$WORKBOOK_SOURCE" WORKBOOK_CPUS_PER_RANK=2 \
  bash "$WORKBOOK_SOURCE/hpc/lsf/ch03-2nodes.lsf" > "$out" 2>&1 || job_failed "the cores-per-rank dry run failed" "$out" "$out"
expect_line "$out" "^launch: LSF job 302: 2 node\\(s\\), 4 rank\\(s\\) \\(2 2 per node\\), 2 core\\(s\\) per rank" "$out" "$out"
expect_line "$out" "--threads 2$" "$out" "$out"
expect_line "$out" "^launch: hostfile .*: nodeA slots=2;nodeB slots=2;$" "$out" "$out"
echo "ok: LSF slots divided by the cores per rank"
