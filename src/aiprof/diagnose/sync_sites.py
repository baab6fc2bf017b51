"""Which line of user code a sync point came from: the outermost CPU op around it.

The innermost op of a sync is the same for most implicit syncs (``aten::_local_scalar_dense``,
``aten::nonzero``); the op Python called names the construct: ``aten::is_nonzero`` is a
Python ``if`` (or ``bool()``) on a tensor, ``aten::index`` / ``aten::masked_select`` /
``aten::nonzero`` boolean-mask indexing (the count of selected elements is copied to the host
before the output can be allocated), ``aten::item`` a ``.item()``, ``aten::to`` / ``aten::cpu``
a copy to the host.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from aiprof.trace import Trace

CONSTRUCTS = {
    "aten::is_nonzero": "Python `if`/`bool()` on a tensor",
    "aten::index": "boolean-mask indexing x[mask]",
    "autograd::engine::evaluate_function: IndexBackward0":
        "the backward of x[mask] (index_put_ calls nonzero)",
    "aten::index_put_": "boolean-mask assignment x[mask] = v",
    "aten::masked_select": "torch.masked_select",
    "aten::nonzero": "nonzero / boolean-mask indexing",
    "aten::item": ".item()",
    "aten::to": ".to('cpu') / .cpu()",
    "aten::cpu": ".cpu()",
    "aten::unique": "torch.unique (output size depends on the data)",
    "aten::_unique2": "torch.unique (output size depends on the data)",
    "aten::repeat_interleave": "repeat_interleave with tensor repeats",
}
"""The Python construct behind an outermost op that synchronizes (aten's op names)."""

REMEDIES = {
    "aten::index": "fold a boolean mask into the op instead of selecting with it "
                   "(F.cross_entropy(..., ignore_index=...), torch.where, "
                   "(x * mask).sum() / mask.sum())",
    "autograd::engine::evaluate_function: IndexBackward0":
        "the same: without the gather there is no backward of it",
    "aten::index_put_": "torch.where(mask, v, x) instead of x[mask] = v",
    "aten::masked_select": "torch.where or a masked reduction instead of masked_select",
    "aten::nonzero": "torch.where or a masked reduction instead of the indices of a mask",
    "aten::is_nonzero": "torch.where instead of a Python `if` on a tensor, or a check every N "
                        "steps",
}
"""What keeps the data on the GPU, per construct (the op names of ``CONSTRUCTS``)."""


def remedies(callers: list[dict[str, object]]) -> list[str]:
    """The remedies of the constructs among ``callers`` (``sync_callers``), in their order."""
    return [REMEDIES[str(c["op"])] for c in callers if str(c["op"]) in REMEDIES]


def outermost_ops(trace: Trace, runtime_rows: np.ndarray) -> np.ndarray:
    """Per runtime call: the row of the outermost CPU op on its thread around it (-1: none)."""
    ops, rt = trace.cpu_ops, trace.runtime
    out = np.full(len(runtime_rows), -1, dtype=np.int64)
    if len(ops) == 0 or len(runtime_rows) == 0:
        return out
    ends = ops.ts_us + ops.dur_us
    for tid in np.unique(rt.tid[runtime_rows]):
        mine = np.flatnonzero(ops.tid == tid)
        mine = mine[np.lexsort((-ends[mine], ops.ts_us[mine]))]
        reach = np.maximum.accumulate(ends[mine])
        top = mine[np.concatenate([[True], ops.ts_us[mine][1:] >= reach[:-1]])]
        at = np.flatnonzero(rt.tid[runtime_rows] == tid)
        t = rt.ts_us[runtime_rows[at]]
        i = np.searchsorted(ops.ts_us[top], t, side="right") - 1
        ok = (i >= 0) & (ends[top[np.maximum(i, 0)]] >= t)
        out[at[ok]] = top[i[ok]]
    return out


def sync_callers(trace: Trace, runtime_rows: np.ndarray, limit: int) -> list[dict[str, object]]:
    """The outermost ops of these sync points, most frequent first, with their construct."""
    rows = outermost_ops(trace, runtime_rows)
    names = Counter(trace.name(int(trace.cpu_ops.name_id[r])) if r >= 0 else "-"
                    for r in rows.tolist())
    return [{"op": name, "count": count, "construct": CONSTRUCTS.get(name, "")}
            for name, count in names.most_common(limit)]
