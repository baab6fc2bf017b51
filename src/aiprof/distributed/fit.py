"""Fit α and β to measured collective times, so the cost model can use measured parameters.

A ring collective costs ``A + B·n`` (reference §B3): all-reduce A = 2(p−1)α, B = 2(p−1)/p·β;
all-gather and reduce-scatter A = (p−1)α, B = (p−1)/p·β; broadcast A = (p−1)α, B = β (pipelined
chain, large k). We fit A and B by least squares on the *relative* error, Σ((A + B·nᵢ − tᵢ)/tᵢ)²,
so that 1 MiB and 1 GiB weigh the same, then convert A and B to α and β of one link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aiprof.distributed.busbw import canonical_collective
from aiprof.distributed.links import LinkParams
from aiprof.errors import InputError


@dataclass(frozen=True, kw_only=True)
class AlphaBetaFit:
    """Fitted ring parameters for one collective at one rank count."""

    collective: str
    num_ranks: int
    num_points: int
    fit_min_bytes: int
    fit_max_bytes: int
    intercept_us: float
    """A: the fitted time of an empty message."""
    us_per_byte: float
    """B: the fitted time per byte of the collective (not of the link)."""
    alpha_us: float
    """α of one link, A divided by the ring's number of steps."""
    bandwidth_gbps: float
    """1/β of one link (the bus bandwidth the fit implies)."""
    max_rel_error_pct: float
    """Largest |model − measured| / measured over the fitted points."""
    floor_us: float = 0.0
    """Measured time of the smallest message in the window: the latency the data shows."""
    alpha_clamped: bool = False
    """The unconstrained fit gave a negative A, so A was held at 0: α is not resolved by this
    window (large messages dominate it); ``floor_us`` is the measured small-message time."""

    def link(self) -> LinkParams:
        """The fit as a link, named ``measured``."""
        return LinkParams(
            name="measured", alpha_us=max(self.alpha_us, 0.0), bandwidth_gbps=self.bandwidth_gbps
        )


def ring_coefficients(collective: str, num_ranks: int) -> tuple[float, float]:
    """(steps, bytes factor) of the ring algorithm: time = steps·α + factor·n·β."""
    kind = canonical_collective(collective)
    p = num_ranks
    if kind == "allreduce":
        return 2.0 * (p - 1), 2.0 * (p - 1) / p
    if kind in ("allgather", "reducescatter"):
        return float(p - 1), (p - 1) / p
    if kind == "broadcast":
        return float(p - 1), 1.0
    raise InputError(f"no ring model to fit for {kind}")


def fit_alpha_beta(
    collective: str,
    num_ranks: int,
    sizes_bytes: Sequence[float] | np.ndarray,
    times_us: Sequence[float] | np.ndarray,
    *,
    min_bytes: int = 0,
    max_bytes: int | None = None,
) -> AlphaBetaFit:
    """Fit ``time = A + B·bytes`` (A ≥ 0) on the points with min_bytes ≤ bytes ≤ max_bytes."""
    if num_ranks < 2:
        raise InputError(f"fitting needs at least 2 ranks, got {num_ranks}")
    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_us, dtype=float)
    keep = (sizes >= min_bytes) & (times > 0)
    if max_bytes is not None:
        keep &= sizes <= max_bytes
    sizes, times = sizes[keep], times[keep]
    if len(np.unique(sizes)) < 2:
        raise InputError(
            "fitting α and β needs measurements at two or more sizes in the fit window"
        )
    design = np.column_stack([np.ones_like(sizes), sizes]) / times[:, None]
    (intercept, slope), *_ = np.linalg.lstsq(design, np.ones_like(times), rcond=None)
    clamped = bool(intercept < 0)
    if clamped:  # a latency cannot be negative: refit through the origin
        intercept = 0.0
        (slope,), *_ = np.linalg.lstsq(design[:, 1:], np.ones_like(times), rcond=None)
    if slope <= 0:
        raise InputError("the measured times do not grow with size; widen the fit window")
    steps, factor = ring_coefficients(collective, num_ranks)
    predicted = intercept + slope * sizes
    return AlphaBetaFit(
        collective=canonical_collective(collective),
        num_ranks=num_ranks,
        num_points=int(len(sizes)),
        fit_min_bytes=int(sizes.min()),
        fit_max_bytes=int(sizes.max()),
        intercept_us=float(intercept),
        us_per_byte=float(slope),
        alpha_us=float(intercept / steps),
        bandwidth_gbps=float(factor / slope / 1000.0),
        max_rel_error_pct=float(np.max(np.abs(predicted - times) / times) * 100.0),
        floor_us=float(times[sizes == sizes.min()].min()),
        alpha_clamped=clamped,
    )


def predict_us(fits: Sequence[AlphaBetaFit], num_bytes: float) -> float:
    """Time of the cheapest fitted line at ``num_bytes`` (each line is one protocol regime)."""
    return min(f.intercept_us + f.us_per_byte * num_bytes for f in fits)


def fit_protocols(
    collective: str,
    num_ranks: int,
    sizes_bytes: Sequence[float] | np.ndarray,
    times_us: Sequence[float] | np.ndarray,
    *,
    min_bytes: int = 0,
    max_segments: int = 3,
) -> list[AlphaBetaFit]:
    """One α-β line per protocol regime, the measured time being the cheapest line.

    NCCL picks a protocol per size (LL, LL128, Simple; reference §B2), and each protocol is an
    α-β line of its own, so measured times follow the lower envelope of up to three lines. The
    sizes are cut into at most ``max_segments`` runs of consecutive sizes, a line is fitted to
    each, and the cut whose envelope has the smallest largest relative error wins (fewer lines
    on ties). Brute force over cut points: a sweep has a few dozen sizes.
    """
    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_us, dtype=float)
    keep = (sizes >= min_bytes) & (times > 0)
    sizes, times = sizes[keep], times[keep]
    order = np.argsort(sizes)
    sizes, times = sizes[order], times[order]
    best: tuple[float, list[AlphaBetaFit]] | None = None
    for count in range(1, max_segments + 1):
        for cuts in _cuts(len(sizes), count):
            lines = _segment_lines(collective, num_ranks, sizes, times, cuts)
            if lines is None:
                continue
            error = max(
                abs(predict_us(lines, n) - t) / t for n, t in zip(sizes, times, strict=True)
            )
            if best is None or error < best[0] - 1e-12:
                best = (error, lines)
    if best is None:
        raise InputError("fitting needs at least two sizes that grow in time")
    return best[1]


def _cuts(num_points: int, count: int) -> list[tuple[int, ...]]:
    """Boundaries (start indexes) of ``count`` runs of at least 2 consecutive points."""
    from itertools import combinations

    inner = [
        c
        for c in combinations(range(2, num_points - 1), count - 1)
        if all(b - a >= 2 for a, b in zip((0, *c), (*c, num_points), strict=True))
    ]
    return [(0, *c, num_points) for c in inner]


def _segment_lines(
    collective: str, num_ranks: int, sizes: np.ndarray, times: np.ndarray, cuts: tuple[int, ...]
) -> list[AlphaBetaFit] | None:
    lines = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        try:
            lines.append(fit_alpha_beta(collective, num_ranks, sizes[a:b], times[a:b]))
        except InputError:
            return None
    return lines
