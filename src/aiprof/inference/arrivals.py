"""Arrival processes for load generation and simulation: Poisson, bursty, and replay.

All return sorted arrival times in microseconds from 0, drawn from a seeded generator.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aiprof.errors import InputError


def poisson_arrivals(rate_rps: float, num_requests: int, *, seed: int = 0) -> np.ndarray:
    """Arrival times of a Poisson process: exponential gaps of mean 1/rate."""
    _check(rate_rps, num_requests)
    gaps = np.random.default_rng(seed).exponential(1e6 / rate_rps, num_requests)
    return np.asarray(np.cumsum(gaps) - gaps[0])


def bursty_arrivals(
    rate_rps: float,
    num_requests: int,
    *,
    burst_factor: float = 4.0,
    burst_share: float = 0.2,
    mean_period_us: float = 100_000.0,
    seed: int = 0,
) -> np.ndarray:
    """A two-state (on/off) Markov-modulated Poisson process with mean rate ``rate_rps``.

    During bursts (a ``burst_share`` of the time) the rate is ``burst_factor`` times the quiet
    rate; state durations are exponential with mean ``mean_period_us`` split by share.
    """
    _check(rate_rps, num_requests)
    if burst_factor < 1 or not 0 < burst_share < 1:
        raise InputError("burst factor must be >= 1 and burst share strictly between 0 and 1")
    quiet = rate_rps / (burst_share * burst_factor + (1 - burst_share))
    rng = np.random.default_rng(seed)
    times: list[float] = []
    now, burst = 0.0, False
    while len(times) < num_requests:
        length = rng.exponential(mean_period_us * (burst_share if burst else 1 - burst_share))
        rate = quiet * (burst_factor if burst else 1.0)
        count = rng.poisson(rate * length / 1e6)
        times.extend(np.sort(rng.uniform(now, now + length, count)).tolist())
        now += length
        burst = not burst
    out = np.asarray(times[:num_requests])
    return np.asarray(out - out[0])


def replay_arrivals(timestamps_us: Sequence[float] | np.ndarray) -> np.ndarray:
    """Recorded arrival timestamps (any origin, microseconds), sorted and shifted to start at 0."""
    times = np.sort(np.asarray(timestamps_us, dtype=np.float64))
    if times.size == 0:
        raise InputError("no arrival timestamps to replay")
    if not np.all(np.isfinite(times)):
        raise InputError("arrival timestamps must be finite numbers of microseconds")
    return np.asarray(times - times[0])


def _check(rate_rps: float, num_requests: int) -> None:
    if not rate_rps > 0:
        raise InputError(f"arrival rate {rate_rps} req/s must be positive")
    if num_requests < 1:
        raise InputError(f"number of requests {num_requests} must be at least 1")
