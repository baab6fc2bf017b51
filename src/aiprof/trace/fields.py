"""Columns of one field across a list of decoded structs.

With the optional C helper (``_columns``, built by ``pip install``), a value is one pointer
read from the struct's slot; without it, ``np.fromiter`` over ``attrgetter``. Both raise
``TypeError`` or ``ValueError`` for a value of another type and ``OverflowError`` for an
integer beyond 64 bits, so the callers' fallbacks (``"stream 7"``, ROCm's ``"0x0"``) work
the same on either path; tests compare the two paths' tables.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import numpy as np

try:
    from aiprof.trace import _columns
except ImportError:  # not compiled: the pure-Python path
    _columns = None  # type: ignore[assignment]

COMPILED = _columns is not None


def floats(objects: list[Any], field: str) -> np.ndarray:
    return _numbers(objects, field, np.float64, b"d")


def ints(objects: list[Any], field: str) -> np.ndarray:
    return _numbers(objects, field, np.int64, b"q")


def present(objects: list[Any], field: str, default: object) -> np.ndarray:
    """Boolean mask: which objects' ``field`` is not the shared ``default`` object."""
    if _columns is not None and objects:
        out: np.ndarray = np.empty(len(objects), dtype=np.int64)
        _columns.present(objects, _descriptor(type(objects[0]), field), default, out)
        return out.astype(bool)
    values = map(attrgetter(field), objects)
    return np.fromiter((v is not default for v in values), dtype=bool, count=len(objects))


def string_ids(objects: list[Any], field: str, ids: dict[str, int]) -> np.ndarray:
    """The id of each object's ``field`` in ``ids`` (str -> id, ids in insertion order),
    new strings added with the next id."""
    if _columns is not None and objects:
        out = np.empty(len(objects), dtype=np.int64)
        _columns.intern(objects, _descriptor(type(objects[0]), field), ids, out)
        return out
    return intern_values(list(map(attrgetter(field), objects)), ids)


def intern_values(values: list[str], ids: dict[str, int]) -> np.ndarray:
    """The id of each value in ``ids`` (str -> id in insertion order), new ones appended."""
    for value in dict.fromkeys(values):  # distinct values, first-seen order
        if value not in ids:
            ids[value] = len(ids)
    return np.fromiter(map(ids.__getitem__, values), dtype=np.int64, count=len(values))


def _numbers(objects: list[Any], field: str, dtype: type, code: bytes) -> np.ndarray:
    if _columns is not None and objects:
        out: np.ndarray = np.empty(len(objects), dtype=dtype)
        _columns.fill(objects, (_descriptor(type(objects[0]), field),), code, (out,))
        return out
    return np.fromiter(map(attrgetter(field), objects), dtype=dtype, count=len(objects))


def _descriptor(cls: type, field: str) -> Any:
    """The slot (member descriptor) holding ``field`` in instances of ``cls``."""
    return getattr(cls, field)
