"""GIVEN normalized interval sets WHEN one window is cut out THEN the bisected ``between`` gives
the same arrays, bit for bit, as clipping the whole set."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from aiprof.analysis import intervals as iv


def clipped_whole(intervals: iv.Intervals, lo: float, hi: float) -> iv.Intervals:
    """The definition: every interval clipped to [lo, hi], the empty ones dropped."""
    starts, ends = np.maximum(intervals[0], lo), np.minimum(intervals[1], hi)
    keep = ends > starts
    return starts[keep], ends[keep]


times = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(times, times), max_size=40), times, times)
def test_between_is_the_clipped_set(pairs: list[tuple[float, float]], lo: float,
                                    hi: float) -> None:
    starts = np.array([min(a, b) for a, b in pairs], dtype=np.float64)
    ends = np.array([max(a, b) for a, b in pairs], dtype=np.float64)
    normalized = iv.union(starts, ends)
    got, want = iv.between(normalized, lo, hi), clipped_whole(normalized, lo, hi)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert iv.length(got) == iv.length(want)


def test_between_on_edges() -> None:
    normalized = (np.array([0.0, 2.0, 5.0]), np.array([1.0, 3.0, 6.0]))
    assert iv.between(normalized, 1.0, 2.0)[0].size == 0  # windows that only touch
    assert iv.length(iv.between(normalized, 0.5, 5.5)) == 0.5 + 1.0 + 0.5
    assert iv.between(normalized, 4.0, 3.0)[0].size == 0  # an inverted window
    assert iv.between(iv.EMPTY, 0.0, 1.0)[0].size == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(times, times), max_size=40), st.lists(times, min_size=1, max_size=20))
def test_covered_before_is_the_length_of_the_set_up_to_each_time(
        pairs: list[tuple[float, float]], at: list[float]) -> None:
    starts = np.array([min(a, b) for a, b in pairs], dtype=float)
    ends = np.array([max(a, b) for a, b in pairs], dtype=float)
    spans = iv.union(starts, ends)
    low = min([*at, *starts.tolist()]) - 1.0
    expected = [iv.length(iv.between(spans, low, t)) for t in at]
    assert np.allclose(iv.covered_before(spans, np.array(at)), expected, atol=1e-9)
