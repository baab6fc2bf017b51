"""Launch overhead: CPU time spent launching GPU work against the GPU time it launched.

A launch is the runtime/driver call linked to a GPU op (``cudaLaunchKernel``,
``cuLaunchKernel``, ``cudaMemcpyAsync`` ...). A kernel shorter than its own launch call
cannot keep the GPU busy however well the host pipelines: the GPU finishes it before the
next one arrives (the "launch-bound" regime of the chapter's exercise 8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.gpu_window import gpu_window
from aiprof.trace import Trace


@dataclass(frozen=True)
class LaunchResult:
    """Launches of the GPU ops inside the steps."""

    num_launches: int
    launches_per_step: float
    launch_us: float
    """CPU time inside the launch calls (sum)."""
    gpu_us: float
    """GPU time of the launched ops (sum of durations)."""
    median_launch_us: float
    median_kernel_us: float
    num_shorter_than_launch: int
    shorter_than_launch_pct: float
    """Share of the launched ops whose duration is below their launch call's."""


def launch_overhead(trace: Trace) -> LaunchResult:
    """Launch counts and times of the GPU ops that start inside the steps."""
    win = gpu_window(trace)
    ops = trace.gpu_ops
    rows = win.rows[ops.launch_row[win.rows] >= 0]
    launch_dur = trace.runtime.dur_us[ops.launch_row[rows]]
    gpu_dur = ops.dur_us[rows]
    kernels = rows < len(trace.kernels)
    shorter = gpu_dur < launch_dur
    n = len(rows)
    return LaunchResult(
        num_launches=n,
        launches_per_step=n / max(win.num_steps, 1),
        launch_us=float(launch_dur.sum()),
        gpu_us=float(gpu_dur.sum()),
        median_launch_us=float(np.median(launch_dur)) if n else 0.0,
        median_kernel_us=float(np.median(gpu_dur[kernels])) if kernels.any() else 0.0,
        num_shorter_than_launch=int(shorter.sum()),
        shorter_than_launch_pct=100.0 * float(shorter.mean()) if n else 0.0,
    )


def launched_at(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per GPU op of ``rows``: its launch call's start, else its op's start, else NaN."""
    gpu, ops, rt = trace.gpu_ops, trace.cpu_ops, trace.runtime
    at = np.full(len(rows), np.nan)
    op = gpu.op_row[rows]
    at[op >= 0] = ops.ts_us[op[op >= 0]]
    launch = gpu.launch_row[rows]
    at[launch >= 0] = rt.ts_us[launch[launch >= 0]]
    return at


def launched_in(trace: Trace, rows: np.ndarray, spans: iv.Intervals) -> np.ndarray:
    """Per GPU op of ``rows``: launched inside ``spans`` (its launch call's start, else its
    op's start; neither known: no)."""
    at = launched_at(trace, rows)
    return np.asarray(iv.contains(spans, at) & ~np.isnan(at))
