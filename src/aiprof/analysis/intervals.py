"""Interval arithmetic on numpy arrays: unions, lengths, intersections, differences.

An interval set is a pair ``(starts, ends)`` of float64 arrays. ``union`` returns it
sorted and disjoint; the other functions take such normalized sets.
"""

from __future__ import annotations

import numpy as np

Intervals = tuple[np.ndarray, np.ndarray]
EMPTY: Intervals = (np.zeros(0), np.zeros(0))


def union(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Merge possibly overlapping intervals into sorted disjoint ones (empty ones dropped)."""
    keep = ends > starts
    if not keep.all():  # else the arrays as given (read only below): no copy of every span
        starts, ends = starts[keep], ends[keep]
    del keep
    if len(starts) == 0:
        return EMPTY
    if len(starts) > 1 and not np.all(starts[1:] >= starts[:-1]):  # often already in order
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new_group = np.empty(len(starts), dtype=bool)
    new_group[0] = True
    new_group[1:] = starts[1:] > reach[:-1]
    group_starts = np.flatnonzero(new_group)
    group_ends = np.append(group_starts[1:], len(starts)) - 1
    return starts[group_starts], reach[group_ends]


def union_all(*sets: Intervals) -> Intervals:
    if not sets:
        return EMPTY
    return union(np.concatenate([s for s, _ in sets]), np.concatenate([e for _, e in sets]))


def length(intervals: Intervals) -> float:
    starts, ends = intervals
    return float(np.sum(ends - starts))


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two normalized interval sets."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return EMPTY
    # every pair (i, j) that overlaps: for each a-interval, the b-intervals in its span
    first = np.searchsorted(b[1], a[0], side="right")
    last = np.searchsorted(b[0], a[1], side="left")
    counts = np.maximum(last - first, 0)
    if counts.sum() == 0:
        return EMPTY
    a_index = np.repeat(np.arange(len(a[0])), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    b_index = np.repeat(first, counts) + offsets
    starts = np.maximum(a[0][a_index], b[0][b_index])
    ends = np.minimum(a[1][a_index], b[1][b_index])
    keep = ends > starts
    return starts[keep], ends[keep]


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """The parts of ``a`` not covered by ``b`` (both normalized)."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return a
    lo, hi = min(a[0][0], b[0][0]), max(a[1][-1], b[1][-1])
    gaps_of_b = (np.concatenate([[lo], b[1]]), np.concatenate([b[0], [hi]]))
    return intersect(a, gaps_of_b)


def between(intervals: Intervals, lo: float, hi: float) -> Intervals:
    """The part of a normalized interval set inside [lo, hi].

    Only the intervals that reach into [lo, hi] are clipped (found by bisection: the set is
    sorted), so one window costs its own intervals, not the whole set's: a loop over the
    steps of a trace stays linear in the trace."""
    first = int(np.searchsorted(intervals[1], lo, side="right"))
    last = int(np.searchsorted(intervals[0], hi, side="left"))
    starts = np.maximum(intervals[0][first:last], lo)
    ends = np.minimum(intervals[1][first:last], hi)
    keep = ends > starts
    return starts[keep], ends[keep]


def contains(intervals: Intervals, at: np.ndarray) -> np.ndarray:
    """Per time in ``at``: inside one of the (normalized) intervals, ``[start, end)``."""
    starts, ends = intervals
    if len(starts) == 0:
        return np.zeros(len(at), dtype=bool)
    i = np.searchsorted(starts, at, side="right") - 1
    return (i >= 0) & (at < ends[np.maximum(i, 0)])


def covered_before(intervals: Intervals, at: np.ndarray) -> np.ndarray:
    """Per time in ``at``: the length of the (normalized) intervals before it,
    ``|intervals ∩ (-inf, t]|``. In place: three arrays of ``at``'s length alive, not eight."""
    starts, ends = intervals
    if len(starts) == 0:
        return np.zeros(len(at))
    before = np.concatenate([[0.0], np.cumsum(ends - starts)])
    i = np.searchsorted(starts, at, side="right")  # intervals starting at or before t
    some = i > 0
    i -= 1
    last = np.maximum(i, 0, out=i)
    partial = np.minimum(at, ends[last])
    partial -= starts[last]
    partial[~some] = 0.0
    np.maximum(partial, 0.0, out=partial)
    covered: np.ndarray = before[last]
    covered *= some
    covered += partial
    return covered
