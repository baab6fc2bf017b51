"""Coalescing and bank-conflict models against Nsight Compute measurements on an H200.

Expected values are the measured tables of ../shared/reference/gpu-models.md §2.1 and §3.1
(ncu 2025.3 on sm_90), plus an independent brute-force count for the property tests.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiprof.errors import InputError
from aiprof.gpu.banks import bank_conflicts, strided_shared
from aiprof.gpu.coalescing import coalescing, strided
from aiprof.gpu.tiles import suggest_padding, tile_access, tile_column_access

# (stride, elem_bytes, offset, vector_width) -> (sectors per request, efficiency %)
COALESCING = [
    ((1, 4, 0, 1), (4, 100)), ((2, 4, 0, 1), (8, 50)), ((4, 4, 0, 1), (16, 25)),
    ((8, 4, 0, 1), (32, 12.5)), ((16, 4, 0, 1), (32, 12.5)), ((32, 4, 0, 1), (32, 12.5)),
    ((1, 4, 1, 1), (5, 80)), ((0, 4, 0, 1), (1, 12.5)), ((1, 1, 0, 1), (1, 100)),
    ((1, 2, 0, 1), (2, 100)), ((1, 4, 0, 2), (8, 100)), ((1, 4, 0, 4), (16, 100)),
    ((2, 8, 0, 1), (16, 50)), ((2, 4, 0, 4), (32, 50)),
]


@pytest.mark.parametrize("args,expected", COALESCING)
def test_strided_loads_match_ncu(args, expected):
    result = strided(*args)
    assert (result.sectors_per_request, result.efficiency * 100) == pytest.approx(expected)


def test_pairs_reading_one_float_each_and_legacy_model():
    pairs = coalescing([(t // 2) * 4 for t in range(32)], 4)
    assert (pairs.sectors_per_request, pairs.efficiency) == (2, 1.0)
    # The chapter's 128-byte model: stride 32 floats -> 4 B used per 128 B line = 3.1%.
    assert strided(32).legacy_efficiency == pytest.approx(4 / 128)


def test_inactive_lanes_do_not_count():
    half = coalescing([t * 4 if t < 16 else None for t in range(32)], 4)
    assert (half.sectors_per_request, half.bytes_useful) == (2, 64)


@pytest.mark.parametrize("bad", [([0] * 31, 4), ([0] * 32, 3), ([2] * 32, 4), ([None] * 32, 4)])
def test_bad_coalescing_input(bad):
    with pytest.raises(InputError):
        coalescing(*bad)


def _brute_sectors(addresses, width):
    return len({(a + i) // 32 for a in addresses if a is not None for i in range(width)})


@given(st.sampled_from([1, 2, 4, 8, 16]).flatmap(lambda w: st.tuples(
    st.just(w), st.lists(st.one_of(st.none(), st.integers(0, 4096).map(lambda k: k * w)),
                         min_size=32, max_size=32).filter(lambda xs: any(x is not None
                                                                         for x in xs)))))
def test_efficiency_in_unit_interval_and_sectors_brute_force(case):
    width, addresses = case
    result = coalescing(addresses, width)
    assert 0 < result.efficiency <= 1
    assert result.sectors_per_request == _brute_sectors(addresses, width)
    assert result.sectors_per_request >= result.ideal_sectors_per_request


# (elem_bytes, stride) -> (wavefronts, conflicts), ncu on H200 (reference §3.1)
BANKS = [
    ((4, 1), (1, 0)), ((4, 33), (1, 0)), ((4, 0), (1, 0)), ((4, 2), (2, 1)), ((4, 32), (32, 31)),
    ((8, 1), (2, 0)), ((8, 0), (1, 0)), ((8, 2), (4, 2)), ((8, 16), (32, 30)),
    ((16, 1), (4, 0)), ((16, 0), (2, 0)), ((16, 2), (8, 4)), ((16, 8), (32, 28)),
]


@pytest.mark.parametrize("args,expected", BANKS)
def test_shared_patterns_match_ncu(args, expected):
    result = strided_shared(args[1], args[0])
    assert (result.wavefronts, result.conflicts) == expected


def test_transpose_tile_with_and_without_padding():
    # 32 column reads: 1,024 wavefronts / 992 conflicts unpadded; 32 / 0 with tile[32][33].
    unpadded = [bank_conflicts(tile_column_access(32, 32, 0, 4, c), 4) for c in range(32)]
    padded = [bank_conflicts(tile_column_access(32, 32, 1, 4, c), 4) for c in range(32)]
    assert sum(r.wavefronts for r in unpadded) == 1024
    assert sum(r.conflicts for r in unpadded) == 992
    assert (sum(r.wavefronts for r in padded), sum(r.conflicts for r in padded)) == (32, 0)
    assert tile_access(32, 32).suggested_pad == 1
    assert tile_access(32, 32).row_read.wavefronts == 1


def test_suggested_padding_for_doubles_removes_conflicts():
    pad = suggest_padding(32, 32, 8)
    result = tile_access(32, 32, pad, 8)
    assert result.column_read.conflicts == 0


def _brute_wavefronts_32bit(addresses):
    words = {a // 4 for a in addresses if a is not None}
    return max(sum(1 for w in words if w % 32 == b) for b in range(32))


@given(st.lists(st.one_of(st.none(), st.integers(0, 2048).map(lambda k: 4 * k)),
                min_size=32, max_size=32).filter(lambda xs: any(x is not None for x in xs)))
def test_bank_conflicts_non_negative_and_brute_force(addresses):
    result = bank_conflicts(addresses, 4)
    assert result.conflicts >= 0
    assert result.wavefronts == _brute_wavefronts_32bit(addresses)
