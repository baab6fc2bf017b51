"""Store integer columns in fewer bytes without changing a value: the memory of large traces.

A trace's integer columns (ids, rows, streams, grid sizes ...) were 8 bytes a value; most hold
values that fit in 4, and many hold one value for the whole table (-1 in the collective
columns of a trace without NCCL, the one device of a rank). On the scale benchmark's
synthetic trace the tables held 102 bytes per event, 0.66 of the JSON's 155 (docs/scale.md).

- ``narrow``: an int64 column whose values all fit in int32 becomes int32 (checked: a value
  out of range keeps the column int64, chosen per column, chunk and trace).
- ``smallest``: a derived integer column of few values (depths, thread keys) in one or two
  bytes a row.
- ``compact_chunk``: each batch's columns as they are built, narrowed and with one-value
  columns as views, so the chunks of a large trace never hold it at full width.
- ``compact``: a column holding one value becomes a read-only view of that value
  (``np.broadcast_to``, no memory per row). Writing into it raises; every table is compacted
  once it is complete (validated, linked), and passes derive new arrays from it.
- ``concat_columns``: a table's chunks concatenated one column at a time, each column's chunks
  released as soon as it is built, so reading holds the table once plus one column, not twice.

Timestamps, durations and every float column keep float64: only integers are narrowed,
and only where every value is representable, so every result is the same bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

I4 = np.int32
_I4_MIN, _I4_MAX = int(np.iinfo(I4).min), int(np.iinfo(I4).max)
COMPACT_FROM_ROWS = 64
"""Tables shorter than this are left as they are (a view saves nothing there)."""

Columns = dict[str, np.ndarray]


def narrow(values: np.ndarray) -> np.ndarray:
    """``values`` as int32 when it is an int64 column whose every value fits, else as is."""
    if values.dtype != np.int64 or not len(values):
        return values
    if int(values.min()) < _I4_MIN or int(values.max()) > _I4_MAX:
        return values
    return values.astype(I4)


def smallest(values: np.ndarray) -> np.ndarray:
    """An integer column in the smallest signed type that holds its every value (int8, int16,
    int32 or as it is): for derived columns of a handful of values (nesting depths, thread
    keys), where int32 would still be 4 bytes a row."""
    if not len(values) or values.dtype.kind != "i":
        return values
    low, high = int(values.min()), int(values.max())
    for kind in (np.int8, np.int16, np.int32):
        info = np.iinfo(kind)
        if info.min <= low and high <= info.max:
            return values if values.dtype == kind else values.astype(kind)
    return values


def is_constant(values: np.ndarray) -> bool:
    """One value in every row (NaN never counts as equal to itself: kept as a column)."""
    return len(values) > 0 and bool((values == values[0]).all())


def compact(values: np.ndarray) -> np.ndarray:
    """``narrow(values)``, as a read-only view of its one value when it holds only one."""
    if len(values) < COMPACT_FROM_ROWS:
        return values
    if is_view(values):  # compacted already
        return values
    values = narrow(values)
    if is_constant(values):
        return np.broadcast_to(values[:1].copy(), values.shape)
    return values


def compact_columns(columns: dict[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every column compacted (``compact``), except those named in ``skip``."""
    return {name: values if name in skip else compact(values)
            for name, values in columns.items()}


def compact_chunk(columns: Columns) -> Columns:
    """A chunk's columns (one batch of events) narrowed, and as a view where one value fills
    a column; times kept as they are."""
    return {name: values if name.endswith("_us") else _compact_any(narrow(values))
            for name, values in columns.items()}


def _compact_any(values: np.ndarray) -> np.ndarray:
    if len(values) > 1 and is_constant(values):
        return np.broadcast_to(values[:1].copy(), values.shape)
    return values


@dataclass(frozen=True)
class Repeated:
    """A one-value column as it travels between processes (pickling a view writes every row)."""

    value: np.ndarray  # the one value, as a 1-element array of the column's dtype
    length: int


def packable(columns: Columns) -> dict[str, np.ndarray | Repeated]:
    return {name: Repeated(v[:1].copy(), len(v)) if is_view(v) else v
            for name, v in columns.items()}


def unpacked(columns: dict[str, np.ndarray | Repeated]) -> Columns:
    return {name: np.broadcast_to(v.value, (v.length,)) if isinstance(v, Repeated) else v
            for name, v in columns.items()}


def is_view(values: np.ndarray) -> bool:
    """A one-value column made by this module (``np.broadcast_to``: no memory per row)."""
    return values.ndim == 1 and len(values) > 1 and values.strides == (0,)


def concat_columns(names: list[str], parts: list[Columns], keep: tuple[str, ...] = ()) -> Columns:
    """Each column's chunks concatenated in order, popped from ``parts`` as they are used
    (the caller hands ``parts`` over). A column is int64 if any chunk's is, else int32; one
    whose chunks all hold the same one value is a view of it (``compact``), except the
    columns named in ``keep``."""
    out: Columns = {}
    for name in names:
        chunks = [part.pop(name) for part in parts]
        if len(chunks) == 1:
            out[name] = chunks[0]
        elif name not in keep and _one_value(chunks):
            out[name] = np.broadcast_to(chunks[0][:1].copy(), (sum(map(len, chunks)),))
        else:
            out[name] = np.concatenate(chunks)
        del chunks
    return out


def _one_value(chunks: list[np.ndarray]) -> bool:
    first = chunks[0]
    if sum(map(len, chunks)) < COMPACT_FROM_ROWS or not is_constant(first):
        return False
    return all(c.dtype == first.dtype and (is_view(c) or is_constant(c)) and c[0] == first[0]
               for c in chunks)
