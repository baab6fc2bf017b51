"""What a replay change removed, part by part: the numbers behind a finding's gain.

A replay's step is a longest path through CPU work, calls, waits and GPU ops; a change shortens
it by at most what it takes out of those parts (each lies on a path at most once). So a gain
comes with its parts, per step: GPU time removed (the changed ops' time, and the turnaround of
the ops removed altogether), CPU time removed (work between events and calls), and the waits of
the sync points that no longer block, as the trace shows them (plus the profiler's cost taken
out of the steps, by which the CPU may reach them earlier). ``parts_ms_per_step`` adds them up.
A replay gain above it comes from the replay itself, not from the trace (a replayed GPU queue
longer than the recorded one: filtered traces); the engine caps the gain there and says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from aiprof.diagnose.context import Context
from aiprof.diagnose.replay import (
    BLOCKING_LAUNCH,
    LAUNCH,
    SYNC,
    WAITING_CALL_FACTOR,
    Change,
    Timeline,
    call_times,
    cpu_work,
)


def _ms(us: float, steps: int) -> float:
    return round(us / steps / 1000.0, 3)


def replay_parts(ctx: Context, change: Change) -> dict[str, Any]:
    """The parts ``change`` takes out of the replayed steps, per step, and the kernels."""
    tl = ctx.timeline
    steps = max(len(ctx.trace.steps), 1)
    gpu_us, turnaround_us, kernels = _gpu_parts(ctx, change)
    cpu_us = max(_cpu_removed_us(ctx, change), 0.0)  # below 0: the change adds CPU time
    waits_us = _waits_removed_us(ctx, change)
    # with the profiler's cost taken out the CPU reaches a sync earlier and may wait longer
    # there than the trace shows, by at most the cost taken out
    slack_us = len(tl.recorded_starts_us) * tl.profiler_overhead_us if waits_us > 0 else 0.0
    total = gpu_us + turnaround_us + cpu_us + waits_us + slack_us
    parts: dict[str, Any] = {
        "gpu_time_ms_per_step": _ms(gpu_us, steps),
        "turnaround_ms_per_step": _ms(turnaround_us, steps),
        "cpu_time_ms_per_step": _ms(cpu_us, steps),
        "sync_waits_ms_per_step": _ms(waits_us, steps),
        "profiler_time_before_syncs_ms_per_step": _ms(slack_us, steps),
        "parts_ms_per_step": _ms(total, steps),
    }
    if kernels:
        parts["ops"] = kernels[: ctx.options.max_items]
    if change.unblocked:
        count = np.count_nonzero(_waiting(tl) & _unblocked(tl, change))
        parts["syncs_unblocked_per_step"] = round(float(count) / steps, 1)
    return parts


def _gpu_parts(ctx: Context, change: Change) -> tuple[float, float, list[dict[str, Any]]]:
    """GPU time the new durations take out, the turnaround of removed ops, the top ops."""
    tl = ctx.timeline
    shorter = _shorter_turnaround_us(tl, change)
    if not change.gpu_dur_us:
        return 0.0, shorter, []
    events = np.flatnonzero(_steps_ops(tl))
    rows = tl.gpu_row[events]
    new = np.array([change.gpu_dur_us.get(int(r), np.nan) for r in rows.tolist()])
    changed = ~np.isnan(new)
    old = tl.gpu_dur_us[events][changed]
    saved = np.maximum(old - new[changed], 0.0)
    if change.side_stream_rows:  # off their stream altogether: all their time leaves it
        side = np.isin(rows[changed], np.fromiter(change.side_stream_rows, np.int64))
        saved[side] = old[side]
    gaps = np.broadcast_to(tl.gap_us, len(tl.kind))[events][changed]
    turnaround = float(np.sum(gaps[(new[changed] <= 0) & (old > 0)])) + shorter
    return float(saved.sum()), turnaround, _top_ops(ctx, rows[changed], saved)


def _steps_ops(tl: Timeline) -> np.ndarray:
    """Mask of the timeline's events that are GPU ops of the steps: the ops queued before them
    (the first ``num_queued``, ``GpuWindow.backlog``) are not the steps' work, and what a
    change does to them is no part of the steps' gain."""
    return (tl.gpu_row >= 0) & (np.arange(len(tl.kind)) >= tl.num_queued)


def _shorter_turnaround_us(tl: Timeline, change: Change) -> float:
    """What a cap on the turnaround of queued ops (``Change.queued_gap_us``) can take out: the
    cut of every op's turnaround (an op that was not queued had none to cut)."""
    if change.queued_gap_us is None:
        return 0.0
    ops = _steps_ops(tl) & (tl.gpu_dur_us > 0)
    gaps = np.broadcast_to(tl.gap_us, len(tl.kind))[ops]
    return float(np.sum(np.maximum(gaps - change.queued_gap_us, 0.0)))


def _top_ops(ctx: Context, rows: np.ndarray, saved: np.ndarray) -> list[dict[str, Any]]:
    names = ctx.trace.gpu_ops.name_id[rows]
    ids, inverse = np.unique(names, return_inverse=True)
    totals = np.bincount(inverse, weights=saved)
    counts = np.bincount(inverse)
    steps = max(len(ctx.trace.steps), 1)
    order = np.argsort(-totals, kind="stable")
    return [{"name": ctx.trace.name(int(ids[i])),
             "count_per_step": round(float(counts[i]) / steps, 1),
             "removed_ms_per_step": _ms(float(totals[i]), steps)}
            for i in order if totals[i] > 0]


def _cpu_removed_us(ctx: Context, change: Change) -> float:
    """CPU work and call time the change takes out (as the replay counts them)."""
    tl = ctx.timeline
    work, tail = cpu_work(tl, Change())
    new_work, new_tail = cpu_work(tl, change)
    removed = float(work.sum() + tail - new_work.sum() - new_tail)
    call, own = call_times(tl, Change())
    new_call, new_own = call_times(tl, change)
    launch = tl.kind == LAUNCH
    async_call = max(tl.launch_call_us - tl.profiler_overhead_us, 0.0)
    # CUDA graphs: the calls' work part goes (torch.compile keeps the calls)
    collapsed = 0.0 if change.keep_launch_calls else 1.0 - change.launch_work_scale
    scaled = np.minimum(new_call, WAITING_CALL_FACTOR * async_call) * collapsed
    removed += float(np.sum((call - new_call + scaled)[launch]))
    waiting = _waiting(tl) & ~_unblocked(tl, change)  # unblocked ones: _waits_removed_us
    return removed + float(np.sum((own - new_own)[waiting]))


def _waiting(tl: Timeline) -> np.ndarray:
    waiting: np.ndarray = (tl.kind == SYNC) | (tl.kind == BLOCKING_LAUNCH)
    return waiting


def _unblocked(tl: Timeline, change: Change) -> np.ndarray:
    if not change.unblocked:
        return np.zeros(len(tl.kind), dtype=bool)
    return np.isin(tl.sync_id, np.fromiter(change.unblocked, dtype=np.int64))


def _waits_removed_us(ctx: Context, change: Change) -> float:
    """The calls of the syncs and blocking copies the change unblocks, as recorded: their wait
    for the GPU and their own time (neither is spent once they no longer block)."""
    tl = ctx.timeline
    mask = _waiting(tl) & _unblocked(tl, change)
    return float(np.sum(np.maximum(tl.cpu_end_us - tl.cpu_start_us, 0.0)[mask]))


PARTS_SLACK_MS = 0.002
"""Rounding of the parts (ms to 3 decimals) allowed before a gain counts as above them."""


def bounded_gain(ctx: Context, change: Change, gain_pct: float) -> tuple[float, dict[str, Any]]:
    """``gain_pct`` of ``change``, at most what its parts take out of the trace, and the parts.

    A replay that saves more than the parts saves its own queue, not the trace's (a replay off
    the measured step: filtered traces); the parts then get ``replay_gain_ms_per_step``."""
    parts = replay_parts(ctx, change)
    gain_ms = ctx.gain_ms_per_step(gain_pct)
    if gain_ms > 0 and gain_ms > parts["parts_ms_per_step"] + PARTS_SLACK_MS:
        parts["replay_gain_ms_per_step"] = round(float(gain_ms), 3)
        return gain_pct * max(float(parts["parts_ms_per_step"]), 0.0) / gain_ms, parts
    return gain_pct, parts
