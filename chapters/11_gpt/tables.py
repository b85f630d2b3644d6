#!/usr/bin/python3
"""The tables of chapters/11_gpt/results.md and results_bench.md, rendered
from the kept files (the tests ch11_results_tables and ch11_results_bench_tables
check that they hold what this prints).

    python3 tables.py bench measured/bench_X.jsonl PART   # `workbook bench ch11 --json`'s medians
    python3 tables.py profile FILE[=LABEL]...             # where a step's time goes
    python3 tables.py before-after measured/before_after_X.jsonl  # a step before and after a change
    python3 tables.py ops NAME,NAME... FILE[=LABEL]...    # those operations' calls a step
    python3 tables.py calls measured/reduce_scatter_calls_X.jsonl  # MPI calls timed alone
    python3 tables.py plan measured/plan_X.jsonl          # `ch11_plan --json`: each layout predicted / measured
    python3 tables.py plan-summary measured/plan_X.jsonl  # the same in one sentence: within 20%, the pick
    python3 tables.py links measured/plan_X.jsonl         # the links the plan fitted

The profile: from the --profile files of ch11_train and pytorch_gpt_baseline.py.
Each operation's self time (workbook/op_profile.hpp) goes into one row, by its
name, whether it ran in backward, and its outermost caller; the rows are ms a
step, the mean over the profiled steps. "Between operations" is the steps'
time less every operation's: the frontend's own work (C++ or Python) and the
profiler's.
"""
import json
import statistics
import sys

PRODUCTS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
ADAM = {"aten::add_", "aten::mul_", "aten::addcmul_", "aten::addcdiv_", "aten::sqrt", "aten::div", "aten::div_",
        "aten::lerp_", "aten::mul", "aten::add", "aten::sub", "aten::pow", "aten::zeros_like", "aten::fill_",
        "aten::copy_", "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::zero_", "aten::clone",
        "aten::select", "aten::as_strided", "aten::item", "aten::_local_scalar_dense", "aten::to",
        "aten::_to_copy", "aten::_fused_adam_"}
ROWS = ["matrix products (mm, addmm, bmm)", "attention: fused kernel", "attention: scores' mask and softmax",
        "GELU", "LayerNorm", "loss (log-softmax, NLL)", "embeddings", "optimizer (Adam, zero_grad)",
        "torch.compile's generated kernels", "copies, views and other elementwise", "between operations"]


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
    if "CompiledFxGraph" in name:  # Inductor's fused code: GELU, LayerNorm and the adds, one loop
        return ROWS[8]
    return ROWS[9]


def read(path):
    header, rows, calls = None, {}, 0
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if record["type"] == "profile":
                header = record
            elif record["type"] == "op":
                rows[row_of(record)] = rows.get(row_of(record), 0.0) + record["self_us"]
                calls += record["calls"]
    if header is None or header["steps"] < 1:
        sys.exit(f"error: {path} holds no profile line with steps")
    steps = header["steps"]
    ms = {row: us / 1000 / steps for row, us in rows.items()}
    step_ms = header["steps_s"] * 1000 / steps
    ms[ROWS[-1]] = step_ms - sum(ms.values())
    return header["impl"], ms, step_ms, calls / steps


def bench_table(path, part):
    """A part's medians, one row an implementation, as `workbook bench` printed them."""
    lines = [json.loads(line) for line in open(path)]
    rows = [row for row in lines if row["type"] == "bench" and row["part"] == part]
    batch = {line["impl"]: line["result"]["batch"] for line in lines
             if line["type"] == "bench_run" and line["part"] == part and line["ok"]}
    if not rows:
        sys.exit(f"error: {path} holds no bench line of part {part}")
    print(f"| {rows[0]['ranks']} rank(s) x {rows[0]['threads']} thread(s) | runs | s a step | sequences/s | "
          "held-out loss | vs reference |")
    print("|---|---:|---:|---:|---:|---:|")
    steps = {row["impl"]: batch[row["impl"]] / row["samples_per_s"] for row in rows}
    digits = 4 if min(steps.values()) < 0.05 else 3  # a GPU's milliseconds
    for row in rows:
        print(f"| {row['impl']} | {row['runs']} | {steps[row['impl']]:.{digits}f} | {row['samples_per_s']:.1f} | "
              f"{row['test_loss']:.4f} | {row['vs_reference']:.2f}x |")


def before_after_table(path):
    """The median step of each code on each run, and the cut: the runs took turns."""
    lines = [json.loads(line) for line in open(path) if json.loads(line)["type"] == "before_after"]
    print("| run | code | runs | s a step (median) | held-out loss | step cut |")
    print("|---|---|---:|---:|---:|---:|")
    for run in dict.fromkeys(line["run"] for line in lines):
        before = None
        for code in dict.fromkeys(line["code"] for line in lines):
            mine = [line for line in lines if line["run"] == run and line["code"] == code]
            step = statistics.median(line["step_s"] for line in mine)
            cut = f"{100 * (1 - step / before):.1f}%" if before else "–"
            before = before or step
            print(f"| {run} | {code} | {len(mine)} | {step:.4f} | {mine[0]['validation_loss']:.4f} | {cut} |")


def profile_table(paths):
    """One column a file; FILE=LABEL names its column (the file's impl otherwise)."""
    impls = []
    for path in paths:
        path, _, label = path.partition("=")
        impl, ms, step_ms, calls = read(path)
        impls.append((label or impl, ms, step_ms, calls))
    # A step of milliseconds (a GPU's) gets two decimals, a CPU's one.
    digits = 2 if max(step_ms for _, _, step_ms, _ in impls) < 50 else 1
    print("| ms a step | " + " | ".join(impl for impl, _, _, _ in impls) + " |")
    print("|---|" + "---:|" * len(impls))
    for row in ROWS:
        cells = []
        for _, ms, step_ms, _ in impls:
            value = ms.get(row, 0.0)
            cells.append(f"{value:.{digits}f} ({100 * value / step_ms:.0f}%)" if value else "–")
        print(f"| {row} | " + " | ".join(cells) + " |")
    print("| **the step (profiled)** | " + " | ".join(f"**{step_ms:.{digits}f}**" for _, _, step_ms, _ in impls) + " |")
    print("| step / matrix products | " +
          " | ".join(f"{step_ms / ms[ROWS[0]]:.2f}" for _, ms, step_ms, _ in impls) + " |")
    print("| operations a step (each one the profiler saw) | " +
          " | ".join(f"{calls:.0f}" for _, _, _, calls in impls) + " |")


def ops_table(names, paths):
    """Calls a step of each named operation (on a GPU, each is a kernel launched)."""
    columns = []
    for path in paths:
        path, _, label = path.partition("=")
        lines = [json.loads(line) for line in open(path)]
        header = next(line for line in lines if line["type"] == "profile")
        calls = {}
        for line in lines:
            if line["type"] == "op" and line["name"] in names:
                calls[line["name"]] = calls.get(line["name"], 0) + line["calls"]
        columns.append((label or header["impl"], {name: calls.get(name, 0) / header["steps"] for name in names}))
    print("| calls a step | " + " | ".join(label for label, _ in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name in names:
        print(f"| `{name}` | " + " | ".join(f"{calls[name]:.0f}" for _, calls in columns) + " |")


def plan_lines(path):
    lines = [json.loads(line) for line in open(path)]
    plans = sorted((line for line in lines if line["type"] == "plan"), key=lambda p: p["predicted"])
    if not plans:
        sys.exit(f"error: {path} holds no plan line")
    return plans


def layout_name(plan):
    return f"{plan['data']}×{plan['pipeline']}×{plan['tensor']}, m = {plan['micro_batches']}"


def plan_table(path):
    """`ch11_plan --json`'s layouts, fastest predicted first: seconds a step, predicted / measured."""
    plans = plan_lines(path)
    fastest = min(plans, key=lambda p: p["measured"])
    print("| layout d×p×t | predicted | measured | ratio | MFU |")
    print("|---|---:|---:|---:|---:|")
    for plan in plans:
        marks = [m for m, yes in (("predicted fastest", plan is plans[0]), ("measured fastest", plan is fastest)) if yes]
        name = layout_name(plan) + (f" ({', '.join(marks)})" if marks else "")
        print(f"| {name} | {plan['predicted']:.3f} | {plan['measured']:.3f} | "
              f"{plan['predicted'] / plan['measured']:.2f} | {plan['mfu']:.2f} |")


def plan_summary(path):
    """One sentence: how many layouts the plan predicted within 20%, and how its pick fared."""
    plans = plan_lines(path)
    ratios = [p["predicted"] / p["measured"] for p in plans]
    within = sum(1 for r in ratios if 0.8 <= r <= 1.2)
    fastest = min(plans, key=lambda p: p["measured"])
    pick = plans[0]
    verdict = ("the measured fastest too" if pick is fastest else
               f"{pick['measured'] / fastest['measured']:.2f}× the fastest, {layout_name(fastest)} "
               f"({fastest['measured']:.3f} s)")
    print(f"{within} of the {len(plans)} layouts within 20% of their prediction (predicted / measured "
          f"{min(ratios):.2f} to {max(ratios):.2f}); the plan's pick, {layout_name(pick)}, measured "
          f"{pick['measured']:.3f} s: {verdict}.")


def link_table(path):
    """The links `ch11_plan` fitted: α and β through the bandwidth-bound sizes, and the line through every size."""
    links = [json.loads(line) for line in open(path) if json.loads(line).get("kind") == "link"]
    if not links:
        sys.exit(f"error: {path} holds no link line")
    print("| link | α (ms) | β (ns a byte) | rate | every size: α (ms) | β (ns a byte) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, link in zip(("within a node", "between nodes"), links):
        rate = f"{8 / link['beta'] / 1e9:.2f} Gbit/s" if link["beta"] > 0 else "– (β ≤ 0)"
        print(f"| {name} | {link['alpha'] * 1e3:.2f} | {link['beta'] * 1e9:.3f} | {rate} | "
              f"{link['every_size_alpha'] * 1e3:.2f} | {link['every_size_beta'] * 1e9:.3f} |")


def calls_table(path):
    """measured/reduce_scatter_calls.c's lines: each MPI call's time, by rank count."""
    lines = [json.loads(line) for line in open(path)]
    print("| call | ranks | MB | s (median) | s (best) |")
    print("|---|---:|---:|---:|---:|")
    for line in lines:
        print(f"| `{line['call']}` | {line['ranks']} | {line['bytes'] / 1e6:.1f} | {line['median_s']:.3f} | "
              f"{line['best_s']:.3f} |")


def main(argv):
    if len(argv) < 2 or argv[0] not in ("bench", "profile", "before-after", "ops", "calls", "plan", "plan-summary",
                                        "links"):
        sys.exit(__doc__)
    one_file = {"plan": plan_table, "plan-summary": plan_summary, "links": link_table}
    if argv[0] in one_file:
        one_file[argv[0]](argv[1])
        return 0
    if argv[0] == "calls":
        calls_table(argv[1])
        return 0
    if argv[0] == "ops":
        ops_table(argv[1].split(","), argv[2:])
        return 0
    if argv[0] == "bench":
        bench_table(argv[1], int(argv[2]) if len(argv) > 2 else 0)
    elif argv[0] == "before-after":
        before_after_table(argv[1])
    else:
        profile_table(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
