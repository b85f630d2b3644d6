#!/bin/sh
# expect_error.sh STATUS PATTERN COMMAND... — passes when COMMAND exits with
# STATUS and its stderr holds one line matching PATTERN (grep -E): how the
# tests check that bad input gets one clear message and a non-zero exit.
expected_status=$1
pattern=$2
shift 2
stderr_file=$(mktemp)
"$@" >/dev/null 2>"$stderr_file"
status=$?
if [ "$status" -ne "$expected_status" ]; then
  echo "expected exit status $expected_status, got $status from: $*"
  cat "$stderr_file"
  rm -f "$stderr_file"
  exit 1
fi
if ! grep -Eq -- "$pattern" "$stderr_file"; then
  echo "stderr of: $*"
  cat "$stderr_file"
  echo "does not match: $pattern"
  rm -f "$stderr_file"
  exit 1
fi
echo "ok: exit $status, $(head -1 "$stderr_file")"
rm -f "$stderr_file"
