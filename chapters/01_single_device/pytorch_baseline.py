#!/usr/bin/python3
"""The PyTorch (Python frontend) baseline for `workbook bench ch01`.

The same training as ch01_train: FashionCNN, Adam, the same batch size,
thread count, warm-up and timing rules, the whole dataset held in memory as
tensors and batches gathered with index_select from a seeded permutation.
Only the frontend differs, so the ratio of samples/s measures what C++ buys.

    python3 pytorch_baseline.py --epochs 1 --train-samples 20000 --threads 2 --json out.jsonl
    python3 pytorch_baseline.py ... --compile      # the same through torch.compile
    python3 pytorch_baseline.py ... --compile --compile-mode reduce-overhead --device cuda
                                                   # ... replayed as CUDA graphs
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

WARMUP_STEPS = 5  # untimed steps at the start of the first epoch, as in ch01_train


class FashionCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * 6 * 6, 600)
        self.dropout = nn.Dropout(0.25)
        self.fc2 = nn.Linear(600, 120)
        self.fc3 = nn.Linear(120, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = self.dropout(self.fc1(x.flatten(1)))
        return self.fc3(self.fc2(x))


def read_idx(directory, name, header):
    path = os.path.join(directory, name)
    opener = open if os.path.exists(path) else gzip.open
    path = path if os.path.exists(path) else path + ".gz"
    with opener(path, "rb") as f:
        data = f.read()
    return np.frombuffer(data, dtype=np.uint8, offset=header).copy()


def load(directory, prefix, limit=None):
    images = read_idx(directory, f"{prefix}-images-idx3-ubyte", 16).reshape(-1, 1, 28, 28)
    labels = read_idx(directory, f"{prefix}-labels-idx1-ubyte", 8)
    if limit:
        images, labels = images[:limit], labels[:limit]
    return (torch.from_numpy(images).float().div_(255.0), torch.from_numpy(labels).long())


def peak_memory_bytes(device):
    """What the C++ programs report (workbook/memory.hpp): the caching allocator's
    peak on a GPU, the process's peak resident memory on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--train-samples", type=int, default=None)
    p.add_argument("--data", default=os.environ.get("WORKBOOK_DATA", "/usr/share/datasets/fashion-mnist"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", default=None)
    p.add_argument("--compile", action="store_true",
                   help="train through torch.compile (its compilation falls in the untimed warm-up steps)")
    p.add_argument("--compile-mode", default="default", choices=["default", "reduce-overhead", "max-autotune"],
                   help="torch.compile's mode: reduce-overhead replays the compiled forward and backward as CUDA "
                        "graphs (the optimizer's step stays eager)")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    train_x, train_y = load(args.data, "train", args.train_samples)
    test_x, test_y = load(args.data, "t10k")
    train_x, train_y, test_x, test_y = (t.to(device) for t in (train_x, train_y, test_x, test_y))
    model = FashionCNN().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    train_model = torch.compile(model, mode=args.compile_mode) if args.compile else model
    n = train_x.shape[0]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    timed_samples, timed_seconds, epoch_seconds = 0, 0.0, []
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed + epoch)).to(device)
        warmup = WARMUP_STEPS if epoch == 1 else 0
        started = time.perf_counter()
        for step, begin in enumerate(range(0, n, args.batch)):
            if step == warmup:
                sync()
                clock = time.perf_counter()
            rows = order[begin:begin + args.batch]
            x, y = train_x.index_select(0, rows), train_y.index_select(0, rows)
            optimizer.zero_grad()
            loss = F.cross_entropy(train_model(x), y)
            loss.backward()
            optimizer.step()
            if step >= warmup:
                timed_samples += rows.shape[0]
        sync()
        timed_seconds += time.perf_counter() - clock
        epoch_seconds.append(time.perf_counter() - started)

    model.eval()
    correct = 0
    with torch.no_grad():
        for begin in range(0, test_x.shape[0], 1000):
            logits = model(test_x[begin:begin + 1000])
            correct += int((logits.argmax(1) == test_y[begin:begin + 1000]).sum())
    result = {
        "type": "result", "chapter": "ch01", "config": (f"pytorch-compile ({args.compile_mode})" if args.compile else "pytorch-python"), "device": str(device), "ranks": 1,
        "threads": args.threads, "epochs": args.epochs, "batch": args.batch, "train_samples": n,
        "test_accuracy": correct / test_x.shape[0], "samples_per_s": timed_samples / timed_seconds,
        "epoch_s": sum(epoch_seconds) / len(epoch_seconds),
        "peak_mem_bytes": peak_memory_bytes(device),
        "torch_version": torch.__version__,
    }
    print(f"result: test accuracy {result['test_accuracy']:.4f}, {result['samples_per_s']:.1f} samples/s, "
          f"{result['epoch_s']:.2f} s/epoch")
    if args.json:
        with open(args.json, "w") as f:
            f.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
