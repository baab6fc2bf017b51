"""The nesting of CPU spans per thread (ops, annotations, runtime calls), vectorized.

A span's parent is the latest-starting span of the same thread that was still open when it
started. Spans are ordered by (thread, time, ends before starts, longer first), so a span
that ends exactly when the next begins is its sibling and two spans starting together nest
the shorter inside the longer. Depth is the number of spans open at a span's start; the
parent is then found per depth level (a handful of levels, not one step per event).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis.groups import groups


@dataclass(frozen=True, eq=False)
class SpanTree:
    """Parent (-1 for roots) and depth of each span, in the order the spans were given."""

    parent: np.ndarray
    depth: np.ndarray

    def sum_children(self, values: np.ndarray) -> np.ndarray:
        """For each span, the sum of ``values`` over its direct children."""
        out = np.zeros(len(self.parent), dtype=np.float64)
        has = self.parent >= 0
        np.add.at(out, self.parent[has], values[has])
        return out

    def sum_subtree(self, values: np.ndarray) -> np.ndarray:
        """For each span, ``values`` summed over itself and all its descendants."""
        out = values.astype(np.float64).copy()
        for level in range(int(self.depth.max(initial=0)), 0, -1):
            rows = np.flatnonzero(self.depth == level)
            np.add.at(out, self.parent[rows], out[rows])
        return out


def merge_repeats(tree: SpanTree, name_id: np.ndarray) -> tuple[SpanTree, np.ndarray]:
    """Fold a span into its parent when it is the parent's only child and has its name.

    Dispatcher re-entries (``aten::sum`` inside ``aten::sum``) then count once, as in
    torch.profiler's ``key_averages()`` (``EventList._remove_dup_nodes``). Returns the tree
    with the folded spans detached (parent -1) and their children moved up, and a mask of
    the spans kept.
    """
    parent = tree.parent.copy()
    keep = np.ones(len(parent), dtype=bool)
    while True:
        up = np.maximum(parent, 0)
        counted = keep & (parent >= 0)
        children = np.bincount(parent[counted], minlength=len(parent))
        fold = counted & (name_id[up] == name_id) & (children[up] == 1)
        if not fold.any():
            break
        keep &= ~fold
        while True:  # point children of folded spans at the nearest kept ancestor
            up = np.maximum(parent, 0)
            moved = keep & (parent >= 0) & ~keep[up]
            if not moved.any():
                break
            parent[moved] = parent[up[moved]]
    return SpanTree(np.where(keep, parent, -1), tree.depth), keep


def span_tree(tid: np.ndarray, ts_us: np.ndarray, dur_us: np.ndarray) -> SpanTree:
    """Nest spans given as parallel arrays (see the module docstring)."""
    n = len(ts_us)
    if n == 0:
        return SpanTree(np.zeros(0, np.int64), np.zeros(0, np.int64))
    order = _point_order(tid, ts_us, dur_us)
    starts = order < n
    step = np.where(starts, np.int8(1), np.int8(-1))
    open_before = np.cumsum(step) - step  # every thread's spans close before the next's
    del step
    position = np.empty(n, np.int64)
    position[order[starts]] = np.flatnonzero(starts)
    del order, starts
    depth = open_before[position]
    del open_before
    parent = np.full(n, -1, np.int64)
    for level in range(1, int(depth.max()) + 1):
        children = np.flatnonzero(depth == level)
        candidates = np.flatnonzero(depth == level - 1)
        if len(candidates) == 0:
            continue
        by_position = candidates[np.argsort(position[candidates])]
        k = np.searchsorted(position[by_position], position[children]) - 1
        found = by_position[np.maximum(k, 0)]
        ok = (k >= 0) & (tid[found] == tid[children])
        parent[children[ok]] = found[ok]
    return SpanTree(parent, depth)


def _point_order(tid: np.ndarray, ts_us: np.ndarray, dur_us: np.ndarray) -> np.ndarray:
    """The order of the spans' start and end points: by thread, time, kind, longer first.

    Point kinds: 0 = end of a span with length, 1 = start, 2 = end of an empty span (one
    byte each: the sort keys die here, before the tree is built)."""
    n = len(ts_us)
    times = np.concatenate([ts_us, ts_us + dur_us])
    kind = np.concatenate([np.ones(n, np.int8), np.where(dur_us > 0, 0, 2).astype(np.int8)])
    threads = np.concatenate([tid, tid])
    longer_first = np.concatenate([-dur_us, np.zeros(n)])
    return np.lexsort((longer_first, kind, times, threads))


def thread_keys(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per (pid, tid) pair."""
    _, pid_rank = groups(pid)
    tids, tid_rank = groups(tid)
    return np.asarray(pid_rank.astype(np.int64) * max(len(tids), 1) + tid_rank).ravel()
