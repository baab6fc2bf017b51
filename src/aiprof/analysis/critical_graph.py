"""The dependency graph of a window of one rank (a step, or an annotation's instance).

Nodes are the start and the end of each event: CPU ops and runtime/driver calls with a
duration that start in the window, and the GPU ops those calls launched (node ``2i`` starts
event ``i``, ``2i + 1`` ends it). Edges, as HTA 0.5's ``CPGraph`` builds them:

- **operator**: consecutive points of one thread's nesting (start of a parent, start and end
  of each child, end of the parent), weighted by the time between them, zero into the end of
  a blocking call (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, ``cudaEventQuery``,
  ``cudaEventSynchronize``, ``cudaMemcpy``, ``cudaMemcpyAsync``): that wait belongs to the GPU
  work it waits for; and the span of each GPU op.
- **dependency** (weight 0): the end of one top-level op to the start of the next on a thread.
- **launch delay**: launch call start -> op start, when the op's stream had nothing queued or
  running when it was launched; otherwise **kernel-kernel delay**: the previous op on the
  stream -> this op, weighted by the gap.
- **sync** (weight 0): the last op on a stream (every stream for a context sync; the op
  launched last before the recorded event for an event sync) -> the end of the
  synchronizing call; for a stream waiting on an event (``cudaStreamWaitEvent``), the op
  launched last on the recording stream before ``cudaEventRecord`` -> the next op launched
  on the waiting stream (whose own launch or kernel-kernel edge is then kept only when it
  is later than that op's end, as HTA does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from aiprof.analysis.cputree import span_tree, thread_keys
from aiprof.analysis.queue import HTA_LAUNCHES
from aiprof.trace import Trace
from aiprof.trace.links import gather, lookup

BLOCKING = re.compile(
    r"^(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventQuery|cudaEventSynchronize|"
    r"cudaMemcpy|cudaMemcpyAsync)$"
)
EDGE_TYPES = ("operator", "dependency", "launch_delay", "kernel_kernel_delay", "sync")
OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC = range(5)


@dataclass(frozen=True, eq=False)
class Graph:
    """Events (CPU first, then GPU) and edges between their start/end nodes."""

    ts_us: np.ndarray  # per event
    dur_us: np.ndarray
    name_id: np.ndarray
    stream: np.ndarray  # -1 for CPU events
    num_cpu: int
    src: np.ndarray  # per edge: node ids
    dst: np.ndarray
    weight_us: np.ndarray
    kind: np.ndarray  # index into EDGE_TYPES
    event: np.ndarray  # the event an edge is attributed to, -1 for none
    num_ops: int  # events [0, num_ops) are CPU ops, [num_ops, num_cpu) runtime calls
    rows: np.ndarray  # per event: its row in trace.cpu_ops, trace.runtime or trace.gpu_ops

    def node_ts(self, nodes: np.ndarray) -> np.ndarray:
        events = nodes // 2
        return np.asarray(self.ts_us[events] + np.where(nodes % 2 == 1, self.dur_us[events], 0.0))


def build_graph(trace: Trace, lo_us: float, hi_us: float) -> Graph:
    """The graph of the events in ``[lo_us, hi_us]`` (see the module docstring)."""
    cpu_tables = (trace.cpu_ops, trace.runtime)
    cpu_mask = [(t.ts_us >= lo_us) & (t.ts_us <= hi_us) & (t.dur_us > 0) for t in cpu_tables]
    ops, calls = trace.cpu_ops, trace.runtime
    call_rows = np.flatnonzero(cpu_mask[1])
    gpu = trace.gpu_ops
    in_window = np.zeros(len(calls), bool)
    in_window[call_rows] = True
    gpu_rows = np.flatnonzero((gpu.launch_row >= 0) & gather(in_window, gpu.launch_row, False))
    op_rows = np.flatnonzero(cpu_mask[0])
    num_cpu = len(op_rows) + len(call_rows)
    ts = np.concatenate([ops.ts_us[op_rows], calls.ts_us[call_rows], gpu.ts_us[gpu_rows]])
    dur = np.concatenate([ops.dur_us[op_rows], calls.dur_us[call_rows], gpu.dur_us[gpu_rows]])
    names = np.concatenate([ops.name_id[op_rows], calls.name_id[call_rows], gpu.name_id[gpu_rows]])
    tid = np.concatenate([ops.tid[op_rows], calls.tid[call_rows]])
    pid = np.concatenate([ops.pid[op_rows], calls.pid[call_rows]])
    stream_key = gpu.device[gpu_rows].astype(np.int64) * (1 << 32) + gpu.stream[gpu_rows]
    stream = np.concatenate([np.full(num_cpu, -1), gpu.stream[gpu_rows]])
    call_event = np.full(len(calls), -1)
    call_event[call_rows] = len(op_rows) + np.arange(len(call_rows))
    launch_event = call_event[gpu.launch_row[gpu_rows]]
    waits_on = _stream_waits(trace, gpu_rows, stream_key)
    parts = [
        _thread_edges(pid, tid, ts[:num_cpu], dur[:num_cpu],
                      trace.strings.mask(names[:num_cpu], BLOCKING)),
        _gpu_span_edges(num_cpu, len(gpu_rows), dur[num_cpu:]),
        _stream_edges(trace, gpu_rows, num_cpu, stream_key, launch_event, waits_on),
        _sync_edges(trace, gpu_rows, num_cpu, stream_key, call_event),
    ]
    src, dst, weight, kind, event = (np.concatenate([p[i] for p in parts]) for i in range(5))
    return Graph(ts, dur, names, stream, num_cpu, src.astype(np.int64), dst.astype(np.int64),
                 weight, kind.astype(np.int64), event.astype(np.int64), len(op_rows),
                 np.concatenate([op_rows, call_rows, gpu_rows]))


Edges = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _thread_edges(pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                  blocking: np.ndarray) -> Edges:
    """Consecutive points of each thread's nesting; dependencies between top-level ops."""
    n = len(ts)
    thread = thread_keys(pid, tid)
    tree = span_tree(thread, ts, dur)
    nodes = np.concatenate([2 * np.arange(n), 2 * np.arange(n) + 1])
    times = np.concatenate([ts, ts + dur])
    kind = np.concatenate([np.ones(n), np.zeros(n)])  # ends before starts at equal times
    inner_first = np.concatenate([-dur, dur])  # starts: parent first; ends: child first
    order = np.lexsort((inner_first, kind, times, np.concatenate([thread, thread])))
    p, q = nodes[order][:-1], nodes[order][1:]
    same = np.concatenate([thread, thread])[order]
    keep = same[:-1] == same[1:]
    p, q = p[keep], q[keep]
    ep, eq = p // 2, q // 2
    gap = (p % 2 == 1) & (q % 2 == 0) & (tree.depth[ep] == 0) & (tree.depth[eq] == 0)
    tq = np.where(q % 2 == 1, ts[eq] + dur[eq], ts[eq])
    tp = np.where(p % 2 == 1, ts[ep] + dur[ep], ts[ep])
    zero = gap | ((q % 2 == 1) & blocking[eq])
    weight = np.where(zero, 0.0, tq - tp)
    attributed = np.where(p % 2 == 0, ep, np.where(q % 2 == 1, eq, tree.parent[ep]))
    return p, q, weight, np.where(gap, DEPENDENCY, OPERATOR), np.where(gap, -1, attributed)


def _gpu_span_edges(num_cpu: int, num_gpu: int, dur: np.ndarray) -> Edges:
    events = num_cpu + np.arange(num_gpu)
    return 2 * events, 2 * events + 1, dur, np.full(num_gpu, OPERATOR), events


def _stream_waits(trace: Trace, gpu_rows: np.ndarray, stream_key: np.ndarray) -> np.ndarray:
    """Per op (of ``gpu_rows``): the op it waits for through ``cudaStreamWaitEvent``, or -1."""
    syncs, calls, gpu = trace.syncs, trace.runtime, trace.gpu_ops
    waits_on = np.full(len(gpu_rows), -1)
    wait = np.flatnonzero(trace.strings.mask(syncs.name_id, "^Stream Wait Event$"))
    if len(wait) == 0 or len(gpu_rows) == 0:
        return waits_on
    launch_ts = calls.ts_us[gpu.launch_row[gpu_rows]]
    wait_call = lookup(syncs.correlation[wait], calls.correlation)
    record_call = lookup(syncs.wait_on_event_correlation[wait], calls.correlation)
    for i, w, r in zip(wait, wait_call, record_call, strict=True):  # one per wait call
        if w < 0 or r < 0:
            continue
        device = np.int64(syncs.device[i])
        recording = np.flatnonzero((stream_key == device * (1 << 32) + syncs.wait_on_stream[i])
                                   & (launch_ts < calls.ts_us[r]))
        waiting = np.flatnonzero((stream_key == device * (1 << 32) + syncs.stream[i])
                                 & (launch_ts > calls.ts_us[w]))
        if len(recording) and len(waiting):
            dest = waiting[np.argmin(launch_ts[waiting])]
            waits_on[dest] = recording[np.argmax(launch_ts[recording])]
    return waits_on


def _stream_edges(trace: Trace, gpu_rows: np.ndarray, num_cpu: int, stream_key: np.ndarray,
                  launch_event: np.ndarray, waits_on: np.ndarray) -> Edges:
    """Launch delay when the stream was empty at launch, else kernel-kernel delay; and the
    edges of ``cudaStreamWaitEvent`` waits."""
    gpu, calls = trace.gpu_ops, trace.runtime
    q_launch, q_start = _queue_at(trace, gpu_rows)
    start, end = gpu.ts_us[gpu_rows], gpu.end_us[gpu_rows]
    launch_ts = calls.ts_us[gpu.launch_row[gpu_rows]]
    order = np.lexsort((start, stream_key))
    first = np.concatenate([[True], stream_key[order][1:] != stream_key[order][:-1]])
    prev = np.where(first, -1, np.concatenate([[-1], order[:-1]]))
    previous = np.full(len(gpu_rows), -1)
    previous[order] = prev
    prev_end = np.where(previous >= 0, end[np.maximum(previous, 0)], -np.inf)
    waited = waits_on >= 0
    wait_end = np.where(waited, end[np.maximum(waits_on, 0)], -np.inf)
    launch = ((q_launch == 1) & (q_start == 0) & (prev_end < launch_ts) & (launch_event >= 0)
              & (wait_end < launch_ts))
    chain = ~launch & (previous >= 0) & (wait_end < prev_end)
    events = num_cpu + np.arange(len(gpu_rows))
    src = np.concatenate([2 * launch_event[launch], 2 * (num_cpu + previous[chain]) + 1,
                          2 * (num_cpu + waits_on[waited]) + 1])
    dst = np.concatenate([2 * events[launch], 2 * events[chain], 2 * events[waited]])
    weight = np.concatenate([start[launch] - launch_ts[launch], start[chain] - prev_end[chain],
                             np.zeros(waited.sum())])
    kind = np.concatenate([np.full(launch.sum(), LAUNCH), np.full(chain.sum(), KERNEL_KERNEL),
                           np.full(waited.sum(), SYNC)])
    attributed = np.concatenate([np.full(launch.sum(), -1), num_cpu + previous[chain],
                                 np.full(waited.sum(), -1)])
    return src, dst, weight, kind, attributed


def _queue_at(trace: Trace, gpu_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per op: its stream's queue length just after its launch and just after its start.

    A length counts the launches and starts before it on its stream: only the points up to
    the latest launch or start of ``gpu_rows`` are ordered (each stream's earliest points, so
    every length is the one the whole trace gives), not every op of the trace."""
    gpu = trace.gpu_ops
    rows = np.flatnonzero((gpu.launch_row >= 0) & trace.strings.mask(
        gather(trace.runtime.name_id, gpu.launch_row, 0), HTA_LAUNCHES))
    if len(rows) == 0:  # no op has a launch call of its own: no queue to count
        unknown = np.full(len(gpu_rows), -1.0)
        return unknown, unknown.copy()
    launch_ts, start_ts = trace.runtime.ts_us[gpu.launch_row[rows]], gpu.ts_us[rows]
    pos = np.minimum(np.searchsorted(rows, gpu_rows), len(rows) - 1)
    where = np.where(rows[pos] == gpu_rows, pos, -1)  # rows is sorted
    needed = where[where >= 0]
    last = max(float(launch_ts[needed].max()), float(start_ts[needed].max())) \
        if len(needed) else -np.inf
    launched, started = np.flatnonzero(launch_ts <= last), np.flatnonzero(start_ts <= last)
    key = gpu.device[rows].astype(np.int64) * (1 << 32) + gpu.stream[rows]
    times = np.concatenate([launch_ts[launched], start_ts[started]])
    keys = np.concatenate([key[launched], key[started]])
    del launch_ts, start_ts, key
    delta = np.concatenate([np.ones(len(launched)), -np.ones(len(started))])
    order = np.lexsort((times, keys))
    total = np.cumsum(delta[order])
    first = np.concatenate([[True], keys[order][1:] != keys[order][:-1]])
    base = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    level = total - (total - delta[order])[base]  # restart the count on each stream
    at = np.empty(len(order))
    at[order] = level
    at_launch, at_start = np.full(len(rows), -1.0), np.full(len(rows), -1.0)
    at_launch[launched], at_start[started] = at[: len(launched)], at[len(launched):]
    return gather(at_launch, where, -1.0), gather(at_start, where, -1.0)


def _sync_edges(trace: Trace, gpu_rows: np.ndarray, num_cpu: int, stream_key: np.ndarray,
                call_event: np.ndarray) -> Edges:
    """Stream, context and event syncs: the op waited for -> the end of the waiting call."""
    syncs, gpu = trace.syncs, trace.gpu_ops
    sync_call = lookup(syncs.correlation, trace.runtime.correlation)
    waiter = gather(call_event, sync_call, -1)
    names = [trace.name(int(i)) for i in syncs.name_id]
    start = gpu.ts_us[gpu_rows]
    src: list[int] = []
    dst: list[int] = []
    for i in np.flatnonzero(waiter >= 0):  # few: one per synchronizing call
        sync_end = syncs.ts_us[i] + syncs.dur_us[i]
        if names[i] == "Stream Sync" or names[i] == "Context Sync":
            same = (stream_key == np.int64(syncs.device[i]) * (1 << 32) + syncs.stream[i]) | (
                names[i] == "Context Sync")
            for key in np.unique(stream_key[same & (start <= sync_end)]):
                mine = np.flatnonzero((stream_key == key) & (start <= sync_end))
                last = mine[np.argmax(start[mine])]
                src.append(2 * (num_cpu + int(last)) + 1)
                dst.append(2 * int(waiter[i]) + 1)
        elif names[i] == "Event Sync":
            recorded = _recorded_op(trace, gpu_rows, int(syncs.wait_on_event_correlation[i]))
            if recorded >= 0:
                src.append(2 * (num_cpu + recorded) + 1)
                dst.append(2 * int(waiter[i]) + 1)
    n = len(src)
    return (np.array(src, np.int64), np.array(dst, np.int64), np.zeros(n), np.full(n, SYNC),
            np.full(n, -1))


def _recorded_op(trace: Trace, gpu_rows: np.ndarray, record_correlation: int) -> int:
    """The GPU op launched last, on the recording thread, before ``cudaEventRecord``."""
    calls, gpu = trace.runtime, trace.gpu_ops
    record = lookup(np.array([record_correlation]), calls.correlation)[0]
    if record < 0:
        return -1
    launch = gpu.launch_row[gpu_rows]
    before = (calls.ts_us[launch] < calls.ts_us[record]) & (calls.tid[launch] == calls.tid[record])
    if not before.any():
        return -1
    candidates = np.flatnonzero(before)
    return int(candidates[np.argmax(calls.ts_us[launch[candidates]])])
