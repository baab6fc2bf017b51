"""The nesting of a trace's CPU spans (ops, annotations, runtime calls), built once per trace.

The op view, memory by op and the diff all read it; it is kept per ``Trace`` object (weakly:
it goes with the trace) so that computing several views nests the spans once. It is kept
narrow (rows int32, depths and thread keys in a byte or two where they fit): the report holds
it beside the trace, 31 bytes a span where it took 53 (docs/scale.md).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from aiprof.analysis.cputree import SpanTree, merge_repeats, span_tree, thread_keys
from aiprof.trace import Trace
from aiprof.trace.narrow import narrow, smallest

_CACHE: weakref.WeakKeyDictionary[Trace, CpuForest] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class CpuForest:
    """Rows: ``cpu_ops``, then ``annotations``, then ``runtime`` (``offsets`` where each
    starts). ``nested`` is the plain nesting, ``tree`` with re-entries folded (``keep``)."""

    offsets: tuple[int, int, int]
    thread: np.ndarray
    ts_us: np.ndarray
    dur_us: np.ndarray
    name_id: np.ndarray
    nested: SpanTree
    tree: SpanTree
    keep: np.ndarray

    def kept_owner(self, rows: np.ndarray) -> np.ndarray:
        """Each row, or its nearest kept ancestor when it was folded (-1 stays -1)."""
        while True:
            folded = (rows >= 0) & ~self.keep[np.maximum(rows, 0)]
            if not folded.any():
                return rows
            rows = np.where(folded, self.nested.parent[np.maximum(rows, 0)], rows)

    def innermost(self, thread: np.ndarray, at_us: np.ndarray) -> np.ndarray:
        """Row of the innermost span of ``thread`` running at each time (``ts <= t < end``,
        or starting at ``t`` when empty), -1 for none."""
        order = np.lexsort((-self.dur_us, self.ts_us, self.thread))
        rows = np.full(len(at_us), -1, dtype=np.int64)
        for key in np.unique(thread):  # one step per thread, not per event
            mine = np.flatnonzero(thread == key)
            spans = order[self.thread[order] == key]
            if len(spans) == 0:
                continue
            pos = np.searchsorted(self.ts_us[spans], at_us[mine], side="right") - 1
            rows[mine] = np.where(pos >= 0, spans[np.maximum(pos, 0)], -1)
        end = self.ts_us + self.dur_us
        while True:  # climb out of spans that ended before the time
            r = np.maximum(rows, 0)
            outside = (rows >= 0) & (end[r] <= at_us) & ~((self.dur_us[r] == 0)
                                                         & (self.ts_us[r] == at_us))
            if not outside.any():
                return rows
            rows = np.where(outside, self.nested.parent[r], rows)


def cpu_forest(trace: Trace) -> CpuForest:
    """The trace's CPU span nesting (computed on first use, then kept with the trace)."""
    found = _CACHE.get(trace)
    if found is None:
        found = _build(trace)
        _CACHE[trace] = found
    return found


def _build(trace: Trace) -> CpuForest:
    tables = (trace.cpu_ops, trace.annotations, trace.runtime)
    ops, notes = len(trace.cpu_ops), len(trace.annotations)
    thread = smallest(thread_keys(np.concatenate([t.pid for t in tables]),
                                  np.concatenate([t.tid for t in tables])))
    ts = np.concatenate([t.ts_us for t in tables])
    dur = np.concatenate([t.dur_us for t in tables])
    name_id = np.concatenate([t.name_id for t in tables])
    nested = span_tree(thread, ts, dur)
    nested = SpanTree(narrow(nested.parent), smallest(nested.depth))
    tree, keep = merge_repeats(nested, name_id)
    tree = SpanTree(narrow(tree.parent), tree.depth)
    return CpuForest((0, ops, ops + notes), thread, ts, dur, name_id, nested, tree, keep)
