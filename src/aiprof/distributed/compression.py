"""Gradient compression trade-offs for DDP communication hooks: fp16/bf16 casts and PowerSGD.

Hooks: https://docs.pytorch.org/docs/stable/ddp_comm_hooks.html; PowerSGD: Vogels et al., NeurIPS
2019 (reference §B9). An n×m gradient matrix at rank r is sent as P (n×r) and Q (m×r) in two
all-reduces, r(n + m) values instead of n·m; 1-D tensors and matrices with
n·m < min_compression_rate·r(n + m) go uncompressed. Compute added per matrix and step:
P = M·Q and Q = Mᵀ·P (2·n·m·r FLOPs each), Gram-Schmidt of P (≈ 2·n·r² FLOPs), the
reconstruction P·Qᵀ (2·n·m·r) and error feedback (reads/writes the n·m residual).
Compression pays when the ring time it saves exceeds the compute it adds:
2(d−1)/d·Δbytes / B > t_added  ⇔  B < 2(d−1)/d·Δbytes / t_added (break-even bandwidth).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiprof.errors import InputError

METHODS = ("none", "fp16", "bf16", "powersgd")


@dataclass(frozen=True, kw_only=True)
class CompressionOptions:
    """The gradients and the machine."""

    shapes: Sequence[tuple[int, ...]]
    """Gradient tensor shapes (a conv weight [o, i, kh, kw] is viewed as o × i·kh·kw)."""
    num_ranks: int
    grad_bytes: int = 4
    """Bytes per gradient element before compression (fp32 DDP)."""
    rank: int = 1
    """PowerSGD matrix_approximation_rank r (default 1, as PowerSGDState)."""
    min_compression_rate: float = 2.0
    """PowerSGDState default: compress only if n·m ≥ 2·r(n + m)."""
    compute_tflops: float = 50.0
    """Achieved FLOP rate of the compression GEMMs, TFLOP/s (set from a measurement)."""
    memory_gbps: float = 2000.0
    """Achieved memory bandwidth for casts and error feedback, GB/s."""

    def __post_init__(self) -> None:
        if self.num_ranks < 1 or self.rank < 1:
            raise InputError("ranks and PowerSGD rank must be >= 1")
        if self.compute_tflops <= 0 or self.memory_gbps <= 0 or self.grad_bytes < 1:
            raise InputError("compute, memory bandwidth and gradient bytes must be > 0")
        if any(d < 1 for shape in self.shapes for d in shape):
            raise InputError("tensor dimensions must be >= 1")


@dataclass(frozen=True, kw_only=True)
class CompressionTradeoff:
    """One method against plain fp32 all-reduce."""

    method: str
    bytes_per_step: float
    """Bytes all-reduced per step (before the ring factor)."""
    compression_ratio: float
    num_allreduces_per_bucket: int
    added_compute_us: float
    bytes_saved_per_rank: float
    """Ring bytes each rank no longer sends: 2(d−1)/d × (original − compressed)."""
    breakeven_gbps: float
    """Compression is faster below this bus bandwidth (inf: adds no compute; 0: saves nothing)."""


def _matrix(shape: tuple[int, ...]) -> tuple[int, int] | None:
    if len(shape) < 2:
        return None
    rows, cols = shape[0], 1
    for d in shape[1:]:
        cols *= d
    return rows, cols


def _powersgd(options: CompressionOptions) -> tuple[float, float, float]:
    """(elements sent, FLOPs added, bytes touched added)."""
    r, elems, flops, touched = options.rank, 0.0, 0.0, 0.0
    for shape in options.shapes:
        nm = _matrix(shape)
        size = _prod(shape)
        if nm is None or nm[0] * nm[1] < options.min_compression_rate * r * (nm[0] + nm[1]):
            elems += size
            continue
        n, m = nm
        elems += r * (n + m)
        flops += 3 * 2.0 * n * m * r + 2.0 * n * r * r
        touched += 3.0 * n * m * options.grad_bytes  # residual read, write, reconstructed grad
    return elems, flops, touched


def compression_tradeoffs(options: CompressionOptions) -> list[CompressionTradeoff]:
    """fp32 baseline, fp16/bf16 casting hooks and PowerSGD, with break-even bandwidths."""
    total = float(sum(_prod(s) for s in options.shapes))
    base_bytes = total * options.grad_bytes
    ring = 2 * (options.num_ranks - 1) / options.num_ranks
    cast_us = (
        2 * total * (options.grad_bytes + 2) / (options.memory_gbps * 1e3)
    )  # cast there and back
    elems, flops, touched = _powersgd(options)
    psgd_us = flops / (options.compute_tflops * 1e6) + touched / (options.memory_gbps * 1e3)
    rows = [
        ("none", base_bytes, 1, 0.0),
        ("fp16", total * 2, 1, cast_us),
        ("bf16", total * 2, 1, cast_us),
        ("powersgd", elems * options.grad_bytes, 2, psgd_us),
    ]
    out = []
    for method, sent, calls, added in rows:
        saved = ring * (base_bytes - sent)
        if saved <= 0:
            breakeven = 0.0
        else:
            breakeven = float("inf") if added == 0 else saved / added / 1e3
        out.append(
            CompressionTradeoff(
                method=method,
                bytes_per_step=sent,
                compression_ratio=base_bytes / sent if sent else float("inf"),
                num_allreduces_per_bucket=calls,
                added_compute_us=added,
                bytes_saved_per_rank=saved,
                breakeven_gbps=breakeven,
            )
        )
    return out


def _prod(shape: tuple[int, ...]) -> int:
    size = 1
    for d in shape:
        size *= d
    return size
