"""What a fix that removes some allocations does to the ``cudaMalloc`` calls of a step that
empties the cache (``torch.cuda.empty_cache()``).

After ``empty_cache()`` every segment without a live block is gone, so each step builds its
segments again; which of its allocations need a new one depends on which blocks were freed
before them. A fix that removes allocations (``channels_last`` removes cuDNN's NCHW<->NHWC
staging, the workspace each converting convolution allocates and frees) also removes the freed
blocks later allocations reused: those now need segments of their own. The replay of the
caching allocator (``allocation_replay.py``) says which allocations need a new segment with
and without the removed ones; each one the fix adds costs what one costs in the trace (the
median ``cudaMalloc`` call, the capture check before it, the allocator's slow path in its op
and the median ``cudaFree`` with which ``empty_cache()`` gives it back), before the first
kernel launched after it; each one the fix removes takes its own calls away.

Used only where the replay of the unchanged steps reproduces the trace's own number of new
segments (with ``profile_memory=True``; without ``[memory]`` events nothing changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.diagnose.allocation_replay import (
    FREE_CALL,
    next_launches,
    replayed,
    scratch_inside,
)
from aiprof.diagnose.context import Context
from aiprof.diagnose.rules.allocator_churn import (
    CAPTURE_CHECK,
    MALLOC_CALL,
    slow_path_excess,
)


@dataclass(frozen=True)
class SegmentShift:
    """The allocator calls a fix adds and removes."""

    mallocs_per_step: float
    """New segments per step in the trace (and in its replay)."""
    mallocs_per_step_after: float
    """New segments per step in the replay without the removed allocations."""
    segment_cost_us: float
    """What one new segment costs the host in this trace."""
    added_cpu_us: dict[int, float] = field(default_factory=dict)
    """Host time added before the launch of ``gpu_row``."""
    removed_cpu: iv.Intervals = iv.EMPTY
    """The calls of the segments the fix no longer needs."""


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if len(values) else 0.0


def _malloc_calls(ctx: Context, picked: np.ndarray, events_rows: np.ndarray) -> np.ndarray:
    """The ``cudaMalloc`` call that made each picked event's segment (runtime rows): the last
    one ending before the event on its thread."""
    rt, mem = ctx.trace.runtime, ctx.trace.memory
    malloc = np.flatnonzero(ctx.trace.strings.mask(rt.name_id, MALLOC_CALL))
    calls: list[int] = []
    for row in events_rows[picked].tolist():
        mine = malloc[(rt.tid[malloc] == mem.tid[row]) & (rt.end_us[malloc] <= mem.ts_us[row])]
        if len(mine):
            calls.append(int(mine[np.argmax(rt.end_us[mine])]))
    return np.unique(np.array(calls, dtype=np.int64))


def _removed(ctx: Context, calls: np.ndarray) -> iv.Intervals:
    """The calls, the capture check right before each, and the slow path inside their ops."""
    rt = ctx.trace.runtime
    check = np.flatnonzero(ctx.trace.strings.mask(rt.name_id, CAPTURE_CHECK))
    start = rt.ts_us[calls].copy()
    for i, call in enumerate(calls.tolist()):
        before = check[(rt.tid[check] == rt.tid[call]) & (rt.end_us[check] <= rt.ts_us[call])]
        if len(before):
            start[i] = min(start[i], rt.ts_us[before[np.argmax(rt.end_us[before])]])
    ops = rt.op_row[calls]
    ops = ops[ops >= 0]
    in_ops = iv.union(ctx.trace.cpu_ops.ts_us[ops], ctx.trace.cpu_ops.end_us[ops])
    slow = iv.intersect(slow_path_excess(ctx, ctx.allocator.call_spans), in_ops)
    return iv.union_all(iv.union(start, rt.end_us[calls]), slow)


def _step_of(ctx: Context, ts_us: np.ndarray) -> np.ndarray:
    return np.searchsorted(ctx.trace.steps.cpu_start_us, ts_us, side="right") - 1


def _frees(ctx: Context, net_per_step: np.ndarray, cost_us: float,
           added_cpu: dict[int, float]) -> iv.Intervals:
    """Each step's change in segments given back: more ``cudaFree`` calls charged before the
    step's first launch (the previous step's ``empty_cache()`` gives them back, the queue
    drained by its sync), fewer taken away (the step's shortest)."""
    trace = ctx.trace
    rt, gpu = trace.runtime, trace.gpu_ops
    launched = np.flatnonzero(gpu.launch_row >= 0)
    launch_ts = rt.ts_us[gpu.launch_row[launched]]
    free = np.flatnonzero(trace.strings.mask(rt.name_id, FREE_CALL))
    free_step = _step_of(ctx, rt.ts_us[free])
    gone: list[int] = []
    for step, net in enumerate(net_per_step.tolist()):
        if net > 0:
            inside = launched[_step_of(ctx, launch_ts) == step]
            if len(inside):
                first = int(inside[np.argmin(rt.ts_us[gpu.launch_row[inside]])])
                added_cpu[first] = added_cpu.get(first, 0.0) + net * cost_us
        elif net < 0:
            mine = free[free_step == step]
            gone.extend(mine[np.argsort(rt.dur_us[mine], kind="stable")][:-net].tolist())
    rows = np.array(gone, dtype=np.int64)
    return iv.union(rt.ts_us[rows], rt.end_us[rows])


def segment_costs_us(ctx: Context) -> tuple[float, float]:
    """One new segment's host time in the trace: the median ``cudaMalloc``, the median capture
    check and the slow path per ``cudaMalloc`` (``allocator_churn``); and the median
    ``cudaFree`` that gives it back."""
    rt = ctx.trace.runtime
    al = ctx.allocator
    spans = al.call_spans
    inside = iv.contains(spans, rt.ts_us)
    malloc = inside & ctx.trace.strings.mask(rt.name_id, MALLOC_CALL)
    free = inside & ctx.trace.strings.mask(rt.name_id, FREE_CALL)
    check = ctx.trace.strings.mask(rt.name_id, CAPTURE_CHECK)
    num = int(malloc.sum())
    slow = iv.length(slow_path_excess(ctx, spans)) / num if num else 0.0
    return (_median(rt.dur_us[malloc]) + _median(rt.dur_us[check]) + slow,
            _median(rt.dur_us[free]))


def without_scratch(ctx: Context, op_rows: np.ndarray) -> SegmentShift | None:
    """The allocator calls a step makes once the blocks allocated and freed inside the CPU ops
    ``op_rows`` are gone (None: no new segments in the trace, no such blocks, or a replay
    that does not reproduce the trace's own segments)."""
    if ctx.allocations is None or not len(op_rows):
        return None
    events, base = ctx.allocations.events, ctx.allocations.base
    scratch = scratch_inside(ctx.trace, events, op_rows)
    if not scratch.any():
        return None
    after = replayed(events, scratch)
    steps = max(len(ctx.trace.steps), 1)
    added = np.flatnonzero(after.new_segment & ~base.new_segment)
    gone = np.flatnonzero(base.new_segment & ~after.new_segment)
    malloc_us, free_us = segment_costs_us(ctx)
    sites = next_launches(ctx.trace, events, added)
    added_cpu: dict[int, float] = {}
    for row in sites[sites >= 0].tolist():
        added_cpu[row] = added_cpu.get(row, 0.0) + malloc_us
    event_step = _step_of(ctx, ctx.trace.memory.ts_us[events.rows])
    net = (np.bincount(event_step[added], minlength=steps)
           - np.bincount(event_step[gone], minlength=steps))[:steps]
    freed = _frees(ctx, net, free_us, added_cpu)
    return SegmentShift(
        mallocs_per_step=base.num_mallocs / steps,
        mallocs_per_step_after=after.num_mallocs / steps,
        segment_cost_us=malloc_us + free_us,
        added_cpu_us=added_cpu,
        removed_cpu=iv.union_all(_removed(ctx, _malloc_calls(ctx, gone, events.rows)), freed),
    )
