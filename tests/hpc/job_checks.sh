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

# Where SLURM's commands run: here (the emulated cluster's test runs them on a node).
slurm_client() { "$@"; }

# sbatch_wait ARGS...: submits with sbatch, prints the job's id and waits (at
# most 120 s) for the job to end; succeeds when it COMPLETED (exit status 0).
# Note: sbatch --wait asks the controller after 2 s, then every 8 s (Slurm
# 22.05), so a 3-second job returned after 10; asking every 0.1 s made the
# SLURM tests about 25 s shorter.
sbatch_wait() {
  local id
  id=$(slurm_client sbatch --parsable "$@") || return 1
  id=${id%%;*}
  echo "$id"
  job_wait "$id" 1200
}

# job_wait ID TENTHS: waits (at most TENTHS tenths of a second) for job ID to
# end; succeeds when it COMPLETED.
job_wait() {
  local id=$1 tenths=$2 state=""
  for _ in $(seq "$tenths"); do
    state=$(slurm_client scontrol -o show job "$id" 2> /dev/null | sed -n 's/.* JobState=\([A-Z_]*\) .*/\1/p')
    case $state in
      PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.1 ;;
      *) break ;;
    esac
  done
  [ "$state" = COMPLETED ] && return 0
  slurm_client scancel "$id" 2> /dev/null
  echo "job $id ended $state" >&2
  return 1
}
