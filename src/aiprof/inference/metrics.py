"""Per-request timings of a batcher (real or simulated) and their summary.

The split of a request's latency follows Triton's server-side metrics (queue, compute) as
perf_analyzer reports them (../shared/reference/serving-and-distributed.md section A2), with the
queue time divided into time waiting for a free model instance (``queue``) and time waiting, with an
instance free, for the batch to fill (``forming``).
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

import numpy as np


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


class MetricsRecorder:
    """Collects timings; keeps the ``max_samples`` latest per-request samples (bounded memory)."""

    def __init__(self, max_samples: int = 1_000_000) -> None:
        self._latency: deque[float] = deque(maxlen=max_samples)
        self._level: deque[int] = deque(maxlen=max_samples)
        self._queue: deque[float] = deque(maxlen=max_samples)
        self._forming: deque[float] = deque(maxlen=max_samples)
        self._compute: deque[float] = deque(maxlen=max_samples)
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
        forming = dispatch_us - max(enqueue_us, free_us)
        self._latency.append(done_us - enqueue_us + outside_us)
        self._level.append(level)
        self._forming.append(forming)
        self._queue.append(dispatch_us - enqueue_us - forming)
        self._compute.append(done_us - dispatch_us)
        self.num_completed += 1

    def requests(self, enqueue_us: list[float], levels: list[int], free_us: float,
                 dispatch_us: float, done_us: float) -> None:
        """Record the completed requests of one batch (as :meth:`request` does for each)."""
        if len(enqueue_us) == 1:  # a lone request: the common batch of a lightly loaded server
            self.request(enqueue_us[0], free_us, dispatch_us, done_us, levels[0])
            return
        forming = [dispatch_us - max(e, free_us) for e in enqueue_us]
        self._latency.extend([done_us - e for e in enqueue_us])
        self._level.extend(levels)
        self._forming.extend(forming)
        self._queue.extend([dispatch_us - e - f for e, f in zip(enqueue_us, forming,
                                                                 strict=True)])
        self._compute.extend([done_us - dispatch_us] * len(enqueue_us))
        self.num_completed += len(enqueue_us)

    def reject(self, reason: str, count: int = 1) -> None:
        """Record requests answered with an error before compute."""
        self.rejected[reason] += count

    def fail(self, reason: str, count: int) -> None:
        """Record requests whose batch reached the model but brought no result back."""
        self.num_failed += count
        self.failed[reason] += count

    def summary(self, duration_us: float, num_instances: int = 1) -> BatchingMetrics:
        """Percentiles and means of what was recorded over ``duration_us``."""
        latency = np.asarray(self._latency, dtype=np.float64)
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
            latency_mean_us=_mean(self._latency),
            queue_mean_us=_mean(self._queue),
            forming_mean_us=_mean(self._forming),
            compute_mean_us=_mean(self._compute),
            mean_batch_size=executed / batches if batches else 0.0,
            batch_size_histogram={str(k): v for k, v in sorted(self.batch_sizes.items())},
            latency_p99_by_level_us=self._p99_by_level(latency),
            busy_pct=100.0 * self.busy_us / (duration_us * num_instances) if seconds > 0 else 0.0,
            failed=dict(sorted(self.failed.items())),
            num_replaced_instances=self.num_replaced,
            compute_p50_us=(float(np.median(np.asarray(self._compute))) if self._compute
                            else float("nan")),
        )


    def _p99_by_level(self, latency: np.ndarray) -> dict[str, float]:
        levels = np.asarray(self._level, dtype=np.int64)
        return {str(level): float(np.percentile(latency[levels == level], 99))
                for level in np.unique(levels).tolist()}


def _mean(values: deque[float]) -> float:
    return float(np.mean(np.asarray(values))) if values else float("nan")
