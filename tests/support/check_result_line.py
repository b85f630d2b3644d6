#!/usr/bin/python3
"""check_result_line.py FILE — the last JSON line a run wrote is its result and
carries every key ARCHITECTURE.md requires (Output)."""
import json
import sys

REQUIRED = ["chapter", "device", "ranks", "epochs", "samples_per_s", "epoch_s", "peak_mem_bytes"]

lines = [line for line in open(sys.argv[1]) if line.strip()]
if not lines:
    sys.exit(f"{sys.argv[1]}: no JSON lines")
records = [json.loads(line) for line in lines]
result = records[-1]
missing = [key for key in REQUIRED if key not in result]
if result.get("type") != "result" or missing:
    sys.exit(f"last line is not a complete result: type={result.get('type')}, missing={missing}")
# A classifier's accuracy, or (a model that is not one: Chapter 11's GPT) its held-out loss.
if "test_accuracy" not in result and "test_loss" not in result:
    sys.exit(f"the result has neither test_accuracy nor test_loss: {result}")
if not 0.0 <= result.get("test_accuracy", 0.0) <= 1.0 or result["samples_per_s"] <= 0 or result["peak_mem_bytes"] <= 0:
    sys.exit(f"implausible result: {result}")
epochs = [r for r in records[:-1] if r.get("type") == "epoch"]  # other lines (e.g. "memory") may come too
# A program that trains several variants side by side writes an epoch line per variant.
variants = {r.get("variant") for r in epochs} or {None}
if len(epochs) != result["epochs"] * len(variants) or any(r.get("type") == "result" for r in records[:-1]):
    sys.exit(f"expected one epoch line per epoch (and variant), then the result, got {[r.get('type') for r in records]}")
print("ok:", json.dumps(result))
