#!/bin/bash
# lsf_pbs.sh SOURCE BUILD — hpc/lsf/grade.lsf and hpc/pbs/grade.pbs as their
# schedulers run an array job's pieces, with the variables they set: the kits
# (LSF), task 1 (LSF, LSB_JOBINDEX) and task 2 (PBS, PBS_ARRAY_INDEX) of a
# class of the grader's fixture chapter, and the merge (PBS); the merged
# gradebook must give each submission its points. (SLURM's are submitted to
# a real SLURM by tests/hpc/test_slurm_jobs.sh.)
set -euo pipefail
trap 'echo "FAILED: line $LINENO of ${BASH_SOURCE[0]}: $BASH_COMMAND" >&2' ERR
source=$1
export WORKBOOK_BUILD=$2 WORKBOOK_ROOT=$1
work=$(mktemp -d /tmp/workbook-grade-jobs.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 711 "$work"
fixture=$source/tests/grade/fixture
mkdir -p "$work/right/chapters/90_fixture" "$work/skeleton/chapters/90_fixture"
cp "$fixture/solutions/90_fixture/add.cpp" "$work/right/chapters/90_fixture/"
cp "$fixture/chapters/90_fixture/add.cpp" "$work/skeleton/chapters/90_fixture/"
printf '%s\n\n%s\n' "$work/right" "$work/skeleton" > "$work/class.list"
options="--root $fixture --time 60"
cd "$work"

env WORKBOOK_ARGS="kits ch90 $options" LSB_JOBID=11 LS_SUBCWD="$work" bash "$source/hpc/lsf/grade.lsf"
env WORKBOOK_ARGS="task $work/class.list ch90 $work/graded $options" LSB_JOBID=12 LSB_JOBINDEX=1 LS_SUBCWD="$work" \
  bash "$source/hpc/lsf/grade.lsf"
env WORKBOOK_ARGS="task $work/class.list ch90 $work/graded $options" PBS_JOBID="13[2].server" PBS_ARRAY_INDEX=2 \
  PBS_O_WORKDIR="$work" bash "$source/hpc/pbs/grade.pbs"
env WORKBOOK_ARGS="merge $work/graded" PBS_JOBID=14.server PBS_O_WORKDIR="$work" bash "$source/hpc/pbs/grade.pbs"
grep -q "^right,ch90,ex90.1,10,10,1,1," graded/gradebook.csv
grep -q "^skeleton,ch90,ex90.1,0,10,0,1,.*ex90.1 is not implemented yet" graded/gradebook.csv
# A task outside an array job is refused with one line.
if env -u SLURM_ARRAY_TASK_ID WORKBOOK_ARGS="task class.list ch90 graded" bash "$source/hpc/lsf/grade.lsf" 2> refused.err; then
  echo "FAILED: a task outside an array job ran" >&2; exit 1
fi
grep -q "^grade.sh: task runs as a task of an array job" refused.err
echo "ok: the kits, two tasks and the merge as LSF and PBS run them; each submission its points"
