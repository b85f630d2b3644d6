#!/bin/bash
# grade-class.sh — grades a class on SLURM with hpc/slurm/grade.sbatch: the
# kits once, then an array job with a task per submission (after the kits
# succeeded), then the merge into one gradebook (after every task ended,
# failed or not: a task that failed leaves its submission out, and the
# merge says how many it found).
#
#   hpc/slurm/grade-class.sh CLASS_LIST CHAPTERS OUT [workbook grade options]
#
#   CLASS_LIST  a file with one submission's path a line
#   CHAPTERS    e.g. ch12,ch13
#   OUT         where the gradebook goes: OUT/gradebook.csv, OUT/summary.md,
#               OUT/NAME/results.json (Gradescope's), OUT/tasks/ (each task's)
# Options after OUT go to every `workbook grade` (e.g. --points grading.json,
# --earlier own, --time 600). Run it from the workbook's folder, or set
# WORKBOOK_ROOT. It prints the three job ids, the merge's last.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: hpc/slurm/grade-class.sh CLASS_LIST CHAPTERS OUT [workbook grade options]" >&2; exit 2; }
list=$1 chapters=$2 out=$3
shift 3
[ -f "$list" ] || { echo "grade-class.sh: $list is not a file (one submission's path a line)" >&2; exit 2; }
count=$(grep -cv '^[[:space:]]*$' "$list" || true)
[ "$count" -gt 0 ] || { echo "grade-class.sh: $list names no submission" >&2; exit 2; }
script=$(cd "$(dirname "$0")" && pwd)/grade.sbatch
mkdir -p "$out"
kits=$(sbatch --parsable --job-name=wb-grade-kits --output="$out/kits-%j.out" "$script" kits "$chapters" "$@")
kits=${kits%%;*}
tasks=$(sbatch --parsable --dependency="afterok:$kits" --array="0-$((count - 1))" \
  --output="$out/task-%a-%A.out" "$script" task "$list" "$chapters" "$out" "$@")
tasks=${tasks%%;*}
merge=$(sbatch --parsable --dependency="afterany:$tasks" --job-name=wb-grade-merge --output="$out/merge-%j.out" \
  "$script" merge "$out")
merge=${merge%%;*}
echo "grade-class.sh: kits job $kits, array job $tasks ($count tasks), merge job $merge; the gradebook: $out/gradebook.csv"
echo "$merge"
