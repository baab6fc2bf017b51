"""Build the replay's ``Timeline`` from a trace (see ``replay.py`` for the model)."""

from __future__ import annotations

import numpy as np

from aiprof.analysis.allocator import AllocatorResult
from aiprof.analysis.gpu_window import gpu_window
from aiprof.analysis.groups import groups
from aiprof.analysis.step_breakdown import in_window
from aiprof.analysis.sync import SyncPoints
from aiprof.diagnose.dependencies import cross_stream_after, sync_waits
from aiprof.diagnose.launch_queue import launch_queue
from aiprof.diagnose.replay import BLOCKING_LAUNCH, LAUNCH, SYNC, WAITING_CALL_FACTOR, Timeline
from aiprof.trace import Trace
from aiprof.trace.links import gather
from aiprof.trace.narrow import narrow

DEFAULT_LATENCY_US = 2.0
"""Launch call's return to the op's start when the trace has no launch at all to measure it
on. Measured (median over launches that found the GPU idle): 1.5-2.1 µs on every H200 trace
in tests/data, 1.0-4.0 µs on the public A100 and V100 traces (docs/diagnose.md)."""
DEFAULT_TURNAROUND_US = 1.5
"""Turnaround of a queued op of a kind the trace has no queued sample of. Measured (median
start after the previous op's end, kernels already queued): 0.8-3.0 µs on the public V100 and
A100 traces, 1.0-3.3 µs on the H200 traces in tests/data."""
KERNEL, MEMCPY, MEMSET = 0, 1, 2


def build_timeline(trace: Trace, syncs: SyncPoints, allocator: AllocatorResult) -> Timeline:
    """Launch events of the GPU ops in the steps plus sync points (``cudaFree`` included).

    Ops already queued when the window opens (``GpuWindow.backlog``: launched before the steps
    or before the trace) are issued at the window's start, ahead of every other event
    (``num_queued``): the GPU is busy with them when the steps begin, but they are not the
    steps' work (the replay measures the GPU's side of the step from their end). The timeline
    is of the trace as recorded (no profiler correction; ``Context`` sets it).
    """
    win = gpu_window(trace)
    ops, rt = trace.gpu_ops, trace.runtime
    start = float(win.window[0][0]) if len(win.window[0]) else 0.0
    end = float(win.window[1][-1]) if len(win.window[1]) else 0.0
    at_start = np.concatenate([win.backlog, _unlinked(trace, win.rows)])
    rows = np.concatenate([at_start, win.rows[ops.launch_row[win.rows] >= 0]])
    launched = np.arange(len(rows)) >= len(at_start)
    issue_start = np.where(launched, gather(rt.ts_us, ops.launch_row[rows], start), start)
    issue_end = np.where(launched, gather(rt.end_us, ops.launch_row[rows], start), start)
    issue_id = np.where(launched, ops.launch_row[rows], -2 - rows)
    blocking = np.isin(rows, syncs.gpu_row[syncs.gpu_row >= 0])
    launch_kind = np.where(blocking, BLOCKING_LAUNCH, LAUNCH).astype(np.int64)
    cpu_stop = min(float(trace.steps.cpu_end_us.max()), end) if len(trace.steps) else end
    sync_calls = _in_steps(trace, np.concatenate([syncs.call_row[syncs.gpu_row < 0],
                                                  allocator.free_rows]), cpu_stop)
    keys = ops.device[rows].astype(np.int64) * (1 << 32) + ops.stream[rows]
    unique_keys, stream = groups(keys)
    submitted = np.where(blocking, issue_start, issue_end)
    op_kind = _op_kind(trace, rows)
    latency = _latency(trace, rows, submitted, blocking | ~launched)
    gaps = _gaps(trace, rows, submitted, op_kind)
    kind = np.concatenate([launch_kind, np.full(len(sync_calls), SYNC)])
    cpu_start = np.concatenate([issue_start, rt.ts_us[sync_calls]])
    order = np.argsort(np.where(np.arange(len(cpu_start)) < len(win.backlog), -np.inf,
                                cpu_start), kind="stable")  # the backlog first
    kind, cpu_start = narrow(kind[order]), cpu_start[order]
    cpu_end = np.concatenate([issue_end, rt.end_us[sync_calls]])[order]
    gpu_row = narrow(np.concatenate([rows, np.full(len(sync_calls), -1)])[order])
    stream = narrow(np.concatenate([stream, np.full(len(sync_calls), -1)])[order])
    gap = np.concatenate([gaps[op_kind], np.zeros(len(sync_calls))])[order]
    submit = np.concatenate([submitted, rt.end_us[sync_calls]])[order]
    sync_id = narrow(np.concatenate([issue_id, sync_calls])[order])
    gpu_dur = np.concatenate([ops.dur_us[rows], np.zeros(len(sync_calls))])[order]
    del issue_start, issue_end, issue_id, submitted, launch_kind, blocking, launched, keys, order
    is_op = gpu_row >= 0
    gpu_start = np.where(is_op, ops.ts_us[np.maximum(gpu_row, 0)], np.nan)
    gpu_end = np.where(is_op, ops.end_us[np.maximum(gpu_row, 0)], np.nan)
    after, delay = cross_stream_after(is_op, stream, gpu_start, gpu_end, submit, latency, gap)
    gpu_name = np.where(is_op, ops.name_id[np.maximum(gpu_row, 0)], -1)
    del submit
    wait_ptr, wait_idx = sync_waits(is_op, kind == SYNC, stream, gpu_end, cpu_end)
    own = _own_call_us(kind, cpu_start, cpu_end, gpu_end, wait_ptr, wait_idx)
    own, delay = _host_time_before_copies(kind, after, own, delay)
    calls = (cpu_end - cpu_start)[(kind == LAUNCH) & (cpu_end > cpu_start)]
    launch_call_us = float(np.median(calls)) if len(calls) else 0.0
    queue = launch_queue(is_op & (kind != SYNC), stream, cpu_start, cpu_end, gpu_end,
                         WAITING_CALL_FACTOR * launch_call_us)
    return Timeline(
        kind=kind,
        cpu_start_us=cpu_start,
        cpu_end_us=cpu_end,
        gpu_row=gpu_row,
        stream=stream,
        gpu_dur_us=gpu_dur,
        after=narrow(after),
        delay_us=delay,
        wait_ptr=narrow(wait_ptr),
        wait_idx=narrow(wait_idx),
        own_us=own,
        sync_id=sync_id,
        start_us=start,
        end_us=end,
        cpu_stop_us=cpu_stop,
        latency_us=latency,
        gap_us=gap,
        num_streams=len(unique_keys),
        measured_us=win.window_us,
        num_queued=len(win.backlog),
        recorded_starts_us=_recorded_starts(trace, win.window),
        launch_call_us=launch_call_us,
        backlog_twin=backlog_twins(gpu_name, stream, gpu_start, len(win.backlog)),
        queue_depth=queue.depth,
        queue_waited=queue.waited,
    )


def backlog_twins(name_id: np.ndarray, stream: np.ndarray, gpu_start_us: np.ndarray,
                  num_queued: int) -> np.ndarray:
    """Per event (the first ``num_queued`` the ops queued before the steps): the event of the
    same op in the last step, -1 where there is none. The backlog is the previous step's last
    ops, so on each stream its ops in GPU order line up, from the end, with the steps' last
    ops; a pair counts where the kernel's name agrees."""
    twin = np.full(len(name_id), -1, dtype=np.int64)
    if num_queued == 0:
        return twin
    is_op = name_id >= 0
    queued = np.arange(len(name_id)) < num_queued
    for s in np.unique(stream[:num_queued][is_op[:num_queued]]).tolist():
        back = np.flatnonzero(queued & is_op & (stream == s))
        steps = np.flatnonzero(~queued & is_op & (stream == s))
        m = min(len(back), len(steps))
        if m == 0:
            continue
        back = back[np.argsort(gpu_start_us[back], kind="stable")][-m:]
        steps = steps[np.argsort(gpu_start_us[steps], kind="stable")][-m:]
        same = name_id[back] == name_id[steps]
        twin[back[same]] = steps[same]
    return twin


def _recorded_starts(trace: Trace, window: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Sorted starts of the CPU ops and runtime calls inside the steps (the profiler's events
    on the CPU side, each with its own recording cost). Each table is in time order as read,
    so a stable sort (timsort) merges two runs: 2 ms against 40 ms for numpy's default sort on
    the 250 MB synthetic trace (2-core VM, 2026-12-01); the same floats whatever the order."""
    ops, rt = trace.cpu_ops.ts_us, trace.runtime.ts_us
    both = np.concatenate([ops[in_window(ops, window)], rt[in_window(rt, window)]])
    return np.sort(both, kind="stable")


def _own_call_us(
    kind: np.ndarray, cpu_start: np.ndarray, cpu_end: np.ndarray, gpu_end: np.ndarray,
    wait_ptr: np.ndarray, wait_idx: np.ndarray,
) -> np.ndarray:
    """Call time of syncs and blocking copies spent after what they waited for had ended."""
    awaited = np.full(len(kind), -np.inf)
    blocking = kind == BLOCKING_LAUNCH
    awaited[blocking] = gpu_end[blocking]
    for k in np.flatnonzero(kind == SYNC).tolist():
        waits = wait_idx[wait_ptr[k]:wait_ptr[k + 1]]
        if len(waits):
            awaited[k] = float(np.max(gpu_end[waits]))
    own = cpu_end - np.maximum(cpu_start, awaited)
    return np.where((kind == SYNC) | blocking, np.clip(own, 0.0, cpu_end - cpu_start), 0.0)


def _in_steps(trace: Trace, calls: np.ndarray, cpu_stop_us: float) -> np.ndarray:
    """The sync calls that start before the CPU's last step span ends. One after it (the drain
    before the profiler stops) is no step's: it waits for the GPU's end, which the step already
    lasts until, and with a backlog its wait would count the backlog in the CPU's side."""
    return np.asarray(calls[trace.runtime.ts_us[calls] <= cpu_stop_us])


def _unlinked(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Ops without a launch call that start before the first launched op of their stream (a
    stream whose launches the trace does not link: all its ops); issued at the window's start."""
    ops = trace.gpu_ops
    unlaunched = rows[ops.launch_row[rows] < 0]
    if len(unlaunched) == 0:
        return np.asarray(unlaunched)
    launched = rows[ops.launch_row[rows] >= 0]
    keep = np.zeros(len(unlaunched), dtype=bool)
    for key in np.unique(ops.stream[unlaunched]):
        mine = ops.stream[unlaunched] == key
        others = launched[ops.stream[launched] == key]
        first = float(ops.ts_us[others].min()) if len(others) else np.inf
        keep |= mine & (ops.ts_us[unlaunched] < first)
    return np.asarray(unlaunched[keep])


def _op_kind(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """``KERNEL``, ``MEMCPY`` or ``MEMSET`` per row of ``trace.gpu_ops`` (kernels first)."""
    num_kernels, num_copies = len(trace.kernels), len(trace.memcpy)
    return np.where(rows < num_kernels, KERNEL,
                    np.where(rows < num_kernels + num_copies, MEMCPY, MEMSET)).astype(np.int64)


def _latency(trace: Trace, rows: np.ndarray, submitted: np.ndarray,
             not_sampled: np.ndarray) -> float:
    """Median submission-to-start of asynchronous launches made while their device was idle
    (every op of the trace on that device that started before had ended); a blocking copy's
    call, or an op issued at the window's start, is no sample (``not_sampled``). Without any
    such launch: the smallest start - submission (an upper bound on the latency), at most
    ``DEFAULT_LATENCY_US``."""
    ops = trace.gpu_ops
    starts = ops.ts_us[rows]
    launched = (ops.launch_row[rows] >= 0) & ~not_sampled
    idle = launched & (submitted > _reach_before(trace, rows))
    if idle.any():
        return float(np.median((starts - submitted)[idle]))
    bound = float(np.min((starts - submitted)[launched])) if launched.any() else np.inf
    return min(DEFAULT_LATENCY_US, bound)


def _reach_before(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per row: the latest end of the ops of its device that started before it (-inf: none)."""
    ops = trace.gpu_ops
    reach = np.full(len(rows), -np.inf)
    for device in np.unique(ops.device[rows]):
        mine = np.flatnonzero(ops.device == device)
        mine = mine[np.argsort(ops.ts_us[mine], kind="stable")]
        ends = np.maximum.accumulate(ops.end_us[mine])
        at = np.flatnonzero(ops.device[rows] == device)
        before = np.searchsorted(ops.ts_us[mine], ops.ts_us[rows[at]], side="left") - 1
        reach[at] = np.where(before >= 0, ends[np.maximum(before, 0)], -np.inf)
    return reach


def _gaps(trace: Trace, rows: np.ndarray, submitted: np.ndarray, op_kind: np.ndarray) -> np.ndarray:
    """Median turnaround (start after the previous op of the stream ended) of ops already
    queued then (submitted before it ended), per kind of op: a copy engine's start after a
    kernel differs from a kernel's after a kernel. A kind without samples takes
    ``DEFAULT_TURNAROUND_US``."""
    ops = trace.gpu_ops
    order = np.argsort(ops.ts_us[rows], kind="stable")
    starts, ends = ops.ts_us[rows][order], ops.end_us[rows][order]
    submitted, kinds = submitted[order], op_kind[order]
    streams = ops.device[rows][order].astype(np.int64) * (1 << 32) + ops.stream[rows][order]
    samples, sample_kinds = [], []
    for key in np.unique(streams):
        mine = np.flatnonzero(streams == key)
        prev_end = np.concatenate([[np.inf], np.maximum.accumulate(ends[mine])[:-1]])
        queued = (submitted[mine] <= prev_end) & np.isfinite(prev_end)
        samples.append(np.maximum(starts[mine] - prev_end, 0.0)[queued])
        sample_kinds.append(kinds[mine][queued])
    gap = np.concatenate(samples) if samples else np.zeros(0)
    gap_kind = np.concatenate(sample_kinds) if samples else np.zeros(0, dtype=np.int64)
    return np.array([
        float(np.median(gap[gap_kind == k])) if np.any(gap_kind == k) else DEFAULT_TURNAROUND_US
        for k in (KERNEL, MEMCPY, MEMSET)
    ])


def _host_time_before_copies(
    kind: np.ndarray, after: np.ndarray, own: np.ndarray, delay: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A blocking copy that started later than its stream and submission explain, waiting for
    no other stream, waited for its own call: the host staging the data (a pageable copy goes
    through a pinned buffer the CPU fills) or blocked in the call. That time is the call's own
    CPU time, not a GPU delay, so a fix that removes the call's CPU time removes it."""
    host = (kind == BLOCKING_LAUNCH) & (after < 0) & (delay > 0)
    return np.where(host, own + delay, own), np.where(host, 0.0, delay)
