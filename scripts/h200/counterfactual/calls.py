"""Steps that call their model several times: a recurrent cell unrolled by the loop, a convnet
on several crops, a denoiser applied in refinement rounds. Held out of the suite's parts (named
on the command line only): they test how ``torch.compile``'s cost per call of the model
(``aiprof.diagnose.compiled_host.calls_per_step``) carries to models it was not read from."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from counterfactual.hf import pick
from counterfactual.knobs import Ctx, Knobs, Step, train_step
from counterfactual.workload import Workload


class Cell(nn.Module):
    """A gated recurrent cell (GRU-like, written out: two linears, sigmoid and tanh)."""

    def __init__(self, inputs: int, hidden: int) -> None:
        super().__init__()
        self.gates = nn.Linear(inputs + hidden, 2 * hidden)
        self.candidate = nn.Linear(inputs + hidden, hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        z, r = torch.sigmoid(self.gates(torch.cat([x, h], -1))).chunk(2, -1)
        c = torch.tanh(self.candidate(torch.cat([x, r * h], -1)))
        return (1 - z) * h + z * c


def cell_bptt_train(ctx: Ctx) -> Step:
    """The cell called once per time step by the loop, backpropagated through time."""
    inputs, hidden, batch, steps = pick(ctx, (64, 256, 256, 24), (8, 16, 4, 3))
    cell = ctx.model(Cell(inputs, hidden))
    head = nn.Linear(hidden, 10).to(ctx.device)
    opt = ctx.adamw([*cell.parameters(), *head.parameters()])
    xs = torch.randn(steps, batch, inputs, device=ctx.device)
    y = torch.randint(0, 10, (batch,), device=ctx.device)

    def loss_of(m: nn.Module) -> torch.Tensor:
        h = torch.zeros(batch, hidden, device=ctx.device)
        for t in range(steps):
            h = m(xs[t], h)
        return F.cross_entropy(head(h).float(), y)
    return train_step(ctx, cell, opt, loss_of)


def small_convnet(width: int, classes: int = 100) -> nn.Sequential:
    layers: list[nn.Module] = []
    cin = 3
    for cout in (width, 2 * width, 2 * width, 4 * width):
        layers += [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                   nn.ReLU(inplace=True), nn.MaxPool2d(2)]
        cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


def multi_crop_convnet_train(ctx: Ctx) -> Step:
    """One convnet on six crops of the batch a step (multi-crop training), the losses averaged."""
    width, batch, size, crops = pick(ctx, (32, 32, 64, 6), (4, 2, 16, 2))
    model = ctx.model(small_convnet(width))
    images = [ctx.image(torch.randn(batch, 3, size, size, device=ctx.device))
              for _ in range(crops)]
    y = torch.randint(0, 100, (batch,), device=ctx.device)
    return train_step(ctx, model, ctx.adamw(model.parameters()), lambda m: torch.stack(
        [F.cross_entropy(m(x).float(), y) for x in images]).mean())


def refine_mlp_train(ctx: Ctx) -> Step:
    """A denoiser applied in eight refinement rounds, noise mixed in between, trained through
    all of them."""
    width, batch, rounds = pick(ctx, (512, 512, 8), (16, 4, 2))
    model = ctx.model(nn.Sequential(nn.Linear(width, 2 * width), nn.SiLU(),
                                    nn.Linear(2 * width, width)))
    target = torch.randn(batch, width, device=ctx.device)
    start = torch.randn(batch, width, device=ctx.device)

    def loss_of(m: nn.Module) -> torch.Tensor:
        x = start
        for k in range(rounds):
            x = x + m(x)
            x = 0.9 * x + 0.1 * torch.randn_like(x) / (k + 1)
        return (x.float() - target).square().mean()
    return train_step(ctx, model, ctx.adamw(model.parameters()), loss_of)


WORKLOADS = [
    Workload("cell_bptt_train", "custom", "train",
             "A gated recurrent cell (256 hidden) unrolled by the loop over 24 time steps, "
             "batch 256, backpropagated through time: 24 calls of the cell a step",
             ("compile",), Knobs(), cell_bptt_train),
    Workload("multi_crop_convnet_train", "custom", "train",
             "A 4-conv BatchNorm net on six 64x64 crops of a batch of 32 a step, the losses "
             "averaged: 6 calls of the net a step", ("compile",), Knobs(),
             multi_crop_convnet_train, frozenset({"channels_last"})),
    Workload("refine_mlp_train", "custom", "train",
             "A 512-wide MLP denoiser applied in 8 refinement rounds with noise mixed in "
             "between, batch 512, trained through all rounds: 8 calls a step", ("compile",),
             Knobs(), refine_mlp_train),
]
