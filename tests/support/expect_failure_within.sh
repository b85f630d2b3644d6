#!/bin/sh
# expect_failure_within.sh SECONDS PATTERN COMMAND... — passes when COMMAND
# (a multi-process job made to go wrong) ends within SECONDS with a non-zero
# status and its output (stdout and stderr) holds a line matching PATTERN
# (grep -E): how the tests prove that no job hangs and that it says why.
limit=$1
pattern=$2
shift 2
output=$(mktemp)
start=$(date +%s)
# A backstop, so that this script itself cannot hang: three times the limit.
timeout --kill-after=10 $((limit * 3)) "$@" >"$output" 2>&1
status=$?
elapsed=$(($(date +%s) - start))
fail() {
  echo "$1"
  echo "--- output of: $*"
  cat "$output"
  rm -f "$output"
  exit 1
}
[ "$status" -ne 0 ] || fail "expected a non-zero exit status, got 0"
[ "$elapsed" -le "$limit" ] || fail "took ${elapsed} s, more than ${limit} s (exit status $status)"
grep -Eq -- "$pattern" "$output" || fail "no line matches: $pattern"
echo "ok: exit status $status after ${elapsed} s: $(grep -E -m1 -- "$pattern" "$output")"
rm -f "$output"
