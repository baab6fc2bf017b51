"""Where a latency tail comes from, read off the per-request (due time, latency) series.

A server (or a load generator) that stops for S milliseconds delays every request due in those S
ms: the one due first waits about S, the last about 0, a ramp in latency against due time. At
2,400 req/s one stop of 50 ms delays 120 requests, 2% of a 3 s run, which alone sets the P99. So
the summary says how the requests above the P99 are spread in time (all in one window, or all
over the run), how late the load generator itself sent them (a late client is not a slow server),
and the worst latency per window of the run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, kw_only=True)
class LatencySeries:
    """A served run's latency against due time; times from the first request due."""

    bin_ms: float
    """Width of the windows of ``max_latency_per_bin_us``."""
    max_latency_per_bin_us: tuple[float, ...]
    """The worst latency of the requests due in each window (0 for a window with none)."""
    tail_threshold_us: float
    """The P99 latency: requests at or above it make the tail."""
    num_tail: int
    tail_first_due_ms: float
    tail_last_due_ms: float
    tail_bins: int
    """Windows holding at least one tail request: 1-2 for one stall, many for a spread tail."""
    tail_client_late_share: float
    """Share of the tail requests that the load generator sent late by over half their latency:
    near 1 when the client, not the server, stalled."""
    worst_latency_us: float
    worst_due_ms: float
    worst_send_lag_us: float
    """How late the worst request left the client."""
    first_window_p99_us: float
    """P99 of the requests due in the first window (warm-up), for comparison with the rest."""
    rest_p99_us: float


def latency_series(sched_ns: np.ndarray, handoff_ns: np.ndarray, recv_ns: np.ndarray,
                   *, bin_ms: float = 100.0) -> LatencySeries:
    """Summarize the answered requests (``recv_ns >= 0``) of one run."""
    answered = (recv_ns >= 0) & (handoff_ns >= 0)
    due_ms = sched_ns[answered] / 1e6
    latency_us = (recv_ns[answered] - sched_ns[answered]) / 1e3
    lag_us = (handoff_ns[answered] - sched_ns[answered]) / 1e3
    if not due_ms.size:
        return _empty(bin_ms)
    due_ms = due_ms - due_ms.min()
    bins = (due_ms // bin_ms).astype(np.int64)
    worst = np.zeros(int(bins.max()) + 1)
    np.maximum.at(worst, bins, latency_us)
    threshold = float(np.percentile(latency_us, 99))
    tail = latency_us >= threshold
    top = int(np.argmax(latency_us))
    first = bins == 0
    return LatencySeries(
        bin_ms=bin_ms, max_latency_per_bin_us=tuple(float(w) for w in worst),
        tail_threshold_us=threshold, num_tail=int(tail.sum()),
        tail_first_due_ms=float(due_ms[tail].min()) if tail.any() else 0.0,
        tail_last_due_ms=float(due_ms[tail].max()) if tail.any() else 0.0,
        tail_bins=int(np.unique(bins[tail]).size),
        tail_client_late_share=(float(np.mean(lag_us[tail] > latency_us[tail] / 2))
                                if tail.any() else 0.0),
        worst_latency_us=float(latency_us[top]), worst_due_ms=float(due_ms[top]),
        worst_send_lag_us=float(lag_us[top]),
        first_window_p99_us=float(np.percentile(latency_us[first], 99)),
        rest_p99_us=(float(np.percentile(latency_us[~first], 99)) if (~first).any()
                     else float("nan")))


def _empty(bin_ms: float) -> LatencySeries:
    nan = float("nan")
    return LatencySeries(bin_ms=bin_ms, max_latency_per_bin_us=(), tail_threshold_us=nan,
                         num_tail=0, tail_first_due_ms=0.0, tail_last_due_ms=0.0, tail_bins=0,
                         tail_client_late_share=0.0, worst_latency_us=nan, worst_due_ms=0.0,
                         worst_send_lag_us=nan, first_window_p99_us=nan, rest_p99_us=nan)
