#!/bin/bash
# job_checks.sh — what the hpc tests check in a job's output files. Sourced.
# shellcheck shell=bash

# Stops the test with the job's output files shown.
job_failed() {
  local message=$1 out=$2 err=$3
  echo "FAILED: $message" >&2
  for file in "$out" "$err"; do
    echo "---- $file" >&2
    if [ -f "$file" ]; then cat "$file" >&2; else echo "(missing)" >&2; fi
  done
  exit 1
}

# expect_line FILE REGEX OUT ERR: FILE has a line matching the extended REGEX.
expect_line() {
  grep -Eq -- "$2" "$1" || job_failed "no line matching '$2' in $1" "$3" "$4"
}

# check_smoke OUT ERR RANKS: the smoke test's table has a row per rank, the
# exact all-reduce passed on every rank, and the bandwidth line has numbers.
check_smoke() {
  local out=$1 err=$2 ranks=$3 rank
  expect_line "$out" "^smoke_test: $ranks rank\\(s\\) on 1 node\\(s\\)" "$out" "$err"
  for ((rank = 0; rank < ranks; rank++)); do
    expect_line "$out" "^ +$rank +$rank +$ranks +$(hostname) +cpu " "$out" "$err"
  done
  expect_line "$out" "^all-reduce \\(sum, float32, .*\\): OK on all $ranks ranks$" "$out" "$err"
  expect_line "$out" "^ +67108864 +16777216 +float +sum +[0-9.]+ +[0-9.]+ +[0-9.]+ " "$out" "$err"
  expect_line "$out" "^smoke test passed$" "$out" "$err"
  if grep -Eiq "error|warning|fail" "$err"; then job_failed "the error file reports a problem" "$out" "$err"; fi
  echo "ok: smoke test on $ranks ranks ($out)"
}

# check_training OUT ERR JSON RANKS: the program printed its result, and the
# last JSON line is a complete result from RANKS ranks.
check_training() {
  local out=$1 err=$2 json=$3 ranks=$4
  expect_line "$out" "^result: " "$out" "$err"
  python3 "$WORKBOOK_SOURCE/tests/support/check_result_line.py" "$json" > /dev/null ||
    job_failed "$json has no complete result line" "$out" "$err"
  python3 -c "import json, sys; r = json.loads(open(sys.argv[1]).readlines()[-1]); sys.exit(0 if r['ranks'] == int(sys.argv[2]) else f'ranks {r[\"ranks\"]}')" \
    "$json" "$ranks" || job_failed "the result is not from $ranks ranks" "$out" "$err"
  echo "ok: training result from $ranks ranks ($out)"
}
