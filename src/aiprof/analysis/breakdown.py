"""Where GPU time goes: busy/idle and compute/communication/memory, over the profiled steps.

Definitions (aiprof), within the window W = the union of the profiled steps:
- busy = |(kernels ∪ memcpys ∪ memsets) ∩ W|; ``gpu_busy_pct`` = busy / |W|.
- compute = |compute kernels ∩ W| (every kernel that is not communication).
- communication = |communication kernels ∩ W| not under compute (exposed communication).
- memory = |memcpys ∪ memsets ∩ W| not under compute or communication.
- idle = |W| − busy. The four parts sum to |W|.

HTA's temporal breakdown differs by choice, not by error (kineto-trace-format.md §12.3):
its window is first-to-last GPU event (not the steps), it drops the last profiled step,
counts ``cuda_sync`` events as busy GPU time, rounds ns timestamps to whole µs, and folds
communication and memory into one "non-compute" share. ``hta_temporal_breakdown``
reproduces its numbers so the two can be compared on the same file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.classify import communication_kernels, spans
from aiprof.trace import Trace
from aiprof.trace.links import gather, lookup


@dataclass(frozen=True)
class TemporalBreakdown:
    """GPU time over the profiled steps, split four ways (see module docstring)."""

    window_us: float
    compute_us: float
    communication_us: float
    memory_us: float
    idle_us: float

    @property
    def busy_us(self) -> float:
        return self.compute_us + self.communication_us + self.memory_us

    def pct(self, value_us: float) -> float:
        return 100.0 * value_us / self.window_us if self.window_us > 0 else 0.0


def step_window(trace: Trace) -> iv.Intervals:
    steps = trace.steps
    return iv.union(steps.start_us, steps.end_us)


def temporal_breakdown(trace: Trace, window: iv.Intervals | None = None) -> TemporalBreakdown:
    """Compute / communication / memory / idle over ``window`` (default: the steps)."""
    window = step_window(trace) if window is None else window
    comm_mask = communication_kernels(trace)
    compute = iv.intersect(spans(trace.kernels, ~comm_mask), window)
    communication = iv.subtract(iv.intersect(spans(trace.kernels, comm_mask), window), compute)
    copies = iv.union_all(spans(trace.memcpy), spans(trace.memset))
    memory = iv.subtract(iv.intersect(copies, window), iv.union_all(compute, communication))
    total = iv.length(window)
    compute_us, comm_us, memory_us = (iv.length(p) for p in (compute, communication, memory))
    idle_us = max(0.0, total - compute_us - comm_us - memory_us)
    return TemporalBreakdown(total, compute_us, comm_us, memory_us, idle_us)


def gpu_busy_pct(trace: Trace) -> float:
    """Busy share of the step window, per GPU, averaged over the GPUs the trace used.

    Each device's ops are merged on their own: one process driving two GPUs, each 40% busy
    at different times, is 40% busy, not 80% (their union).
    """
    by_device = gpu_busy_pct_by_device(trace)
    return sum(by_device.values()) / len(by_device) if by_device else 0.0


def gpu_busy_pct_by_device(trace: Trace) -> dict[int, float]:
    """Busy share of the step window of each device index that ran a GPU op."""
    window = step_window(trace)
    total = iv.length(window)
    tables = (trace.kernels, trace.memcpy, trace.memset)
    devices = [np.where(t.device >= 0, t.device, t.pid) for t in tables]
    out: dict[int, float] = {}
    for device in np.unique(np.concatenate(devices)).tolist():
        parts = [spans(t, d == device) for t, d in zip(tables, devices, strict=True)]
        busy = iv.intersect(iv.union_all(*parts), window)
        out[int(device)] = 100.0 * iv.length(busy) / total if total > 0 else 0.0
    return out


@dataclass(frozen=True)
class HtaTemporalBreakdown:
    """HTA 0.5's ``get_temporal_breakdown`` numbers for one rank (µs)."""

    kernel_time_us: float
    idle_time_us: float
    compute_time_us: float
    non_compute_time_us: float


def hta_temporal_breakdown(trace: Trace) -> HtaTemporalBreakdown:
    """HTA's definition, re-implemented: last step dropped, ns rounded, syncs count as GPU."""
    last_step_start = _last_step_start(trace)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    comm = communication_kernels(trace)
    for table, is_compute in ((trace.kernels, ~comm), (trace.memcpy, None), (trace.memset, None)):
        keep = _launched_before(trace, table.launch_row, last_step_start)
        compute = np.zeros(len(table), bool) if is_compute is None else is_compute
        parts.append((table.ts_us[keep], table.end_us[keep], compute[keep]))
    syncs = trace.syncs
    sync_keep = (syncs.stream >= 0) & _correlated_before(trace, syncs.correlation, last_step_start)
    parts.append((syncs.ts_us[sync_keep], syncs.end_us[sync_keep], np.zeros(sync_keep.sum(), bool)))
    starts = np.concatenate([p[0] for p in parts])
    ends = np.concatenate([p[1] for p in parts])
    is_compute = np.concatenate([p[2] for p in parts])
    if _has_fractional(starts):  # HTA: ts = ceil(ts), end = floor(ts + dur)
        starts, ends = np.ceil(starts), np.floor(ends)
    merged = iv.union(starts, ends)
    if len(merged[0]) == 0:
        return HtaTemporalBreakdown(0.0, 0.0, 0.0, 0.0)
    span = float(merged[1][-1] - merged[0][0])
    idle_us = span - iv.length(merged)
    compute_us = iv.length(iv.union(starts[is_compute], ends[is_compute]))
    return HtaTemporalBreakdown(span, idle_us, compute_us, span - compute_us - idle_us)


def _last_step_start(trace: Trace) -> float:
    steps = trace.steps
    return float(steps.cpu_start_us[-1]) if len(steps) >= 2 else math.inf


def _launched_before(trace: Trace, launch_row: np.ndarray, limit: float) -> np.ndarray:
    launch_ts = gather(trace.runtime.ts_us, launch_row, math.inf)
    return (launch_row >= 0) & (launch_ts < limit)


def _correlated_before(trace: Trace, correlation: np.ndarray, limit: float) -> np.ndarray:
    return _launched_before(trace, lookup(correlation, trace.runtime.correlation), limit)


def _has_fractional(values: np.ndarray) -> bool:
    return bool(len(values)) and bool(np.any(values != np.floor(values)))
