"""Every view of one rank, computed once for the report (``report.views_html`` renders it).

Curves are thinned to at most ``MAX_POINTS`` points for plotting: every k-th point plus the
maximum, so the peak a reader looks for is always drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis.critical_path import CriticalPath, critical_path
from aiprof.analysis.gpu_samples import Columns, SampleView, gpu_sample_view
from aiprof.analysis.kernel_view import KernelView, kernel_view
from aiprof.analysis.memory_ops import MemoryView, memory_by_op
from aiprof.analysis.ops import OpView, op_view
from aiprof.analysis.python_tree import CallTree, python_call_tree
from aiprof.analysis.queue import QueueResult, queue_length
from aiprof.analysis.timeline_steps import StepTimeline, step_timeline
from aiprof.errors import AiprofError
from aiprof.trace import Trace

MAX_POINTS = 1500
"""Points per plotted curve: an SVG path of this size renders at once in a browser."""


@dataclass(frozen=True, eq=False)
class Curve:
    name: str
    xs: np.ndarray
    ys: np.ndarray


@dataclass(frozen=True, eq=False)
class RankViews:
    rank: int
    ops: OpView
    kernels: KernelView
    queue: QueueResult
    queue_curves: list[Curve]
    """The launch queue of the busiest streams over the steps (µs, ops)."""
    critical: CriticalPath | None
    critical_error: str | None
    memory: MemoryView
    memory_curves: list[Curve]
    python: CallTree
    samples: SampleView | None
    sample_curves: list[Curve]
    timeline: StepTimeline


def rank_views(trace: Trace, samples: Columns | None = None) -> RankViews:
    """All views of ``trace`` (and its run's NVML samples, if given)."""
    queue = queue_length(trace)
    window = (float(trace.steps.start_us.min()), float(trace.steps.end_us.max())) \
        if len(trace.steps) else (-np.inf, np.inf)
    queue_curves = [_thin(f"GPU {s.device} stream {s.stream}", s.ts_us, s.length, window)
                    for s in queue.streams[:3]]
    try:
        critical, error = critical_path(trace), None
    except AiprofError as failure:
        critical, error = None, str(failure)
    memory = memory_by_op(trace)
    memory_curves = [_thin(d.label, d.ts_us, d.live_bytes,
                           (-np.inf, np.inf)) for d in memory.devices]
    view = None
    sample_curves: list[Curve] = []
    if samples is not None and len(samples.get("time_unix_ns", ())) and \
            trace.base_time_ns is not None:
        view = gpu_sample_view(trace, samples)
        for d in view.devices:
            for field in ("gpu_util_pct", "mem_util_pct"):
                sample_curves.append(_thin(f"GPU {d.device} {field}", d.t_us, d.curves[field],
                                           (-np.inf, np.inf)))
    return RankViews(trace.rank, op_view(trace), kernel_view(trace), queue, queue_curves,
                     critical, error, memory, memory_curves, python_call_tree(trace), view,
                     sample_curves, step_timeline(trace))


def _thin(name: str, xs: np.ndarray, ys: np.ndarray, window: tuple[float, float]) -> Curve:
    inside = (xs >= window[0]) & (xs <= window[1])
    xs, ys = xs[inside], ys[inside].astype(np.float64)
    if len(xs) > MAX_POINTS:
        keep = np.zeros(len(xs), dtype=bool)
        keep[:: int(np.ceil(len(xs) / MAX_POINTS))] = True
        keep[int(np.nanargmax(ys))] = True
        keep[-1] = True
        xs, ys = xs[keep], ys[keep]
    return Curve(name, xs, ys)
