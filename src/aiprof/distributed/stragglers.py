"""Stragglers and load imbalance across ranks.

A collective ends on every rank at about the same moment, when the last rank has arrived; the
time a rank spends in it beyond the shortest rank's time is waiting for that last rank. For a
call paired across ranks (``matched_rows``: by end time), wait(r, i) = dur(r, i) − min over
ranks of dur(·, i), and the rank with the shortest duration is the late arriver the others
waited for. The wait itself needs no clock alignment; the pairing needs clocks roughly on a
common zero (closer than the gap between calls).
Load imbalance is λ = (max/mean − 1)·100% of per-rank compute per step (Pearce et al.,
"Quantifying the effectiveness of load balance algorithms", ICS 2012).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.distributed.commtrace import CollectiveCalls


@dataclass(frozen=True, kw_only=True)
class WaitResult:
    """Waiting in collectives, per rank (index = position in the input list)."""

    num_matched_calls: int
    wait_us: list[float]
    """Total time each rank waited in collectives for a later rank."""
    caused_us: list[float]
    """Total wait of the other ranks attributed to each rank (it arrived last)."""
    last_arrival_share_pct: list[float]
    """Share of matched calls in which this rank arrived last."""


MAX_SHIFT = 64
"""How many calls one rank's trace window may start before or after another's."""


def best_shift(base_ends: np.ndarray, other_ends: np.ndarray) -> int:
    """s such that call j of the base pairs with call j − s of the other rank.

    Profiling windows of ranks rarely start on the same call; a collective ends at about the
    same moment on every rank, so the shift that minimizes the median gap between the paired
    end times (clocks on a common zero) is the right pairing. At least half the calls of the
    shorter list must pair; ties go to the smaller |s|.
    """
    need = max(1, min(len(base_ends), len(other_ends)) // 2)
    best, best_score = 0, np.inf
    for s in sorted(range(-len(other_ends) + 1, len(base_ends)), key=abs):
        if abs(s) > MAX_SHIFT:
            break
        lo, hi = max(0, s), min(len(base_ends), len(other_ends) + s)
        if hi - lo < need:
            continue
        score = float(np.median(np.abs(base_ends[lo:hi] - other_ends[lo - s : hi - s])))
        if score < best_score:
            best, best_score = s, score
    return best


def matched_rows(calls: list[CollectiveCalls], kind: str) -> list[np.ndarray]:
    """Row indexes, per rank, of the calls of ``kind`` that pair up across all ranks."""
    rows = [np.flatnonzero(np.array(c.kind, dtype=object) == kind) for c in calls]
    if any(len(r) == 0 for r in rows):
        return [np.empty(0, dtype=np.int64) for _ in calls]
    ends = [c.ts_us[r] + c.dur_us[r] for c, r in zip(calls, rows, strict=True)]
    shifts = [0] + [best_shift(ends[0], e) for e in ends[1:]]
    lo = max(max(0, s) for s in shifts)
    hi = min(min(len(ends[0]), len(e) + s) for e, s in zip(ends, shifts, strict=True))
    j = np.arange(lo, max(lo, hi))
    return [r[j - s] for r, s in zip(rows, shifts, strict=True)]


def collective_waits(calls: list[CollectiveCalls]) -> WaitResult:
    """Match calls across ranks (``matched_rows``) and split their durations into wait and work.

    The wait of a call is its first ``wait`` microseconds; waits of calls that run at the same
    time (several async collectives queued together) are merged, not added.
    """
    n = len(calls)
    spans: list[list[tuple[float, float, int]]] = [[] for _ in range(n)]  # (start, end, late rank)
    last = np.zeros(n)
    matched = 0
    for kind in sorted({k for c in calls for k in c.kind}):
        rows = matched_rows(calls, kind)
        count = len(rows[0])
        if count == 0 or n < 2:
            continue
        table = np.stack([c.dur_us[r] for c, r in zip(calls, rows, strict=True)])
        late = table.argmin(axis=0)
        waits = table - table.min(axis=0)
        for rank, (c, r) in enumerate(zip(calls, rows, strict=True)):
            starts = c.ts_us[r]
            spans[rank].extend(zip(starts, starts + waits[rank], late, strict=True))
        np.add.at(last, late, 1)
        matched += count
    wait, caused = np.zeros(n), np.zeros(n)
    for rank, items in enumerate(spans):
        arr = np.array(items, dtype=float).reshape(-1, 3)
        wait[rank] = iv.length(iv.union(arr[:, 0], arr[:, 1]))
        for culprit in range(n):
            if culprit != rank:
                mine = arr[arr[:, 2] == culprit]
                caused[culprit] += iv.length(iv.union(mine[:, 0], mine[:, 1]))
    share = (100.0 * last / matched).tolist() if matched else [float("nan")] * n
    return WaitResult(
        num_matched_calls=matched,
        wait_us=wait.tolist(),
        caused_us=caused.tolist(),
        last_arrival_share_pct=share,
    )


def imbalance_pct(values: list[float]) -> float:
    """λ = (max/mean − 1)·100; 0 for one rank or all zero."""
    arr = np.asarray(values, dtype=float)
    if len(arr) < 2 or arr.mean() <= 0:
        return 0.0
    return float((arr.max() / arr.mean() - 1.0) * 100.0)


def compute_outliers(compute_us_per_step: list[float], tolerance_pct: float) -> list[int]:
    """Positions whose compute per step exceeds the median of the others by more than tolerance."""
    arr = np.asarray(compute_us_per_step, dtype=float)
    out = []
    for i, value in enumerate(arr):
        others = np.delete(arr, i)
        if (
            len(others)
            and np.median(others) > 0
            and value > np.median(others) * (1 + tolerance_pct / 100)
        ):
            out.append(i)
    return out
