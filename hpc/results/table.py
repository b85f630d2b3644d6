#!/usr/bin/python3
"""The tables the lessons and the README show from the kept GPU checks.

    table.py runs FILE...    every program's run at one rank, grouped: how many
                             runs, samples/s (median, lowest, highest), the
                             held-out result and the peak GPU memory
    table.py ch09 FILE...    Chapter 9's runs one by one, with the bytes the
                             forward kept for backward, and a 16-bit run's
                             samples/s over float32's in the same file

FILE is a results file of `hpc/gpu_check.sh run` (this folder). A run is a
JSON result line a stage printed (ranks1, ch09-bf16, ch11), or one of the
`graph` stage's three Chapter 1 runs (its `result:` lines, in the stage's
order: eager, --device-adam, --cuda-graph). The lessons and the README
render these tables (`<!-- rendered: ... -->`) and CI checks them.
"""
import json
import os
import re
import statistics
import sys

GRAPH_RUNS = ["eager", "--device-adam", "--cuda-graph"]
GRAPH_RESULT = re.compile(r"^result: test accuracy ([0-9.]+) \(\d+/\d+\), ([0-9.]+) samples/s, "
                          r"[0-9.]+ s/epoch, peak memory ([0-9.]+) MiB$")
MIB = 1024 * 1024


def runs_in(path):
    """Each run in a results file: a dict with chapter, what, samples_per_s,
    held_out (text), peak_mib and the file's name."""
    name, stage, graph_index, found = os.path.basename(path), None, 0, []
    for line in open(path).read().splitlines():
        heading = re.match(r"^## (\S+): ", line)
        if heading:
            stage, graph_index = heading.group(1), 0
            continue
        if stage == "graph":
            match = GRAPH_RESULT.match(line)
            if match:
                found.append({"file": name, "chapter": "ch01", "what": f"ch01_train {GRAPH_RUNS[graph_index]}",
                              "samples_per_s": float(match.group(2)), "held_out": f"{float(match.group(1)):.4f}",
                              "peak_mib": float(match.group(3))})
                graph_index += 1
            continue
        if not line.startswith("{"):
            continue
        result = json.loads(line)
        if result.get("type") != "result" or "samples_per_s" not in result:
            continue  # ch04's bandwidth bench has no samples
        what = result["config"]
        if result.get("bfloat16"):
            what += ", --bf16"
        if "test_accuracy" in result:
            held_out = f"{result['test_accuracy']:.4f}"
        else:
            held_out = f"{result['validation_loss']:.3f} nats/byte"
        found.append({"file": name, "chapter": result["chapter"], "what": what,
                      "samples_per_s": result["samples_per_s"], "held_out": held_out,
                      "peak_mib": result["peak_mem_bytes"] / MIB,
                      "kept_mib": result.get("saved_activation_bytes", 0) / MIB})
    return found


def spread(values, form):
    low, high = min(values), max(values)
    return form.format(low) if form.format(low) == form.format(high) else f"{form.format(low)}–{form.format(high)}"


def table_runs(files):
    groups = {}
    for path in files:
        for run in runs_in(path):
            groups.setdefault((run["chapter"], run["what"]), []).append(run)
    print("| chapter | what ran (1 rank, --device cuda) | runs | samples/s, median | lowest–highest | "
          "test accuracy (or held-out loss) | peak GPU memory, MiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (chapter, what), runs in sorted(groups.items(), key=lambda item: item[0][0]):
        rates = [run["samples_per_s"] for run in runs]
        held = sorted({run["held_out"] for run in runs})
        held_text = held[0] if len(held) == 1 else f"{held[0]}–{held[-1]}"
        print(f"| {chapter} | {what} | {len(runs)} | {statistics.median(rates):,.0f} | "
              f"{spread(rates, '{:,.0f}')} | {held_text} | {spread([run['peak_mib'] for run in runs], '{:.1f}')} |")


def table_ch09(files):
    print("| file | compute | test accuracy | samples/s | vs fp32, same file | kept by forward | peak GPU memory |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for path in files:
        runs = [run for run in runs_in(path) if run["chapter"] == "ch09"]
        fp32 = [run["samples_per_s"] for run in runs if run["what"] == "fp32"]
        for run in runs:
            ratio = f"{run['samples_per_s'] / fp32[-1]:.2f}x" if fp32 and run["what"] != "fp32" else "–"
            print(f"| `{run['file']}` | {run['what']} | {run['held_out']} | {run['samples_per_s']:,.0f} | {ratio} | "
                  f"{run['kept_mib']:.1f} MiB | {run['peak_mib']:.1f} MiB |")


def main(argv):
    tables = {"runs": table_runs, "ch09": table_ch09}
    if len(argv) < 2 or argv[0] not in tables:
        sys.exit(__doc__.strip().split("\n\n")[1])
    missing = [path for path in argv[1:] if not os.path.isfile(path)]
    if missing:
        sys.exit(f"table.py: no file {missing[0]}")
    tables[argv[0]](argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
