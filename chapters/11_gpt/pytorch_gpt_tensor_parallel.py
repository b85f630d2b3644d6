"""PyTorch's own tensor parallelism for the bench's GPT (pytorch_gpt_baseline.py
--tensor N): torch.distributed.tensor.parallel's ColwiseParallel and
RowwiseParallel on each block's Linears. Its plan (tensor_parallel below) is
ex11.1's answer: read it after.

Note: [three Linears for the fused qkv] Each block's fused qkv becomes three
Linears holding the same rows (the same weights), so that ColwiseParallel's
contiguous rows of each are whole heads (why the fused one would not do is
ex11.1's question).

Note: [the embedding and the output replicated] ch11_train splits the
tied embedding and the output's logits by vocabulary (ex11.2, ex11.4).
Here they stay whole on every rank, as a parallelize plan leaves what it
does not name: each rank computes all 256 logits (a small product at this
vocabulary) and the same gradient for the tied weight, so no rank needs
another's. The loss and every parameter's update are the same as one
process's; the work and the messages outside the blocks are not ch11's.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class SplitAttention(nn.Module):
    """Causal attention with q, k and v as three Linears (Note [three Linears for the fused qkv])."""

    def __init__(self, attention, width, heads):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        with torch.no_grad():
            for i, linear in enumerate((self.q, self.k, self.v)):
                linear.weight.copy_(attention.qkv.weight[i * width:(i + 1) * width])
                linear.bias.copy_(attention.qkv.bias[i * width:(i + 1) * width])
        self.projection = attention.projection
        self.head_size = width // heads

    def forward(self, x):
        n, t, _ = x.shape
        # This rank's heads: the -1 is heads / tensor ranks once q, k, v are split.
        q, k, v = (f(x).view(n, t, -1, self.head_size).transpose(1, 2) for f in (self.q, self.k, self.v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.projection(attended.transpose(1, 2).reshape(n, t, -1))


def tensor_parallel(model, ranks):
    """`model` (pytorch_gpt_baseline.Gpt, the same whole weights on every rank)
    with each block split over `ranks` ranks of the default process group."""
    mesh = init_device_mesh(model.tokens.weight.device.type, (ranks,))
    plan = {"attention.q": ColwiseParallel(), "attention.k": ColwiseParallel(), "attention.v": ColwiseParallel(),
            "attention.projection": RowwiseParallel(), "expand": ColwiseParallel(), "contract": RowwiseParallel()}
    for block in model.blocks:
        block.attention = SplitAttention(block.attention, model.tokens.weight.shape[1], block.attention.heads)
        parallelize_module(block, mesh, plan)
    return model
