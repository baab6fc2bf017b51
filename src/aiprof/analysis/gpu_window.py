"""GPU ops of the profiled steps, with the CPU time of their launch (shared by the passes).

Rows index ``trace.gpu_ops`` (kernels, then memcpys, then memsets). An op belongs to the
steps when it started inside the step window (``breakdown.step_window``); the steady state
is every step but the first (warm-up allocations and autotuning happen there), or the
only step when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    num_steps: int

    @property
    def step_us(self) -> float:
        """Mean step time (window length / steps)."""
        return self.window_us / max(self.num_steps, 1)


def gpu_window(trace: Trace) -> GpuWindow:
    """The GPU ops that start inside the profiled steps, sorted by start time."""
    window = step_window(trace)
    ops = trace.gpu_ops
    rows = np.flatnonzero(in_window(ops.ts_us, window))
    rows = rows[np.argsort(ops.ts_us[rows], kind="stable")]
    return GpuWindow(rows, window, iv.length(window), len(trace.steps))


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
