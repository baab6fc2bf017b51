"""Launch queue length per GPU stream: GPU ops launched by the host but not yet started.

The queue grows by one at the start of each launch call (``cudaLaunchKernel``,
``cudaMemcpyAsync``, ...) and shrinks by one when the op it launched starts on its stream:
HTA 0.5's definition (``TraceCounters.get_queue_length_time_series``). ``hta_*`` fields are
HTA's summary: statistics over the series' points, each point counted once whatever time it
lasts. aiprof adds what the diagnosis rests on, weighted by time over the profiled steps:
the share of the steps each stream's queue is empty, and empty while the stream is idle too
(the GPU waited for the host: ``cpu_bound``, ``host_sync``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.frames import data_frame
from aiprof.trace import Trace
from aiprof.trace.links import gather

HTA_LAUNCHES = re.compile(
    r"^(cudaLaunchKernel|cudaLaunchKernelExC|cuLaunchKernel|cudaMemcpyAsync|cudaMemsetAsync|"
    r"hipLaunchKernel|hipExtModuleLaunchKernel|hipMemsetAsync|hipMemcpyAsync|"
    r"hipMemcpyWithStream)$"
)
"""The launch calls HTA 0.5 counts (``get_runtime_launch_events_query``); aiprof counts every
runtime call linked to a GPU op (``cudaMemcpy``, ``cudaLaunchCooperativeKernel`` too)."""


@dataclass(frozen=True, eq=False)
class StreamQueue:
    """One stream's queue: the series (a step function) and its statistics."""

    device: int
    stream: int
    num_ops: int
    ts_us: np.ndarray
    """Times the length changes (sorted); the length holds until the next time."""
    length: np.ndarray
    """Queue length from each ``ts_us`` on."""
    hta_mean: float
    hta_std: float
    hta_min: float
    hta_p25: float
    hta_p50: float
    hta_p75: float
    hta_max: float
    time_mean: float
    """Mean length weighted by time, over the steps."""
    empty_pct: float
    """Share of the steps with nothing waiting on this stream."""
    empty_idle_pct: float
    """Share of the steps with nothing waiting and nothing running on this stream."""


@dataclass(frozen=True, eq=False)
class QueueResult:
    """Every stream with launched GPU ops, busiest first."""

    rank: int
    path: str
    window_us: float
    streams: list[StreamQueue]

    def to_pandas(self) -> Any:
        """One row per stream (the summary); the series are in ``series_to_pandas``."""
        rows = self.streams
        names = [n for n in StreamQueue.__dataclass_fields__ if n not in ("ts_us", "length")]
        columns: dict[str, list[Any]] = {"rank": [self.rank] * len(rows)}
        columns |= {n: [getattr(s, n) for s in rows] for n in names}
        return data_frame(columns)

    def series_to_pandas(self) -> Any:
        """Every stream's series: ``stream, ts_us, length`` rows."""
        return data_frame(
            {
                "device": np.concatenate([np.full(len(s.ts_us), s.device) for s in self.streams])
                if self.streams else np.zeros(0, np.int64),
                "stream": np.concatenate([np.full(len(s.ts_us), s.stream) for s in self.streams])
                if self.streams else np.zeros(0, np.int64),
                "ts_us": _concat([s.ts_us for s in self.streams]),
                "length": _concat([s.length for s in self.streams]),
            }
        )


def queue_length(trace: Trace, *, hta: bool = False) -> QueueResult:
    """The queue length series of every stream over the whole trace (see module docstring).

    ``hta=True`` reproduces HTA 0.5 exactly: only ``HTA_LAUNCHES`` calls, and, as HTA's
    loader does, nothing launched at or after the start of the last ``ProfilerStep``.
    """
    ops = trace.gpu_ops
    launched = ops.launch_row >= 0
    if hta:
        call_names = gather(trace.runtime.name_id, ops.launch_row, -1)
        launched &= trace.strings.mask(np.maximum(call_names, 0), HTA_LAUNCHES) & (call_names >= 0)
        if trace.step_source.startswith("ProfilerStep") and len(trace.steps) >= 2:
            launch_at = gather(trace.runtime.ts_us, ops.launch_row, np.inf)
            launched &= launch_at < trace.steps.cpu_start_us.max()
    rows = np.flatnonzero(launched)
    launch_ts = trace.runtime.ts_us[ops.launch_row[rows]]
    window = step_window(trace)
    busy_by_stream = _keys(ops.device[rows], ops.stream[rows])
    streams = []
    for key in np.unique(busy_by_stream):
        mine = rows[busy_by_stream == key]
        ts, length = _series(launch_ts[busy_by_stream == key], ops.ts_us[mine])
        running = iv.union(ops.ts_us[mine], ops.end_us[mine])
        streams.append(_stream(int(key >> 32), int(key & 0xFFFFFFFF), len(mine), ts, length,
                               running, window))
    streams.sort(key=lambda s: (-s.num_ops, s.device, s.stream))
    return QueueResult(trace.rank, trace.path, iv.length(window), streams)


def _series(launch_ts: np.ndarray, start_ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ts = np.concatenate([launch_ts, start_ts])
    # one byte a step, summed in float64: the same whole numbers as float64 steps summed
    delta = np.concatenate([np.ones(len(launch_ts), np.int8), -np.ones(len(start_ts), np.int8)])
    order = np.argsort(ts, kind="stable")
    return ts[order], np.cumsum(delta[order], dtype=np.float64)


def _stream(
    device: int,
    stream: int,
    num_ops: int,
    ts: np.ndarray,
    length: np.ndarray,
    running: iv.Intervals,
    window: iv.Intervals,
) -> StreamQueue:
    p25, p50, p75 = np.percentile(length, [25, 50, 75])
    # segments [ts[i], ts[i+1]) hold length[i]; before the first and after the last: empty
    seg_start, seg_end = ts[:-1], ts[1:]
    coverage = iv.covered_before(window, ts)  # at every point once: each segment's ends are points
    covered = coverage[1:] - coverage[:-1]
    del coverage
    window_us = iv.length(window)
    queued = length[:-1] > 0
    waiting = iv.union(seg_start[queued], seg_end[queued])
    del queued
    empty_us = window_us - iv.length(iv.intersect(waiting, window))
    empty_idle_us = window_us - iv.length(iv.intersect(iv.union_all(waiting, running), window))
    pct = 100.0 / window_us if window_us > 0 else 0.0
    return StreamQueue(
        device=device,
        stream=stream,
        num_ops=num_ops,
        ts_us=ts,
        length=length,
        hta_mean=float(length.mean()),
        hta_std=float(length.std(ddof=1)) if len(length) > 1 else float("nan"),
        hta_min=float(length.min()),
        hta_p25=float(p25),
        hta_p50=float(p50),
        hta_p75=float(p75),
        hta_max=float(length.max()),
        time_mean=float((length[:-1] * covered).sum() / window_us) if window_us > 0 else 0.0,
        empty_pct=empty_us * pct,
        empty_idle_pct=empty_idle_us * pct,
    )


def _keys(device: np.ndarray, stream: np.ndarray) -> np.ndarray:
    return np.asarray(np.asarray(device, dtype=np.int64) * (1 << 32) + stream)


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0)


def waiting(result: QueueResult) -> iv.Intervals:
    """When at least one stream has launched work that has not started."""
    parts = [
        (s.ts_us[:-1][s.length[:-1] > 0], s.ts_us[1:][s.length[:-1] > 0]) for s in result.streams
    ]
    return iv.union_all(*parts) if parts else iv.EMPTY
