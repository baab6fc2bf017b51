"""Step time in torch-tb-profiler's categories (kineto-trace-format.md §10.2).

Within the steps, each category in priority order claims the time its spans cover that no
earlier category claimed: Kernel, Memcpy, Memset, Communication, Runtime, DataLoader,
CPU Exec; the rest is Other. Categories never double count and sum to the step time
(a memcpy hidden under a kernel counts 0). Communication is NCCL/RCCL kernels plus CPU-side
``nccl:*``/``gloo:*`` ranges (so CPU-only gloo jobs show it too); tb-profiler counted comm
kernels by their op's External id, with the same result on NCCL traces.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.classify import (
    CPU_COMMUNICATION,
    DATALOADER,
    communication_kernels,
    spans,
)
from aiprof.trace import Trace
from aiprof.trace.steps import PROFILER_STEP

CATEGORIES = (
    "kernel",
    "memcpy",
    "memset",
    "communication",
    "runtime",
    "dataloader",
    "cpu_exec",
    "other",
)


@dataclass(frozen=True)
class StepBreakdown:
    """Microseconds per category, averaged over the steps, and their share of step time."""

    per_step_us: dict[str, float]
    num_steps: int

    @property
    def step_us(self) -> float:
        return sum(self.per_step_us.values())

    def pct(self, category: str) -> float:
        total = self.step_us
        return 100.0 * self.per_step_us[category] / total if total > 0 else 0.0


def step_breakdown(trace: Trace) -> StepBreakdown:
    window = step_window(trace)
    claimed = iv.EMPTY
    totals: dict[str, float] = {}
    for category, covered in _category_spans(trace):
        mine = iv.subtract(iv.intersect(covered, window), claimed)
        del covered
        totals[category] = iv.length(mine)
        claimed = iv.union_all(claimed, mine)
    totals["other"] = max(0.0, iv.length(window) - iv.length(claimed))
    steps = max(len(trace.steps), 1)
    return StepBreakdown({c: totals[c] / steps for c in CATEGORIES}, len(trace.steps))


def _category_spans(trace: Trace) -> Iterator[tuple[str, iv.Intervals]]:
    """Each category's spans in priority order, built one at a time (a trace's every span
    set at once would hold several copies of its spans)."""
    comm_kernels = communication_kernels(trace)
    ann, ops = trace.annotations, trace.cpu_ops

    def masks(pattern: re.Pattern[str]) -> tuple[np.ndarray, np.ndarray]:
        return trace.strings.mask(ann.name_id, pattern), trace.strings.mask(ops.name_id, pattern)

    ann_loader, ops_loader = masks(DATALOADER)
    ann_comm, ops_comm = masks(CPU_COMMUNICATION)
    ann_step, ops_step = masks(PROFILER_STEP)
    yield "kernel", spans(trace.kernels, ~comm_kernels)
    yield "memcpy", spans(trace.memcpy)
    yield "memset", spans(trace.memset)
    yield "communication", iv.union_all(
        spans(trace.kernels, comm_kernels), spans(ann, ann_comm), spans(ops, ops_comm)
    )
    yield "runtime", spans(trace.runtime)
    yield "dataloader", iv.union_all(spans(ann, ann_loader), spans(ops, ops_loader))
    yield "cpu_exec", iv.union_all(
        spans(ann, ~(ann_loader | ann_comm | ann_step)),
        spans(ops, ~(ops_loader | ops_comm | ops_step)),
    )


def in_window(ts_us: np.ndarray, window: iv.Intervals) -> np.ndarray:
    """Mask of timestamps that fall inside a normalized interval set."""
    starts, ends = window
    if len(starts) == 0:
        return np.zeros(len(ts_us), dtype=bool)
    index = np.searchsorted(starts, ts_us, side="right")  # intervals starting at or before
    inside = index > 0
    index -= 1  # in place: a pass over every event makes two arrays of its length, not six
    np.maximum(index, 0, out=index)
    inside &= ts_us <= ends[index]
    return inside
