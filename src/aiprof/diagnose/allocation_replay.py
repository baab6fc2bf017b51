"""The steps' allocations as the trace's ``[memory]`` events show them, replayed through the
caching allocator (``caching_allocator.py``) with and without some of them.

A ``[memory]`` event is reported by the caching allocator for every block it hands out or takes
back (``reportMemoryUsageToProfiler`` in ``c10/cuda/CUDACachingAllocator.cpp``; recorded with
``profile_memory=True``): the block's size (negative for a free), its address and the totals
allocated and reserved after it. A rise of the reserved total at an allocation is a new segment
(a ``cudaMalloc`` of that many bytes, at the block's address); a drop is a release
(``empty_cache()``). The segments that exist before the first step and hold free space the steps
use are not in the trace; their free space is read from where the steps' blocks land outside
the segments the steps create (``pinned_ranges``): the union of those blocks' address ranges,
in the small pool where no block of more than 1 MiB ever lands there. Replayed from that cache,
the suite's ``empty_cache`` recordings make the trace's own number of new segments per step,
of the same sizes (``tests/diagnose/test_caching_allocator.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from aiprof.analysis.breakdown import step_window
from aiprof.analysis.step_breakdown import in_window
from aiprof.diagnose.caching_allocator import (
    SMALL_SIZE_BYTES,
    PinnedRange,
    SegmentReplay,
    replay_segments,
    round_size,
    segment_size,
)
from aiprof.trace import Trace

CUDA_DEVICE = 1
"""``Device Type`` of a CUDA (or ROCm) device in ``[memory]`` events (c10::DeviceType::CUDA)."""
MALLOC_CALL = re.compile(r"^(cuda|hip)Malloc$")
"""A new segment's call (``alloc_block``: ``cudaMalloc``; ROCm's ``hipMalloc``)."""
FREE_CALL = re.compile(r"^(cuda|hip)Free$")
"""A released segment's call (``release_block``: ``cudaFree``)."""
MAX_EVENTS = 200_000
"""Longer sequences are not replayed (the replay walks the events one by one: 4 µs each on
the 2-core CPU VM, 5.5 ms for the UNet's 1,332; this many take about a second)."""


@dataclass(frozen=True)
class AllocationEvents:
    """The GPU's ``[memory]`` events inside the steps, in time order."""

    rows: np.ndarray
    """Rows of ``trace.memory``."""
    size_bytes: np.ndarray
    """Block size; negative for a free."""
    ids: np.ndarray
    """Block address."""
    release_before: np.ndarray
    """``empty_cache()`` just before the event: the reserved total dropped, or a ``cudaFree``
    call ran since the previous event."""
    new_segment_bytes: np.ndarray
    """At an allocation that made a new segment (the reserved total rose, or a ``cudaMalloc``
    call on its thread ran since that thread's previous event), the segment's size: the rise,
    or where the rise does not show (the first event; a release in between), the allocator's
    size for the block; else 0."""
    free_of: np.ndarray
    """Per allocation, the index of the event that frees its block (-1: not freed)."""

    @property
    def num_mallocs(self) -> int:
        return int((self.new_segment_bytes > 0).sum())


def allocation_events(trace: Trace) -> AllocationEvents | None:
    """The steps' allocation events of the trace's busiest GPU (None without any, or when
    there are more than ``MAX_EVENTS``)."""
    mem = trace.memory
    if not len(trace.steps) or not len(mem.ts_us):
        return None
    gpu = (mem.device_type == CUDA_DEVICE) & in_window(mem.ts_us, step_window(trace))
    if not gpu.any():
        return None
    devices, counts = np.unique(mem.device_id[gpu], return_counts=True)
    rows = np.flatnonzero(gpu & (mem.device_id == devices[np.argmax(counts)]))
    if len(rows) > MAX_EVENTS:
        return None
    rows = rows[np.argsort(mem.ts_us[rows], kind="stable")]
    size = mem.bytes[rows].astype(np.int64)
    reserved = mem.total_reserved[rows].astype(np.int64)
    change = np.diff(reserved, prepend=reserved[0])
    ts, tid = mem.ts_us[rows], mem.tid[rows]
    released = (change < 0) | _calls_since(trace, FREE_CALL, ts, tid, any_thread=True)
    malloc = _calls_since(trace, MALLOC_CALL, ts, tid, any_thread=False)
    rise = (change > 0) & ~released
    new = np.where(rise, change, 0)
    unseen = malloc & ~rise  # the first event, or a release in between hides the rise
    new[unseen] = [segment_size(round_size(int(b))) for b in size[unseen]]
    new[size <= 0] = 0
    return AllocationEvents(
        rows=rows, size_bytes=size, ids=mem.addr[rows].astype(np.int64),
        release_before=released, new_segment_bytes=new,
        free_of=_frees(size, mem.addr[rows].astype(np.int64)),
    )


def _calls_since(trace: Trace, name: re.Pattern[str], ts: np.ndarray, tid: np.ndarray,
                 any_thread: bool) -> np.ndarray:
    """Per event, whether a runtime call named ``name`` ended inside the steps since the
    previous event (of the same thread, unless ``any_thread``)."""
    rt = trace.runtime
    calls = np.flatnonzero(trace.strings.mask(rt.name_id, name)
                           & (rt.end_us >= trace.steps.cpu_start_us[0]))
    groups = np.zeros_like(tid) if any_thread else tid
    out = np.zeros(len(ts), bool)
    for group in np.unique(groups).tolist():
        here = np.flatnonzero(groups == group)
        mine = calls if any_thread else calls[rt.tid[calls] == group]
        after = np.searchsorted(np.sort(rt.end_us[mine]), ts[here], side="right")
        out[here] = after > np.concatenate([[0], after[:-1]])
    return out


def _frees(size: np.ndarray, ids: np.ndarray) -> np.ndarray:
    free_of = np.full(len(size), -1, dtype=np.int64)
    live: dict[int, int] = {}
    for i, (bytes_, name) in enumerate(zip(size.tolist(), ids.tolist(), strict=True)):
        if bytes_ > 0:
            live[name] = i
        elif name in live:
            free_of[live.pop(name)] = i
    return free_of


def pinned_ranges(events: AllocationEvents) -> list[PinnedRange]:
    """The free space of segments older than the steps, from where the steps' blocks land."""
    new = np.flatnonzero(events.new_segment_bytes > 0)
    bases, ends = events.ids[new], events.ids[new] + events.new_segment_bytes[new]
    order = np.argsort(bases)
    bases, ends = bases[order], ends[order]
    alloc = np.flatnonzero(events.size_bytes > 0)
    start = events.ids[alloc]
    at = np.searchsorted(bases, start, side="right") - 1
    inside_new = (at >= 0) & (start < np.append(ends, 0)[at])
    start, size = start[~inside_new], events.size_bytes[alloc][~inside_new]
    ranges: list[PinnedRange] = []
    lo = hi = -1
    small = True
    for a, s in sorted(zip(start.tolist(), size.tolist(), strict=True)):
        if a > hi:
            if hi > lo:
                ranges.append(PinnedRange(lo, hi - lo, small))
            lo, hi, small = a, a + s, s <= SMALL_SIZE_BYTES
        else:
            hi, small = max(hi, a + s), small and s <= SMALL_SIZE_BYTES
    if hi > lo:
        ranges.append(PinnedRange(lo, hi - lo, small))
    return ranges


def replayed(events: AllocationEvents, dropped: np.ndarray | None = None,
             releases: bool = True) -> SegmentReplay:
    """The replay of the events without the ``dropped`` ones (a mask; an allocation and its
    free together), and without ``empty_cache()`` when not ``releases``."""
    keep = np.ones(len(events.rows), bool) if dropped is None else ~dropped
    released = np.cumsum(events.release_before & releases)[keep]  # a dropped event's release
    release = np.diff(released, prepend=0) > 0  # comes before the next kept one
    replay = replay_segments(events.size_bytes[keep], events.ids[keep], release,
                             pinned_ranges(events))
    new = np.zeros(len(keep), bool)
    new[keep] = replay.new_segment
    segment = np.zeros(len(keep), np.int64)
    segment[keep] = replay.segment_bytes
    return SegmentReplay(new_segment=new, segment_bytes=segment,
                         num_releases=replay.num_releases)


@dataclass(frozen=True)
class ReproducedAllocations:
    """A trace's allocation events whose replay makes the trace's own new segments: the only
    ones a model may replay with some of them removed."""

    events: AllocationEvents
    base: SegmentReplay
    """The replay of every event, as recorded."""


def reproduced_allocations(trace: Trace) -> ReproducedAllocations | None:
    """The steps' allocation events and their replay (None: no events, no new segment, or a
    replay that does not make the trace's own number of new segments)."""
    events = allocation_events(trace)
    if events is None or events.num_mallocs == 0:
        return None
    base = replayed(events)
    return ReproducedAllocations(events, base) if base.num_mallocs == events.num_mallocs \
        else None


def scratch_inside(trace: Trace, events: AllocationEvents, op_rows: np.ndarray) -> np.ndarray:
    """Events of blocks allocated and freed inside one of the CPU ops ``op_rows``, on its
    thread (an op's scratch: a cuDNN workspace), allocation and free both: some op of the
    thread that starts before the allocation ends after the free (the latest end among the ops
    started so far)."""
    ops, mem = trace.cpu_ops, trace.memory
    alloc = np.flatnonzero(events.free_of >= 0)
    freed = events.free_of[alloc]
    t_alloc, t_free = mem.ts_us[events.rows[alloc]], mem.ts_us[events.rows[freed]]
    tid = mem.tid[events.rows[alloc]]
    inside = np.zeros(len(alloc), bool)
    op_rows = np.unique(op_rows)
    for thread in np.unique(ops.tid[op_rows]).tolist():
        mine = op_rows[ops.tid[op_rows] == thread]
        mine = mine[np.argsort(ops.ts_us[mine], kind="stable")]
        here = tid == thread
        at = np.searchsorted(ops.ts_us[mine], t_alloc[here], side="right") - 1
        latest_end = np.maximum.accumulate(ops.end_us[mine])[np.maximum(at, 0)]
        inside[here] = (at >= 0) & (t_free[here] <= latest_end)
    mask = np.zeros(len(events.rows), bool)
    mask[alloc[inside]] = True
    mask[freed[inside]] = True
    return mask


def next_launches(trace: Trace, events: AllocationEvents, picked: np.ndarray) -> np.ndarray:
    """For each picked event, the ``gpu_row`` of the first kernel launched after it on its
    thread (-1 when none): the work the allocation holds back."""
    gpu, rt, mem = trace.gpu_ops, trace.runtime, trace.memory
    launched = np.flatnonzero(gpu.launch_row >= 0)
    call = gpu.launch_row[launched]
    ts, tid = mem.ts_us[events.rows[picked]], mem.tid[events.rows[picked]]
    out = np.full(len(picked), -1, dtype=np.int64)
    for thread in np.unique(tid).tolist():
        mine = launched[rt.tid[call] == thread]
        if not len(mine):
            continue
        order = np.argsort(rt.ts_us[gpu.launch_row[mine]], kind="stable")
        mine = mine[order]
        at = np.searchsorted(rt.ts_us[gpu.launch_row[mine]], ts[tid == thread], side="left")
        out[tid == thread] = np.where(at < len(mine), mine[np.minimum(at, len(mine) - 1)], -1)
    return out
