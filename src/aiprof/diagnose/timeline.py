"""Build the replay's ``Timeline`` from a trace (see ``replay.py`` for the model)."""

from __future__ import annotations

import numpy as np

from aiprof.analysis.allocator import AllocatorResult
from aiprof.analysis.gpu_window import gpu_window
from aiprof.analysis.step_breakdown import in_window
from aiprof.analysis.sync import SyncPoints
from aiprof.diagnose.dependencies import cross_stream_after, sync_waits
from aiprof.diagnose.replay import BLOCKING_LAUNCH, LAUNCH, SYNC, Timeline
from aiprof.trace import Trace

DEFAULT_LATENCY_US = 5.0
"""Launch-to-start latency when the trace has no launched op at all to bound it (aiprof's
assumption, the order of the ~5 µs launch latency of recent GPUs and drivers)."""
MIN_LATENCY_SAMPLES = 1


def build_timeline(
    trace: Trace, syncs: SyncPoints, allocator: AllocatorResult, profiler_overhead_us: float = 0.0
) -> Timeline:
    """Launch events of the GPU ops in the steps plus sync points (``cudaFree`` included).

    Ops already queued when the window opens (launched before the trace: no launch call) are
    issued at the window's start, ahead of their stream's launched ops.
    """
    win = gpu_window(trace)
    ops, rt = trace.gpu_ops, trace.runtime
    start = float(win.window[0][0]) if len(win.window[0]) else 0.0
    end = float(win.window[1][-1]) if len(win.window[1]) else 0.0
    rows = np.concatenate([_backlog(trace, win.rows), win.rows[ops.launch_row[win.rows] >= 0]])
    launched = ops.launch_row[rows] >= 0
    launch_rows = np.maximum(ops.launch_row[rows], 0)
    issue_start = np.where(launched, rt.ts_us[launch_rows], start)
    issue_end = np.where(launched, rt.end_us[launch_rows], start)
    issue_id = np.where(launched, ops.launch_row[rows], -2 - rows)
    blocking_rows = set(syncs.gpu_row[syncs.gpu_row >= 0].tolist())
    launch_kind = np.array(
        [BLOCKING_LAUNCH if r in blocking_rows else LAUNCH for r in rows.tolist()], dtype=np.int64
    )
    sync_calls = np.concatenate([syncs.call_row[syncs.gpu_row < 0], allocator.free_rows])
    keys = ops.device[rows] * (1 << 32) + ops.stream[rows]
    unique_keys, stream = np.unique(keys, return_inverse=True)
    latency, gap = _latency_and_gap(trace, rows, issue_start)
    kind = np.concatenate([launch_kind, np.full(len(sync_calls), SYNC)])
    cpu_start = np.concatenate([issue_start, rt.ts_us[sync_calls]])
    order = np.argsort(cpu_start, kind="stable")
    kind, cpu_start = kind[order], cpu_start[order]
    cpu_end = np.concatenate([issue_end, rt.end_us[sync_calls]])[order]
    gpu_row = np.concatenate([rows, np.full(len(sync_calls), -1)])[order]
    stream = np.concatenate([stream, np.full(len(sync_calls), -1)])[order]
    is_op = gpu_row >= 0
    gpu_start = np.where(is_op, ops.ts_us[np.maximum(gpu_row, 0)], np.nan)
    gpu_end = np.where(is_op, ops.end_us[np.maximum(gpu_row, 0)], np.nan)
    after, delay = cross_stream_after(is_op, stream, gpu_start, gpu_end, cpu_start, latency, gap)
    wait_ptr, wait_idx = sync_waits(is_op, kind == SYNC, stream, gpu_end, cpu_end)
    own = _own_call_us(kind, cpu_start, cpu_end, gpu_end, wait_ptr, wait_idx)
    return Timeline(
        kind=kind,
        cpu_start_us=cpu_start,
        cpu_end_us=cpu_end,
        gpu_row=gpu_row,
        stream=stream,
        gpu_dur_us=np.concatenate([ops.dur_us[rows], np.zeros(len(sync_calls))])[order],
        after=after,
        delay_us=delay,
        wait_ptr=wait_ptr,
        wait_idx=wait_idx,
        own_us=own,
        sync_id=np.concatenate([issue_id, sync_calls])[order],
        start_us=start,
        end_us=end,
        cpu_stop_us=min(float(trace.steps.cpu_end_us.max()), end) if len(trace.steps) else end,
        latency_us=latency,
        gap_us=gap,
        num_streams=len(unique_keys),
        measured_us=win.window_us,
        cpu_op_starts_us=np.sort(trace.cpu_ops.ts_us[in_window(trace.cpu_ops.ts_us, win.window)]),
        profiler_overhead_us=profiler_overhead_us,
    )


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


def _backlog(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Ops without a launch call that start before the first launched op of their stream."""
    ops = trace.gpu_ops
    unlaunched = rows[ops.launch_row[rows] < 0]
    if len(unlaunched) == 0:
        return unlaunched
    launched = rows[ops.launch_row[rows] >= 0]
    keep = np.zeros(len(unlaunched), dtype=bool)
    for key in np.unique(ops.stream[unlaunched]):
        mine = ops.stream[unlaunched] == key
        others = launched[ops.stream[launched] == key]
        first = float(ops.ts_us[others].min()) if len(others) else np.inf
        keep |= mine & (ops.ts_us[unlaunched] < first)
    return unlaunched[keep]


def _latency_and_gap(trace: Trace, rows: np.ndarray, issued: np.ndarray) -> tuple[float, float]:
    """Median launch-to-start of ops launched while the device was idle (every op that started
    before had ended), and median turnaround (start after the previous op of the stream) of ops
    that were already queued."""
    ops = trace.gpu_ops
    order = np.argsort(ops.ts_us[rows], kind="stable")
    starts, ends, issued = ops.ts_us[rows][order], ops.end_us[rows][order], issued[order]
    reach_before = np.concatenate([[np.inf], np.maximum.accumulate(ends)[:-1]])
    idle = issued > reach_before  # the first op's predecessors are unknown: not a sample
    lat = (starts - issued)[idle]
    lat = lat[lat >= 0]
    if len(lat) >= MIN_LATENCY_SAMPLES:
        latency = float(np.median(lat))
    else:  # no launch found the device idle: every start - launch is an upper bound on it
        bounds = (starts - issued)[np.isfinite(issued) & (starts >= issued)]
        latency = float(bounds.min()) if len(bounds) else DEFAULT_LATENCY_US
    streams = ops.device[rows][order] * (1 << 32) + ops.stream[rows][order]
    gaps = []
    for key in np.unique(streams):
        mine = streams == key
        prev_end = np.concatenate([[np.inf], np.maximum.accumulate(ends[mine])[:-1]])
        queued = issued[mine] <= prev_end
        gaps.append((starts[mine] - prev_end)[queued & np.isfinite(prev_end)])
    gap = np.concatenate(gaps) if gaps else np.zeros(0)
    turnaround = float(np.median(np.maximum(gap, 0.0))) if len(gap) else 0.0
    return latency, turnaround
