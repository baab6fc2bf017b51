"""Everything the HTML report shows, computed here so that the renderer only renders."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from aiprof.analysis.idle import IdleResult
from aiprof.analysis.occupancy import OccupancyResult
from aiprof.analysis.summary import RankSummary, summarize_trace
from aiprof.analysis.timeline_steps import StepTimeline, merge_timelines, step_timeline
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.diagnose.engine import (
    RankDiagnosis,
    assemble,
    diagnose_ranks,
    diagnose_trace,
    shifted_parts,
    stream_rank,
)
from aiprof.diagnose.finding import Diagnosis
from aiprof.errors import AiprofError
from aiprof.tensor.trace_roofline import TraceRoofline, trace_roofline
from aiprof.trace import Trace, TraceSet
from aiprof.trace.heap import release_freed
from aiprof.trace.stream import TraceStream, shifted_table
from aiprof.trace.tables import StepTable

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
    parts = [_trace_part(trace) for trace in traces]  # before the replay timelines exist
    release_freed()  # their passes' temporaries (diagnose/context.py, ``_releasing``)
    if diagnosis is None:
        diagnosis, contexts = diagnose_ranks(traces, options)
    else:
        contexts = [Context(trace, options or DiagnoseOptions()) for trace in traces]
    views = [_rank_view(part, ctx) for part, ctx in zip(parts, contexts, strict=True)]
    del contexts  # the replay timelines, before the report's views are computed
    release_freed()
    return ReportData(title, diagnosis, views)


@dataclass(frozen=True)
class RankReportPart:
    """What the report needs of one rank of a ``TraceStream``, computed in its worker."""

    diagnosis: RankDiagnosis
    view: RankView
    timeline: StepTimeline
    steps: StepTable


def report_stream(
    stream: TraceStream, title: str, options: DiagnoseOptions | None = None
) -> tuple[ReportData, StepTimeline, tuple[float, ...]]:
    """``report_data`` of a ``TraceStream`` (each rank diagnosed and viewed in its worker),
    every rank's steps on one timeline (``merged_timeline``) and the ranks' clock shifts."""
    options = options or DiagnoseOptions()
    mapped = stream.map(partial(report_rank, options=options, part=len(stream) > 1))
    parts = list(mapped.results)
    ranks = shifted_parts([p.diagnosis for p in parts], mapped.shifts_us)
    diagnosis = assemble(ranks, options, mapped.alignment)
    timeline = merge_timelines([(p.diagnosis.rank, p.timeline, shifted_table(p.steps, shift))
                                for p, shift in zip(parts, mapped.shifts_us, strict=True)])
    return ReportData(title, diagnosis, [p.view for p in parts]), timeline, mapped.shifts_us


def report_rank(trace: Trace, options: DiagnoseOptions, part: bool) -> RankReportPart:
    """A worker's share of ``report_stream``: one rank's diagnosis, view and timeline."""
    trace_part = _trace_part(trace)
    found, ctx = diagnose_trace(trace, options)
    return RankReportPart(stream_rank(trace, options, part, (found, ctx)),
                          _rank_view(trace_part, ctx), step_timeline(trace), trace.steps)


@dataclass(frozen=True)
class _TracePart:
    """The part of a ``RankView`` read from the trace alone: computed before the diagnosis, so
    that its passes' peaks do not come on top of the replay's timeline (docs/scale.md)."""

    summary: RankSummary
    step_number: int
    step_us: float
    timeline: list[TimelineOp]
    roofline: TraceRoofline | None


def _trace_part(trace: Trace) -> _TracePart:
    steps = trace.steps
    number, start, end = 0, 0.0, 0.0
    if len(steps):
        i = int(np.argsort(steps.duration_us)[len(steps) // 2])  # the median step
        number, start, end = int(steps.number[i]), float(steps.start_us[i]), float(steps.end_us[i])
    return _TracePart(summarize_trace(trace), number, end - start, _timeline(trace, start, end),
                      _roofline(trace))


def _rank_view(part: _TracePart, ctx: Context) -> RankView:
    return RankView(
        summary=part.summary,
        idle=ctx.idle,
        occupancy=ctx.occupancy,
        step_number=part.step_number,
        step_us=part.step_us,
        timeline=part.timeline,
        roofline=part.roofline,
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
