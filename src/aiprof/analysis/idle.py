"""Idle time of each GPU stream inside the steps, and why the stream was idle.

A gap between two consecutive ops of a stream is:
- ``host_wait`` when the next op was launched after the previous one had ended (the CPU
  launched late: the queue was empty, the GPU waited for the host);
- ``kernel_wait`` when the next op was already queued and the gap is at most
  ``kernel_wait_max_us`` (the device's own turnaround between queued kernels);
- ``other`` otherwise (waits on another stream's event, or unknown launch times), plus the
  stream's idle time before its first and after its last op in the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.gpu_window import gpu_window, launch_ts_us
from aiprof.trace import Trace


@dataclass(frozen=True)
class StreamIdle:
    """One GPU stream over the steps (µs summed over all steps)."""

    device: int
    stream: int
    num_ops: int
    busy_us: float
    idle_us: float
    host_wait_us: float
    kernel_wait_us: float
    other_us: float
    num_host_waits: int

    @property
    def idle_pct(self) -> float:
        total = self.busy_us + self.idle_us
        return 100.0 * self.idle_us / total if total > 0 else 0.0


@dataclass(frozen=True)
class IdleResult:
    """Idle time per stream; the streams are sorted by busy time, busiest first."""

    window_us: float
    streams: list[StreamIdle]
    median_queued_gap_us: float
    """Median gap between an op and the next one already queued on its stream (NaN if none)."""


def stream_idle(trace: Trace, kernel_wait_max_us: float = 20.0) -> IdleResult:
    """Classify every gap of every stream inside the steps (see the module docstring)."""
    win = gpu_window(trace)
    ops = trace.gpu_ops
    rows = win.rows
    launch = launch_ts_us(trace, rows)
    streams, queued_gaps = [], []
    keys = ops.device[rows].astype(np.int64) * (1 << 32) + ops.stream[rows]
    for key in np.unique(keys):
        mine = keys == key
        start, end = ops.ts_us[rows][mine], ops.end_us[rows][mine]
        busy = iv.length(iv.union(start, end))
        gaps = np.maximum(start[1:] - np.maximum.accumulate(end)[:-1], 0.0)
        late = launch[mine][1:] > np.maximum.accumulate(end)[:-1]
        queued = ~late & ~np.isnan(launch[mine][1:])
        host = float(gaps[late].sum())
        kernel = float(gaps[queued & (gaps <= kernel_wait_max_us)].sum())
        queued_gaps.append(gaps[queued])
        idle = max(win.window_us - busy, 0.0)
        streams.append(
            StreamIdle(
                device=int(key >> 32),
                stream=int(key & 0xFFFFFFFF),
                num_ops=int(mine.sum()),
                busy_us=busy,
                idle_us=idle,
                host_wait_us=host,
                kernel_wait_us=kernel,
                other_us=max(idle - host - kernel, 0.0),
                num_host_waits=int((late & (gaps > 0)).sum()),
            )
        )
    streams.sort(key=lambda s: (-s.busy_us, s.device, s.stream))
    gaps_all = np.concatenate(queued_gaps) if queued_gaps else np.zeros(0)
    median = float(np.median(gaps_all)) if len(gaps_all) else float("nan")
    return IdleResult(win.window_us, streams, median)
