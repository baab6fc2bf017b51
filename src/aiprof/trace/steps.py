"""Steps (iterations) of a trace.

Source, in order of preference:
1. ``ProfilerStep#N`` spans (``user_annotation`` in 2.x, ``cpu_op``/``Operator`` before).
2. Spans of an annotation name the user gives (``--step-annotation NAME``): each is one step.
3. Otherwise one step spanning the whole trace (first to last event, profiler spans excluded).

As torch-tb-profiler does (kineto-trace-format.md §10.2), each step's end is extended to the
end of the last GPU op launched inside its CPU span, and its start is clamped to the previous
step's end, so GPU work is attributed to the step that launched it and steps never overlap.
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from aiprof.trace.strings import StringTable
from aiprof.trace.tables import AnnotationTable, GpuOpTable, RuntimeTable, SpanTable, StepTable
from aiprof.trace.validate import TraceRepairWarning

PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
SOURCE_PROFILER_STEP = "ProfilerStep"
SOURCE_WHOLE_TRACE = "whole trace"


def find_steps(
    strings: StringTable,
    span_tables: list[SpanTable],
    gpu_tables: list[GpuOpTable],
    runtime: RuntimeTable,
    annotation: str | None = None,
) -> tuple[StepTable, str]:
    """The step table and a description of where the steps came from."""
    if annotation is not None:
        pattern = re.compile(f"^{re.escape(annotation)}$")
        source = f"annotation '{annotation}'"
    else:
        pattern, source = PROFILER_STEP, SOURCE_PROFILER_STEP
    starts, ends, numbers = _spans_named(strings, span_tables, pattern)
    if len(starts) == 0:
        if annotation is not None:
            return StepTable.empty(), source
        return _whole_trace(span_tables, gpu_tables), SOURCE_WHOLE_TRACE
    if annotation is not None:
        numbers = np.arange(len(starts), dtype=np.int64)
    return _extend_to_gpu(starts, ends, numbers, gpu_tables, runtime), source


def _spans_named(
    strings: StringTable, tables: list[SpanTable], pattern: re.Pattern[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    starts, ends, numbers = [], [], []
    for table in tables:
        mask = strings.mask(table.name_id, pattern)
        if not mask.any():
            continue
        starts.append(table.ts_us[mask])
        ends.append(table.end_us[mask])
        ids = table.name_id[mask]
        numbers.append(
            np.array([_step_number(strings.full(i), pattern) for i in ids], dtype=object)
        )
        if isinstance(table, AnnotationTable):
            break  # 2.x writes ProfilerStep as an annotation; ignore duplicates elsewhere
    if not starts:
        empty = np.zeros(0)
        return empty, empty, np.zeros(0, dtype=np.int64)
    start, end, number = np.concatenate(starts), np.concatenate(ends), np.concatenate(numbers)
    order = np.argsort(start, kind="stable")
    return start[order], end[order], _as_int64(number[order])


MAX_STEP_DIGITS = 18
"""Step numbers of up to 18 digits fit in int64; longer ones renumber the steps."""


def _step_number(name: str, pattern: re.Pattern[str]) -> int:
    """N of ``ProfilerStep#N``; -1 when N has more than ``MAX_STEP_DIGITS`` digits."""
    match = pattern.search(name)
    if not match or not match.groups():
        return 0
    digits = match.group(1)
    return int(digits) if len(digits) <= MAX_STEP_DIGITS else -1


def _as_int64(numbers: np.ndarray) -> np.ndarray:
    """Step numbers as int64; if one did not fit, the steps are numbered 0, 1, ... instead."""
    if any(n == -1 for n in numbers.tolist()):
        warnings.warn(
            f"a ProfilerStep number has more than {MAX_STEP_DIGITS} digits: steps renumbered "
            "0, 1, ... in time order",
            TraceRepairWarning,
            stacklevel=5,
        )
        return np.arange(len(numbers), dtype=np.int64)
    return numbers.astype(np.int64)


def _extend_to_gpu(
    starts: np.ndarray,
    ends: np.ndarray,
    numbers: np.ndarray,
    gpu_tables: list[GpuOpTable],
    runtime: RuntimeTable,
) -> StepTable:
    new_ends = ends.copy()
    for gpu in gpu_tables:
        launched = gpu.launch_row >= 0
        if not launched.any():
            continue
        launch_ts = runtime.ts_us[gpu.launch_row[launched]]
        gpu_end = gpu.end_us[launched]
        step = np.searchsorted(starts, launch_ts, side="right") - 1
        inside = (step >= 0) & (launch_ts <= ends[np.maximum(step, 0)])
        np.maximum.at(new_ends, step[inside], gpu_end[inside])
    new_starts = starts.copy()
    new_starts[1:] = np.maximum(starts[1:], new_ends[:-1])
    new_ends = np.maximum(new_ends, new_starts)
    return StepTable(numbers, starts, ends, new_starts, new_ends)


def _whole_trace(span_tables: list[SpanTable], gpu_tables: list[GpuOpTable]) -> StepTable:
    tables = [t for t in [*span_tables, *gpu_tables] if len(t)]
    if not tables:
        return StepTable.empty()
    start = min(float(t.ts_us.min()) for t in tables)
    end = max(float(t.end_us.max()) for t in tables)
    one = np.array([start]), np.array([end])
    return StepTable(np.zeros(1, dtype=np.int64), *one, *one)
