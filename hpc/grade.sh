#!/bin/bash
# grade.sh — one job of a class's grading, under SLURM, LSF or PBS (the job
# scripts hpc/slurm/grade.sbatch, hpc/lsf/grade.lsf and hpc/pbs/grade.pbs run
# it; hpc/README.md, "Grading a class", shows how to submit them):
#
#   hpc/grade.sh kits CHAPTERS [options]           each chapter's kit, and the reference graded with it
#   hpc/grade.sh task CLASS_LIST CHAPTERS OUT [options]
#                                                  one task of an array job: the submission on the
#                                                  task's line of CLASS_LIST, into OUT/tasks/LINE
#   hpc/grade.sh merge OUT                         the tasks' gradebooks into one: OUT/gradebook.csv,
#                                                  OUT/summary.md, OUT/NAME/results.json
#
# The task's line: SLURM_ARRAY_TASK_ID + 1 (grade-class.sh submits the array
# from 0), LSB_JOBINDEX (bsub -J "name[1-N]"), PBS_ARRAY_INDEX (qsub -J 1-N)
# or PBS_ARRAYID (Torque, qsub -t 1-N). Blank lines of the list are skipped.
# Options go to `workbook grade` (--points FILE, --earlier own, --time S, ...).
# WORKBOOK_ARGS, when set, takes the place of the arguments (bsub passes a job
# script none, qsub only through -v).
set -euo pipefail
root=${WORKBOOK_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
build=${WORKBOOK_BUILD:-$root/build/default}
workbook=$build/workbook
fail() { echo "grade.sh: $*" >&2; exit 2; }
[ -x "$workbook" ] || fail "$workbook is not built (set WORKBOOK_ROOT or WORKBOOK_BUILD)"
if [ -n "${WORKBOOK_ARGS:-}" ]; then
  read -r -a words <<< "$WORKBOOK_ARGS"
  set -- "${words[@]}"
fi
mode=${1:-}
[ $# -eq 0 ] || shift
case $mode in
  kits)
    [ $# -ge 1 ] || fail "kits CHAPTERS [options]"
    chapters=$1
    shift
    exec "$workbook" grade --prepare --chapters "$chapters" "$@" ;;
  task)
    [ $# -ge 3 ] || fail "task CLASS_LIST CHAPTERS OUT [options]"
    list=$1 chapters=$2 out=$3
    shift 3
    if [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then line=$((SLURM_ARRAY_TASK_ID + 1))
    elif [ -n "${LSB_JOBINDEX:-}" ] && [ "${LSB_JOBINDEX}" != 0 ]; then line=$LSB_JOBINDEX
    elif [ -n "${PBS_ARRAY_INDEX:-}" ]; then line=$PBS_ARRAY_INDEX
    elif [ -n "${PBS_ARRAYID:-}" ]; then line=$PBS_ARRAYID
    else fail "task runs as a task of an array job (no SLURM_ARRAY_TASK_ID, LSB_JOBINDEX or PBS_ARRAY_INDEX)"
    fi
    [ -f "$list" ] || fail "$list is not a file (one submission's path a line)"
    submission=$(grep -v '^[[:space:]]*$' "$list" | sed -n "${line}p")
    [ -n "$submission" ] || fail "$list has no line $line"
    exec "$workbook" grade --kits-ready --chapters "$chapters" --out "$out/tasks/$line" "$@" "$submission" ;;
  merge)
    [ $# -eq 1 ] || fail "merge OUT"
    exec "$workbook" grade --merge "$1/tasks" --out "$1" ;;
  *)
    fail "the first argument is kits, task or merge" ;;
esac
