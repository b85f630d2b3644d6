#!/usr/bin/python3
"""pytorch_gpt_baseline.py does ch11_train's work: on a small model, both
print the same loss at every step and the same held-out loss (to the 4
decimals they print), with the fused attention and with --masked. So the
bench's ratios compare the same work, not two models. Both --profile files
of those runs render (tables.py), their products and attention counted.

    PYTHON check_baseline.py CH11_TRAIN BASELINE_PY WORK_DIR
Run with the Python whose torch the baseline uses: the baseline runs in this
process (torch imported once). Exits 77 (skipped) when that Python has no torch.
"""
import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "chapters", "11_gpt"))
import tables  # noqa: E402  (the renderer of results.md's profile table)

SIZES = ["--layers", "2", "--width", "32", "--heads", "2", "--context", "16", "--batch", "4",
         "--micro-batches", "1", "--steps", "4", "--report-every", "1", "--threads", "1", "--sample", "0"]


def losses_in(printed, what):
    steps = re.findall(r"step +\d+ +loss ([0-9.]+)", printed)
    held_out = re.findall(r"validation loss ([0-9.]+)", printed)
    if len(steps) != 4 or not held_out:
        sys.exit(f"{what} printed no 4 step losses and a validation loss:\n{printed}")
    return steps + held_out[-1:]


def main(train, baseline_path, work):
    if importlib.util.find_spec("torch") is None:
        print(f"skipped: {sys.executable} has no torch")
        return 77
    spec = importlib.util.spec_from_file_location("pytorch_gpt_baseline", baseline_path)
    baseline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(baseline)
    os.makedirs(work, exist_ok=True)
    profiles = [os.path.join(work, "profile_reference.jsonl"), os.path.join(work, "profile_python.jsonl")]
    done = subprocess.run([train] + SIZES + ["--profile", profiles[0]], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        sys.exit(f"ch11_train failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    reference = losses_in(done.stdout, "ch11_train")
    for variant in (["--profile", profiles[1]], ["--masked"]):
        printed = io.StringIO()
        sys.argv = [baseline_path] + SIZES + variant
        with contextlib.redirect_stdout(printed):
            baseline.main()
        theirs = losses_in(printed.getvalue(), f"pytorch_gpt_baseline.py {' '.join(variant)}")
        if theirs != reference:
            sys.exit(f"pytorch_gpt_baseline.py {' '.join(variant)}: losses (4 steps, then held-out) {theirs}, "
                     f"ch11_train's {reference}: not the same work")
    for path in profiles:
        impl, ms, step_ms, _ = tables.read(path)
        if not (ms.get(tables.ROWS[0], 0) > 0 and ms.get(tables.ROWS[1], 0) > 0 and step_ms > 0):
            sys.exit(f"{path} ({impl}): no matrix products or no fused attention in its profile: {ms}")
    print(f"the same losses, fused and masked: {reference}; both profiles render")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
