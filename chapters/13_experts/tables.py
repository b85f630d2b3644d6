#!/usr/bin/python3
"""The tables of chapters/13_experts/results.md, rendered from the kept
files (the test ch13_results_tables checks that results.md holds what this
prints).

    python3 tables.py models measured/bench_X_models.jsonl...          # ch13_bench --measure models --json
    python3 tables.py all_to_all WHERE=measured/bench_X.jsonl...       # ch13_bench --measure all_to_all --json
    python3 tables.py kept measured/bench_X_kept.jsonl RING.jsonl      # ch13_bench --measure kept, and ch12_bench --measure memory
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


def kept(path, ring_path):
    ring = {row["variant"]: row["kept_mib"] for row in rows(ring_path)}  # Chapter 12's, "cp=N"
    print("| cp | positions a rank holds | planned (ex13.4) MiB | counted, the GPT alone MiB | planned / counted "
          "| counted, Chapter 12's ring attention MiB | planned / ring |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows(path):
        with_ring = ring.get(row["variant"])
        print(f"| {row['cp']} | {1024 // row['cp']} | {row['planned_mib']:.2f} | {row['counted_mib']:.2f} | "
              f"{row['vs_counted']:.3f}× | {with_ring:.2f} | {row['planned_mib'] / with_ring:.3f}× |")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "models":
        models(sys.argv[2:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "all_to_all":
        all_to_all(sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "kept":
        kept(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
