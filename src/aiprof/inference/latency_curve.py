"""Service time of one batch as a function of batch size, measured or given.

Between measured sizes the curve is interpolated linearly; beyond the largest it is extrapolated
from the last two points (batched compute grows about linearly once the GPU is full).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

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
