"""Host work other than launching while the GPU idles: preprocessing outside a DataLoader, long
blocking calls.

Two kinds of CPU span count, inside the steps:

- a top-level CPU op (not inside another op of its thread) that launches nothing (no runtime
  call of its thread that launched a GPU op lies within it) and lasts at least ``min_us``:
  work on CPU tensors (decoding, resizing, augmenting a batch in the loop), file I/O wrapped in
  ops;
- a runtime call of at least ``min_us`` (a synchronous copy of a few bytes that blocks for
  hundreds of ms, a driver call): its time beyond the GPU work it waited for;
- time in which no thread has any CPU op or runtime call recorded (``UNTRACKED``), inside a
  stretch that launches nothing for at least ``LAUNCH_FREE_FACTOR`` median launch-to-launch
  intervals and ends in a host-to-device copy: Python that does not call torch and makes the
  data the GPU then receives (a tokenizer, numpy augmentation, file reads), in a trace that
  records CPU ops. The Python of an optimizer or of a training loop (grouping tensors, the
  loop's bookkeeping) launches next, uploads nothing, and is the launch overhead a CUDA graph
  removes. The Python of an eager model between its ops (80-150
  µs between a LayerNorm and the next Linear in the transformers models of the H200 suite)
  sits between launches: the launch overhead ``cpu_bound`` removes. A thread blocked while
  another works (the main thread in ``backward()`` while the autograd thread runs) leaves no
  untracked time, since the other thread's ops fill it.

Spans the DataLoader (``dataloader.py``) or the allocator (``allocator.py``) own are left out;
what remains is measured against the GPU's idle time (no GPU op running on any stream).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.breakdown import step_window
from aiprof.analysis.step_breakdown import in_window
from aiprof.trace import Trace

LAUNCH_FREE_FACTOR = 10.0
"""A stretch without launches this many median launch-to-launch intervals long is not slow
launching (the threshold the replay uses for a launch call that waited inside it,
``diagnose.replay.LAUNCH_FREE_FACTOR``; aiprof's)."""
HOST_TO_DEVICE = re.compile(r"\bHtoD\b")
"""Kineto's name of a host-to-device copy (``Memcpy HtoD (Pageable -> Device)``)."""
UNTRACKED = "(Python outside any op)"
"""The name of host work no CPU op or runtime call records (``untracked_gaps``)."""


@dataclass(frozen=True)
class HostWorkItem:
    """Host work of one name (a CPU op or a runtime call)."""

    name: str
    kind: str
    """``op`` or ``call``."""
    count: int
    total_us: float
    gpu_idle_us: float
    """Of ``total_us``, the time the GPU had nothing running."""


@dataclass(frozen=True)
class HostWorkResult:
    """Host work inside the steps and how much of it the GPU sat idle through."""

    spans: iv.Intervals
    """The host work (normalized), DataLoader and allocator spans taken out."""
    gpu_idle_us: float
    """GPU idle time inside the steps (no op running on any stream)."""
    overlap_us: float
    """|host work ∩ GPU idle|."""
    items: list[HostWorkItem]
    """By name, most GPU-idle time first."""


def host_work(trace: Trace, min_us: float, owned: iv.Intervals = iv.EMPTY,
              sync_calls: np.ndarray | None = None) -> HostWorkResult:
    """Host work of at least ``min_us`` per span inside the steps, without ``owned`` spans.

    Kernel launch calls (a long one waited inside: lazy loading, a full queue; ``cpu_bound``
    keeps that part) and the synchronize calls ``sync_calls`` (rows of ``trace.runtime``:
    waits for the GPU, ``host_sync``'s) are not host work; copy calls are."""
    window = step_window(trace)
    gpu = trace.gpu_ops
    idle = iv.subtract(window, iv.union(gpu.ts_us, gpu.end_us))
    ops, rt = trace.cpu_ops, trace.runtime
    op_rows = _idle_ops(trace, min_us, window)
    kernel_launches = trace.kernels.launch_row[trace.kernels.launch_row >= 0]
    skip = np.concatenate([kernel_launches, sync_calls if sync_calls is not None else []])
    call_rows = np.flatnonzero((rt.dur_us >= min_us) & in_window(rt.ts_us, window))
    call_rows = call_rows[~np.isin(call_rows, skip.astype(np.int64))]
    work = iv.union(np.concatenate([ops.ts_us[op_rows], rt.ts_us[call_rows]]),
                    np.concatenate([ops.end_us[op_rows], rt.end_us[call_rows]]))
    gaps = iv.subtract(untracked_gaps(trace, window), owned)
    found = iv.union_all(iv.subtract(iv.intersect(work, window), owned), gaps)
    items = _items(trace, op_rows, call_rows, idle, owned)
    if iv.length(gaps) > 0:
        items.append(HostWorkItem(UNTRACKED, "gap", len(gaps[0]), iv.length(gaps),
                                  iv.length(iv.intersect(gaps, idle))))
        items.sort(key=lambda i: (-i.gpu_idle_us, i.name))
    return HostWorkResult(found, iv.length(idle), iv.length(iv.intersect(found, idle)), items)


def untracked_gaps(trace: Trace, window: iv.Intervals) -> iv.Intervals:
    """Time inside ``window`` with no CPU op or runtime call on any thread, within stretches
    that launch nothing for at least ``LAUNCH_FREE_FACTOR`` median launch-to-launch intervals
    and end in a host-to-device copy (the host made data for the GPU there); none when the
    trace records no CPU ops (then every gap between launches would look untracked)."""
    ops, rt, gpu = trace.cpu_ops, trace.runtime, trace.gpu_ops
    rows = np.flatnonzero(gpu.launch_row >= 0)
    at = rt.ts_us[gpu.launch_row[rows]]
    inside = in_window(at, window)
    rows, at = rows[inside], at[inside]
    if len(ops.ts_us) == 0 or len(at) < 2:
        return iv.EMPTY
    order = np.argsort(at, kind="stable")
    rows, at = rows[order], at[order]
    min_stretch_us = LAUNCH_FREE_FACTOR * float(np.median(np.diff(at)))
    first_copy = len(trace.kernels)
    uploads = (rows >= first_copy) & (rows < first_copy + len(trace.memcpy))
    uploads[uploads] = trace.strings.mask(gpu.name_id[rows[uploads]], HOST_TO_DEVICE)
    previous = np.concatenate([[float(window[0][0])], at[:-1]])
    keep = uploads & (at - previous >= min_stretch_us)
    stretches = iv.intersect(iv.union(previous[keep], at[keep]), window)
    if len(stretches[0]) == 0:  # nothing to subtract the events from (the common case)
        return stretches
    # each table's spans merged on their own (each in time order as read: no sort), then both
    events = iv.union_all(iv.union(ops.ts_us, ops.end_us), iv.union(rt.ts_us, rt.end_us))
    return iv.subtract(stretches, events)


def _idle_ops(trace: Trace, min_us: float, window: iv.Intervals) -> np.ndarray:
    """Rows of the top-level CPU ops of at least ``min_us`` that launched nothing."""
    ops, rt = trace.cpu_ops, trace.runtime
    rows = np.flatnonzero((ops.dur_us >= min_us) & in_window(ops.ts_us, window))
    if len(rows) == 0:
        return rows
    launches = np.unique(trace.gpu_ops.launch_row[trace.gpu_ops.launch_row >= 0])
    keep = np.zeros(len(rows), dtype=bool)
    for tid in np.unique(ops.tid[rows]).tolist():
        mine = rows[ops.tid[rows] == tid]
        calls = np.sort(rt.ts_us[launches[rt.tid[launches] == tid]])
        inside = (np.searchsorted(calls, ops.end_us[mine], side="right")
                  - np.searchsorted(calls, ops.ts_us[mine], side="left"))
        keep[np.isin(rows, mine[(inside == 0) & _top_level(trace, mine)])] = True
    return rows[keep]


def _top_level(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Per row: no other CPU op of its thread encloses it."""
    ops = trace.cpu_ops
    tid = int(ops.tid[rows[0]])
    thread = np.flatnonzero(ops.tid == tid)
    thread = thread[np.lexsort((-ops.dur_us[thread], ops.ts_us[thread]))]
    reach = np.maximum.accumulate(ops.end_us[thread])
    before = np.concatenate([[-np.inf], reach[:-1]])
    top = set(thread[ops.ts_us[thread] >= before].tolist())
    return np.array([r in top for r in rows.tolist()], dtype=bool)


def _items(trace: Trace, op_rows: np.ndarray, call_rows: np.ndarray, idle: iv.Intervals,
           owned: iv.Intervals) -> list[HostWorkItem]:
    out = []
    for kind, table, rows in (("op", trace.cpu_ops, op_rows), ("call", trace.runtime, call_rows)):
        for name_id in np.unique(table.name_id[rows]).tolist():
            mine = rows[table.name_id[rows] == name_id]
            found = iv.subtract(iv.union(table.ts_us[mine], table.end_us[mine]), owned)
            if iv.length(found) <= 0:
                continue
            out.append(HostWorkItem(trace.name(int(name_id)), kind, len(mine), iv.length(found),
                                    iv.length(iv.intersect(found, idle))))
    return sorted(out, key=lambda i: (-i.gpu_idle_us, i.name))
