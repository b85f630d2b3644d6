#!/usr/bin/python3
"""PyTorch's own DistributedDataParallel (Python, gloo): the baseline for `workbook bench ch03`.

The same work as ch03_train: FashionCNN (the model of Chapter 1's baseline),
Adam, the global batch split evenly over the ranks, a DistributedSampler
seeded with seed + epoch, 5 untimed warm-up steps, samples/s counted over all
ranks, evaluation split over the ranks and summed. Started like ch03_train,
one process per rank (rank and size from mpirun's, srun's or torchrun's
variables); the ranks meet on a local TCP port derived from their parent's
process id (mpirun's, the same for every rank on this machine).

    mpirun -n 2 python3 pytorch_ddp_baseline.py --epochs 1 --train-samples 10000 --threads 1 --json out.jsonl
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "01_single_device"))
from pytorch_baseline import FashionCNN, load  # noqa: E402  (Chapter 1's model and data loading)

WARMUP_STEPS = 5


def launch_env():
    for rank, size in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"),
                       ("RANK", "WORLD_SIZE")):
        if rank in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return 0, 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=100, help="the global batch")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--train-samples", type=int, default=None)
    p.add_argument("--data", default=os.environ.get("WORKBOOK_DATA", "/usr/share/datasets/fashion-mnist"))
    p.add_argument("--json", default=None)
    args = p.parse_args()

    rank, world = launch_env()
    if args.batch % world:
        sys.exit(f"error: --batch {args.batch} does not divide among {world} ranks")
    port = 20000 + os.getppid() % 20000
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train_x, train_y = load(args.data, "train", args.train_samples)
    test_x, test_y = load(args.data, "t10k")
    model = DistributedDataParallel(FashionCNN())  # broadcasts rank 0's weights; buckets of 25 MiB
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    local_batch = args.batch // world
    sampler = DistributedSampler(range(train_x.shape[0]), num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed)

    timed_samples, timed_seconds, epoch_seconds = 0, 0.0, []
    for epoch in range(1, args.epochs + 1):
        model.train()
        sampler.set_epoch(epoch)
        indices = torch.tensor(list(iter(sampler)), dtype=torch.int64)
        warmup = WARMUP_STEPS if epoch == 1 else 0
        started = time.perf_counter()
        for step, begin in enumerate(range(0, indices.shape[0], local_batch)):
            if step == warmup:
                clock = time.perf_counter()
            rows = indices[begin:begin + local_batch]
            x, y = train_x.index_select(0, rows), train_y.index_select(0, rows)
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()  # DDP averages the gradients during backward
            optimizer.step()
            if step >= warmup:
                timed_samples += rows.shape[0] * world
        timed_seconds += time.perf_counter() - clock
        epoch_seconds.append(time.perf_counter() - started)

    model.eval()
    counts = torch.zeros(2, dtype=torch.int64)
    with torch.no_grad():
        mine = torch.arange(rank, test_x.shape[0], world)
        for begin in range(0, mine.shape[0], 1000):
            rows = mine[begin:begin + 1000]
            logits = model.module(test_x.index_select(0, rows))
            counts[0] += int((logits.argmax(1) == test_y.index_select(0, rows)).sum())
            counts[1] += rows.shape[0]
    dist.all_reduce(counts)
    peak = torch.tensor([int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024])
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    result = {
        "type": "result", "chapter": "ch03", "config": "pytorch-ddp", "device": "cpu", "ranks": world,
        "threads": args.threads, "epochs": args.epochs, "batch": args.batch, "train_samples": train_x.shape[0],
        "test_accuracy": int(counts[0]) / int(counts[1]), "samples_per_s": timed_samples / timed_seconds,
        "epoch_s": sum(epoch_seconds) / len(epoch_seconds), "peak_mem_bytes": int(peak),
        "torch_version": torch.__version__,
    }
    if rank == 0:
        print(f"result: test accuracy {result['test_accuracy']:.4f}, {result['samples_per_s']:.1f} samples/s over "
              f"{world} rank(s), {result['epoch_s']:.2f} s/epoch")
        if args.json:
            with open(args.json, "w") as f:
                f.write(json.dumps(result) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
