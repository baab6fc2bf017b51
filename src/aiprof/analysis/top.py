"""The kernels and CPU ops that take the most time, grouped by name."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.step_breakdown import in_window
from aiprof.trace import Trace
from aiprof.trace.steps import PROFILER_STEP
from aiprof.trace.tables import SpanTable


@dataclass(frozen=True)
class NameTotal:
    """One name's time: ``pct`` is its share of the table's total time in the window."""

    name: str
    count: int
    total_us: float
    mean_us: float
    pct: float


def top_by_name(
    names: list[str],
    table: SpanTable,
    mask: np.ndarray,
    limit: int = 10,
    denominator_us: float | None = None,
) -> list[NameTotal]:
    """Rows selected by ``mask`` grouped by name, largest total duration first.

    ``pct`` is each name's share of ``denominator_us`` (default: the selected rows' total).
    """
    ids, durations = table.name_id[mask], table.dur_us[mask]
    if len(ids) == 0:
        return []
    counts = np.bincount(ids)  # ids are small dense string ids: no sort needed
    distinct = np.flatnonzero(counts)
    totals = np.bincount(ids, weights=durations)[distinct]
    counts = counts[distinct]
    grand = float(durations.sum()) if denominator_us is None else denominator_us
    order = np.lexsort((distinct, -totals))[:limit]
    return [
        NameTotal(
            name=names[int(distinct[i])],
            count=int(counts[i]),
            total_us=float(totals[i]),
            mean_us=float(totals[i] / counts[i]),
            pct=100.0 * float(totals[i]) / grand if grand > 0 else 0.0,
        )
        for i in order
    ]


def top_kernels(trace: Trace, limit: int = 10) -> list[NameTotal]:
    """Kernels that started inside the profiled steps; ``pct`` of all their GPU time."""
    window = step_window(trace)
    return top_by_name(
        trace.strings.display, trace.kernels, in_window(trace.kernels.ts_us, window), limit
    )


def top_ops(trace: Trace, limit: int = 10) -> list[NameTotal]:
    """CPU ops that started inside the steps, by inclusive time; ``pct`` of the step time.

    Ops nest (``aten::conv2d`` contains ``aten::convolution``), so rows overlap and their
    percentages do not add up to 100.
    """
    ops = trace.cpu_ops
    window = step_window(trace)
    mask = in_window(ops.ts_us, window) & ~trace.strings.mask(ops.name_id, PROFILER_STEP)
    return top_by_name(trace.strings.display, ops, mask, limit, iv.length(window))
