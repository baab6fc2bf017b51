"""Data reuse of convolutions and GEMMs, and the GEMM tile that fits a cache (chapter 33.2).

Conv reuse factors are the chapter's formulas: input reuse = ``k_h·k_w·out_h·out_w /
(in_h·in_w)`` (how many times a sliding window touches each input pixel on average), weight
reuse = ``batch·out_h·out_w`` (each weight is applied at every output position of every sample).
GEMM: each element of A (M×K) is used N times, each element of B (K×N) M times.
Tiling: square T×T tiles of A, B and C resident at once need ``3·T²·elem_bytes`` of cache; with
them, A is streamed N/T times and B M/T times (the blocked-matmul analysis of Lam, Rothberg and
Wolf, "The Cache Performance and Optimizations of Blocked Algorithms", ASPLOS 1991).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiprof.errors import InputError


@dataclass(frozen=True)
class ConvReuse:
    """Reuse factors of one 2-D convolution."""

    input_reuse: float
    weight_reuse: int
    out_h: int
    out_w: int


def conv_reuse(
    batch: int, in_h: int, in_w: int, k_h: int, k_w: int, stride: int = 1, padding: int = 0
) -> ConvReuse:
    """The chapter's input and weight reuse factors of a convolution (output size from the
    torch.nn.Conv2d formula)."""
    _positive(batch=batch, in_h=in_h, in_w=in_w, k_h=k_h, k_w=k_w, stride=stride)
    out_h = (in_h + 2 * padding - k_h) // stride + 1
    out_w = (in_w + 2 * padding - k_w) // stride + 1
    if out_h < 1 or out_w < 1:
        raise InputError(
            f"a {k_h}x{k_w} kernel does not fit a {in_h}x{in_w} input with padding {padding}"
        )
    return ConvReuse(
        input_reuse=k_h * k_w * out_h * out_w / (in_h * in_w),
        weight_reuse=batch * out_h * out_w,
        out_h=out_h,
        out_w=out_w,
    )


@dataclass(frozen=True)
class GemmTiling:
    """A square GEMM tile for a cache, and the traffic and intensity it gives."""

    tile: int
    """Tile edge T (a multiple of ``multiple``)."""
    tile_bytes: int
    """``3·T²·elem_bytes``: A, B and C tiles resident together."""
    a_reuse: int
    """Uses of each A element: N."""
    b_reuse: int
    """Uses of each B element: M."""
    traffic_bytes: int
    """``elem·(M·K·⌈N/T⌉ + K·N·⌈M/T⌉ + M·N)``: A and B streamed once per tile column/row."""
    intensity_flop_per_byte: float
    """``2·M·N·K / traffic``."""


def gemm_tiling(
    m: int, n: int, k: int, cache_bytes: int, elem_bytes: int, multiple: int = 8
) -> GemmTiling:
    """The largest square tile (a multiple of ``multiple``) whose A, B, C tiles fit the cache."""
    _positive(m=m, n=n, k=k, cache_bytes=cache_bytes, elem_bytes=elem_bytes, multiple=multiple)
    edge = math.isqrt(cache_bytes // (3 * elem_bytes))
    tile = edge // multiple * multiple
    if tile < multiple:
        raise InputError(
            f"a {cache_bytes}-byte cache cannot hold three {multiple}x{multiple} tiles"
        )
    tile = min(tile, -(-max(m, n, k) // multiple) * multiple)  # no bigger than the problem
    traffic = elem_bytes * (m * k * math.ceil(n / tile) + k * n * math.ceil(m / tile) + m * n)
    return GemmTiling(
        tile=tile,
        tile_bytes=3 * tile * tile * elem_bytes,
        a_reuse=n,
        b_reuse=m,
        traffic_bytes=traffic,
        intensity_flop_per_byte=2 * m * n * k / traffic,
    )


def _positive(**values: int) -> None:
    for name, value in values.items():
        if value <= 0:
            raise InputError(f"{name} must be positive (got {value})")
