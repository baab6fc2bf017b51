"""What channels_last does to EfficientNet-B0's depthwise convolutions and BatchNorms on this GPU.

    OUT=/some/dir python3 scripts/h200/depthwise_layouts.py

``layout_conversion`` withholds its gain where the depthwise convolutions that channels_last
moves from PyTorch's own kernels (NCHW) to cuDNN's (channels_last) take as long as it saves
(docs/diagnose.md, the counterfactual suite's third pass): the NCHW trace cannot time cuDNN's
kernels. This measures both, for EfficientNet-B0's depthwise shapes at batch 64 in bf16
(the ``efficientnet_b0_pageable_nchw_train`` workload), forward and backward, and its BatchNorm
shapes likewise: per shape and layout the median of ROUNDS rounds of ITERS calls timed with CUDA
events (layouts alternate), and the kernel names of one profiled call. Writes
$OUT/depthwise_layouts.json. Needs only torch.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch.profiler import ProfilerActivity, profile

DEV = "cuda"
ITERS = 20
ROUNDS = 5
BATCH = 64
# (channels, spatial size, kernel, stride): EfficientNet-B0's depthwise convolutions
# (torchvision efficientnet_b0, the shapes of the committed trace's aten::_conv_depthwise2d)
DEPTHWISE = [(32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 5, 2),
             (240, 28, 5, 1), (240, 28, 3, 2), (480, 14, 3, 1), (480, 14, 5, 1),
             (672, 14, 5, 1), (672, 14, 5, 2), (1152, 7, 5, 1), (1152, 7, 3, 1)]
BATCH_NORM = [(32, 112), (96, 112), (144, 56), (240, 28), (480, 14), (672, 14), (1152, 7)]


def _timed_ms(fn: Callable[[], None]) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(ITERS):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / ITERS


def _kernels(fn: Callable[[], None]) -> list[str]:
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name[:120] for e in prof.events() if e.device_type.name == "CUDA"})


def _depthwise(c: int, size: int, k: int, stride: int, fmt: torch.memory_format
               ) -> Callable[[], None]:
    x = torch.randn(BATCH, c, size, size, device=DEV, dtype=torch.bfloat16)
    x = x.to(memory_format=fmt).requires_grad_()
    w = torch.randn(c, 1, k, k, device=DEV, dtype=torch.bfloat16)
    w = w.to(memory_format=fmt).requires_grad_()

    def step() -> None:
        y = F.conv2d(x, w, stride=stride, padding=k // 2, groups=c)
        y.backward(torch.ones_like(y))
    return step


def _batch_norm(c: int, size: int, fmt: torch.memory_format) -> Callable[[], None]:
    x = torch.randn(BATCH, c, size, size, device=DEV, dtype=torch.bfloat16)
    x = x.to(memory_format=fmt).requires_grad_()
    bn = torch.nn.BatchNorm2d(c).to(DEV)

    def step() -> None:
        y = bn(x)
        y.backward(torch.ones_like(y))
    return step


def _measure(name: str, make: Callable[[torch.memory_format], Callable[[], None]]) -> dict:
    formats = {"nchw": torch.contiguous_format, "channels_last": torch.channels_last}
    fns = {label: make(fmt) for label, fmt in formats.items()}
    times: dict[str, list[float]] = {label: [] for label in fns}
    for _ in range(ROUNDS):
        for label, fn in fns.items():
            times[label].append(_timed_ms(fn))
    row = {"shape": name, **{f"{k}_ms": statistics.median(v) for k, v in times.items()},
           "kernels": {label: _kernels(fn) for label, fn in fns.items()}}
    print(f"{name:28s} nchw {row['nchw_ms']:.3f} ms  channels_last {row['channels_last_ms']:.3f}"
          " ms", flush=True)
    return row


def main() -> None:
    out = Path(os.environ.get("OUT", ".")) / "depthwise_layouts.json"
    torch.backends.cudnn.benchmark = True
    rows = [_measure(f"dw c{c} {s}x{s} k{k} s{st}",
                     lambda fmt, c=c, s=s, k=k, st=st: _depthwise(c, s, k, st, fmt))
            for c, s, k, st in DEPTHWISE]
    rows += [_measure(f"bn c{c} {s}x{s}", lambda fmt, c=c, s=s: _batch_norm(c, s, fmt))
             for c, s in BATCH_NORM]
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "batch": BATCH, "iters": ITERS,
           "rounds": ROUNDS, "rows": rows}
    out.write_text(json.dumps(doc, indent=1))
    for kind in ("dw", "bn"):
        part = [r for r in rows if r["shape"].startswith(kind)]
        print(kind, "total nchw", round(sum(r["nchw_ms"] for r in part), 3), "ms, channels_last",
              round(sum(r["channels_last_ms"] for r in part), 3), "ms")


if __name__ == "__main__":
    main()
