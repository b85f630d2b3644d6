#!/bin/bash
# overlap_turns.sh OUT.jsonl [RUNS] [--one-machine] — ch11_train at data 2,
# without and with --overlap, taking turns: one rank on each of the emulated
# cluster's 2 nodes (`workbook cluster up --nodes 2 --link 1gbit` first), or
# with --one-machine both ranks here. Each run's result line is appended to
# OUT.jsonl as a `before_after` line (`tables.py before-after` renders them).
set -euo pipefail
out=${1:?usage: overlap_turns.sh OUT.jsonl [RUNS] [--one-machine]}
runs=${2:-5}
root=$(cd "$(dirname "$0")/../../.." && pwd)
commit=$(git -C "$root" rev-parse --short HEAD)
where=(--nodes 2)
label="data 2 on 2 nodes at 1 Gbit/s ($commit)"
if [[ ${3:-} == --one-machine ]]; then
  where=(--ranks 2)
  label="data 2 on one machine ($commit)"
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for ((run = 0; run < runs; ++run)); do
  for code in "stage 1" "--overlap"; do
    flags=()
    [[ $code == --overlap ]] && flags=(--overlap)
    rm -f "$scratch/run.jsonl"
    "$root/build/default/workbook" run ch11 --solution "${where[@]}" -- --steps 24 --micro-batches 1 --sample 0 \
      --report-every 1000 --threads 1 "${flags[@]}" --json "$scratch/run.jsonl" > /dev/null
    python3 - "$scratch/run.jsonl" "$code" "$label" >> "$out" <<'PY'
import json, sys
result = [json.loads(line) for line in open(sys.argv[1]) if json.loads(line).get("type") == "result"][-1]
result.update(type="before_after", run=sys.argv[3], code=sys.argv[2])
print(json.dumps(result, sort_keys=True))
PY
  done
done
