"""Timing of a callable on CPU or GPU: warm-up, then per-call durations, or their median.

On CUDA each call is bracketed by CUDA events recorded on the current stream and read after one
synchronize (``torch.cuda.Event(enable_timing=True)``; resolution about 0.5 us per the CUDA runtime
documentation of ``cudaEventElapsedTime``); on CPU by ``time.perf_counter_ns``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.errors import InputError


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Durations of repeated calls, microseconds."""

    p50_us: float
    p90_us: float
    p99_us: float
    mean_us: float
    num_calls: int

    @classmethod
    def of(cls, samples_us: np.ndarray) -> Timing:
        """Summary of a sample of durations."""
        p50, p90, p99 = np.percentile(samples_us, [50, 90, 99])
        return cls(
            p50_us=float(p50),
            p90_us=float(p90),
            p99_us=float(p99),
            mean_us=float(np.mean(samples_us)),
            num_calls=int(samples_us.size),
        )


def is_cuda(device: Any) -> bool:
    """Whether ``device`` (a string or torch.device) names a CUDA device."""
    return str(device).startswith("cuda")


def time_calls(
    fn: Callable[[], Any], *, device: str = "cpu", warmup: int = 3, iters: int = 20
) -> np.ndarray:
    """Microseconds of each of ``iters`` calls of ``fn`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    if is_cuda(device):
        import torch

        torch.cuda.synchronize(device)
        pairs = []
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize(device)
        return np.array([s.elapsed_time(e) * 1e3 for s, e in pairs])
    samples = np.empty(iters)
    for index in range(iters):
        begin = time.perf_counter_ns()
        fn()
        samples[index] = (time.perf_counter_ns() - begin) / 1e3
    return samples


def wall_us(fn: Callable[[], Any], device: str = "cpu") -> tuple[float, Any]:
    """Wall time of one call (synchronizing a CUDA device before and after), and its result."""
    sync = _sync(device)
    sync()
    begin = time.perf_counter_ns()
    result = fn()
    sync()
    return (time.perf_counter_ns() - begin) / 1e3, result


def _sync(device: str) -> Callable[[], None]:
    if is_cuda(device):
        import torch

        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def median_us(
    fn: Callable[[], Any],
    *,
    device: str = "cpu",
    warmup: int = 2,
    repeats: int = 5,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> float:
    """Median wall time of ``fn()`` in microseconds over ``repeats`` synchronized runs."""
    if repeats < 1 or warmup < 0:
        raise InputError(f"repeats must be >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    for _ in range(warmup):
        fn()
    sync = _sync(device)
    sync()
    samples = []
    for _ in range(repeats):
        start = clock()
        fn()
        sync()
        samples.append((clock() - start) / 1e3)
    return statistics.median(samples)
