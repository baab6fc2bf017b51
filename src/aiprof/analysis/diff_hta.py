"""HTA 0.5's ``TraceDiff.compare_traces``, re-implemented: counts and total durations per
name in one iteration of each trace, every kind of event together.

HTA assigns a CPU event to iteration N when it starts inside ``ProfilerStep#N`` (on any
thread), and a GPU event to the iteration of its launching runtime call (``cuda_sync``
events too, through their correlation). Its loader drops the last profiled step; its
default is the first iteration of each trace. aiprof's own ``diff.trace_diff`` compares
per-step means over every step instead.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from aiprof.errors import InputError
from aiprof.trace import Trace
from aiprof.trace.links import gather, lookup
from aiprof.trace.tables import SpanTable


@dataclass(frozen=True)
class HtaDiffRow:
    name: str
    control_counts: int
    test_counts: int
    control_total_duration_us: float
    test_total_duration_us: float


def hta_compare_traces(control: Trace, test: Trace) -> list[HtaDiffRow]:
    """Per name: counts and total durations in the first iteration of each trace."""
    a, b = _iteration_totals(control), _iteration_totals(test)
    return [
        HtaDiffRow(name, a.get(name, (0, 0.0))[0], b.get(name, (0, 0.0))[0],
                   a.get(name, (0, 0.0))[1], b.get(name, (0, 0.0))[1])
        for name in sorted(set(a) | set(b))
    ]


def _iteration_totals(trace: Trace) -> dict[str, tuple[int, float]]:
    steps = trace.steps
    if not trace.step_source.startswith("ProfilerStep") or len(steps) == 0:
        raise InputError(f"{trace.path}: HTA's diff needs ProfilerStep#N annotations")
    first = int(np.argmin(steps.number))
    lo, hi = steps.cpu_start_us[first], steps.cpu_end_us[first]
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])

    def add(table: SpanTable, mask: np.ndarray) -> None:
        ids, counts = np.unique(table.name_id[mask], return_counts=True)
        sums = np.bincount(np.searchsorted(ids, table.name_id[mask]), weights=table.dur_us[mask],
                           minlength=len(ids))
        for name_id, count, total in zip(ids, counts, sums, strict=True):
            entry = totals[trace.name(int(name_id))]
            entry[0] += int(count)
            entry[1] += float(total)

    cpu = (trace.cpu_ops, trace.annotations, trace.runtime, trace.python_functions,
           trace.other_spans)
    for table in cpu:
        add(table, (table.ts_us >= lo) & (table.ts_us < hi))
    calls = trace.runtime
    launched_in = (calls.ts_us >= lo) & (calls.ts_us < hi)
    for gpu in (trace.kernels, trace.memcpy, trace.memset):
        add(gpu, gather(launched_in, gpu.launch_row, False).astype(bool))
    sync_call = lookup(trace.syncs.correlation, calls.correlation)
    add(trace.syncs, gather(launched_in, sync_call, False).astype(bool))
    return {name: (int(c), float(t)) for name, (c, t) in totals.items()}
