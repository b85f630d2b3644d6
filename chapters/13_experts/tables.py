#!/usr/bin/python3
"""The tables of chapters/13_experts/results.md, rendered from the kept
files (the test ch13_results_tables checks that results.md holds what this
prints).

    python3 tables.py models measured/bench_X_models.jsonl...          # ch13_bench --measure models --json
    python3 tables.py all_to_all WHERE=measured/bench_X.jsonl...       # ch13_bench --measure all_to_all --json
"""
import json
import sys


def lines(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def rows(path):
    return [row for row in lines(path) if row.get("type") == "row"]


def models(paths):
    print("| ranks | variant | steps | step ms | vs dense | tokens/s | held-out loss | assignments dropped |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for path in paths:
        for row in rows(path):
            print(f"| {row['ranks']} | {row['variant']} | {row['steps']} | {row['step_ms']:.1f} | "
                  f"{row['vs_dense']:.2f}× | {row['tokens_per_s']:.0f} | {row['validation_loss']:.4f} | "
                  f"{100 * row['dropped_share']:.1f}% |")


def all_to_all(labelled):
    print("| where | ranks | α µs | β ns/byte | variant | bytes from each rank | ms | predicted ms | measured / predicted |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|")
    for item in labelled:
        where, path = item.split("=", 1)
        for row in rows(path):
            print(f"| {where} | {row['ranks']} | {row['alpha_us']:.1f} | {row['beta_ns_per_byte']:.3f} | "
                  f"{row['variant']} | {row['bytes']} | {row['ms']:.3f} | {row['predicted_ms']:.3f} | "
                  f"{row['vs_predicted']:.2f}× |")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "models":
        models(sys.argv[2:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "all_to_all":
        all_to_all(sys.argv[2:])
    else:
        sys.exit(__doc__)
