"""The knobs a workload is built from, the fixes that turn them, and the category each fix is
the measured truth for.

A workload's step is built from ``Knobs``; its planted configuration is its base. A fix is the
base with one knob turned to the good side. The category mapping is the one of issue 15
("CUDA graph -> cpu_bound, compile -> unfused_elementwise, ..."); two choices are ours:
``sdpa`` counts for ``unfused_elementwise`` (the fused attention kernel removes the softmax,
scale and mask kernels between the two GEMMs, as fusion does), and ``host_prep_workers`` (host
preprocessing moved from the training loop into DataLoader workers) counts for ``host_busy``
(the GPU idles while the host does work other than launching, outside any DataLoader; the
finding's fix is to preprocess in DataLoader workers).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

Step = Callable[[], None]


@dataclass(frozen=True, kw_only=True)
class Knobs:
    """How a step is built. Every field's good side is the value a fix sets."""

    tf32: str = "default"
    """"off": FP32 matmuls and convolutions without TF32 (both backend flags False);
    "default": PyTorch's defaults (cuDNN TF32 on, matmul TF32 off); "on": both on."""
    bf16: bool = False
    """Forward (and loss) under ``torch.autocast(dtype=torch.bfloat16)``."""
    channels_last: bool = False
    """Conv models and their 4-D inputs in ``torch.channels_last``."""
    sdpa: bool = True
    """Attention through ``F.scaled_dot_product_attention`` instead of hand-written."""
    padded: bool = False
    """Misaligned dimensions padded to multiples of 8/64 (vocabulary, channels, features)."""
    loader_workers: bool = False
    """DataLoader with worker processes and pinned memory instead of ``num_workers=0``."""
    host_prep_workers: bool = False
    """Host preprocessing moved from the loop into DataLoader workers."""
    pinned: bool = False
    """Host tensors pinned and copied with ``non_blocking=True``, the next one prefetched."""
    sync_free: bool = False
    """No ``.item()``, boolean-mask indexing or ``isnan`` test inside the step."""
    reads_kept: bool = False
    """A twin's knob, which no fix sets: with ``sync_free``, the values the reads took are
    still computed and kept on the GPU (the reduction of ``x.mean().item()`` stays, the read
    goes), so the read's own cost and its inputs' are timed apart
    (``scripts/h200/read_feeders_twins.py``)."""
    no_empty_cache: bool = False
    """No ``torch.cuda.empty_cache()`` inside the step."""
    compile: bool = False
    """The model wrapped in ``torch.compile`` (default mode: no CUDA graphs)."""
    cuda_graph: bool = False
    """The whole step captured once and replayed as one CUDA graph."""


@dataclass(frozen=True)
class Fix:
    """One fix: the knob it turns, the value it sets, the category it is the truth for."""

    name: str
    knob: str
    value: Any
    category: str


FIXES: tuple[Fix, ...] = (
    Fix("cuda_graph", "cuda_graph", True, "cpu_bound"),
    Fix("compile", "compile", True, "unfused_elementwise"),
    Fix("tf32", "tf32", "on", "tensor_cores_unused"),
    Fix("bf16_autocast", "bf16", True, "tensor_cores_unused"),
    Fix("channels_last", "channels_last", True, "layout_conversion"),
    Fix("sdpa", "sdpa", True, "unfused_elementwise"),
    Fix("padded_shapes", "padded", True, "misaligned_shapes"),
    Fix("loader_workers", "loader_workers", True, "dataloader"),
    Fix("host_prep_workers", "host_prep_workers", True, "host_busy"),
    Fix("pinned_prefetch", "pinned", True, "h2d_transfer"),
    Fix("sync_free", "sync_free", True, "host_sync"),
    Fix("no_empty_cache", "no_empty_cache", True, "allocator_churn"),
)
FIX_BY_NAME = {fix.name: fix for fix in FIXES}


def turned(base: Knobs, fix: Fix) -> Knobs:
    """The base with the fix's knob turned."""
    return replace(base, **{fix.knob: fix.value})


@dataclass
class Ctx:
    """What a workload's builder gets: the knobs, the device and the smoke flag."""

    knobs: Knobs
    device: str
    smoke: bool

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        # cache_enabled=False: a CUDA graph cannot capture autocast's weight cache; the same
        # setting in every variant keeps the comparison fair. A CPU smoke run enters autocast
        # disabled: bf16 convolutions on a CPU without bf16 units take seconds a step.
        enabled = self.knobs.bf16 and (self.cuda or not self.smoke)
        return torch.autocast(self.device, dtype=torch.bfloat16, enabled=enabled,
                              cache_enabled=False)

    def model(self, module: nn.Module, *, train: bool = True) -> nn.Module:
        """The module on the device, in channels_last when asked, compiled when asked."""
        module = module.to(self.device).train(train)
        if self.knobs.channels_last:
            module = module.to(memory_format=torch.channels_last)
        if self.knobs.compile:
            module = torch.compile(module)  # type: ignore[assignment]
        return module

    def image(self, x: torch.Tensor) -> torch.Tensor:
        """A 4-D input in the layout the knobs ask for."""
        return x.contiguous(memory_format=torch.channels_last) if self.knobs.channels_last else x

    def adamw(self, params: Iterator[nn.Parameter], lr: float = 1e-4) -> torch.optim.Optimizer:
        # capturable keeps Adam's step counter on the device, which a CUDA graph needs.
        return torch.optim.AdamW(params, lr=lr, capturable=self.knobs.cuda_graph and self.cuda)

    def pin(self, x: torch.Tensor) -> torch.Tensor:
        return x.pin_memory() if self.cuda else x

    def empty_cache(self) -> None:
        if not self.knobs.no_empty_cache and self.cuda:
            torch.cuda.empty_cache()


def set_tf32(mode: str) -> None:
    """Apply a ``Knobs.tf32`` mode to the backend flags."""
    torch.backends.cuda.matmul.allow_tf32 = mode == "on"
    torch.backends.cudnn.allow_tf32 = mode != "off"


def train_step(ctx: Ctx, model: nn.Module, opt: torch.optim.Optimizer,
               loss_of: Callable[[nn.Module], torch.Tensor]) -> Step:
    """forward (under the knobs' autocast), backward, optimizer step, zero_grad."""
    def step() -> None:
        with ctx.autocast():
            loss = loss_of(model)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def infer_step(ctx: Ctx, model: nn.Module, run: Callable[[nn.Module], Any]) -> Step:
    """forward only, no grad, under the knobs' autocast."""
    @torch.no_grad()
    def step() -> None:
        with ctx.autocast():
            run(model)
    return step
