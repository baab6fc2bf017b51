"""GIVEN integer keys of every width, sign and spread WHEN grouped THEN the distinct keys and
each key's group are ``np.unique(keys, return_inverse=True)``'s, dtype included, by the dense
table and by the bisection alike."""

from __future__ import annotations

import numpy as np
import pytest

from aiprof.analysis import groups


@pytest.mark.parametrize("dense", [True, False])
def test_groups_are_numpys_unique(dense: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not dense:
        monkeypatch.setattr(groups, "DENSE_KEYS_PER_SPAN", -10**12)  # always the bisection
    rng = np.random.default_rng(7)
    cases = [np.zeros(0, np.int64), np.array([5], np.int8), rng.integers(0, 2, 500).astype(bool)]
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32):
        info = np.iinfo(dtype)
        for spread in (3, 1000, int(info.max)):
            low = max(int(info.min), -spread)
            cases.append(rng.integers(low, min(spread, int(info.max)), 2000,
                                      endpoint=True).astype(dtype))
    cases.append(np.array([2**40, -2**40, 7, 7, -1], np.int64))
    for keys in cases:
        distinct, index = groups.groups(keys)
        want, inverse = np.unique(keys, return_inverse=True)
        assert distinct.dtype == want.dtype and np.array_equal(distinct, want)
        assert np.array_equal(index, inverse.ravel()) and len(index) == len(keys)


def test_groups_refuse_floats() -> None:
    with pytest.raises(TypeError, match="integer"):
        groups.groups(np.zeros(3))
