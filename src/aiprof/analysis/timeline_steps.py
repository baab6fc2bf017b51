"""Every CPU thread and GPU stream of each step, as spans for the report's timeline.

Per step (at most ``MAX_STEPS``): the CPU spans of nesting depth 0 to 2 on every thread but
``ProfilerStep#N`` itself (top-level ops and what they call first: the level a reader scans)
and every kernel, copy and memset on every stream, times relative to the step's start; at
most ``MAX_SPANS`` spans a step, the longest kept, so a page stays light on steps with a
million events. Spans come longest first, so a drawing puts the inner ones on top.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis.cpu_forest import cpu_forest
from aiprof.trace import Trace
from aiprof.trace.steps import PROFILER_STEP
from aiprof.trace.tables import StepTable

MAX_STEPS = 8
MAX_SPANS = 4000
KINDS = ("op", "annotation", "runtime", "kernel", "memcpy", "memset")


@dataclass(frozen=True, eq=False)
class TimelineStep:
    number: int
    duration_us: float
    lane: np.ndarray  # index into StepTimeline.lanes
    start_us: np.ndarray  # from the step's start
    dur_us: np.ndarray
    kind: np.ndarray  # index into KINDS
    name: np.ndarray  # index into StepTimeline.names


@dataclass(frozen=True, eq=False)
class StepTimeline:
    lanes: list[str]
    names: list[str]
    steps: list[TimelineStep]
    num_steps: int
    """All profiled steps (``steps`` holds the first ``MAX_STEPS``)."""


def step_timeline(trace: Trace) -> StepTimeline:
    forest = cpu_forest(trace)
    gpu = trace.gpu_ops
    steps = trace.steps
    windows = [(float(steps.start_us[i]), float(steps.end_us[i]))
               for i in range(min(len(steps), MAX_STEPS))]
    step_spans = trace.strings.mask(forest.name_id, PROFILER_STEP)
    shallow = np.flatnonzero((forest.nested.depth <= 2) & ~step_spans
                             & _in_windows(forest.ts_us, windows))
    del step_spans
    gpu_rows = np.flatnonzero(_in_windows(gpu.ts_us, windows))
    cpu_kind = np.searchsorted(np.array(forest.offsets[1:]), shallow, side="right")
    gpu_kind = 3 + np.searchsorted(np.array([len(trace.kernels),
                                             len(trace.kernels) + len(trace.memcpy)]),
                                   gpu_rows, side="right")
    cpu_lane = [f"thread {t}" for t in _tids(trace)]
    stream_keys = gpu.device.astype(np.int64) * (1 << 32) + gpu.stream
    streams = np.unique(stream_keys)
    stream_index = np.searchsorted(streams, stream_keys[gpu_rows])
    del stream_keys
    lanes = cpu_lane + [f"GPU {int(k >> 32)} stream {int(k & 0xFFFFFFFF)}" for k in streams]
    ts = np.concatenate([forest.ts_us[shallow], gpu.ts_us[gpu_rows]])
    dur = np.concatenate([forest.dur_us[shallow], gpu.dur_us[gpu_rows]])
    lane = np.concatenate([forest.thread[shallow], len(cpu_lane) + stream_index])
    kind = np.concatenate([cpu_kind, gpu_kind])
    name_id = np.concatenate([forest.name_id[shallow], gpu.name_id[gpu_rows]])
    chosen = []
    for i, (lo, hi) in enumerate(windows):
        rows = np.flatnonzero((ts >= lo) & (ts < hi))
        rows = rows[np.argsort(-dur[rows], kind="stable")[:MAX_SPANS]]
        chosen.append((int(steps.number[i]), lo, hi, rows))
    used: np.ndarray = (np.unique(np.concatenate([name_id[r] for *_, r in chosen])) if chosen
                        else np.zeros(0, np.int64))
    names = [trace.name(int(i)) for i in used]
    out = [TimelineStep(n, hi - lo, lane[r], ts[r] - lo, dur[r], kind[r],
                        np.searchsorted(used, name_id[r]))
           for n, lo, hi, r in chosen]
    return StepTimeline(lanes, names, out, len(steps))


def _in_windows(ts_us: np.ndarray, windows: list[tuple[float, float]]) -> np.ndarray:
    """Which times fall in one of the drawn steps' ``[start, end)``: the spans are taken in
    their order from those alone, not from the whole trace (the same rows per step)."""
    inside = np.zeros(len(ts_us), dtype=bool)
    for lo, hi in windows:
        inside |= (ts_us >= lo) & (ts_us < hi)
    return inside


def _tids(trace: Trace) -> list[int]:
    """The tid of each forest thread key, in key order."""
    forest = cpu_forest(trace)
    tids = np.concatenate([trace.cpu_ops.tid, trace.annotations.tid, trace.runtime.tid])
    keys, first = np.unique(forest.thread, return_index=True)
    out = [0] * (int(keys.max()) + 1 if len(keys) else 0)
    for k, f in zip(keys.tolist(), first.tolist(), strict=True):
        out[k] = int(tids[f])
    return out


def merged_timeline(traces: list[Trace]) -> StepTimeline:
    """Every rank's timeline in one: lanes named ``rank N ...``; step i of every rank drawn
    on the common clock from the first rank's step i (ranks without it are left out)."""
    return merge_timelines([(t.rank, step_timeline(t), t.steps) for t in traces])


def merge_timelines(parts: list[tuple[int, StepTimeline, StepTable]]) -> StepTimeline:
    """``merged_timeline`` of each rank's (rank, ``step_timeline``, steps on the common clock)."""
    if len(parts) == 1:
        return parts[0][1]
    lanes: list[str] = []
    names: list[str] = []
    lane_base, name_base = [], []
    for rank, tl, _ in parts:
        lane_base.append(len(lanes))
        name_base.append(len(names))
        lanes += [f"rank {rank} {lane}" for lane in tl.lanes]
        names += tl.names
    first_steps = parts[0][2]
    steps = []
    for i in range(min(len(tl.steps) for _, tl, _ in parts)):
        zero = float(first_steps.start_us[i])
        pieces = []
        end = 0.0
        for k, (_, tl, table) in enumerate(parts):
            s = tl.steps[i]
            shift = float(table.start_us[i]) - zero
            pieces.append((s.lane + lane_base[k], s.start_us + shift, s.dur_us, s.kind,
                           s.name + name_base[k]))
            end = max(end, shift + s.duration_us)
        columns = [np.concatenate([p[j] for p in pieces]) for j in range(5)]
        order = np.argsort(-columns[2], kind="stable")  # longest first: inner spans on top
        steps.append(TimelineStep(tl.steps[i].number, end, *(c[order] for c in columns)))
    return StepTimeline(lanes, names, steps, min(tl.num_steps for _, tl, _ in parts))
