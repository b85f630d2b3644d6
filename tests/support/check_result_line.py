#!/usr/bin/python3
"""check_result_line.py FILE — the last JSON line a run wrote is its result and
carries every key ARCHITECTURE.md requires (Output)."""
import json
import sys

REQUIRED = ["chapter", "device", "ranks", "epochs", "test_accuracy", "samples_per_s", "epoch_s", "peak_mem_bytes"]

lines = [line for line in open(sys.argv[1]) if line.strip()]
if not lines:
    sys.exit(f"{sys.argv[1]}: no JSON lines")
records = [json.loads(line) for line in lines]
result = records[-1]
missing = [key for key in REQUIRED if key not in result]
if result.get("type") != "result" or missing:
    sys.exit(f"last line is not a complete result: type={result.get('type')}, missing={missing}")
if not 0.0 <= result["test_accuracy"] <= 1.0 or result["samples_per_s"] <= 0 or result["peak_mem_bytes"] <= 0:
    sys.exit(f"implausible result: {result}")
epochs = [r for r in records[:-1] if r.get("type") == "epoch"]  # other lines (e.g. "memory") may come too
# A program that trains several variants side by side writes an epoch line per variant.
variants = {r.get("variant") for r in epochs} or {None}
if len(epochs) != result["epochs"] * len(variants) or any(r.get("type") == "result" for r in records[:-1]):
    sys.exit(f"expected one epoch line per epoch (and variant), then the result, got {[r.get('type') for r in records]}")
print("ok:", json.dumps(result))
