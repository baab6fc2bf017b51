"""``summary(trace)``: the one-screen picture of a trace, per rank."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis.breakdown import TemporalBreakdown, gpu_busy_pct, temporal_breakdown
from aiprof.analysis.step_breakdown import StepBreakdown, step_breakdown
from aiprof.analysis.top import NameTotal, top_kernels, top_ops
from aiprof.forked import map_forked
from aiprof.trace import Trace, TraceSet
from aiprof.trace.stream import TraceStream

SCHEMA = "aiprof.summary/1"
PARALLEL_FROM_EVENTS = 1_000_000
"""Forking pays from about this many events in all ranks. 2-core VM, 2026-11-30, ranks of
df_index_resolver: 432k events 0.042 s alone against 0.068 s forked, 648k even (0.065 and
0.066 s), 864k 0.075 against 0.070 s."""


@dataclass(frozen=True)
class StepTimes:
    mean_us: float
    median_us: float
    min_us: float
    max_us: float


@dataclass(frozen=True)
class RankSummary:
    """Everything ``aiprof summary`` shows for one trace."""

    rank: int
    path: str
    device: str | None
    num_events: int
    num_steps: int
    step_source: str
    step_time: StepTimes
    gpu_busy_pct: float
    temporal: TemporalBreakdown
    steps: StepBreakdown
    top_kernels: list[NameTotal]
    top_ops: list[NameTotal]


def summarize_trace(trace: Trace) -> RankSummary:
    durations = trace.steps.duration_us
    times = (
        StepTimes(
            float(durations.mean()),
            float(np.median(durations)),
            float(durations.min()),
            float(durations.max()),
        )
        if len(durations)
        else StepTimes(0.0, 0.0, 0.0, 0.0)
    )
    device = trace.device
    return RankSummary(
        rank=trace.rank,
        path=trace.path,
        device=device.name if device else None,
        num_events=trace.num_events,
        num_steps=len(trace.steps),
        step_source=trace.step_source,
        step_time=times,
        gpu_busy_pct=gpu_busy_pct(trace),
        temporal=temporal_breakdown(trace),
        steps=step_breakdown(trace),
        top_kernels=top_kernels(trace),
        top_ops=top_ops(trace),
    )


def summary(traces: Trace | TraceSet | TraceStream) -> list[RankSummary]:
    """One ``RankSummary`` per trace, in rank order.

    Ranks holding ``PARALLEL_FROM_EVENTS`` events or more in all are summarized in forked
    processes; below that, forking costs more than it saves. A ``TraceStream``'s ranks are
    read and summarized in its workers (or Ray tasks), one rank at a time each.
    """
    if isinstance(traces, Trace):
        return [summarize_trace(traces)]
    if isinstance(traces, TraceStream):
        return list(traces.map(summarize_trace).results)
    if sum(t.num_events for t in traces) < PARALLEL_FROM_EVENTS:
        return [summarize_trace(t) for t in traces]
    return map_forked(summarize_trace, traces.traces)
