#!/usr/bin/python3
"""The tables of chapters/11_gpt/results.md, rendered from the kept files
(the test ch11_results_tables checks that results.md holds what this prints).

    python3 tables.py bench measured/bench_*.jsonl        # `workbook bench ch11 --json`'s medians
    python3 tables.py profile measured/profile_*.jsonl    # where a step's time goes

The profile: from the --profile files of ch11_train and pytorch_gpt_baseline.py.
Each operation's self time (workbook/op_profile.hpp) goes into one row, by its
name, whether it ran in backward, and its outermost caller; the rows are ms a
step, the mean over the profiled steps. "Between operations" is the steps'
time less every operation's: the frontend's own work (C++ or Python) and the
profiler's.
"""
import json
import sys

PRODUCTS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
ADAM = {"aten::add_", "aten::mul_", "aten::addcmul_", "aten::addcdiv_", "aten::sqrt", "aten::div", "aten::div_",
        "aten::lerp_", "aten::mul", "aten::add", "aten::sub", "aten::pow", "aten::zeros_like", "aten::fill_",
        "aten::copy_", "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::zero_", "aten::clone",
        "aten::select", "aten::as_strided", "aten::item", "aten::_local_scalar_dense", "aten::to",
        "aten::_to_copy", "aten::_fused_adam_"}
ROWS = ["matrix products (mm, addmm, bmm)", "attention: fused kernel", "attention: scores' mask and softmax",
        "GELU", "LayerNorm", "loss (log-softmax, NLL)", "embeddings", "optimizer (Adam, zero_grad)",
        "copies, views and other elementwise", "between operations"]


def row_of(op):
    name, root = op["name"], op["root"]
    if name in PRODUCTS:
        return ROWS[0]
    if "scaled_dot_product" in name or "flash_attention" in name:
        return ROWS[1]
    if "softmax" in name and "log_softmax" not in name or "masked_fill" in name or name == "aten::triu":
        return ROWS[2]
    if "gelu" in name:
        return ROWS[3]
    if "layer_norm" in name:
        return ROWS[4]
    if "log_softmax" in name or "nll_loss" in name or "cross_entropy" in name or "logsumexp" in name:
        return ROWS[5]
    if "embedding" in name:
        return ROWS[6]
    # The optimizer: Python's scope says so; the C++ Adam's element-wise ops
    # are their own roots, outside backward and outside any module's call.
    if root.startswith("Optimizer.") or (not op["backward"] and root == name and name in ADAM):
        return ROWS[7]
    return ROWS[8]


def read(path):
    header, rows = None, {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record["type"] == "profile":
                header = record
            elif record["type"] == "op":
                rows[row_of(record)] = rows.get(row_of(record), 0.0) + record["self_us"]
    if header is None or header["steps"] < 1:
        sys.exit(f"error: {path} holds no profile line with steps")
    steps = header["steps"]
    ms = {row: us / 1000 / steps for row, us in rows.items()}
    step_ms = header["steps_s"] * 1000 / steps
    ms[ROWS[-1]] = step_ms - sum(ms.values())
    return header["impl"], ms, step_ms


def bench_table(path):
    """Each part's medians: one row an implementation, as `workbook bench` printed them."""
    lines = [json.loads(line) for line in open(path)]
    for part in sorted({line["part"] for line in lines if line["type"] == "bench"}):
        rows = [line for line in lines if line["type"] == "bench" and line["part"] == part]
        print(f"| {rows[0]['ranks']} rank(s) x {rows[0]['threads']} thread(s) | runs | s a step | sequences/s | "
              "held-out loss | vs reference |")
        print("|---|---:|---:|---:|---:|---:|")
        for row in rows:
            print(f"| {row['impl']} | {row['runs']} | {16 / row['samples_per_s']:.3f} | {row['samples_per_s']:.1f} | "
                  f"{row['test_loss']:.4f} | {row['vs_reference']:.2f}x |")
        print()


def profile_table(paths):
    impls = [read(p) for p in paths]
    print("| ms a step | " + " | ".join(impl for impl, _, _ in impls) + " |")
    print("|---|" + "---:|" * len(impls))
    for row in ROWS:
        cells = []
        for _, ms, step_ms in impls:
            value = ms.get(row, 0.0)
            cells.append(f"{value:.1f} ({100 * value / step_ms:.0f}%)" if value else "–")
        print(f"| {row} | " + " | ".join(cells) + " |")
    print("| **the step (profiled)** | " + " | ".join(f"**{step_ms:.1f}**" for _, _, step_ms in impls) + " |")
    print("| step / matrix products | " +
          " | ".join(f"{step_ms / ms[ROWS[0]]:.2f}" for _, ms, step_ms in impls) + " |")


def main(argv):
    if len(argv) < 2 or argv[0] not in ("bench", "profile"):
        sys.exit(__doc__)
    if argv[0] == "bench":
        for path in argv[1:]:
            bench_table(path)
    else:
        profile_table(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
