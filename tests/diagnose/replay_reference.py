"""The replay's event loop as it was before it was tuned for speed: the oracle that the tuned
``aiprof.diagnose.replay.simulate`` must match bit for bit (tests/diagnose/test_replay_speed.py)."""

from __future__ import annotations

import numpy as np

from aiprof.diagnose.replay import (
    BLOCKING_LAUNCH,
    LAUNCH,
    SYNC,
    WAITING_CALL_FACTOR,
    Change,
    Replayed,
    Timeline,
    call_times,
    cpu_work,
)


def simulate(timeline: Timeline, change: Change | None = None) -> Replayed:
    """``replay.simulate`` as it was before it was tuned for speed (2026-12-01)."""
    change = change or Change()
    work, tail = cpu_work(timeline, change)
    durations = timeline.gpu_dur_us.copy()
    for row_index in np.flatnonzero(timeline.gpu_row >= 0):
        new = change.gpu_dur_us.get(int(timeline.gpu_row[row_index]))
        if new is not None:
            durations[row_index] = new
    for k, twin in enumerate(timeline.backlog_twin.tolist()):  # the backlog (added 2026-12-03)
        old = timeline.gpu_dur_us[twin] if twin >= 0 else 0.0
        if twin >= 0 and old > 0:
            durations[k] = timeline.gpu_dur_us[k] * (durations[twin] / old)
    if timeline.gpu_scale != 1.0:
        durations = durations * timeline.gpu_scale
    call_scale = change.launch_work_scale
    async_call = max(timeline.launch_call_us - timeline.profiler_overhead_us, 0.0)
    stream_end = [timeline.start_us] * max(timeline.num_streams, 1)
    host_wait = [0.0] * len(stream_end)
    busy = [0.0] * len(stream_end)
    num_ops = num_drained = 0
    sync_wait = 0.0
    end_at = [timeline.start_us] * len(durations)
    cpu, lat = timeline.start_us, timeline.latency_us
    calls, owns = (a.tolist() for a in call_times(timeline, change))
    ptr, idx = timeline.wait_ptr.tolist(), timeline.wait_idx.tolist()
    gpu_from = timeline.start_us  # the backlog's end (added 2026-12-02)
    launched_ends: list[list[float]] = [[] for _ in stream_end]  # queues (added 2026-12-03)
    depth = timeline.queue_depth
    for k, (kind, stream, dur, sync_id, after, delay, gap) in enumerate(zip(
        timeline.kind.tolist(), timeline.stream.tolist(), durations.tolist(),
        timeline.sync_id.tolist(), timeline.after.tolist(), timeline.delay_us.tolist(),
        np.broadcast_to(timeline.gap_us, len(durations)).tolist(), strict=True,
    )):
        if change.queued_gap_us is not None:  # a graph's turnaround (added 2026-12-01)
            gap = min(gap, change.queued_gap_us)
        cpu += work[k]
        blocks = sync_id not in change.unblocked
        if kind == SYNC:
            if blocks:
                if ptr[k + 1] > ptr[k]:
                    drained = max(end_at[j] for j in idx[ptr[k]:ptr[k + 1]])
                    sync_wait += max(drained - cpu, 0.0)
                    cpu = max(cpu, drained)
                cpu += owns[k]
            continue
        if kind == LAUNCH:
            work_part = min(calls[k], WAITING_CALL_FACTOR * async_call)
            call = work_part * call_scale + (calls[k] - work_part)
        else:
            call = min(calls[k], async_call)
        if dur > 0:
            if depth and len(launched_ends[stream]) >= depth:
                cpu = max(cpu, launched_ends[stream][-depth])
            submitted = cpu if kind == BLOCKING_LAUNCH and blocks else cpu + call
            ready = end_at[after] + gap if after >= 0 else timeline.start_us
            device_ready = max(stream_end[stream] + gap, ready)
            host_ready = max(submitted + lat, cpu)
            start = max(host_ready, device_ready) + delay
            if delay < 0:  # an op in another stream's op's tail (added 2026-12-03)
                start = max(start, stream_end[stream] + gap, host_ready)
            num_ops += 1
            if host_ready > device_ready:  # the queue had drained: the GPU waited for the host
                num_drained += 1
                host_wait[stream] += host_ready - max(device_ready, stream_end[stream])
            stream_end[stream] = start + dur
            busy[stream] += dur
            launched_ends[stream].append(stream_end[stream])
        elif after >= 0:  # a removed op's wait on another stream stays: the stream still waits
            stream_end[stream] = max(stream_end[stream], end_at[after])
        end_at[k] = stream_end[stream]
        if kind == BLOCKING_LAUNCH and blocks:
            sync_wait += max(stream_end[stream] - cpu, 0.0)
            cpu = max(cpu, stream_end[stream]) + owns[k]
        else:
            cpu += call
        if k == timeline.num_queued - 1:
            gpu_from = max(stream_end)
    step = max(cpu + tail - timeline.start_us, max(stream_end) - gpu_from)
    # the host's work after the last launch: the streams idle until the step ends
    host_wait = [w + max(cpu + tail - end, 0.0) for w, end in zip(host_wait, stream_end,
                                                                    strict=True)]
    return Replayed(step, tuple(host_wait), num_ops, num_drained, sync_wait, tuple(busy))
