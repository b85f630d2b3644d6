#!/usr/bin/env python3
"""The default tour's comparisons over several runs: for each row, its
samples/s in every run and their spread (max/min - 1); for each comparison a
row exists for, its value in every run. Run from the repository root:

    python3 results/tour/spread.py results/tour/*_default_*.jsonl
"""
import json
import sys


def rows(path):
    out = {}
    for line in open(path):
        d = json.loads(line)
        if d.get("type") == "tour" and d.get("ok"):
            out[(d["chapter"], d["configuration"])] = d
    return out


def main(paths):
    runs = [rows(p) for p in paths]
    keys = [k for k in runs[0] if all(k in r for r in runs)]
    print(f"{len(runs)} runs: " + ", ".join(paths))
    print(f"{'row':<70} {'samples/s in each run':<30} spread")
    for k in keys:
        rates = [r[k]["samples_per_s"] for r in runs]
        print(f"{k[0] + ' ' + k[1]:<70} {' '.join(f'{x:8.1f}' for x in rates):<30} {max(rates) / min(rates) - 1:5.1%}")

    def rate(r, ch, cfg):
        return r[(ch, cfg)]["samples_per_s"]

    def acc(r, ch, cfg):
        return r[(ch, cfg)].get("test_accuracy")

    comparisons = [
        ("ch02 DataParallel / ch01 single device (samples/s)",
         lambda r: rate(r, "ch02", "DataParallel, 2 replicas") / rate(r, "ch01", "single device")),
        ("ch03 DDP / ch02 DataParallel (samples/s)",
         lambda r: rate(r, "ch03", "DDP") / rate(r, "ch02", "DataParallel, 2 replicas")),
        ("ch04 ring overlapped / ch03 DDP, 2 nodes at 1 Gbit/s (samples/s): the overlap point",
         lambda r: rate(r, "ch04", "DDP, ring, overlapped, 2 nodes at 1 Gbit/s") / rate(r, "ch03", "DDP, 2 nodes at 1 Gbit/s")),
        ("ch04 test_acc - ch03 test_acc (the same model)",
         lambda r: acc(r, "ch04", "DDP, ring, overlapped") - acc(r, "ch03", "DDP")),
        ("ch04 busbw ring / library at the largest size, on one node",
         lambda r: r[("ch04", "DDP, ring, overlapped")]["busbw_ring"] / r[("ch04", "DDP, ring, overlapped")]["busbw_library"]),
        ("ch05 DDP + SyncBN / ch03 DDP (samples/s)",
         lambda r: rate(r, "ch05", "DDP + SyncBN") / rate(r, "ch03", "DDP")),
        ("ch06 naive batch 1024 diverged (1 = yes)",
         lambda r: float(r[("ch06", "naive: linear rule, no warm-up, batch 1024")].get("diverged", False))),
        ("ch06 LAMB 1024 test_acc - momentum SGD 128 test_acc",
         lambda r: acc(r, "ch06", "LAMB, warm-up, linear decay, batch 1024") - acc(r, "ch06", "momentum SGD, batch 128")),
        ("ch07 ZeRO 2 test_acc - ch03 DDP test_acc (the same model)",
         lambda r: acc(r, "ch07", "ZeRO stage 2") - acc(r, "ch03", "DDP")),
        ("ch08 strided / consecutive tensor groups, 2 nodes (samples/s)",
         lambda r: rate(r, "ch08", "hybrid, tensor groups strided, 2 nodes at 1 Gbit/s")
         / rate(r, "ch08", "hybrid, tensor groups consecutive, 2 nodes at 1 Gbit/s")),
        ("ch09 bf16 / fp32, 2 nodes (samples/s)",
         lambda r: rate(r, "ch09", "bf16 compute, bf16 on the wire, 2 nodes at 1 Gbit/s") / rate(r, "ch09", "fp32, 2 nodes at 1 Gbit/s")),
        ("ch11 held-out loss (nats a byte; 5.55 a uniform guess)",
         lambda r: r[("ch11", "GPT, data 2 x pipeline 2, 2 nodes at 1 Gbit/s")]["test_loss"]),
    ]
    print()
    for name, f in comparisons:
        try:
            values = [f(r) for r in runs]
        except (KeyError, TypeError, ZeroDivisionError):
            print(f"{name:<90} (missing in a run)")
            continue
        print(f"{name:<90} {' '.join(f'{v:7.3f}' for v in values)}")


if __name__ == "__main__":
    main(sys.argv[1:])
