#!/usr/bin/python3
"""The tables of chapters/12_long_context/results.md, rendered from the kept
files (the test ch12_results_tables checks that results.md holds what this
prints).

    python3 tables.py bench measured/bench_X.jsonl...   # ch12_bench --json: its rows, one table
    python3 tables.py progress measured/exchange_progress_X.jsonl  # the wait of an exchange, with and without computing first
"""
import json
import statistics
import sys


def lines(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def bench(paths):
    print("| measure | ranks | variant | step ms | vs first | kept for backward, MiB | work imbalance |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for path in paths:
        for row in lines(path):
            if row.get("type") != "row":
                continue
            print(f"| {row['measure']} | {row['ranks']} | {row['variant']} | {row['step_ms']:.1f} | "
                  f"{row['vs_first']:.2f}× | {row['kept_mib']:.2f} | {row['work_imbalance']:.2f} |")


def progress(path):
    rows = lines(path)
    print("| computed outside MPI before the wait | exchanges | wait, median ms | lowest–highest ms |")
    print("|---:|---:|---:|---:|")
    for computed in sorted({r["computed_ms"] for r in rows}):
        waits = [r["wait_ms"] for r in rows if r["computed_ms"] == computed]
        print(f"| {computed} ms | {len(waits)} | {statistics.median(waits):.1f} | {min(waits):.1f}–{max(waits):.1f} |")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "bench":
        bench(sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "progress":
        progress(sys.argv[2])
    else:
        sys.exit(__doc__)
