"""GPU ops of the profiled steps, with the CPU time of their launch (shared by the passes).

Rows index ``trace.gpu_ops`` (kernels, then memcpys, then memsets). An op belongs to the
steps when it started inside the step window (``breakdown.step_window``) and the steps
launched it; the steady state is every step but the first (warm-up allocations and
autotuning happen there), or the only step when there is one.

When the GPU runs behind the host (a deep launch queue), the first step's CPU span opens while
the GPU still runs ops the host queued before it (the previous, unrecorded step's): they start
inside the window but are not the steps' work. Such an op is ``backlog``: on a stream the
steps launched on, it starts before the first op they launched there, and it has no launch
call in the trace or one made before the first step began. The window's length is then
measured as a period between step boundaries: the steps end where their CPU and GPU work end,
and they began where the CPU began them and, on the GPU, where the backlog ended; the window
keeps the time the CPU still worked on the steps while the GPU ran the backlog.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.step_breakdown import in_window
from aiprof.trace import Trace
from aiprof.trace.links import gather


@dataclass(frozen=True)
class GpuWindow:
    """The GPU ops inside the steps (``rows`` of ``trace.gpu_ops``, in start order)."""

    rows: np.ndarray
    window: iv.Intervals
    window_us: float
    """The steps' period: the window's length less the backlog's time no CPU step work
    overlapped (the module docstring)."""
    num_steps: int
    backlog: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Rows of the ops queued before the steps that started inside the window, in start order."""

    @property
    def step_us(self) -> float:
        """Mean step time (window length / steps)."""
        return self.window_us / max(self.num_steps, 1)


def gpu_window(trace: Trace) -> GpuWindow:
    """The GPU ops the steps launched that start inside them, sorted by start time, and the
    backlog queued before them (module docstring)."""
    window = step_window(trace)
    ops = trace.gpu_ops
    rows = np.flatnonzero(in_window(ops.ts_us, window))
    rows = rows[np.argsort(ops.ts_us[rows], kind="stable")]
    queued = _queued_before(trace, rows)
    backlog = rows[queued]
    backlog_end = float(ops.end_us[backlog].max()) if len(backlog) else -np.inf
    length_us = iv.length(window) - _backlog_only_us(trace, window, backlog_end)
    return GpuWindow(rows[~queued], window, length_us, len(trace.steps), backlog)


def _queued_before(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Mask of ``rows`` that are backlog: not launched by the steps (no launch call, or one
    before the first step's CPU start) and started before the first op the steps launched on
    their stream. Streams the steps launched nothing on keep every op (a trace without launch
    links has no backlog)."""
    ops = trace.gpu_ops
    first_cpu_us = float(trace.steps.cpu_start_us.min()) if len(trace.steps) else -np.inf
    launched = launch_ts_us(trace, rows) >= first_cpu_us  # NaN (no launch call): False
    keys = ops.device[rows].astype(np.int64) * (1 << 32) + ops.stream[rows]
    queued = np.zeros(len(rows), dtype=bool)
    for key in np.unique(keys[~launched]):
        mine = keys == key
        own = mine & launched
        if own.any():
            first_us = float(ops.ts_us[rows[own]].min())
            queued |= mine & ~launched & (ops.ts_us[rows] < first_us)
    return queued


def _backlog_only_us(trace: Trace, window: iv.Intervals, backlog_end_us: float) -> float:
    """Time from the window's start to the backlog's end that is not the steps' period: all of
    it, less what the CPU still spent in the steps after the GPU's last op ended (the CPU's
    side of the period then begins at the window's start)."""
    starts, ends = window
    if len(starts) == 0 or not np.isfinite(backlog_end_us):
        return 0.0
    start_us, end_us = float(starts[0]), float(ends[-1])
    cpu_stop_us = min(float(trace.steps.cpu_end_us.max()), end_us)
    return max(0.0, min(backlog_end_us - start_us, end_us - cpu_stop_us))


def launch_ts_us(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """CPU start time of the runtime call that launched each GPU op (NaN when unknown)."""
    return gather(trace.runtime.ts_us, trace.gpu_ops.launch_row[rows], np.nan)


def steady_window(trace: Trace) -> iv.Intervals:
    """The steps after the first (all of them when there is only one)."""
    steps = trace.steps
    if len(steps) <= 1:
        return step_window(trace)
    return iv.union(steps.start_us[1:], steps.end_us[1:])


def names_of(trace: Trace, name_ids: np.ndarray) -> list[str]:
    """The strings of ``name_ids`` (a short list: callers pass few rows)."""
    return [trace.name(int(i)) for i in name_ids]
