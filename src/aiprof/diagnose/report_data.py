"""Everything the HTML report shows, computed here so that the renderer only renders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.analysis.idle import IdleResult
from aiprof.analysis.occupancy import OccupancyResult
from aiprof.analysis.summary import RankSummary, summarize_trace
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.engine import diagnose_ranks
from aiprof.diagnose.finding import Diagnosis
from aiprof.errors import AiprofError
from aiprof.tensor.trace_roofline import TraceRoofline, trace_roofline
from aiprof.trace import Trace, TraceSet

MAX_TIMELINE_OPS = 5000
"""Ops drawn in the timeline (the longest are kept when a step has more)."""


@dataclass(frozen=True)
class TimelineOp:
    """One GPU op of the drawn step, times relative to the step start."""

    start_us: float
    dur_us: float
    lane: str
    name: str
    kind: str


@dataclass(frozen=True)
class RankView:
    """One rank's part of the report."""

    summary: RankSummary
    idle: IdleResult
    occupancy: OccupancyResult
    step_number: int
    step_us: float
    timeline: list[TimelineOp]
    roofline: TraceRoofline | None
    """Ops with recorded shapes on the device's roofline (None: no shapes or unknown GPU)."""


@dataclass(frozen=True)
class ReportData:
    """The report: the diagnosis and one view per rank."""

    title: str
    diagnosis: Diagnosis
    ranks: list[RankView]
    trial: dict[str, Any] | None = None
    """The run's try record (``aiprof.try/1``, from ``aiprof try``), shown beside the findings."""


def report_data(
    traces: TraceSet, title: str, options: DiagnoseOptions | None = None,
    diagnosis: Diagnosis | None = None,
) -> ReportData:
    """The per-rank views of ``traces`` beside their diagnosis: ``diagnosis`` when given (it is
    not computed again), else diagnosed here, once."""
    if diagnosis is None:
        diagnosis, contexts = diagnose_ranks(traces, options)
    else:
        contexts = [Context(trace, options or DiagnoseOptions()) for trace in traces]
    return ReportData(title, diagnosis, [_rank_view(ctx.trace, ctx) for ctx in contexts])


def _rank_view(trace: Trace, ctx: Context) -> RankView:
    steps = trace.steps
    number, start, end = 0, 0.0, 0.0
    if len(steps):
        i = int(np.argsort(steps.duration_us)[len(steps) // 2])  # the median step
        number, start, end = int(steps.number[i]), float(steps.start_us[i]), float(steps.end_us[i])
    return RankView(
        summary=summarize_trace(trace),
        idle=ctx.idle,
        occupancy=ctx.occupancy,
        step_number=number,
        step_us=end - start,
        timeline=_timeline(trace, start, end),
        roofline=_roofline(trace),
    )


def _roofline(trace: Trace) -> TraceRoofline | None:
    """The tensor issue's trace roofline, when the trace allows one."""
    if not trace.has_gpu or trace.device is None:
        return None
    try:
        result = trace_roofline(trace)
    except AiprofError:
        return None
    placed = [r for r in result.rows if r.point.intensity_flop_per_byte]
    return result if placed else None


def _timeline(trace: Trace, start: float, end: float) -> list[TimelineOp]:
    gpu = trace.gpu_ops
    rows = np.flatnonzero((gpu.ts_us >= start) & (gpu.ts_us < end))
    if len(rows) > MAX_TIMELINE_OPS:
        rows = np.sort(rows[np.argsort(-gpu.dur_us[rows])[:MAX_TIMELINE_OPS]])
    num_kernels, num_copies = len(trace.kernels), len(trace.kernels) + len(trace.memcpy)
    kinds = np.where(rows < num_kernels, "kernel", np.where(rows < num_copies, "memcpy", "memset"))
    return [
        TimelineOp(
            start_us=float(gpu.ts_us[r] - start),
            dur_us=float(gpu.dur_us[r]),
            lane=f"GPU {int(gpu.device[r])} stream {int(gpu.stream[r])}",
            name=trace.name(int(gpu.name_id[r])),
            kind=str(k),
        )
        for r, k in zip(rows.tolist(), kinds.tolist(), strict=True)
    ]
