"""Boolean-mask gathers (``x[mask]``) and the backward nodes autograd made for them.

``x[mask]`` is ``aten::index`` with a bool index. Its ``nonzero`` copies the number of selected
elements to the host before the output can be allocated (a sync), and its kernel compacts the
selected elements into a new tensor. In training autograd records ``IndexBackward0``, which
scatters the gradient back into a zeroed tensor of the input's shape (``index_put_`` with
accumulate, which calls ``nonzero`` again: a second sync, on the autograd thread).

Folding the mask into the op that consumed the gather (``F.cross_entropy(..., ignore_index=
...)``, ``torch.where``, ``(x * mask).sum() / mask.sum()``) removes all of it: the gather, its
backward node, both syncs. The consumer then takes the whole tensor with the mask applied
inside; its cost is taken to be what it cost on the selected part (on the suite's
``deeplabv3_mnv3_mask_train``, cross-entropy over the 7/8 of the pixels the mask kept, against
all of them with the rest ignored).

A backward node belongs to a gather when it is an ``IndexBackward0`` carrying the gather's
sequence number (autograd numbers each forward op that records a node, and the node's
``evaluate_function`` span carries the number): the first such span that starts after the
gather ends (on the device's autograd thread for CUDA tensors, on the caller's for CPU ones).
"""

from __future__ import annotations

import re

import numpy as np

from aiprof.trace import Trace

GATHER_OP = re.compile(r"^aten::index$")
"""The op Python calls for ``x[mask]`` (an integer index does not synchronize, so an
``aten::index`` around a sync is a boolean mask's)."""
BACKWARD_NODE = re.compile(r"^autograd::engine::evaluate_function: IndexBackward0$")
"""Autograd's span around the node ``aten::index`` records (``IndexBackward0``, from
``derivatives.yaml``'s ``index.Tensor``). The name matters: a gather whose input needs no
gradient (``target[mask]``) records no node and carries the sequence number of the next op
that does (the loss's ``LogSoftmaxBackward0``)."""


def mask_gathers(trace: Trace, op_rows: np.ndarray) -> np.ndarray:
    """The rows of ``op_rows`` (the outermost CPU ops around sync calls) that are boolean-mask
    gathers (``GATHER_OP``), unique, in row order."""
    rows = np.unique(op_rows[op_rows >= 0])
    return np.asarray(rows[trace.strings.mask(trace.cpu_ops.name_id[rows], GATHER_OP)])


def backward_nodes(trace: Trace, gathers: np.ndarray) -> np.ndarray:
    """Per gather of ``gathers``, the row of its backward node's ``evaluate_function`` span
    (the first after it with its sequence number); gathers without one
    (inference, or an input that needs no gradient: ``target[mask]``) give none."""
    ops = trace.cpu_ops
    nodes = np.flatnonzero(trace.strings.mask(ops.name_id, BACKWARD_NODE)
                           & (ops.sequence_number >= 0))
    found: list[int] = []
    for gather in gathers.tolist():
        same = nodes[(ops.sequence_number[nodes] == ops.sequence_number[gather])
                     & (ops.ts_us[nodes] >= ops.end_us[gather])]
        if ops.sequence_number[gather] >= 0 and len(same):
            found.append(int(same[np.argmin(ops.ts_us[same])]))
    return np.unique(np.asarray(found, dtype=np.int64))
