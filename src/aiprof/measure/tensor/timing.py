"""Timing a callable on the current device: warm-up, synchronized repeats, median.

torch is imported inside; the clock is injected (nanoseconds).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from aiprof.errors import InputError


def synchronize(device: str) -> None:
    """Wait for the device's queued work (no-op on CPU)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


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
    synchronize(device)
    samples = []
    for _ in range(repeats):
        start = clock()
        fn()
        synchronize(device)
        samples.append((clock() - start) / 1e3)
    return statistics.median(samples)
