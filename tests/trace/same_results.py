"""Field-by-field equality of analysis results (dataclasses, numpy arrays, floats with NaN)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

REL_TOL = 1e-9
ABS_TOL = 1e-6
"""``close``: a rank analysed on its own clock and the same rank analysed after its clock was
moved to the job's common zero differ by the rounding of that move (a float64 timestamp of
1e6-1e9 µs carries 1e-10-1e-7 µs): far below these."""


def assert_same(a: Any, b: Any, where: str = "result", *, close: bool = False) -> None:
    """``a`` and ``b`` equal in every field, recursively: the same types, arrays of the same
    dtype and values, floats bit-equal (NaN equal to NaN), or with ``close`` within
    ``REL_TOL``/``ABS_TOL``. Fields declared ``compare=False`` (a finding's replay change) are
    not results."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for field in dataclasses.fields(a):
            if field.compare:
                assert_same(getattr(a, field.name), getattr(b, field.name),
                            f"{where}.{field.name}", close=close)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape}"
        if close and a.dtype.kind == "f":
            assert np.allclose(a, b, rtol=REL_TOL, atol=ABS_TOL, equal_nan=True), where
        else:
            nan = a.dtype.kind in "fc"
            assert np.array_equal(a, b, equal_nan=nan), f"{where}: arrays differ"
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]", close=close)
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]", close=close)
    elif isinstance(a, float):
        same = a == b or (math.isnan(a) and math.isnan(b))
        if close and not same:
            same = math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
        assert same, f"{where}: {a!r} != {b!r}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
