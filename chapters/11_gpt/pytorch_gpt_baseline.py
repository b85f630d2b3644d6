#!/usr/bin/python3
"""PyTorch's own GPT, the baseline for `workbook bench ch11`.

The same work as ch11_train at data ranks only (no tensor or pipeline
group): the model of workbook/gpt.hpp (token embedding + learned positions,
pre-LayerNorm blocks of causal attention and a GELU MLP, a final LayerNorm,
the output tied to the token embedding), GPT-2's initialisation, drawn from
the same seed in the same order, so that both start from the same weights;
Adam at the same rate, the same windows of the Jargon File drawn from the
same generator (seed + 1), the same held-out windows (seed + 2), 3 untimed
warm-up steps, and a step's time as ch11_train takes it (the median over the
timed steps, from the batch in hand to the loss on the host).

At one rank it is plain PyTorch eager; started as several ranks (mpirun's,
srun's or torchrun's variables) it wraps the model in DistributedDataParallel
(gloo), each rank taking its rows of the global batch as ch11_train's data
ranks do; with --tensor equal to the ranks it splits each block over them
with PyTorch's own tensor parallelism instead (pytorch_gpt_tensor_parallel.py),
and with --pipeline equal to the ranks it runs PyTorch's own 1F1B pipeline
(pytorch_gpt_pipeline.py). Both show how they split the model: read them
after ex11.1 and ex11.4.
--compile trains through torch.compile.

    python3 pytorch_gpt_baseline.py --steps 30 --threads 1 --json out.jsonl
    python3 pytorch_gpt_baseline.py --steps 30 --threads 1 --compile
    mpirun -n 2 python3 pytorch_gpt_baseline.py --steps 30 --threads 1
    mpirun -n 2 python3 pytorch_gpt_baseline.py --steps 30 --threads 1 --tensor 2
    mpirun -n 2 python3 pytorch_gpt_baseline.py --steps 30 --threads 1 --pipeline 2 --micro-batches 4
"""
import argparse
import gzip
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

WARMUP_STEPS = 3          # as ch11_train's kWarmupSteps
VALIDATION_WINDOWS = 64   # as ch11_train's kValidationWindows
CORPUS = "jargon.txt"

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "01_single_device"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "03_ddp"))
from pytorch_baseline import peak_memory_bytes  # noqa: E402  (Chapter 1's: what the C++ programs report)
from pytorch_ddp_baseline import launch_env  # noqa: E402  (Chapter 3's: mpirun's, srun's or torchrun's rank)


class Attention(nn.Module):
    def __init__(self, width, heads, fused):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.projection = nn.Linear(width, width)
        self.heads, self.fused = heads, fused

    def forward(self, x):
        n, t, width = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        if self.fused:
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(2, 3)).float() / math.sqrt(q.shape[-1])
            future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            attended = torch.softmax(scores.masked_fill(future, float("-inf")), -1).to(v.dtype) @ v
        return self.projection(attended.transpose(1, 2).reshape(n, t, width))


class Block(nn.Module):
    def __init__(self, width, heads, fused):
        super().__init__()
        # Registered in gpt.hpp's order, so that the initialisation draws come in its order.
        self.norm1 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.attention = Attention(width, heads, fused)
        self.expand = nn.Linear(width, 4 * width)
        self.contract = nn.Linear(4 * width, width)

    def forward(self, x):
        h = x + self.attention(self.norm1(x))
        return h + self.contract(F.gelu(self.expand(self.norm2(h))))


class Gpt(nn.Module):
    def __init__(self, layers, width, heads, context, vocabulary=256, fused=True):
        super().__init__()
        self.tokens = nn.Embedding(vocabulary, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, fused) for _ in range(layers))
        self.final_norm = nn.LayerNorm(width)
        residual_std = 0.02 / math.sqrt(2 * layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "norm" in name:
                    continue
                if name.endswith("bias"):
                    p.zero_()
                else:
                    residual = "projection.weight" in name or "contract.weight" in name
                    p.normal_(0.0, residual_std if residual else 0.02)

    def forward(self, bytes_):
        x = self.tokens(bytes_) + self.positions(torch.arange(bytes_.shape[1], device=bytes_.device))
        for block in self.blocks:
            x = block(x)
        return self.final_norm(x) @ self.tokens.weight.t()


def load_corpus(data_dir):
    """The Jargon File's bytes, found where ch11_train looks (text_corpus.hpp):
    --data, $WORKBOOK_DATA, ./data, the source tree's data/, Debian's jargon-text."""
    here = os.path.dirname(os.path.abspath(__file__))
    places = [data_dir] if data_dir else ([os.environ["WORKBOOK_DATA"]] if os.environ.get("WORKBOOK_DATA") else
                                          ["data", os.path.join(here, "..", "..", "data"),
                                           "/usr/share/doc/jargon-text"])
    for place in places:
        for name, opener in ((CORPUS, open), (CORPUS + ".gz", gzip.open)):
            path = os.path.join(place, name)
            if os.path.exists(path):
                with opener(path, "rb") as f:
                    text = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
                held_out = int(text.numel() * 0.1)
                return text[:-held_out], text[-held_out:]
    sys.exit(f"error: {CORPUS}(.gz) not found in {', '.join(places)} (data/README.md says how to get it)")


def sample_windows(text, rows, context, generator):
    """text_corpus.cpp's sample_windows: the same draws give the same windows."""
    starts = torch.randint(0, text.numel() - context, (rows, 1), generator=generator, dtype=torch.int64)
    windows = text[starts + torch.arange(context + 1)].long()
    return windows[:, :context].contiguous(), windows[:, 1:].contiguous()


def rendezvous():
    """Where the ranks meet: a file every rank of the job names alike, in /tmp,
    which the emulated cluster's nodes share with this machine; each rank then
    connects from its own host name's address (each node's own /etc/hosts)."""
    if os.environ.get("MASTER_ADDR"):
        return "env://"
    job = (os.environ.get("OMPI_MCA_ess_base_jobid") or
           f"{os.environ.get('SLURM_JOB_ID', '')}.{os.environ.get('SLURM_STEP_ID', '')}")
    return f"file:///tmp/workbook-ddp-{os.getuid()}-{job}"


def variant_of(args, world):
    return ("pytorch-tp" if args.tensor > 1 else "pytorch-pp" if args.pipeline > 1 else "pytorch-ddp" if world > 1 else "pytorch-compile" if args.compile
            else "pytorch-masked" if args.masked else "pytorch-python")


def write_profile(profile, path, impl, step_seconds):
    """op_profile.hpp's lines: each operation's self time, summed by (name,
    its outermost caller, inside backward or not)."""
    sums = {}
    for event in profile.function_events:
        ancestors, parent = [], event.cpu_parent
        while parent is not None:
            ancestors.append(parent)
            parent = parent.cpu_parent
        root = ancestors[-1].name if ancestors else event.name
        backward = any(e.name.startswith("autograd::engine::evaluate_function") for e in [event] + ancestors)
        calls, self_us = sums.get((event.name, root, backward), (0, 0.0))
        sums[(event.name, root, backward)] = (calls + 1, self_us + event.self_cpu_time_total)
    with open(path, "w") as out:
        print(json.dumps({"type": "profile", "impl": impl, "steps": len(step_seconds), "steps_s": sum(step_seconds)}),
              file=out)
        for (name, root, backward), (calls, self_us) in sorted(sums.items()):
            print(json.dumps({"type": "op", "impl": impl, "name": name, "root": root, "backward": backward,
                              "calls": calls, "self_us": self_us}), file=out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in (("--layers", 4), ("--width", 256), ("--heads", 4), ("--context", 128), ("--steps", 200),
                          ("--batch", 16), ("--micro-batches", 1), ("--seed", 0), ("--threads", 1),
                          ("--sample", 0), ("--report-every", 25), ("--tensor", 1), ("--pipeline", 1)):
        p.add_argument(flag, type=int, default=default)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--data", default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", default=None)
    p.add_argument("--masked", action="store_true",
                   help="attention as gpt.cpp's unfused path computes it (scores, mask, softmax), not "
                        "scaled_dot_product_attention")
    p.add_argument("--profile", default=None,
                   help="the timed steps, operation by operation, into this file (the lines of workbook/op_profile.hpp)")
    p.add_argument("--overlap", action="store_true",
                   help="accepted for ch11_train's sake: DDP always all-reduces its buckets during backward")
    p.add_argument("--bucket-mib", type=float, default=None,
                   help="DDP's bucket_cap_mb (its default: 25), as ch11_train's --bucket-mib")
    p.add_argument("--compile", action="store_true",
                   help="train through torch.compile (its compilation falls in the untimed warm-up steps)")
    args = p.parse_args()
    if (args.tensor > 1 or args.pipeline > 1) and (args.compile or args.masked):
        sys.exit("error: --tensor and --pipeline run the fused attention, eager (no --compile, no --masked)")
    if args.tensor > 1 and args.pipeline > 1:
        sys.exit("error: one axis at a time: --tensor or --pipeline")
    for path in (args.profile, args.json):  # a path that cannot be written fails now, not after training
        if path:
            try:
                open(path, "a").close()
            except OSError as e:
                sys.exit(f"error: cannot write {path}: {e.strerror}")

    rank, world = launch_env()
    split = args.tensor * args.pipeline  # the ranks of one data rank
    if world % split:
        sys.exit(f"error: {world} ranks do not make groups of {split}")
    data, data_rank = world // split, rank // split  # ch11_train's mesh, one axis split at most
    if split > 1 and data > 1:
        sys.exit("error: --tensor and --pipeline run one group: as many ranks as they name")
    if args.pipeline > args.layers:
        sys.exit(f"error: {args.pipeline} pipeline stages for {args.layers} layers: at most one stage a layer")
    rows = args.batch // data
    if args.batch % (data * args.micro_batches):
        sys.exit(f"error: --batch {args.batch} does not cut into {data} data ranks x {args.micro_batches} micro-batches")
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    train_text, validation_text = load_corpus(args.data)

    torch.manual_seed(args.seed)
    model = Gpt(args.layers, args.width, args.heads, args.context, fused=not args.masked).to(device)
    parameters = sum(t.numel() for t in model.parameters())
    pipeline = None
    if world > 1:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        dist.init_process_group("gloo", init_method=rendezvous(), rank=rank, world_size=world)
        if args.tensor > 1:
            from pytorch_gpt_tensor_parallel import tensor_parallel
            model = tensor_parallel(model, args.tensor)
        elif args.pipeline > 1:
            from pytorch_gpt_pipeline import Pipeline
            pipeline = Pipeline(model, rank, args.pipeline, args.micro_batches, device)
            model = pipeline.part  # this stage's parameters, for Adam
        else:
            # Buckets (the first 1 MiB, the others 25 MiB unless --bucket-mib), all-reduced as backward fills them.
            model = DistributedDataParallel(model, **({"bucket_cap_mb": args.bucket_mib} if args.bucket_mib else {}))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    train_model = torch.compile(model) if args.compile else model
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def loss_of(inputs, targets):
        logits = train_model(inputs)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))

    windows = torch.Generator().manual_seed(args.seed + 1)
    step_seconds, loss = [], 0.0
    started = time.perf_counter()
    profile = None
    for step in range(1, args.steps + 1):
        if step == WARMUP_STEPS + 1 and args.profile and rank == 0:
            profile = torch.autograd.profiler.profile()
            profile.__enter__()
        inputs, targets = sample_windows(train_text, args.batch, args.context, windows)
        inputs, targets = (t[data_rank * rows:(data_rank + 1) * rows].to(device) for t in (inputs, targets))
        sync()
        step_started = time.perf_counter()
        optimizer.zero_grad()
        if pipeline:
            step_loss = pipeline.step(inputs, targets)  # the micro-batches through 1F1B
        else:
            step_loss = 0.0
            for micro in range(args.micro_batches):  # gradients accumulate over the micro-batches
                part = slice(micro * rows // args.micro_batches, (micro + 1) * rows // args.micro_batches)
                micro_loss = loss_of(inputs[part], targets[part]) / args.micro_batches
                micro_loss.backward()
                step_loss += micro_loss.detach()
        optimizer.step()
        if world > 1 and not pipeline:
            dist.all_reduce(step_loss, op=dist.ReduceOp.AVG)
        loss = float(step_loss)
        if step > WARMUP_STEPS:
            step_seconds.append(time.perf_counter() - step_started)
        if rank == 0 and (step % args.report_every == 0 or step == args.steps):
            print(f"step {step:>5}  loss {loss:.4f}", flush=True)
    training_s = time.perf_counter() - started
    if profile:
        profile.__exit__(None, None, None)
        write_profile(profile, args.profile, variant_of(args, world), step_seconds)

    held_out = torch.Generator().manual_seed(args.seed + 2)
    inputs, targets = sample_windows(validation_text, VALIDATION_WINDOWS - VALIDATION_WINDOWS % data,
                                     args.context, held_out)
    model.eval()
    with torch.no_grad():
        validation_loss = (pipeline.evaluate(inputs, targets) if pipeline else
                           float(loss_of(inputs.to(device), targets.to(device))))
    if world > 1:  # the rendezvous file, once every rank is past needing it
        dist.barrier()
        dist.destroy_process_group()
        if rank == 0 and rendezvous().startswith("file://"):
            os.remove(rendezvous()[len("file://"):])
    step_s = statistics.median(step_seconds) if step_seconds else 0.0
    variant = variant_of(args, world)
    result = {
        "type": "result", "chapter": "ch11", "config": variant, "device": str(device), "ranks": world,
        "threads": args.threads, "epochs": 1, "batch": args.batch, "local_batch": rows,
        "train_samples": int(train_text.numel()), "test_loss": validation_loss,
        "samples_per_s": args.batch / step_s if step_s else 0.0, "epoch_s": training_s,
        "peak_mem_bytes": peak_memory_bytes(device),
        "step_s": step_s, "train_loss": loss, "validation_loss": validation_loss, "parameters": parameters,
        "attention": "masked" if args.masked else "scaled_dot_product_attention",
        "torch_version": torch.__version__,
    }
    if rank == 0:
        print(f"result: {variant}, {parameters} parameters: train loss {loss:.4f}, validation loss "
              f"{validation_loss:.4f} (nats per byte), {step_s:.3f} s a step (median)")
        if args.json:
            with open(args.json, "w") as out:
                print(json.dumps(result), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
