#!/bin/bash
# test_slurm_jobs.sh SOURCE BUILD — submits hpc/slurm's job scripts to a real
# SLURM, as an instructor would, and checks the files the jobs wrote:
#   1. smoke.sbatch: srun (the probe passes here: Debian's Open MPI speaks PMIx);
#   2. smoke.sbatch with an srun plugin the MPI does not speak: the mpirun fallback;
#   3. ch03.sbatch, a short run: its result line;
#   4. every 2-node script, dry run: what it would start on two nodes;
#   5. a class graded as an array job (hpc/slurm/grade-class.sh), merged.
# The cluster (hpc/slurm_cluster.sh) lives in a temporary directory and
# is stopped and removed on every exit; one left by a killed run is stopped first.
# CTest runs it through tests/hpc/outside_a_job.sh: no scheduler variables but the ones it fakes.
set -euo pipefail
trap 'echo "FAILED: line $LINENO of ${BASH_SOURCE[0]}: $BASH_COMMAND" >&2' ERR
export WORKBOOK_SOURCE=$1
build=$2
# shellcheck source=hpc/slurm_cluster.sh
source "$WORKBOOK_SOURCE/hpc/slurm_cluster.sh"
# shellcheck source=tests/hpc/job_checks.sh
source "$WORKBOOK_SOURCE/tests/hpc/job_checks.sh"

# Skipped (77) without Debian's SLURM: WORKBOOK_SKIP_SLURM=1 ./install-packages leaves it out.
for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" > /dev/null || { echo "skipped: $tool is not installed (./install-packages installs it)"; exit 77; }
done

marker=$build/hpc-slurm-cluster  # the directory of the cluster this test started
if [ -f "$marker" ]; then
  slurm_cluster_stop "$(cat "$marker")"
  rm -rf "$(cat "$marker")" "$marker"
fi
cluster=$(mktemp -d /tmp/workbook-slurm.XXXXXX)
echo "$cluster" > "$marker"
cleanup() {
  slurm_cluster_stop "$cluster"
  rm -rf "$cluster" "$marker"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

slurm_cluster_start "$cluster"
echo "ok: a one-node SLURM in $cluster ($(sinfo -h -o '%c CPUs, partition %P'))"

# The jobs are submitted from a folder of their own, so their output files
# do not land in the source tree; WORKBOOK_ROOT says where the workbook is.
mkdir -p "$cluster/jobs"
cd "$cluster/jobs"
export WORKBOOK_ROOT=$WORKBOOK_SOURCE WORKBOOK_BUILD=$build

# submit SCRIPT [ARGS...]: sbatch_wait; prints the job id. A job that fails is a test failure.
submit() {
  local id status=0
  id=$(sbatch_wait "$@") || status=$?
  [ "$status" -eq 0 ] || job_failed "job $id ($*) did not complete" "$(ls -- *-"$id".out 2> /dev/null || echo "job $id .out")" "$(ls -- *-"$id".err 2> /dev/null || echo "job $id .err")"
  echo "$id"
}

# 1. The smoke test, through srun.
id=$(submit "$WORKBOOK_SOURCE/hpc/slurm/smoke.sbatch")
check_smoke "wb-smoke-$id.out" "wb-smoke-$id.err" 2
expect_line "wb-smoke-$id.out" "^launch: starts the ranks with srun " "wb-smoke-$id.out" "wb-smoke-$id.err"
expect_line "wb-smoke-$id.out" "started by srun \\(SLURM_\\*\\)" "wb-smoke-$id.out" "wb-smoke-$id.err"

# 2. The same with a PMI plugin that Open MPI does not speak: every rank
# would start alone; the probe sees it and mpirun starts the ranks instead.
id=$(WORKBOOK_SRUN_MPI=none submit "$WORKBOOK_SOURCE/hpc/slurm/smoke.sbatch")
check_smoke "wb-smoke-$id.out" "wb-smoke-$id.err" 2
expect_line "wb-smoke-$id.out" "^launch: starts the ranks with mpirun \\(srun --mpi=none did not start one MPI job" \
  "wb-smoke-$id.out" "wb-smoke-$id.err"
expect_line "wb-smoke-$id.out" "started by mpirun \\(OMPI_COMM_WORLD_\\*\\)" "wb-smoke-$id.out" "wb-smoke-$id.err"

# 3. A chapter's training job, shortened by its arguments.
id=$(submit "$WORKBOOK_SOURCE/hpc/slurm/ch03.sbatch" --epochs 1 --train-samples 2000 --test-samples 200 --json "$PWD/ch03.jsonl")
check_training "wb-ch03-$id.out" "wb-ch03-$id.err" "$PWD/ch03.jsonl" 2

# 4. The 2-node scripts, run by bash with the variables SLURM would set on
# two nodes, dry: the decisions and the command, nothing started.
for script in "$WORKBOOK_SOURCE"/hpc/slurm/*-2nodes.sbatch; do
  out=$PWD/$(basename "$script").dry
  env WORKBOOK_DRY_RUN=1 SLURM_JOB_ID=4242 SLURM_JOB_NODELIST='node[7-8]' SLURM_NTASKS=4 SLURM_TASKS_PER_NODE='2(x2)' SLURM_CPUS_PER_TASK=3 \
    SLURM_SUBMIT_DIR="$WORKBOOK_SOURCE" bash "$script" > "$out" 2>&1 || job_failed "$script (dry run) failed" "$out" "$out"
  expect_line "$out" "^launch: SLURM job 4242: 2 node\\(s\\), 4 rank\\(s\\) \\(2 2 per node\\), 3 core\\(s\\) per rank, device cpu$" "$out" "$out"
  expect_line "$out" "^launch: hosts: node7 node8$" "$out" "$out"
  expect_line "$out" "^launch: MASTER_ADDR=node7 MASTER_PORT=24242 " "$out" "$out"
  expect_line "$out" "^launch: env -u SLURM_CPUS_PER_TASK -u SLURM_TRES_PER_TASK /[^ ]*/mpirun -np 4 --bind-to none --map-by ppr:2:node .* $build/bin/.* --threads 3$" "$out" "$out"
done
echo "ok: the 2-node SLURM scripts would start 4 ranks on node7 and node8"

# Uneven tasks (--ntasks=4 over 2 nodes may come as 3 and 1): the counts come
# from SLURM_TASKS_PER_NODE, and no per-node mapping is forced.
out=$PWD/uneven.dry
env WORKBOOK_DRY_RUN=1 SLURM_JOB_ID=4243 SLURM_JOB_NODELIST='node[7-8]' SLURM_NTASKS=4 SLURM_TASKS_PER_NODE='3,1' \
  SLURM_SUBMIT_DIR="$WORKBOOK_SOURCE" bash "$WORKBOOK_SOURCE/hpc/slurm/smoke-2nodes.sbatch" > "$out" 2>&1 ||
  job_failed "the uneven dry run failed" "$out" "$out"
expect_line "$out" "^launch: SLURM job 4243: 2 node\\(s\\), 4 rank\\(s\\) \\(3 1 per node\\)" "$out" "$out"
expect_line "$out" "^launch: env -u SLURM_CPUS_PER_TASK -u SLURM_TRES_PER_TASK /[^ ]*/mpirun -np 4 --bind-to none -x " "$out" "$out"
echo "ok: uneven SLURM tasks per node"

# 5. A class graded as an array job: the kits' job, a task per submission,
# the merge. Three submissions of the grader's fixture chapter (one right, one
# the skeleton, one that does not compile) and a blank line in the list.
# Skipped where no sandbox can start (the grader then refuses: tests/grade).
if "$build/workbook" grade --check > /dev/null 2>&1; then
  fixture=$WORKBOOK_SOURCE/tests/grade/fixture
  for name in right skeleton broken; do mkdir -p "class/$name/chapters/90_fixture"; done
  cp "$fixture/solutions/90_fixture/add.cpp" class/right/chapters/90_fixture/
  cp "$fixture/chapters/90_fixture/add.cpp" class/skeleton/chapters/90_fixture/
  echo 'long x = ;' > class/broken/chapters/90_fixture/add.cpp
  printf '%s\n' class/right class/skeleton "" class/broken > class.list
  merge=$(slurm_client bash "$WORKBOOK_SOURCE/hpc/slurm/grade-class.sh" class.list ch90 graded \
    --root "$fixture" --time 60 | tail -1)
  job_wait "$merge" 3000 || job_failed "the merge job $merge did not complete" graded/merge-"$merge".out graded/merge-"$merge".out
  expect_line graded/gradebook.csv "^right,ch90,ex90.1,10,10,1,1," graded/gradebook.csv graded/merge-"$merge".out
  expect_line graded/gradebook.csv "^skeleton,ch90,ex90.1,0,10,0,1,.*ex90.1 is not implemented yet" graded/gradebook.csv graded/merge-"$merge".out
  expect_line graded/gradebook.csv "^broken,ch90,ex90.1,0,10,0,1,.*does not compile" graded/gradebook.csv graded/merge-"$merge".out
  [ -f graded/right/results.json ] || job_failed "no results.json for the right submission" graded/gradebook.csv graded/merge-"$merge".out
  echo "ok: a class of 3 graded as a SLURM array job, merged into one gradebook"
else
  echo "skipped: grading as an array job (no sandbox starts here: workbook grade --check)"
fi
