"""PyTorch's own pipeline for the bench's GPT (pytorch_gpt_baseline.py
--pipeline N): torch.distributed.pipelining's Schedule1F1B over N stages, a
stage a rank, the layers cut as ch11's GptStage cuts them. Its step is
ex11.4's answer for the tied embedding: read it after.

Note: [the tied embedding on two stages] The first stage looks bytes up in
the token embedding and the last multiplies by it for the logits; each holds
its own copy, from the same whole weights, and the two stay one weight as
ch11's step keeps them (ex11.4's question).
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B


def layers_of_stage(layers, stage, stages):
    """gpt_stage.cpp's cut: [first, end) of this stage's blocks, the extra layers to the first stages."""
    base, extra = divmod(layers, stages)
    first = stage * base + min(stage, extra)
    return first, first + base + (1 if stage < extra else 0)


class Stage(nn.Module):
    """One stage of pytorch_gpt_baseline.Gpt: the embeddings on the first, its blocks, the
    final LayerNorm and the tied output on the last (a copy of the token embedding)."""

    def __init__(self, gpt, stage, stages):
        super().__init__()
        first, end = layers_of_stage(len(gpt.blocks), stage, stages)
        self.first, self.last = stage == 0, stage == stages - 1
        if self.first:
            self.tokens, self.positions = gpt.tokens, gpt.positions
        self.blocks = nn.ModuleList(gpt.blocks[first:end])
        if self.last:
            self.final_norm = gpt.final_norm
            self.output = nn.Parameter(gpt.tokens.weight.detach().clone())

    def tied(self):
        """This stage's copies of the tied embedding (Note [the tied embedding on two stages])."""
        return ([self.tokens.weight] if self.first else []) + ([self.output] if self.last else [])

    def forward(self, x):
        if self.first:
            x = self.tokens(x) + self.positions(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks:
            x = block(x)
        return self.final_norm(x) @ self.output.t() if self.last else x


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


class Pipeline:
    """This rank's stage of `gpt` and its 1F1B schedule over `stages` ranks (the whole job)."""

    def __init__(self, gpt, stage, stages, micro_batches, device):
        self.stage, self.stages, self.device = stage, stages, device
        self.part = Stage(gpt, stage, stages).to(device)
        # scale_grads (the default): each micro-batch's gradient divided by their number, the
        # mean over the global batch as ch11's step takes it.
        self.schedule = Schedule1F1B(PipelineStage(self.part, stage, stages, device), n_microbatches=micro_batches,
                                     loss_fn=loss_of)
        self.width = gpt.tokens.weight.shape[1]
        self.pair = dist.new_group([0, stages - 1])  # every rank makes it; the two ends use it

    def step(self, inputs, targets):
        """One step's forwards and backwards; the mean loss, on every rank."""
        losses = []
        if self.stage == 0:
            self.schedule.step(inputs)
        elif self.stage == self.stages - 1:
            self.schedule.step(target=targets, losses=losses)
        else:
            self.schedule.step()
        tied = self.part.tied()
        if tied:  # the first and the last stage, and they alone
            dist.all_reduce(tied[0].grad, group=self.pair)
        loss = torch.stack(losses).mean().detach() if losses else torch.zeros((), device=self.device)
        dist.broadcast(loss, self.stages - 1)
        return loss

    def evaluate(self, inputs, targets):
        """The loss of `inputs` through every stage, forward only, on every rank."""
        with torch.no_grad():
            x = inputs.to(self.device)
            if self.stage > 0:
                x = torch.empty(inputs.shape[0], inputs.shape[1], self.width, device=self.device)
                dist.recv(x, self.stage - 1)
            y = self.part(x)
            if self.stage < self.stages - 1:
                dist.send(y, self.stage + 1)
                loss = torch.zeros((), device=self.device)
            else:
                loss = loss_of(y, targets.to(self.device))
        dist.broadcast(loss, self.stages - 1)
        return float(loss)
