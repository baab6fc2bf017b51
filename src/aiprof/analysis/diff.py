"""Two traces (or runs) compared: the step time change by category, and ops and kernels
added, removed and changed.

Per step (means over each trace's profiled steps), the step time splits into compute,
communication (exposed), memory (copies not hidden) as in ``breakdown.temporal_breakdown``,
and the GPU's idle time in two: ``host_idle`` when no stream had launched work waiting (the
GPU waited for the host) and ``other_idle`` when work was queued but not running (waits on
events, syncs or other streams). The five parts sum to the step time, so their changes sum
to its change. Ops (every CPU span of the op view: ops, annotations, runtime calls) are
matched by name, kind and input shapes; kernels by name. Counts and totals are per step;
``ProfilerStep#N`` spans are left out (the step time is the first table).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window, temporal_breakdown
from aiprof.analysis.classify import spans
from aiprof.analysis.frames import data_frame
from aiprof.analysis.ops import KINDS, op_spans
from aiprof.analysis.queue import queue_length, waiting
from aiprof.analysis.step_breakdown import in_window
from aiprof.trace import Trace
from aiprof.trace.steps import PROFILER_STEP

PARTS = ("compute_us", "communication_us", "memory_us", "host_idle_us", "other_idle_us")


@dataclass(frozen=True)
class StepParts:
    """Mean step time of one trace and its five parts (µs per step)."""

    num_steps: int
    step_us: float
    compute_us: float
    communication_us: float
    memory_us: float
    host_idle_us: float
    other_idle_us: float


@dataclass(frozen=True)
class NameChange:
    """One op or kernel in both traces (per step); ``status``: added, removed, changed, same."""

    table: str  # "op" or "kernel"
    name: str
    kind: str
    input_shapes: str | None
    a_count: float
    b_count: float
    a_total_us: float
    b_total_us: float
    status: str

    @property
    def delta_total_us(self) -> float:
        return self.b_total_us - self.a_total_us

    @property
    def a_mean_us(self) -> float:
        return self.a_total_us / self.a_count if self.a_count else 0.0

    @property
    def b_mean_us(self) -> float:
        return self.b_total_us / self.b_count if self.b_count else 0.0


@dataclass(frozen=True)
class TraceDiff:
    """B against A: parts per step and every op and kernel, largest change first."""

    a_path: str
    b_path: str
    a: StepParts
    b: StepParts
    changes: list[NameChange]

    def delta_us(self, part: str) -> float:
        return float(getattr(self.b, part) - getattr(self.a, part))

    def to_pandas(self) -> Any:
        names = [f.name for f in fields(NameChange)]
        columns: dict[str, list[Any]] = {n: [getattr(c, n) for c in self.changes] for n in names}
        columns["delta_total_us"] = [c.delta_total_us for c in self.changes]
        return data_frame(columns)


def step_parts(trace: Trace) -> StepParts:
    """The mean step and its five parts (see the module docstring)."""
    window = step_window(trace)
    t = temporal_breakdown(trace, window)
    busy = iv.union_all(spans(trace.kernels), spans(trace.memcpy), spans(trace.memset))
    idle = iv.subtract(window, busy)
    queued = iv.length(iv.intersect(idle, waiting(queue_length(trace))))
    n = max(len(trace.steps), 1)
    return StepParts(len(trace.steps), t.window_us / n, t.compute_us / n,
                     t.communication_us / n, t.memory_us / n,
                     max(t.idle_us - queued, 0.0) / n, queued / n)


def trace_diff(a: Trace, b: Trace, *, min_change_pct: float = 0.0) -> TraceDiff:
    """Compare ``b`` with ``a``; ``changed`` means a count or a total differs by more than
    ``min_change_pct`` percent of A's (``0``: any difference)."""
    tables = {**_op_totals(a, "a"), **_op_totals(b, "b")}
    merged: dict[tuple[str, str, str, str | None], dict[str, float]] = {}
    for (side, key), (count, total) in tables.items():
        merged.setdefault(key, {})[f"{side}_count"] = count
        merged[key][f"{side}_total"] = total
    changes = [_change(key, v, min_change_pct) for key, v in merged.items()]
    changes.sort(key=lambda c: (-abs(c.delta_total_us), c.table, c.name))
    return TraceDiff(a.path, b.path, step_parts(a), step_parts(b), changes)


def _op_totals(
    trace: Trace, side: str
) -> dict[tuple[str, tuple[str, str, str, str | None]], tuple[float, float]]:
    """Per-step count and total of each op (name, kind, shapes) and kernel in the steps."""
    window = step_window(trace)
    n = max(len(trace.steps), 1)
    out: dict[tuple[str, tuple[str, str, str, str | None]], tuple[float, float]] = {}
    s = op_spans(trace)
    inside = in_window(s.ts_us, window) & ~trace.strings.mask(s.name_id, PROFILER_STEP)
    keys = np.stack([s.name_id[inside], s.kind[inside], s.shapes_id[inside]], axis=1)
    for (name_id, kind, shape), count, total in _grouped(keys, s.total_cpu_us[inside]):
        shapes = trace.json_texts[shape] if shape >= 0 else None
        out[(side, ("op", trace.name(name_id), KINDS[kind], shapes))] = (count / n, total / n)
    k = trace.kernels
    inside = in_window(k.ts_us, window)
    keys = np.stack([k.name_id[inside]], axis=1)
    for (name_id,), count, total in _grouped(keys, k.dur_us[inside]):
        out[(side, ("kernel", trace.name(name_id), "kernel", None))] = (count / n, total / n)
    return out


def _grouped(keys: np.ndarray, values: np.ndarray) -> list[tuple[tuple[int, ...], int, float]]:
    """Rows of ``keys`` (non-negative ints but for -1) grouped: key, count, sum of values."""
    if len(keys) == 0:
        return []
    flat = np.zeros(len(keys), dtype=np.int64)
    for column in keys.T:  # mixed radix: one int64 per row
        flat = flat * (int(column.max()) + 2) + column + 1
    _, first, group = np.unique(flat, return_index=True, return_inverse=True)
    counts = np.bincount(group)
    totals = np.bincount(group, weights=values)
    return [(tuple(int(x) for x in keys[i]), int(counts[g]), float(totals[g]))
            for g, i in enumerate(first)]


def _change(key: tuple[str, str, str, str | None], v: dict[str, float], pct: float) -> NameChange:
    a_count, b_count = v.get("a_count", 0.0), v.get("b_count", 0.0)
    a_total, b_total = v.get("a_total", 0.0), v.get("b_total", 0.0)
    if a_count == 0:
        status = "added"
    elif b_count == 0:
        status = "removed"
    elif _differs(a_count, b_count, pct) or _differs(a_total, b_total, pct):
        status = "changed"
    else:
        status = "same"
    table, name, kind, shapes = key
    return NameChange(table, name, kind, shapes, a_count, b_count, a_total, b_total, status)


def _differs(a: float, b: float, pct: float) -> bool:
    return abs(b - a) > pct / 100.0 * abs(a)
