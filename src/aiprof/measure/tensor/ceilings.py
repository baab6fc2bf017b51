"""``aiprof ceilings``: measure the real roofs of the current device.

Device-to-device copy bandwidth, GEMM FLOP/s per dtype, host-device bandwidth (pinned and
pageable) and kernel launch latency. On a CPU-only machine it measures memory-copy bandwidth,
GEMM FLOP/s and per-op dispatch time, and lists what it skipped. torch is imported inside.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiprof.measure.timing import median_us
from aiprof.tensor.ceilings_model import Ceilings

GPU_SIZES = {"copy_bytes": 1 << 30, "gemm": 8192, "h2d_bytes": 256 << 20, "launches": 2000}
CPU_SIZES = {"copy_bytes": 64 << 20, "gemm": 1024, "h2d_bytes": 0, "launches": 2000}
QUICK_SIZES = {"copy_bytes": 4 << 20, "gemm": 128, "h2d_bytes": 4 << 20, "launches": 50}


@dataclass(frozen=True)
class MeasuredCeilings:
    """What ``aiprof ceilings`` measured, and what it could not measure here."""

    device: str
    """``cuda:0`` or ``cpu``."""
    device_name: str
    ceilings: Ceilings
    gemm_size: int
    copy_bytes: int
    skipped: tuple[str, ...]
    """Measurements not possible on this device, with the reason."""


def measure_ceilings(
    *, quick: bool = False, repeats: int = 5, clock: Callable[[], int] = time.perf_counter_ns
) -> MeasuredCeilings:
    """Measure the current device (the first CUDA GPU, else the CPU)."""
    import torch

    cuda = torch.cuda.is_available()
    device = "cuda:0" if cuda else "cpu"
    sizes = QUICK_SIZES if quick else (GPU_SIZES if cuda else CPU_SIZES)
    name = torch.cuda.get_device_name(0) if cuda else _cpu_name()
    skipped: list[str] = []
    bandwidth = _copy_bandwidth(device, sizes["copy_bytes"], repeats, clock)
    matmul = {}
    for precision, dtype in _gemm_dtypes(torch, cuda).items():
        matmul[precision] = _gemm_flops(device, dtype, sizes["gemm"], repeats, clock, precision)
    if not cuda:
        skipped += ["tf32, fp16 GEMM (no tensor cores on a CPU)", "fp8 GEMM (no GPU)"]
    else:
        skipped.append("fp8 GEMM (needs torch._scaled_mm on sm_89+; not measured)")
    extra: dict[str, float] = {}
    if cuda:
        for pinned in (True, False):
            key = "h2d_pinned_bytes_per_s" if pinned else "h2d_pageable_bytes_per_s"
            extra[key] = _h2d_bandwidth(sizes["h2d_bytes"], pinned, repeats, clock)
    else:
        skipped += ["host-device bandwidth, pinned and pageable (no GPU)"]
        skipped += ["kernel launch latency (no GPU): the per-op dispatch time is given instead"]
    latency = _launch_latency_us(device, sizes["launches"], clock)
    ceilings = Ceilings(
        name=name,
        memory_bytes_per_s=bandwidth,
        matmul_flops_per_s=matmul,
        vector_flops_per_s=matmul.get("fp32", 0.0),
        launch_latency_us=latency,
        source=f"measured on {name} ({device}) by aiprof ceilings",
        extra=extra,
    )
    return MeasuredCeilings(
        device, name, ceilings, sizes["gemm"], sizes["copy_bytes"], tuple(skipped)
    )


def _gemm_dtypes(torch: Any, cuda: bool) -> dict[str, Any]:
    if cuda:
        return {
            "fp32": torch.float32,
            "tf32": torch.float32,
            "fp16": torch.float16,
            "bf16": torch.bfloat16,
        }
    return {"fp32": torch.float32, "bf16": torch.bfloat16}


def _copy_bandwidth(device: str, nbytes: int, repeats: int, clock) -> float:  # type: ignore[no-untyped-def]
    """Bytes read plus written per second by ``dst.copy_(src)`` (a D2D copy moves both)."""
    import torch

    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    us = median_us(lambda: dst.copy_(src), device=device, repeats=repeats, clock=clock)
    return 2 * src.numel() * 4 / (us * 1e-6)


def _gemm_flops(device: str, dtype, n: int, repeats: int, clock, precision: str) -> float:  # type: ignore[no-untyped-def]
    """``2·n³`` FLOPs per square matmul (serving-and-distributed.md §B8) over its median time."""
    import torch

    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        us = median_us(lambda: torch.mm(a, b), device=device, repeats=repeats, clock=clock)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2 * n**3 / (us * 1e-6)


def _h2d_bandwidth(nbytes: int, pinned: bool, repeats: int, clock) -> float:  # type: ignore[no-untyped-def]
    import torch

    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda:0")
    us = median_us(
        lambda: dev.copy_(host, non_blocking=pinned), device="cuda", repeats=repeats, clock=clock
    )
    return nbytes / (us * 1e-6)


def _launch_latency_us(device: str, count: int, clock) -> float:  # type: ignore[no-untyped-def]
    """Time per launch of ``count`` back-to-back tiny kernels (one-element add)."""
    import torch

    x = torch.zeros(1, device=device)

    def launches() -> None:
        for _ in range(count):
            x.add_(1.0)

    return median_us(launches, device=device, repeats=3, clock=clock) / count


def _cpu_name() -> str:
    import platform

    return f"CPU {platform.processor() or platform.machine()}"
