"""Ops recorded with shapes in a profiler trace, as ``OpCall`` s joined with their kernels' time.

Reads the columnar ``Trace`` (``aiprof.trace``): ``cpu_ops`` carry ``Input Dims``,
``Input type``, ``Input Strides`` and ``Concrete Inputs`` (record_shapes=True); each GPU op
knows the CPU op that launched it (``op_row``). No torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from aiprof.tensor.dtypes import is_dtype_name
from aiprof.tensor.opcall import Arg, OpCall, TensorMeta

if TYPE_CHECKING:
    from aiprof.trace import Trace


@dataclass(frozen=True)
class TraceOp:
    """One CPU op of a trace that launched GPU work, with that work's total device time."""

    row: int
    """Row in ``trace.cpu_ops``."""
    call: OpCall
    device_us: float
    """Sum of the durations of the kernels, memcpys and memsets it launched."""
    num_kernels: int


@dataclass(frozen=True)
class LaunchingCalls:
    """``launching_ops`` as columns: one row per op, its call an index into ``calls``."""

    rows: np.ndarray
    """Rows in ``trace.cpu_ops``, in trace order."""
    call_index: np.ndarray
    device_us: np.ndarray
    num_kernels: np.ndarray
    calls: list[OpCall]
    """The distinct calls (name, dims, types, strides, concrete inputs), each decoded once."""


def launching_ops(trace: Trace) -> list[TraceOp]:
    """Every CPU op that launched device work, in trace order, with that work's device time.

    Kernels, memsets and device-to-device copies count; host<->device copies do not (their roof
    is the host link, not the GPU's memory: the copies analysis looks at them).
    """
    found = launching_calls(trace)
    return [
        TraceOp(r, found.calls[c], us, n)
        for r, c, us, n in zip(found.rows.tolist(), found.call_index.tolist(),
                               found.device_us.tolist(), found.num_kernels.tolist(), strict=True)
    ]


def launching_calls(trace: Trace) -> LaunchingCalls:
    """``launching_ops`` without one object per op (a trace holds millions of them)."""
    rows, durations = [], []
    for table, keep in ((trace.kernels, None), (trace.memset, None), (trace.memcpy, "DtoD")):
        mask = table.op_row >= 0
        if keep is not None:
            mask &= trace.strings.mask(table.name_id, keep)
        rows.append(table.op_row[mask])
        durations.append(table.dur_us[mask])
    row_ids, dur = np.concatenate(rows), np.concatenate(durations)
    if len(row_ids) == 0:
        empty = np.zeros(0, np.int64)
        return LaunchingCalls(empty, empty, np.zeros(0), empty, [])
    size = int(row_ids.max()) + 1
    device_us = np.bincount(row_ids, weights=dur, minlength=size)
    counts = np.bincount(row_ids, minlength=size)
    ops = trace.cpu_ops
    order = np.nonzero(counts)[0]
    order = order[np.argsort(ops.ts_us[order], kind="stable")]
    index, calls = _calls_by_signature(trace, order)
    return LaunchingCalls(order, index, device_us[order], counts[order], calls)


def _calls_by_signature(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, list[OpCall]]:
    """``call_from_row`` of each row, decoded once per distinct (name, dims, types, strides,
    concrete inputs): a training loop repeats the same calls every step, so a trace of 100k ops
    has a few hundred signatures. Returns each row's index into the distinct calls (ordered by
    signature) and those calls."""
    ops = trace.cpu_ops
    columns = [np.asarray(c)[rows] for c in (ops.name_id, ops.input_dims_id,
                                             ops.input_types_id, ops.input_strides_id,
                                             ops.concrete_inputs_id)]
    order = np.lexsort(columns[::-1])  # by name first, then dims, ...; stable
    same = np.ones(len(rows), dtype=bool)  # the same signature as the row before it
    for column in columns:  # one sorted copy at a time
        ordered = column[order]
        same[1:] &= ordered[1:] == ordered[:-1]
        del ordered
    del columns
    same[0] = False
    new = ~same
    first = order[new]  # each signature's first row (the sort is stable)
    inverse = np.empty(len(rows), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return inverse, [call_from_row(trace, int(rows[i])) for i in first]


def call_from_row(trace: Trace, row: int) -> OpCall:
    """The ``OpCall`` of ``trace.cpu_ops`` row ``row`` (empty args without record_shapes)."""
    ops = trace.cpu_ops
    name = trace.name(int(ops.name_id[row]))
    dims = trace.json_value(int(ops.input_dims_id[row])) or []
    types = trace.json_value(int(ops.input_types_id[row])) or []
    strides = trace.json_value(int(ops.input_strides_id[row])) or []
    concrete = trace.json_value(int(ops.concrete_inputs_id[row])) or []
    args = tuple(
        _arg(dims[i], _at(types, i), _at(strides, i), _at(concrete, i)) for i in range(len(dims))
    )
    return OpCall(name, args)


def _at(values: list[Any], index: int) -> Any:
    return values[index] if index < len(values) else None


def _arg(dims: Any, dtype: Any, strides: Any, concrete: Any) -> Arg:
    if isinstance(dtype, str) and is_dtype_name(dtype) and _ints(dims):
        stride = tuple(strides) if _ints(strides) and len(strides) == len(dims) else None
        return TensorMeta(tuple(dims), dtype, stride)
    if isinstance(concrete, str) and concrete:
        try:
            value = json.loads(concrete.replace("True", "true").replace("False", "false"))
        except ValueError:
            return concrete
        return tuple(value) if isinstance(value, list) else value
    return None


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) for v in value)
