#!/bin/bash
# overlap_turns.sh OUT.jsonl [RUNS] — ch11_train at data 2, one rank on each of
# the emulated cluster's 2 nodes (`workbook cluster up --nodes 2 --link 1gbit`
# first), without and with --overlap, taking turns; each run's result line
# goes into OUT.jsonl as a `before_after` line (`tables.py before-after` renders them).
set -euo pipefail
out=${1:?usage: overlap_turns.sh OUT.jsonl [RUNS]}
runs=${2:-5}
root=$(cd "$(dirname "$0")/../../.." && pwd)
program=$root/build/default/bin/solution/ch11_train
commit=$(git -C "$root" rev-parse --short HEAD)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
: > "$out"
for ((run = 0; run < runs; ++run)); do
  for code in "stage 1" "--overlap"; do
    flags=()
    [[ $code == --overlap ]] && flags=(--overlap)
    "$root/hpc/cluster.sh" mpirun --nodes 2 --ranks-per-node 1 "$program" --steps 24 --micro-batches 1 --sample 0 \
      --report-every 1000 --threads 1 "${flags[@]}" --json "$scratch/run.jsonl" > /dev/null
    python3 - "$scratch/run.jsonl" "$code" "$commit" >> "$out" <<'PY'
import json, sys
result = [json.loads(line) for line in open(sys.argv[1]) if json.loads(line).get("type") == "result"][-1]
result.update(type="before_after", run="data 2 on 2 nodes at 1 Gbit/s (" + sys.argv[3] + ")", code=sys.argv[2])
print(json.dumps(result, sort_keys=True))
PY
  done
done
