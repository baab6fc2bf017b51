"""The GPU's launch queue: how many ops the host can have in flight before a launch blocks.

A kernel launch is asynchronous only while the device's queue has room. On a step the GPU
paces, the host runs ahead until the queue is full; from then on each launch call returns only
when an earlier op has finished and freed a slot, so the trace shows launch calls of a
millisecond and more (against a few µs) with the GPU busy throughout. That time is the GPU's,
not the host's: make the GPU faster and the calls return sooner. Replayed as the host's own
time, it puts a floor under the step that no GPU-side fix can go below (issue 15's third
failure class: TF32 on an FP32 RoBERTa step measured 64%, the model said 34%, because 67 ms
of its 118 ms step were launch calls waiting for a slot).

The model (aiprof's), read off the trace itself, one queue per stream (the device's hardware
queues): a launch call longer than ``replay.WAITING_CALL_FACTOR`` median launch calls, with at
least ``MIN_IN_FLIGHT`` earlier ops of its stream unfinished when it returned, waited for a
slot (a long call with few in flight, a first launch's lazy loading, did not). The depth is
the most ops in flight at any of those returns: a call returns as a slot frees, and where
slots hold commands the trace does not show as ops (event records, a communication library's)
it counts fewer, so the largest count is the queue's capacity as measured (RoBERTa's 216
waiting calls: 556-1021 in flight, 1021 at the median; a 6-stream A100 trace's 378: 335-870 on
their streams, where a depth of the median, 757, replays its step 1.0% long and 870, 0.2%).
The replay then lets the host launch a stream's op ``m`` only once that stream's op
``m - depth`` has ended, and gives those launch calls an ordinary call's time. Where no call
waited, the queues are taken as never full (depth 0: no limit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_IN_FLIGHT = 64
"""Ops unfinished at a long launch call's return for it to count as a wait for a slot
(aiprof's threshold): a long call with few ops in flight waited for something else (lazy
module loading on a first launch). The H200 recordings' waiting calls returned with 556-1021
ops in flight (``tests/data/diagnose/counterfactual_large``)."""
MIN_WAITS = 3
"""Waiting calls needed to measure the depth (fewer: the queue is taken as never full)."""


@dataclass(frozen=True)
class LaunchQueue:
    """The queue's measured depth and which events' launch calls waited for a slot."""

    depth: int
    """Ops in flight at which a launch blocks; 0: the queue never filled in the trace."""
    waited: np.ndarray
    """Per timeline event: its launch call waited for a slot (its recorded time is the GPU's)."""


def launch_queue(is_launch: np.ndarray, stream: np.ndarray, cpu_start_us: np.ndarray,
                 cpu_end_us: np.ndarray, gpu_end_us: np.ndarray,
                 long_call_us: float) -> LaunchQueue:
    """The launch queue of a timeline's events (in CPU order): ``is_launch`` marks the ops'
    launch events, ``stream`` their streams, ``gpu_end_us`` each op's recorded end (NaN for
    other events); a launch call longer than ``long_call_us`` may have waited.

    Each stream has a queue of its own (the device's hardware queues; a long launch call on a
    communication stream with none of its own ops in flight waited for something else, however
    full the compute stream's queue: ``trace_diff/control``'s NCCL launches). Ops in flight at
    a call's return: its stream's ops launched before it less those that had ended by then
    (ops launched later end later, so counting every op of the stream that ended is exact up
    to launches from other threads)."""
    none = LaunchQueue(0, np.zeros(len(is_launch), dtype=bool))
    if long_call_us <= 0 or not is_launch.any():
        return none
    long = is_launch & (cpu_end_us - cpu_start_us > long_call_us)
    if long.sum() < MIN_WAITS:
        return none
    at = np.flatnonzero(long)
    in_flight = np.zeros(len(at), dtype=np.int64)
    for s in np.unique(stream[at]).tolist():
        mine = is_launch & (stream == s)
        ends = np.sort(gpu_end_us[mine])
        launched_before = np.cumsum(mine) - mine
        here = stream[at] == s
        in_flight[here] = (launched_before[at[here]]
                           - np.searchsorted(ends, cpu_end_us[at[here]], side="right"))
    full = in_flight >= MIN_IN_FLIGHT
    if full.sum() < MIN_WAITS:
        return none
    waited = np.zeros(len(is_launch), dtype=bool)
    waited[at[full]] = True
    return LaunchQueue(int(in_flight[full].max()), waited)
