"""Build the replay's ``Timeline`` from a trace (see ``replay.py`` for the model)."""

from __future__ import annotations

import numpy as np

from aiprof.analysis.allocator import AllocatorResult
from aiprof.analysis.gpu_window import gpu_window, launch_ts_us
from aiprof.analysis.sync import SyncPoints
from aiprof.diagnose.dependencies import cross_stream_after, sync_waits
from aiprof.diagnose.replay import BLOCKING_LAUNCH, LAUNCH, SYNC, Timeline
from aiprof.trace import Trace

DEFAULT_LATENCY_US = 5.0
"""Launch-to-start latency when the trace shows no idle-GPU launch (aiprof's assumption)."""


def build_timeline(trace: Trace, syncs: SyncPoints, allocator: AllocatorResult) -> Timeline:
    """Launch events of the GPU ops in the steps plus sync points (``cudaFree`` included)."""
    win = gpu_window(trace)
    ops, rt = trace.gpu_ops, trace.runtime
    rows = win.rows[ops.launch_row[win.rows] >= 0]
    launch_rows = ops.launch_row[rows]
    blocking_rows = set(syncs.gpu_row[syncs.gpu_row >= 0].tolist())
    launch_kind = np.array(
        [BLOCKING_LAUNCH if r in blocking_rows else LAUNCH for r in rows.tolist()], dtype=np.int64
    )
    sync_calls = np.concatenate([syncs.call_row[syncs.gpu_row < 0], allocator.free_rows])
    keys = ops.device[rows] * (1 << 32) + ops.stream[rows]
    unique_keys, stream = np.unique(keys, return_inverse=True)
    kind = np.concatenate([launch_kind, np.full(len(sync_calls), SYNC)])
    cpu_start = np.concatenate([rt.ts_us[launch_rows], rt.ts_us[sync_calls]])
    order = np.argsort(cpu_start, kind="stable")
    start = float(win.window[0][0]) if len(win.window[0]) else 0.0
    end = float(win.window[1][-1]) if len(win.window[1]) else 0.0
    latency, gap = _latency_and_gap(trace, rows, stream)
    kind, cpu_start = kind[order], cpu_start[order]
    cpu_end = np.concatenate([rt.end_us[launch_rows], rt.end_us[sync_calls]])[order]
    gpu_row = np.concatenate([rows, np.full(len(sync_calls), -1)])[order]
    stream = np.concatenate([stream, np.full(len(sync_calls), -1)])[order]
    is_op = gpu_row >= 0
    gpu_start = np.where(is_op, ops.ts_us[np.maximum(gpu_row, 0)], np.nan)
    gpu_end = np.where(is_op, ops.end_us[np.maximum(gpu_row, 0)], np.nan)
    after, delay = cross_stream_after(is_op, stream, gpu_start, gpu_end, cpu_start, latency, gap)
    wait_ptr, wait_idx = sync_waits(is_op, kind == SYNC, stream, gpu_end, cpu_end)
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
        sync_id=np.concatenate([launch_rows, sync_calls])[order],
        start_us=start,
        end_us=end,
        cpu_stop_us=min(float(trace.steps.cpu_end_us.max()), end) if len(trace.steps) else end,
        latency_us=latency,
        gap_us=gap,
        num_streams=len(unique_keys),
        measured_us=win.window_us,
    )


def _latency_and_gap(trace: Trace, rows: np.ndarray, stream: np.ndarray) -> tuple[float, float]:
    """Medians of launch-to-start on an idle stream and of start-after-previous when queued."""
    ops = trace.gpu_ops
    launch = launch_ts_us(trace, rows)
    latencies, gaps = [], []
    for s in np.unique(stream):
        mine = np.flatnonzero(stream == s)
        mine = mine[np.argsort(ops.ts_us[rows[mine]], kind="stable")]
        start, end, issued = ops.ts_us[rows[mine]], ops.end_us[rows[mine]], launch[mine]
        prev_end = np.concatenate([[-np.inf], np.maximum.accumulate(end)[:-1]])
        idle = issued > prev_end
        latencies.append(start[idle] - issued[idle])
        gaps.append((start - prev_end)[~idle])
    lat = np.concatenate(latencies) if latencies else np.zeros(0)
    gap = np.concatenate(gaps) if gaps else np.zeros(0)
    latency = float(np.median(lat[lat >= 0])) if np.any(lat >= 0) else DEFAULT_LATENCY_US
    turnaround = float(np.median(np.maximum(gap, 0.0))) if len(gap) else 0.0
    return latency, turnaround
