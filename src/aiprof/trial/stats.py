"""Gain, spread and verdict of one fix against the base, over interleaved rounds.

Each round gives one base and one fix process; each process's step time is the median of its
timed steps, or with ``--statistic floor`` its floor (``floor_step_us``). A round's ratio is
fix/base of the same round (paired: the machine's drift between rounds cancels). The measured
gain is ``100 * (1 - median of the ratios)``.

The test: a percentile bootstrap over rounds (resample the rounds with replacement, take the
median ratio, ``RESAMPLES`` times; Efron & Tibshirani, "An Introduction to the Bootstrap",
1993, ch. 13) gives a ``CONFIDENCE`` interval of the gain. "faster" when the whole interval
is above 0, "slower" when it is below, "within noise" when it holds 0; with fewer than
``MIN_ROUNDS`` rounds the verdict is "too few rounds". With 5 rounds the 95% percentile
interval of the median runs from the smallest to the largest round (a resampled median
equals the smallest round with chance 5.8% > 2.5%), so "faster" needs all 5 rounds faster:
under no effect that happens with chance 1/32 (1/16 for either direction). With 3 rounds the
same rule would be fooled 1 time in 4, hence the minimum.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

FLOOR_BLOCK_US = 50_000.0
"""The floor's blocks last at least 50 ms. On the H200 host (2026-12-01, 16 vCPUs) the same
10 ms of pure Python took 10 or 17-20 ms on a core, switching within tens of ms to seconds,
per core, with no steal time reported; in A/A runs of a 5 ms and a 15 ms step
(tests/data/trial/h200_try_noise.json) the spread of per-round gains was 9.0 and 8.5% with
medians, 5.5 and 0.6% with the floor over 50 ms blocks, 7.9 and 5.0% over 200 ms blocks: the
slowed stretches are long, so short blocks find the unslowed ones."""
CONFIDENCE = 0.95
RESAMPLES = 2000
MIN_ROUNDS = 5
FASTER, SLOWER, NOISE, FEW = "faster", "slower", "within noise", "too few rounds"


@dataclass(frozen=True)
class Comparison:
    """One fix against the base."""

    gain_pct: float
    """100 * (1 - median over rounds of fix/base step time); positive is faster."""
    interval_pct: tuple[float, float]
    """Bootstrap interval of the gain (``CONFIDENCE``)."""
    round_gains_pct: tuple[float, ...]
    """Each round's own gain: the spread."""
    verdict: str
    num_rounds: int


def _median_ratio(ratios: list[float]) -> float:
    return float(statistics.median(ratios))


def bootstrap_interval(ratios: list[float], *, confidence: float = CONFIDENCE,
                       resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the median of ``ratios`` (resampled with replacement)."""
    rng = random.Random(seed)
    medians = sorted(_median_ratio(rng.choices(ratios, k=len(ratios)))
                     for _ in range(resamples))
    tail = (1.0 - confidence) / 2.0
    low = medians[int(tail * (resamples - 1))]
    high = medians[int(round((1.0 - tail) * (resamples - 1)))]
    return low, high


def compare(base_us: list[float], fix_us: list[float], *, seed: int = 0) -> Comparison:
    """Compare per-round median step times (paired by position: round i with round i)."""
    if len(base_us) != len(fix_us) or not base_us:
        raise ValueError("compare needs one base and one fix time per round")
    ratios = [fix / base for base, fix in zip(base_us, fix_us, strict=True)]
    gain = 100.0 * (1.0 - _median_ratio(ratios))
    low_ratio, high_ratio = bootstrap_interval(ratios, seed=seed)
    interval = (100.0 * (1.0 - high_ratio), 100.0 * (1.0 - low_ratio))
    verdict = NOISE if len(ratios) >= MIN_ROUNDS else FEW
    if verdict == NOISE:
        if interval[0] > 0.0:
            verdict = FASTER
        elif interval[1] < 0.0:
            verdict = SLOWER
    return Comparison(gain_pct=gain, interval_pct=interval,
                      round_gains_pct=tuple(100.0 * (1.0 - r) for r in ratios),
                      verdict=verdict, num_rounds=len(ratios))


def floor_step_us(step_us: list[float] | tuple[float, ...],
                  block_us: float = FLOOR_BLOCK_US) -> float:
    """The fastest mean step over consecutive blocks of at least ``block_us`` (µs).

    A block's mean keeps what recurs within it (a loader that starves one step in k, when k
    steps last less than a block); the fastest block drops the stretches where the host ran
    the process slower (another tenant on the core): time added from outside, never removed.
    A trailing part shorter than a block joins the block before it; a window shorter than
    one block is one block."""
    if not step_us:
        raise ValueError("floor_step_us needs at least one step")
    blocks: list[list[float]] = []
    current: list[float] = []
    for t in step_us:
        current.append(t)
        if sum(current) >= block_us:
            blocks.append(current)
            current = []
    if current:
        if blocks:
            blocks[-1].extend(current)
        else:
            blocks.append(current)
    return min(sum(b) / len(b) for b in blocks)


def excess_s(warmup_us: list[float], measured_us: list[float]) -> float:
    """Seconds the warm-up steps took beyond the measured median (compile time, autotuning)."""
    if not measured_us:
        return 0.0
    median = statistics.median(measured_us)
    return sum(max(0.0, t - median) for t in warmup_us) / 1e6
