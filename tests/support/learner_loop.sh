#!/bin/bash
# learner_loop.sh — how long a learner waits: from saving an edit to an
# exercise file to the verdict of `workbook check exN.M`, for one exercise of
# each chapter. Each file is edited (a comment appended), checked, and put
# back as it was; the first check of a chapter (its first touch: the student
# library and test binary are built) is timed apart from the loop.
#
#   tests/support/learner_loop.sh BUILD_DIR [RUNS]      (default RUNS=3; prints medians)
#   LOOP_EXERCISES="ex1.2:01_single_device/train_step.cpp" picks others
set -euo pipefail
build=${1:?usage: learner_loop.sh BUILD_DIR [RUNS]}
runs=${2:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
workbook=$build/workbook
[ -x "$workbook" ] || { echo "learner_loop.sh: $workbook is not built" >&2; exit 2; }

# One exercise per chapter and the file a learner edits for it.
exercises=${LOOP_EXERCISES:-"ex1.2:01_single_device/train_step.cpp ex2.1:02_data_parallel/scatter.cpp ex3.3:03_ddp/replicas.cpp
           ex4.1:04_ring_allreduce/reduce_scatter.cpp ex5.1:05_sync_bn/batch_stats.cpp ex6.2:06_large_batch/lars.cpp
           ex7.2:07_sharding/stage1.cpp ex8.3:08_model_parallel/row_linear.cpp ex9.2:09_precision_memory/loss_scaler.cpp"}

saved=$(mktemp -d)
restore() { for f in "$saved"/*; do [ -e "$f" ] && cp -p "$f" "$root/chapters/$(basename "$f" | tr '%' '/')"; done; rm -rf "$saved"; }
trap restore EXIT

elapsed() { local start=$1; echo "$(date +%s.%N) - $start" | bc; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-6s %-42s %10s %12s  %s\n' exercise file first_s loop_median_s loop_runs_s
for item in $exercises; do
  exercise=${item%%:*} file=${item#*:}
  cp -p "$root/chapters/$file" "$saved/$(echo "$file" | tr '/' '%')"
  start=$(date +%s.%N)
  "$workbook" check "$exercise" > /dev/null 2>&1 || true   # a skeleton fails its tests: the verdict is what counts
  first=$(elapsed "$start")
  times=""
  for run in $(seq "$runs"); do
    echo "// an edit ($run)" >> "$root/chapters/$file"
    start=$(date +%s.%N)
    "$workbook" check "$exercise" > /dev/null 2>&1 || true
    times="$times $(elapsed "$start")"
  done
  printf '%-6s %-42s %10.1f %12.1f  %s\n' "$exercise" "$file" "$first" "$(echo "$times" | median)" "$times"
done
