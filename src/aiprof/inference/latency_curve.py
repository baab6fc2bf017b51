"""Service time of one batch as a function of batch size, measured or given.

Between measured sizes the curve is interpolated linearly; beyond the largest it is extrapolated
from the last two points (batched compute grows about linearly once the GPU is full).
"""

from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import numpy as np

from aiprof.errors import InputError


@dataclass(frozen=True, kw_only=True)
class LatencyCurve:
    """Latency in microseconds of a batch of each measured size."""

    batch_sizes: tuple[int, ...]
    latency_us: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.batch_sizes or len(self.batch_sizes) != len(self.latency_us):
            raise InputError("a latency curve needs one latency per batch size, and at least one")
        if any(b < 1 for b in self.batch_sizes) or any(t <= 0 for t in self.latency_us):
            raise InputError("latency-curve batch sizes must be >= 1 and latencies positive")
        if list(self.batch_sizes) != sorted(set(self.batch_sizes)):
            raise InputError("latency-curve batch sizes must be distinct and increasing")

    @classmethod
    def linear(cls, fixed_us: float, per_item_us: float, max_batch: int = 256) -> LatencyCurve:
        """``T(b) = fixed + per_item·b`` (the model of reference section A1's worked example)."""
        sizes = (1, max_batch) if max_batch > 1 else (1,)
        return cls(batch_sizes=sizes, latency_us=tuple(fixed_us + per_item_us * b for b in sizes))

    def __call__(self, batch_size: int) -> float:
        """Latency of a batch of ``batch_size`` requests, in microseconds."""
        sizes = np.asarray(self.batch_sizes, dtype=np.float64)
        times = np.asarray(self.latency_us)
        if batch_size <= sizes[-1] or sizes.size == 1:
            return float(np.interp(batch_size, sizes, times))
        slope = (times[-1] - times[-2]) / (sizes[-1] - sizes[-2])
        return float(times[-1] + slope * (batch_size - sizes[-1]))

    def capacity_rps(self, max_batch_size: int) -> float:
        """Most requests per second one instance serves with full batches: B / T(B)."""
        return max_batch_size / self(max_batch_size) * 1e6


def read_latency_curve(path: str | Path) -> LatencyCurve:
    """A curve from a CSV with columns ``batch_size`` and ``latency_ms`` (or ``latency_us``)."""
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as error:
        raise InputError(f"cannot read latency curve {path}: {error.strerror}") from error
    if not rows:
        raise InputError(f"latency curve {path} has no rows; expected batch_size,latency_ms")
    scale, column = (1000.0, "latency_ms") if "latency_ms" in rows[0] else (1.0, "latency_us")
    if "batch_size" not in rows[0] or column not in rows[0]:
        raise InputError(
            f"latency curve {path} needs columns batch_size and latency_ms (or latency_us)"
        )
    try:
        pairs = sorted((int(r["batch_size"]), float(r[column]) * scale) for r in rows)
    except (TypeError, ValueError) as error:
        raise InputError(f"latency curve {path} has a non-numeric value: {error}") from error
    sizes, latency = zip(*pairs, strict=True)
    return LatencyCurve(batch_sizes=tuple(sizes), latency_us=tuple(latency))


Z_90 = NormalDist().inv_cdf(0.9)
"""The standard normal's 90th percentile (1.2816): a lognormal's P90 is its median times
``exp(sigma * Z_90)`` (the lognormal's quantile function, NIST/SEMATECH e-Handbook of
Statistical Methods, section 1.3.6.6.9)."""

SPREAD_POINTS = 64
"""Quantiles that stand for a distribution given by its P50 and P90 (midpoints of 64 equal
probability bins: a draw's P99 is within one bin of the distribution's)."""


@dataclass(frozen=True, kw_only=True)
class TimeSpread:
    """How far a batch's time runs from its size's median: per batch size, a sample of
    ``time / median`` factors that a simulated batch draws from (the curve stays the median).

    A size not listed takes the factors of the smallest listed size above it (the bucket a batch
    runs at as a CUDA graph), or of the largest."""

    batch_sizes: tuple[int, ...]
    factors: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        if not self.batch_sizes or len(self.batch_sizes) != len(self.factors):
            raise InputError("a time spread needs one sample of factors per batch size")
        if any(not f or min(f) <= 0 for f in self.factors) or min(self.batch_sizes) < 1:
            raise InputError("time-spread factors must be positive and batch sizes >= 1")

    @classmethod
    def from_factors(cls, factors: dict[int, list[float]]) -> TimeSpread | None:
        """Each size's measured factors (a batch's time over its size's median), kept as
        ``SPREAD_POINTS`` quantiles when there are more; None when no size has any."""
        kept = {b: np.asarray([f for f in v if f > 0], dtype=np.float64)
                for b, v in factors.items()}
        sizes = sorted(b for b, v in kept.items() if v.size)
        if not sizes:
            return None
        probs = (np.arange(SPREAD_POINTS) + 0.5) / SPREAD_POINTS
        return cls(batch_sizes=tuple(sizes), factors=tuple(
            tuple(float(f) for f in (np.sort(kept[b]) if kept[b].size <= SPREAD_POINTS
                                     else np.quantile(kept[b], probs)))
            for b in sizes))

    @classmethod
    def from_p50_p90(cls, batch_sizes: tuple[int, ...], p50_us: tuple[float, ...],
                     p90_us: tuple[float, ...]) -> TimeSpread:
        """A lognormal per size with the given median and 90th percentile (a P90 at or below
        the median: no spread), as ``SPREAD_POINTS`` quantiles."""
        unit = NormalDist()
        probs = [(i + 0.5) / SPREAD_POINTS for i in range(SPREAD_POINTS)]
        sigmas = [max(0.0, math.log(p90 / p50)) / Z_90 if p50 > 0 and p90 > 0 else 0.0
                  for p50, p90 in zip(p50_us, p90_us, strict=True)]
        return cls(batch_sizes=tuple(batch_sizes), factors=tuple(
            tuple(math.exp(s * unit.inv_cdf(p)) for p in probs) for s in sigmas))

    def draw(self, batch_size: int, rng: np.random.Generator) -> float:
        """One batch's factor for a batch of ``batch_size``."""
        at = bisect.bisect_left(self.batch_sizes, batch_size)
        sample = self.factors[min(at, len(self.batch_sizes) - 1)]
        return sample[int(rng.integers(len(sample)))] if len(sample) > 1 else sample[0]
