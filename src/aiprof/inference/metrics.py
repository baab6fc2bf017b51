"""Per-request timings of a batcher (real or simulated) and their summary.

The split of a request's latency follows Triton's server-side metrics (queue, compute) as
perf_analyzer reports them (../shared/reference/serving-and-distributed.md section A2), with the
queue time divided into time waiting for a free model instance (``queue``) and time waiting, with an
instance free, for the batch to fill (``forming``).
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np

from aiprof.inference.policy import BatchPolicy


@dataclass(frozen=True, kw_only=True)
class BatchingMetrics:
    """Summary of a batching run; latencies in microseconds."""

    num_completed: int
    num_failed: int
    """Requests whose batch raised in the model."""
    rejected: dict[str, int]
    """Requests rejected before compute, by reason (queue_full, timeout, deadline, cancelled)."""
    duration_us: float
    throughput_rps: float
    """Completed requests per second over ``duration_us``."""
    latency_p50_us: float
    latency_p95_us: float
    latency_p99_us: float
    latency_mean_us: float
    queue_mean_us: float
    forming_mean_us: float
    compute_mean_us: float
    mean_batch_size: float
    batch_size_histogram: dict[str, int]
    """Number of batches of each size (keys are sizes as decimal strings, for JSON)."""
    busy_pct: float
    """Share of ``duration_us`` (times instances) during which a model instance was computing."""
    latency_p99_by_level_us: dict[str, float]
    """P99 latency of the completed requests of each priority level (keys: levels as strings)."""
    failed: dict[str, int] = field(default_factory=dict)
    """``num_failed`` by reason: model_error, interrupted, compute_timeout, bad_output, shutdown."""
    num_replaced_instances: int = 0
    """Model instances replaced after a compute timeout or a ``BaseException`` from the model."""
    compute_p50_us: float = float("nan")
    """Median over the completed requests of their batch's compute time (robust to one stall)."""
    dispatch_gap_us: tuple[float, ...] = ()
    """The gap between batches: for each batch the policy said to run the moment its instance
    was free (its oldest request past the delay, or a preferred size queued, by then), its
    dispatch minus that moment; at most :data:`GAP_QUANTILES` quantiles. Empty: none such, or
    not asked (``summary(due=...)``)."""


GAP_QUANTILES = 64
"""Gaps kept per run, as quantiles: the resolution a spread of batch times keeps too
(:meth:`aiprof.inference.latency_curve.TimeSpread.from_factors`)."""


def dispatch_gaps_us(enqueue_us: np.ndarray, free_us: np.ndarray, dispatch_us: np.ndarray,
                     due: tuple[float, int]) -> np.ndarray:
    """Per batch (the requests sharing a free and a dispatch time) that was due when its
    instance became free, ``dispatch - free``: ``due`` is (the max queue delay, the smallest
    preferred batch size); a batch is due if its oldest request had waited the delay by then,
    or that many of its requests were queued. At least 0: a batch may be dispatched on a
    clock reading taken just before its instance's thread read its end."""
    if not enqueue_us.size:
        return np.zeros(0)
    keys, batch = np.unique(np.stack([free_us, dispatch_us], axis=1), axis=0,
                            return_inverse=True)
    batch = batch.reshape(-1)
    oldest = np.full(len(keys), np.inf)
    np.minimum.at(oldest, batch, enqueue_us)
    queued = np.bincount(batch, weights=(enqueue_us <= free_us).astype(np.float64),
                         minlength=len(keys))
    delay_us, size = due
    free, dispatch = keys[:, 0], keys[:, 1]
    is_due = np.isfinite(free) & ((oldest + delay_us <= free) | (queued >= size))
    # (a batch taken in on an arrival read just before its instance's thread read its end)
    gaps: np.ndarray = np.maximum(0.0, dispatch[is_due] - free[is_due])
    return gaps


def due_rule(policy: BatchPolicy) -> tuple[float, int]:
    """(max queue delay, smallest preferred size) of ``policy``'s default level: what
    :func:`dispatch_gaps_us` calls a batch due at its instance's free time by."""
    return (policy.max_delay_us(policy.default_priority), policy.preferred[0])


class MetricsRecorder:
    """Collects timings; keeps the ``max_samples`` latest per-request samples (bounded memory)."""

    def __init__(self, max_samples: int = 1_000_000) -> None:
        self._samples: deque[tuple[float, int, float, float, float, float]] = deque(
            maxlen=max_samples)
        """Per request: (enqueue, level, instance free, dispatch, done, outside) times; its
        latency and parts are computed once, in :meth:`summary` (one append per request)."""
        self.batch_sizes: Counter[int] = Counter()
        self.rejected: Counter[str] = Counter()
        self.num_completed = 0
        self.num_failed = 0
        self.failed: Counter[str] = Counter()
        self.num_replaced = 0
        self.busy_us = 0.0

    def batch(self, size: int, compute_us: float) -> None:
        """Record one executed batch."""
        self.batch_sizes[size] += 1
        self.busy_us += compute_us

    def request(
        self, enqueue_us: float, free_us: float, dispatch_us: float, done_us: float,
        level: int = 1, *, outside_us: float = 0.0,
    ) -> None:
        """Record a completed request: queued, instance free, batch dispatched, result ready;
        ``outside_us`` more of latency spent outside the batcher (a simulated transport)."""
        self._samples.append((enqueue_us, level, free_us, dispatch_us, done_us, outside_us))
        self.num_completed += 1

    def requests(self, enqueue_us: list[float], levels: list[int], free_us: float,
                 dispatch_us: float, done_us: float) -> None:
        """Record the completed requests of one batch (as :meth:`request` does for each)."""
        self._samples.extend([(e, level, free_us, dispatch_us, done_us, 0.0)
                              for e, level in zip(enqueue_us, levels, strict=True)])
        self.num_completed += len(enqueue_us)

    def reject(self, reason: str, count: int = 1) -> None:
        """Record requests answered with an error before compute."""
        self.rejected[reason] += count

    def fail(self, reason: str, count: int) -> None:
        """Record requests whose batch reached the model but brought no result back."""
        self.num_failed += count
        self.failed[reason] += count

    def summary(self, duration_us: float, num_instances: int = 1, *,
                due: tuple[float, int] | None = None) -> BatchingMetrics:
        """Percentiles and means of what was recorded over ``duration_us``; with ``due`` (the
        policy's max queue delay and smallest preferred size), the gaps between batches
        (:func:`dispatch_gaps_us`)."""
        table = np.fromiter(itertools.chain.from_iterable(self._samples), dtype=np.float64,
                            count=6 * len(self._samples)).reshape(-1, 6)
        enqueue, free, dispatch, done, outside = (np.ascontiguousarray(table[:, i])
                                                  for i in (0, 2, 3, 4, 5))
        latency = done - enqueue + outside
        forming = dispatch - np.maximum(enqueue, free)
        queue = dispatch - enqueue - forming
        compute = done - dispatch
        levels = table[:, 1].astype(np.int64)
        p50, p95, p99 = np.percentile(latency, [50, 95, 99]) if latency.size else (np.nan,) * 3
        batches = sum(self.batch_sizes.values())
        executed = sum(size * count for size, count in self.batch_sizes.items())
        seconds = duration_us / 1e6
        return BatchingMetrics(
            num_completed=self.num_completed,
            num_failed=self.num_failed,
            rejected=dict(sorted(self.rejected.items())),
            duration_us=duration_us,
            throughput_rps=self.num_completed / seconds if seconds > 0 else 0.0,
            latency_p50_us=float(p50),
            latency_p95_us=float(p95),
            latency_p99_us=float(p99),
            latency_mean_us=_mean(latency),
            queue_mean_us=_mean(queue),
            forming_mean_us=_mean(forming),
            compute_mean_us=_mean(compute),
            mean_batch_size=executed / batches if batches else 0.0,
            batch_size_histogram={str(k): v for k, v in sorted(self.batch_sizes.items())},
            latency_p99_by_level_us=_p99_by_level(latency, levels),
            busy_pct=100.0 * self.busy_us / (duration_us * num_instances) if seconds > 0 else 0.0,
            failed=dict(sorted(self.failed.items())),
            num_replaced_instances=self.num_replaced,
            compute_p50_us=float(np.median(compute)) if compute.size else float("nan"),
            dispatch_gap_us=_gaps(enqueue, free, dispatch, due),
        )


def _gaps(enqueue: np.ndarray, free: np.ndarray, dispatch: np.ndarray,
          due: tuple[float, int] | None) -> tuple[float, ...]:
    if due is None:
        return ()
    gaps = dispatch_gaps_us(enqueue, free, dispatch, due)
    if gaps.size > GAP_QUANTILES:
        gaps = np.quantile(gaps, (np.arange(GAP_QUANTILES) + 0.5) / GAP_QUANTILES)
    return tuple(float(g) for g in np.sort(gaps))


def _p99_by_level(latency: np.ndarray, levels: np.ndarray) -> dict[str, float]:
    return {str(level): float(np.percentile(latency[levels == level], 99))
            for level in np.unique(levels).tolist()}


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if values.size else float("nan")
