"""Every view of one rank, computed once for the report (``report.views_html`` renders it).

Curves are thinned to at most ``MAX_POINTS`` points for plotting: every k-th point plus the
maximum, so the peak a reader looks for is always drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aiprof.analysis.critical_path import CriticalPath, critical_path
from aiprof.analysis.critical_ranks import RanksCriticalPath, ranks_critical_path
from aiprof.analysis.gpu_samples import Columns, SampleView, gpu_sample_view
from aiprof.analysis.kernel_view import KernelView, kernel_view
from aiprof.analysis.memory_ops import MemoryView, memory_by_op
from aiprof.analysis.ops import OpView, op_view
from aiprof.analysis.python_tree import CallTree, python_call_tree
from aiprof.analysis.queue import QueueResult, queue_length
from aiprof.analysis.timeline_steps import StepTimeline, merged_timeline, step_timeline
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


@dataclass(frozen=True)
class RankRow:
    """One rank's totals, for the report's table of every rank."""

    rank: int
    self_cpu_us: float
    """Self CPU time of every CPU op (the op view's rows)."""
    kernel_us: float
    tensor_core_pct: float
    critical_path_us: float
    """Of this rank's own graph; 0 when it has none."""
    critical_bound: str
    """What bounds most of that path."""
    across_path_us: float
    """Time of the critical path across ranks on this rank (0 for one rank)."""
    memory_peak_bytes: int
    """The highest peak over the rank's devices (0 without profile_memory)."""
    gpu_util_mean_pct: float
    """Mean NVML SM utilization over the rank's steps; NaN without samples."""


@dataclass(frozen=True, eq=False)
class ReportViews:
    """Every rank's views, the timeline (every rank on one), the critical path across the
    ranks (several ranks) and a row of totals per rank."""

    ranks: list[RankViews]
    timeline: StepTimeline
    across: RanksCriticalPath | None
    across_error: str | None
    rows: list[RankRow]


def report_views(traces: Sequence[Trace], samples: Columns | None = None) -> ReportViews:
    """The views of every rank of ``traces`` (and the run's NVML samples, if given)."""
    ranks = [rank_views(t, samples) for t in traces]
    timeline = ranks[0].timeline if len(ranks) == 1 else merged_timeline(list(traces))
    across, error = None, None
    if len(ranks) > 1:
        try:
            across = ranks_critical_path(list(traces))
        except AiprofError as failure:
            error = str(failure)
    return ReportViews(ranks, timeline, across, error, [_row(v, across) for v in ranks])


def _row(v: RankViews, across: RanksCriticalPath | None) -> RankRow:
    cp = v.critical
    bound = max(cp.by_bound_us, key=lambda b: cp.by_bound_us[b]) if cp and cp.length_us else ""
    util = [d.curves["gpu_util_pct"] for d in v.samples.devices] if v.samples else []
    values = np.concatenate(util) if util else np.zeros(0)
    return RankRow(
        rank=v.rank, self_cpu_us=float(sum(r.self_cpu_us for r in v.ops.rows)),
        kernel_us=v.kernels.kernel_us, tensor_core_pct=v.kernels.tensor_core_pct,
        critical_path_us=cp.length_us if cp else 0.0, critical_bound=bound,
        across_path_us=across.by_rank_us.get(v.rank, 0.0) if across else 0.0,
        memory_peak_bytes=max((d.peak_bytes for d in v.memory.devices), default=0),
        gpu_util_mean_pct=float(np.nanmean(values)) if np.isfinite(values).any() else np.nan,
    )


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
