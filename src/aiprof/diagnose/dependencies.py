"""What each op and each sync point waited for, read off the trace (for the replay).

- Cross-stream waits: an op that started later than its submission and its stream allow
  (by more than twice its turnaround, at least 2 µs) waited for something else; its
  dependency is the op of another stream, launched before it, that ended last before it
  started, within ``window_us`` (50 µs) of its start (``cudaStreamWaitEvent`` on a recorded
  event looks like this: the waiting stream resumes 2-30 µs after the event, measured on the
  H200 suite).
  When no such op exists but one of another stream, launched before it, was running when it
  started, it waited for the SMs that op held (a concurrent kernel gets them as the running
  one's last blocks retire: cuDNN's FFT convolutions on its own streams beside the main
  stream's FP32 convolutions started 27 µs before such an op's end at the median, the H200's
  VGG-16-BN): it depends on that op, starting as long before its end. Otherwise the
  unexplained delay itself is kept (a wait the trace does not show the cause of: no fix in
  the replay removes it).
- Sync waits: a sync point waited, on each stream, for the last op launched before it whose
  end came before the sync returned.
"""

from __future__ import annotations

import numpy as np

SYNC_TOLERANCE_US = 2.0
"""Slack between an op's end and the sync's return (the call's own return path)."""


def cross_stream_after(
    is_op: np.ndarray, stream: np.ndarray, start: np.ndarray, end: np.ndarray,
    submitted: np.ndarray, latency_us: float, gap_us: np.ndarray, window_us: float = 50.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Per event: the op of another stream it waited for (-1: none) and any unexplained delay.

    ``submitted`` is when each op was handed to the GPU (its launch call's return), ``gap_us``
    each op's turnaround after the previous op of its stream."""
    n = len(is_op)
    after = np.full(n, -1, dtype=np.int64)
    delay = np.zeros(n)
    ops = np.flatnonzero(is_op)
    if len(ops) == 0:
        return after, delay
    prev_end = np.full(n, -np.inf)
    for s in np.unique(stream[ops]):
        mine = ops[stream[ops] == s]
        prev_end[mine[1:]] = np.maximum.accumulate(end[mine])[:-1]
    explained = np.maximum(submitted[ops] + latency_us, prev_end[ops] + gap_us[ops])
    unexplained = start[ops] - explained
    is_late = unexplained > np.maximum(2.0, 2.0 * gap_us[ops])
    late = ops[is_late]
    delay[late] = unexplained[is_late]
    by_end = ops[np.argsort(end[ops], kind="stable")]
    sorted_end = end[by_end]
    for i in late.tolist():
        j = np.searchsorted(sorted_end, start[i] + 0.5, side="right") - 1
        while j >= 0 and sorted_end[j] >= start[i] - window_us:
            candidate = int(by_end[j])
            if stream[candidate] != stream[i] and candidate < i:
                after[i] = candidate
                delay[i] = 0.0
                break
            j -= 1
        if after[i] < 0:
            after[i], delay[i] = _in_a_tail(i, ops, stream, start, end, gap_us, delay[i])
    return after, delay


def _in_a_tail(i: int, ops: np.ndarray, stream: np.ndarray, start: np.ndarray,
               end: np.ndarray, gap_us: np.ndarray, delay: float) -> tuple[int, float]:
    """A late op that no op of another stream explains by ending just before it, but that
    started while one was running: it waited for SMs that op held (a concurrent kernel gets
    them as the running one's last blocks retire), so it depends on that op, and starts the
    same time before its end (a negative delay). Of several running, the first to end (it
    freed SMs first); ``-1`` and ``delay`` kept where none ran, or none launched before it."""
    running = ops[(ops < i) & (stream[ops] != stream[i]) & (start[ops] < start[i])
                  & (end[ops] > start[i])]
    if not len(running):
        return -1, delay
    j = int(running[np.argmin(end[running])])
    return j, float(start[i] - end[j] - gap_us[i])


def sync_waits(
    is_op: np.ndarray, is_sync: np.ndarray, stream: np.ndarray, end: np.ndarray,
    sync_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """CSR (``ptr``, ``idx``) of the op events each sync event waited for."""
    n = len(is_op)
    syncs = np.flatnonzero(is_sync)
    ops = np.flatnonzero(is_op)
    per_sync: list[list[int]] = [[] for _ in range(len(syncs))]
    for s in np.unique(stream[ops]):
        mine = ops[stream[ops] == s]
        reach = np.maximum.accumulate(end[mine])
        before = np.searchsorted(mine, syncs)
        last = np.searchsorted(reach, sync_end[syncs] + SYNC_TOLERANCE_US, side="right") - 1
        last = np.minimum(last, before - 1)
        for k in np.flatnonzero(last >= 0).tolist():
            per_sync[k].append(int(mine[last[k]]))
    counts = np.zeros(n, dtype=np.int64)
    counts[syncs] = [len(w) for w in per_sync]
    ptr = np.concatenate([[0], np.cumsum(counts)])
    idx = np.array([j for w in per_sync for j in w], dtype=np.int64)
    return ptr, idx
