#!/usr/bin/python3
"""check_resume.py DIR LAUNCH... -- ARGS — a run interrupted after one epoch and
resumed from its checkpoint ends with weights bit-identical to a run that was
never interrupted (the result lines' weights_sha256 agree).

    check_resume.py /tmp/x mpiexec -n 2 ch03_train -- --train-samples 600
"""
import json
import os
import subprocess
import sys

directory, rest = sys.argv[1], sys.argv[2:]
split = rest.index("--")
launch, args = rest[:split], rest[split + 1:]
os.makedirs(directory, exist_ok=True)


def run(name, extra):
    out = os.path.join(directory, name + ".jsonl")
    command = launch + args + extra + ["--json", out]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout}\n{done.stderr}")
    return json.loads([line for line in open(out) if line.strip()][-1])


straight = run("straight", ["--epochs", "2", "--checkpoint", os.path.join(directory, "straight.pt")])
resumable = os.path.join(directory, "resumed.pt")
first = run("first", ["--epochs", "1", "--checkpoint", resumable])
resumed = run("resumed", ["--epochs", "2", "--checkpoint", resumable, "--resume"])
if resumed["epochs_trained"] != 1:
    sys.exit(f"the resumed run trained {resumed['epochs_trained']} epochs, expected 1 (it did not resume)")
if first["weights_sha256"] == straight["weights_sha256"]:
    sys.exit("one epoch and two epochs gave the same weights: the comparison would prove nothing")
if resumed["weights_sha256"] != straight["weights_sha256"]:
    sys.exit(f"resumed weights {resumed['weights_sha256'][:16]} differ from uninterrupted "
             f"{straight['weights_sha256'][:16]}")
if resumed["test_correct"] != straight["test_correct"]:
    sys.exit("same weights, different evaluation")
print(f"ok: resumed after epoch 1, weights bit-identical ({straight['weights_sha256'][:16]}), "
      f"test accuracy {straight['test_accuracy']:.4f}")
