"""Replay of the profiled steps: the step time that remains when a cause is removed.

The model (aiprof's; docs/diagnose.md "The replay"). Every GPU op launched inside the steps
and every CPU sync point becomes an event in CPU order. The CPU runs from event to event:
between two events it spends the *work* time the trace shows (the gap between the end of one
event and the start of the next). A launch call hands its op to the GPU when it returns; the op
starts at ``max(submission + latency, previous op of its stream's end + gap)`` and runs for its
duration, and not before the op of another stream it waited for (a cross-stream event, found
in the trace) has ended. A sync point makes the CPU wait for the ops the trace shows it waited
for (per stream, the last one that had ended when the sync returned); a blocking copy for itself.
``latency`` (launch call's return to the op's start on an idle GPU) and ``gap`` (turnaround
between queued ops, per kind of op) are medians measured on the trace itself.

The CPU time excludes the profiler's own cost: ``profiler_overhead_us`` per recorded CPU-side
event (a CPU op or a runtime call), taken out of the work gap it starts in or out of the call
it is (see ``DiagnoseOptions``), so the replay is of the run without the profiler.

A fix is a ``Change``: new op durations, CPU time removed (dataloader, allocator calls,
scalar reads), sync points that no longer block, blocking copies made asynchronous, or CPU
work between launches collapsed (CUDA graphs). The gain is ``1 - replay(change) /
replay(nothing)``; both replays use the same model, so its systematic errors mostly cancel.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from aiprof.analysis import intervals as iv

try:
    from aiprof.diagnose import _replay
except ImportError:  # not compiled: the Python loop (the same results, slower)
    _replay = None  # type: ignore[assignment]

LAUNCH, BLOCKING_LAUNCH, SYNC = 0, 1, 2
WAITING_CALL_FACTOR = 10.0
"""A launch call longer than this many times the median launch call waited inside it (lazy
module loading on a first launch, a full launch queue): ``launch_work_scale`` (CUDA graphs)
does not remove the part beyond that (aiprof's threshold; the 6.5 ms first launch of the
public MI250 trace against a 6.6 µs median)."""


@dataclass(frozen=True)
class Timeline:
    """Events of the steps, sorted by CPU start time (columns of equal length)."""

    kind: np.ndarray
    """``LAUNCH``, ``BLOCKING_LAUNCH`` (a copy the CPU waits for) or ``SYNC``."""
    cpu_start_us: np.ndarray
    cpu_end_us: np.ndarray
    gpu_row: np.ndarray
    """Row of ``trace.gpu_ops`` (-1 for ``SYNC``)."""
    stream: np.ndarray
    """Dense stream index (0..num_streams-1; -1 for ``SYNC``)."""
    gpu_dur_us: np.ndarray
    after: np.ndarray
    """Event index of an op of another stream this op waited for (-1: none); see timeline.py."""
    delay_us: np.ndarray
    """Start delay the trace does not explain (kept as is by every change); negative for an op
    that started in the tail of the other stream's op it waited for (``after``): it took the
    SMs as that op's last blocks left them, never before its own stream and its launch allow."""
    wait_ptr: np.ndarray
    """``wait_idx[wait_ptr[k]:wait_ptr[k + 1]]``: the ops sync event ``k`` waited for."""
    wait_idx: np.ndarray
    own_us: np.ndarray
    """CPU time of a sync or blocking copy call that was not waiting for the GPU (the call's
    end minus the later of its start and the end of what it waited for, in the trace)."""
    sync_id: np.ndarray
    """Row in the trace's runtime table of the sync call or the copy's launch call."""
    start_us: float
    end_us: float
    cpu_stop_us: float
    """Where the CPU's last step span ends: the CPU works until there after its last event."""
    latency_us: float
    """Launch call's return to the op's start, on an idle GPU."""
    gap_us: np.ndarray
    """Per event: the turnaround before this op when it was already queued (by kind of op)."""
    num_streams: int
    measured_us: float
    """The steps' period in the trace (``GpuWindow.window_us``)."""
    num_queued: int = 0
    """The first events are ops queued before the steps (``GpuWindow.backlog``): the GPU runs
    them first, but the GPU's side of the step is measured from their end."""
    recorded_starts_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Sorted start times of the CPU-side events recorded inside the steps (CPU ops and
    runtime calls): each cost the profiler ``profiler_overhead_us``."""
    launch_call_us: float = 0.0
    """Median CPU time of a launch call (what an asynchronous copy's call would cost)."""
    profiler_overhead_us: float = 0.0
    """CPU time the profiler added per recorded CPU-side event; taken out of the CPU time."""
    gpu_scale: float = 1.0
    """Factor on every GPU op's duration (a change's new durations included): below 1 when the
    GPU itself ran slower under the profiler than without it (``calibration.py``)."""
    queue_depth: int = 0
    """Ops of a stream in flight at which a launch on it blocks until the stream's oldest ends
    (``launch_queue.py``, measured on the trace); 0: the queues never filled, no limit."""
    backlog_twin: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Per event: for an op queued before the steps, the event of the same op in the last
    step (the backlog is the previous step's tail: its last ops, in the same order on the same
    stream, the same kernels); -1 for the rest and where the kernels differ."""
    queue_waited: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """Per event: its launch call waited for a slot in the full queue; the replay gives it an
    ordinary call's time and makes the host wait for the slot itself."""


@dataclass(frozen=True)
class Change:
    """What a fix changes in the timeline (all optional)."""

    gpu_dur_us: dict[int, float] = field(default_factory=dict)
    """New duration per ``gpu_row`` (0 removes the op, its gap included)."""
    removed_cpu: iv.Intervals = iv.EMPTY
    """CPU time that disappears (dataloader spans, allocator calls, scalar reads), in work
    gaps and in the calls of the events inside it."""
    unblocked: frozenset[int] = frozenset()
    """``sync_id`` s of sync points / blocking copies that no longer make the CPU wait."""
    launch_work_scale: float = 1.0
    """Factor on the CPU work between events outside ``protected_cpu`` (0: CUDA graphs)."""
    protected_cpu: iv.Intervals = iv.EMPTY
    """CPU time ``launch_work_scale`` does not touch (dataloader, allocator, syncs)."""
    keep_launch_calls: bool = False
    """``launch_work_scale`` scales the CPU work between events only; each launch keeps its
    call (``torch.compile``: the generated code still launches every kernel it keeps)."""
    queued_gap_us: float | None = None
    """Turnaround of a queued op at most this (CUDA graphs: a graph's kernels follow each
    other faster than kernels launched one by one on a stream); None keeps the trace's."""
    side_stream_rows: frozenset[int] = frozenset()
    """``gpu_row`` s moved to a stream of their own (a copy prefetched on a side stream, a
    step ahead): the later ops of their stream no longer wait for them, and the step still
    lasts until they end (the copy engine is busy for them)."""
    added_cpu_us: dict[int, float] = field(default_factory=dict)
    """CPU work added just before the launch of ``gpu_row`` (``torch.compile``: the generated
    code's own cost per kernel it launches, where the eager dispatch is removed); scaled by
    ``launch_work_scale`` like any work between launches."""


def combine(*changes: Change) -> Change:
    """One change applying all of ``changes`` (for a fix that needs others made first)."""
    if len(changes) == 1:
        return changes[0]
    gpu_dur: dict[int, float] = {}
    for change in changes:
        gpu_dur.update(change.gpu_dur_us)
    return Change(
        gpu_dur_us=gpu_dur,
        removed_cpu=iv.union_all(*(c.removed_cpu for c in changes)),
        unblocked=frozenset().union(*(c.unblocked for c in changes)),
        launch_work_scale=min(c.launch_work_scale for c in changes),
        protected_cpu=iv.union_all(*(c.protected_cpu for c in changes)),
        keep_launch_calls=all(c.keep_launch_calls for c in changes
                              if c.launch_work_scale != 1.0),
        queued_gap_us=min((c.queued_gap_us for c in changes if c.queued_gap_us is not None),
                          default=None),
        side_stream_rows=frozenset().union(*(c.side_stream_rows for c in changes)),
        added_cpu_us={row: us for c in changes for row, us in c.added_cpu_us.items()},
    )


def covered_between(intervals: iv.Intervals, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of ``intervals`` (normalized) inside each ``[lo, hi]`` (vectorized)."""
    covered = iv.covered_before(intervals, hi)
    covered -= iv.covered_before(intervals, lo)
    np.maximum(covered, 0.0, out=covered)
    return covered


def cpu_work(timeline: Timeline, change: Change) -> tuple[np.ndarray, float]:
    """CPU work before each event and after the last one, with the change applied."""
    lo = np.maximum.accumulate(np.concatenate([[timeline.start_us], timeline.cpu_end_us]))
    hi = np.append(timeline.cpu_start_us, timeline.cpu_stop_us)
    lo = np.minimum(lo, hi)
    work = hi - lo
    work -= covered_between(change.removed_cpu, lo, hi)
    if timeline.profiler_overhead_us > 0 and len(timeline.recorded_starts_us):
        # an event inside removed CPU time took its profiler cost with it: count only the rest
        starts = kept_starts(timeline.recorded_starts_us, change.removed_cpu)
        recorded = np.searchsorted(starts, hi)
        recorded -= np.searchsorted(starts, lo)
        del starts
        work -= recorded * timeline.profiler_overhead_us
        del recorded
    if change.added_cpu_us:
        work[:-1] += by_gpu_row(timeline, change.added_cpu_us, np.zeros(len(timeline.kind)))
    if change.launch_work_scale != 1.0:
        kept = covered_between(iv.subtract(change.protected_cpu, change.removed_cpu), lo, hi)
        work = kept + (work - kept) * change.launch_work_scale
    work = np.maximum(work, 0.0)
    return work[:-1], float(work[-1])


def kept_starts(starts: np.ndarray, removed: iv.Intervals) -> np.ndarray:
    """The sorted ``starts`` not nested in ``removed`` (normalized intervals): the recorded
    events whose profiler cost is still in the CPU time once ``removed`` is gone. An event
    that starts after a removed span's start is nested in it: the profiler's callbacks of that
    event ran between the span's timestamps, so its cost is part of the removed time and is not
    taken out twice. An event that opens a removed span keeps its cost outside it (the enter
    callback runs before the event's own start timestamp)."""
    lo, hi = removed
    if len(lo) == 0 or len(starts) == 0:
        return starts
    i = np.searchsorted(lo, starts, side="right") - 1
    at = np.maximum(i, 0)
    inside = (i >= 0) & (starts > lo[at]) & (starts < hi[at])
    return starts[~inside]


def own_call_us(timeline: Timeline) -> np.ndarray:
    """Each event's call time not already covered by earlier events' calls (other threads)."""
    ends = timeline.cpu_end_us
    reach = np.maximum.accumulate(np.concatenate([[timeline.start_us], ends]))[:-1]
    return np.asarray(np.maximum(ends - np.maximum(timeline.cpu_start_us, reach), 0.0))


def call_times(timeline: Timeline, change: Change) -> tuple[np.ndarray, np.ndarray]:
    """Per event: the call's own time and its own (non-waiting) time, with the change's
    removed CPU time and the profiler's cost of the call taken out."""
    overhead = timeline.profiler_overhead_us
    removed = covered_between(change.removed_cpu, timeline.cpu_start_us, timeline.cpu_end_us)
    call = np.maximum(own_call_us(timeline) - removed - overhead, 0.0)
    if timeline.queue_depth and timeline.queue_waited.any():
        # a call that waited for a slot in the full queue: its wait is replayed (the loop's
        # queue_depth), its call is an ordinary one
        ordinary = max(timeline.launch_call_us - overhead, 0.0)
        call = np.where(timeline.queue_waited, np.minimum(call, ordinary), call)
    own = np.maximum(timeline.own_us - removed - overhead, 0.0)
    return call, own


@dataclass(frozen=True)
class Replayed:
    """One replay's step and how the GPU's queues fared in it."""

    step_us: float
    host_wait_us: tuple[float, ...]
    """Per stream: idle time before ops that the launch, not the GPU, made wait (the op was
    submitted after its stream had drained: queue depth zero), and after its last op while the
    host still worked."""
    num_ops: int
    num_drained: int
    """Ops that found their stream's queue empty (the host was behind)."""
    sync_wait_us: float = 0.0
    """CPU time spent waiting in syncs and blocking copies for the queued GPU work to drain."""
    busy_us: tuple[float, ...] = ()
    """Per stream: the GPU time of its ops."""

    @property
    def busiest_host_wait_us(self) -> float:
        """Host-wait of the stream with the most GPU time (the one the step waits on)."""
        if not self.busy_us:
            return max(self.host_wait_us, default=0.0)
        return self.host_wait_us[max(range(len(self.busy_us)), key=self.busy_us.__getitem__)]


def replay(timeline: Timeline, change: Change | None = None) -> float:
    """Simulated length of the steps under ``change`` (µs)."""
    return simulate(timeline, change).step_us


def simulate(timeline: Timeline, change: Change | None = None) -> Replayed:
    """The replay under ``change``, with the launch queues' host-wait per stream.

    One pass over the events in CPU order (a recurrence: each op's start depends on the
    previous op's end): ``_events_loop``, or the same loop compiled (``_replay.c``, where the
    optional C helpers were built: a replay of the 250 MB synthetic trace's 323,208 events in
    0.04 s against 0.31 s, 2-core VM, 2026-12-01)."""
    change = change or Change()
    work, tail = cpu_work(timeline, change)
    durations = new_durations(timeline, change)
    if timeline.gpu_scale != 1.0:
        durations = durations * timeline.gpu_scale
    call_scale = 1.0 if change.keep_launch_calls else change.launch_work_scale
    async_call = max(timeline.launch_call_us - timeline.profiler_overhead_us, 0.0)
    launch_cap = WAITING_CALL_FACTOR * async_call
    start_us = timeline.start_us
    streams, num_streams = timeline.stream, max(timeline.num_streams, 1)
    if change.side_stream_rows:
        streams = streams.copy()
        side = np.fromiter(change.side_stream_rows, np.int64, len(change.side_stream_rows))
        streams[(timeline.gpu_row >= 0) & np.isin(timeline.gpu_row, side)] = num_streams
        num_streams += 1
    stream_end = [start_us] * num_streams
    host_wait = [0.0] * len(stream_end)
    busy = [0.0] * len(stream_end)
    calls, owns = call_times(timeline, change)
    columns = (timeline.kind, streams, durations, timeline.sync_id, timeline.after,
               timeline.delay_us, queued_gaps(timeline, change), work, calls, owns)
    loop = _events_loop if _replay is None else _replay.run
    scalars = (start_us, timeline.latency_us, launch_cap, call_scale, async_call,
               float(timeline.queue_depth))
    gpu_from = _backlog_end_us(timeline, columns, loop, scalars, num_streams)
    cpu, num_ops, num_drained, sync_wait = loop(
        columns, timeline.wait_ptr, timeline.wait_idx, change.unblocked, stream_end, host_wait,
        busy, scalars)
    step = max(cpu + tail - start_us, max(stream_end) - gpu_from)
    # the host's work after the last launch: the streams idle until the step ends
    host_wait = [w + max(cpu + tail - end, 0.0) for w, end in zip(host_wait, stream_end,
                                                                    strict=True)]
    return Replayed(step, tuple(host_wait), num_ops, num_drained, sync_wait, tuple(busy))


def _backlog_end_us(timeline: Timeline, columns: tuple[np.ndarray, ...], loop: Any,
                    scalars: tuple[float, ...], num_streams: int) -> float:
    """Where the GPU's side of the step begins: when the replayed backlog (the first
    ``num_queued`` events, ops queued before the steps) ends, the same loop run on them
    alone; the window's start without a backlog. The steps' period is then the later of
    the CPU's time from the window's start and the GPU's from there (``GpuWindow``)."""
    start_us, n = scalars[0], timeline.num_queued
    if n == 0:
        return start_us
    ends = [start_us] * num_streams
    loop(tuple(c[:n] for c in columns), timeline.wait_ptr[:n + 1], timeline.wait_idx,
         frozenset(), ends, [0.0] * num_streams, [0.0] * num_streams, scalars)
    return max(ends)


def _events_loop(
    columns: tuple[np.ndarray, ...], wait_ptr: np.ndarray, wait_idx: np.ndarray,
    unblocked: frozenset[int], stream_end: list[float], host_wait: list[float],
    busy: list[float], scalars: tuple[float, ...],
) -> tuple[float, int, int, float]:
    """The replay's pass over the events (``simulate``): ``stream_end``, ``host_wait`` and
    ``busy`` updated in place; returns the CPU's end, the ops, the ops that found their queue
    drained and the CPU's time waiting in syncs. ``_replay.c`` is this loop compiled.

    Written for CPython's speed: locals, and ``b if b > a else a`` for ``max(a, b)`` (what
    the builtin returns, without its call)."""
    start_us, lat, launch_cap, call_scale, async_call, queue = scalars
    depth = int(queue)
    num_ops = num_drained = 0
    sync_wait = 0.0
    end_at = array("d", [start_us]) * len(columns[0])
    # per stream, the ends of its last ``depth`` ops launched, and how many it launched
    in_flight = [array("d", [start_us]) * depth for _ in stream_end] if depth else []
    launched = [0] * len(stream_end)
    cpu = start_us
    waits, idx = _sync_waits(columns[0], wait_ptr), _int_array(wait_idx)
    events = _rows(list(columns))
    for k, (kind, stream, dur, sync_id, after, delay, gap, work_k, call_k, own_k) in enumerate(
        events
    ):
        cpu += work_k
        blocks = sync_id not in unblocked
        if kind == SYNC:
            if blocks:
                first, last = waits[k]
                if last > first:
                    drained = max([end_at[j] for j in idx[first:last]])
                    waited = drained - cpu
                    sync_wait += 0.0 if 0.0 > waited else waited
                    cpu = drained if drained > cpu else cpu
                cpu += own_k
            continue
        if kind == LAUNCH:
            work_part = launch_cap if launch_cap < call_k else call_k
            call = work_part * call_scale + (call_k - work_part)
        else:
            call = async_call if async_call < call_k else call_k
        end = stream_end[stream]
        if dur > 0:
            if depth and launched[stream] >= depth:  # its queue is full: wait for the oldest
                oldest = in_flight[stream][launched[stream] % depth]
                cpu = oldest if oldest > cpu else cpu
            submitted = cpu if kind == BLOCKING_LAUNCH and blocks else cpu + call
            ready = end_at[after] + gap if after >= 0 else start_us
            device_ready = end + gap
            device_ready = ready if ready > device_ready else device_ready
            host_ready = submitted + lat
            host_ready = cpu if cpu > host_ready else host_ready
            begin = device_ready if device_ready > host_ready else host_ready
            num_ops += 1
            if host_ready > device_ready:  # the queue had drained: the GPU waited for the host
                num_drained += 1
                host_wait[stream] += host_ready - (end if end > device_ready else device_ready)
            began = begin + delay
            if delay < 0.0:  # it took the SMs in another stream's op's tail (dependencies.py)
                own = end + gap
                own = host_ready if host_ready > own else own
                began = own if own > began else began
            end = began + dur
            stream_end[stream] = end
            busy[stream] += dur
            if depth:
                in_flight[stream][launched[stream] % depth] = end
                launched[stream] += 1
        elif after >= 0:  # a removed op's wait on another stream stays: the stream still waits
            waited_for = end_at[after]
            if waited_for > end:
                end = waited_for
                stream_end[stream] = end
        end_at[k] = end
        if kind == BLOCKING_LAUNCH and blocks:
            waited = end - cpu
            sync_wait += 0.0 if 0.0 > waited else waited
            cpu = (end if end > cpu else cpu) + own_k
        else:
            cpu += call
    return cpu, num_ops, num_drained, sync_wait


def _sync_waits(kind: np.ndarray, wait_ptr: np.ndarray) -> dict[int, tuple[int, int]]:
    """``wait_ptr[k], wait_ptr[k + 1]`` of each sync event ``k``: the only events that read
    them, so the replay keeps these pairs, not a pointer per event (storage only)."""
    syncs = np.flatnonzero(kind == SYNC)
    first, last = wait_ptr[syncs].tolist(), wait_ptr[syncs + 1].tolist()
    return dict(zip(syncs.tolist(), zip(first, last, strict=True), strict=True))


def _int_array(values: np.ndarray) -> array[int]:
    """``values`` as an ``array`` of C ints (``"i"``, 4 bytes; ``"q"`` where one does not fit)
    from their bytes: the same ints, without the Python int per value that ``tolist`` makes
    first (36 bytes each, at once, for every event)."""
    if values.dtype.itemsize <= 4 and values.dtype.kind == "i":
        return array("i", np.ascontiguousarray(values, dtype=np.intc).tobytes())
    return array("q", np.ascontiguousarray(values, dtype=np.int64).tobytes())


ROWS_PER_CHUNK = 1 << 12
"""Events turned into Python values at a time by ``_rows``: a float in a list costs 32 bytes,
so the replay's ten columns of a 3-million-event timeline cost 1 GB at once, 1.3 MiB a chunk."""


def _rows(columns: list[np.ndarray]) -> Iterator[tuple[Any, ...]]:
    """The rows of equal-length ``columns`` as tuples of Python numbers, converted
    ``ROWS_PER_CHUNK`` at a time (the values ``tolist`` gives: the same floats)."""
    n = len(columns[0])
    return chain.from_iterable(
        zip(*(c[lo : lo + ROWS_PER_CHUNK].tolist() for c in columns), strict=True)
        for lo in range(0, n, ROWS_PER_CHUNK)
    )


def queued_gaps(timeline: Timeline, change: Change) -> np.ndarray:
    """Each event's turnaround after the previous op of its stream, with the change's cap."""
    gaps = np.broadcast_to(timeline.gap_us, len(timeline.kind))
    if change.queued_gap_us is None:
        return gaps
    return np.asarray(np.minimum(gaps, change.queued_gap_us))


def new_durations(timeline: Timeline, change: Change) -> np.ndarray:
    """Each event's GPU duration with ``change.gpu_dur_us`` applied (by ``gpu_row``), and an op
    queued before the steps changed as its twin of the last step is (``backlog_twin``): the
    backlog is the previous step's tail, which the fix changes too."""
    if not change.gpu_dur_us:  # read only: the timeline's own column, not a copy of it
        return timeline.gpu_dur_us
    new = by_gpu_row(timeline, change.gpu_dur_us, timeline.gpu_dur_us.copy())
    twin = timeline.backlog_twin
    if len(twin):
        k = np.flatnonzero(twin >= 0)
        old = timeline.gpu_dur_us[twin[k]]
        ratio = np.divide(new[twin[k]], old, out=np.ones(len(k)), where=old > 0)
        new[k] = timeline.gpu_dur_us[k] * ratio
    return new


def by_gpu_row(timeline: Timeline, values_by_row: dict[int, float],
               out: np.ndarray) -> np.ndarray:
    """``out`` (one value per event) with ``values_by_row`` written at the events of those
    ``gpu_row`` s."""
    keys = np.fromiter(values_by_row.keys(), np.int64, len(values_by_row))
    values = np.fromiter(values_by_row.values(), np.float64, len(values_by_row))
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    rows = timeline.gpu_row
    at = np.minimum(np.searchsorted(keys, rows), len(keys) - 1)
    hit = (rows >= 0) & (keys[at] == rows)
    out[hit] = values[at[hit]]
    return out
