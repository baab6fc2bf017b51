"""The ops that exist only to feed a scalar read, found from the allocator's events.

``logged.append(x.mean().item())`` launches a reduction whose output nothing but the read
uses; ``if torch.isnan(loss):`` the same for ``isnan``. Keeping the value on the GPU (the fix
for the read's sync) drops the read and those ops with it, while an op whose output lives on
(``loss`` itself, read by ``loss.item()`` and used by ``backward``) stays. On the H200 the
ops that fed the suite's reads were most of what removing the reads gained
(docs/diagnose.md, "What a read costs, and what fed it").

What an op's outputs fed is read from their lifetimes (``profile_memory=True``, as
``aiprof.profile`` records). An op among the read's preceding siblings is a feeder when it
allocated at least one tensor it did not free itself, and every such tensor was freed after
the next op of the chain began (the read, or the feeder after it) and before the next span of
its thread after the read. Nothing of that thread but the read and the feeders ran in
between, so nothing else used them; a tensor freed earlier went to another consumer (the
gradient seed of ``backward``, freed once the autograd threads are done).

The walk goes back from the read over contiguous siblings (``(a * b).sum().item()``: ``sum``,
then ``mul``) and stops at the first that is not a feeder: an annotation
(``Optimizer.step``), an op that allocates nothing (a view, an in-place update), or one whose
output outlives the read. A read nested in another op (``x[mask]``: ``index`` calls
``nonzero``, which reads) has no feeders: that op stays. Without allocator events no op is a
feeder.
"""

from __future__ import annotations

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.cpu_forest import cpu_forest
from aiprof.analysis.sync import SCALAR_OP
from aiprof.trace import Trace


def read_feeders(trace: Trace, reads: iv.Intervals) -> np.ndarray:
    """Rows in ``trace.cpu_ops`` of the ops whose outputs only fed one of ``reads`` (the CPU
    spans of scalar reads, as ``analysis.sync.scalar_reads`` gives them), in time order."""
    ops, memory = trace.cpu_ops, trace.memory
    if len(reads[0]) == 0 or len(memory.ts_us) == 0:
        return np.zeros(0, dtype=np.int64)
    forest = cpu_forest(trace)
    num_ops = len(ops.ts_us)
    parent = forest.nested.parent.astype(np.int64)
    is_op_parent = (parent >= 0) & (parent < num_ops)
    children = np.bincount(parent[is_op_parent], minlength=len(parent))
    family = _families(forest.thread, parent, forest.ts_us)
    allocations = _by_thread(*_lifetimes(trace))
    feeders: list[int] = []
    for row in _read_ops(trace, reads):
        while is_op_parent[row] and children[parent[row]] == 1:  # is_nonzero -> item
            row = int(parent[row])
        if is_op_parent[row]:
            continue  # a read inside another op (x[mask] -> nonzero): that op stays
        siblings = family[(int(forest.thread[row]), int(parent[row]))]
        at = int(np.searchsorted(forest.ts_us[siblings], ops.ts_us[row], side="left"))
        until_us = forest.ts_us[siblings[at + 1]] if at + 1 < len(siblings) else np.inf
        consumer_us = ops.ts_us[row]  # the next op of the chain (the read, then a feeder)
        for sibling in siblings[:at][::-1]:
            if sibling >= num_ops:
                break  # an annotation or a runtime call between: not one chain of ops
            lo, hi = ops.ts_us[sibling], ops.end_us[sibling]
            alloc_ts, free_ts = allocations.get(int(ops.tid[sibling]), _NONE)
            inside = free_ts[np.searchsorted(alloc_ts, lo, side="left"):
                             np.searchsorted(alloc_ts, hi, side="left")]
            outputs = inside[inside >= hi]
            if len(outputs) == 0 or outputs.min() < consumer_us or outputs.max() >= until_us:
                break  # nothing allocated, freed before the chain used it, or outliving it
            feeders.append(int(sibling))
            consumer_us = lo
    return np.unique(np.asarray(feeders, dtype=np.int64))


def _read_ops(trace: Trace, reads: iv.Intervals) -> list[int]:
    """The outermost scalar-read op starting at each read span's start."""
    ops = trace.cpu_ops
    scalar = np.flatnonzero(trace.strings.mask(ops.name_id, SCALAR_OP))
    first = scalar[np.lexsort((-ops.dur_us[scalar], ops.ts_us[scalar]))]
    at = np.searchsorted(ops.ts_us[first], reads[0], side="left")
    found = (at < len(first)) & (ops.ts_us[first[np.minimum(at, len(first) - 1)]] == reads[0])
    return [int(first[i]) for i in at[found]]


def _families(thread: np.ndarray, parent: np.ndarray,
              ts_us: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """The CPU spans (ops, annotations, runtime calls: ``cpu_forest`` rows) of each (thread,
    parent), in time order."""
    order = np.lexsort((ts_us, parent, thread))
    keys = np.stack([thread[order], parent[order]], axis=1)
    cuts = np.flatnonzero(np.any(keys[1:] != keys[:-1], axis=1)) + 1
    return {(int(part[0, 0]), int(part[0, 1])): rows
            for part, rows in zip(np.split(keys, cuts), np.split(order, cuts), strict=True)}


_NONE = (np.zeros(0), np.zeros(0))


def _by_thread(alloc_ts: np.ndarray, alloc_tid: np.ndarray,
               free_ts: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per thread: its allocations' times (sorted) and their blocks' free times."""
    out = {}
    for tid in np.unique(alloc_tid):
        mine = np.flatnonzero(alloc_tid == tid)
        mine = mine[np.argsort(alloc_ts[mine], kind="stable")]
        out[int(tid)] = (alloc_ts[mine], free_ts[mine])
    return out


def _lifetimes(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each allocation's time and thread, and when the same block was freed (inf: never in
    the trace). An address is reused only once freed, so the event after an allocation of the
    same (device, address) is its free."""
    m = trace.memory
    order = np.lexsort((m.ts_us, m.addr, m.device_id, m.device_type))
    same = ((m.addr[order][1:] == m.addr[order][:-1])
            & (m.device_id[order][1:] == m.device_id[order][:-1])
            & (m.device_type[order][1:] == m.device_type[order][:-1]))
    alloc = m.bytes[order] > 0
    freed_next = np.append(same & alloc[:-1] & ~alloc[1:], False)
    free_ts = np.full(len(order), np.inf)
    free_ts[freed_next] = m.ts_us[order][np.flatnonzero(freed_next) + 1]
    return m.ts_us[order][alloc], m.tid[order][alloc], free_ts[alloc]
