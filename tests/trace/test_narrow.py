"""Narrow columns: int32 only where every value fits, one-value columns as read-only views, and
a trace read the same whatever its columns are stored in."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from tests.support.kineto_synth import TraceBuilder

from aiprof.trace import load_trace, narrow
from aiprof.trace.build import BuiltPart, TableBuilder

I4_MAX = int(np.iinfo(np.int32).max)


def test_narrow_keeps_int64_when_one_value_does_not_fit():
    fits = np.array([-1, 0, I4_MAX], dtype=np.int64)
    wide = np.array([-1, 0, I4_MAX + 1], dtype=np.int64)
    assert narrow.narrow(fits).dtype == np.int32
    assert narrow.narrow(fits).tolist() == fits.tolist()
    assert narrow.narrow(wide).dtype == np.int64
    assert narrow.narrow(np.array([-(2**31) - 1])).dtype == np.int64
    floats = np.array([1.5, 2.0])
    assert narrow.narrow(floats) is floats


def test_one_value_column_is_a_read_only_view_with_the_same_values():
    values = np.full(1000, 7, dtype=np.int64)
    view = narrow.compact(values)
    assert narrow.is_view(view) and view.dtype == np.int32
    assert view.tolist() == values.tolist()
    with pytest.raises(ValueError):
        view[3] = 1
    varied = np.arange(1000, dtype=np.int64)
    assert not narrow.is_view(narrow.compact(varied))
    with_nan = np.full(1000, np.nan)
    assert not narrow.is_view(narrow.compact(with_nan))  # NaN != NaN: kept as a column


def test_concat_promotes_and_views_only_one_value_across_chunks():
    parts = [
        {"a": narrow.compact_chunk({"a": np.full(40, -1)})["a"], "t_us": np.zeros(40)},
        {"a": np.array([5, 2**40] * 20, dtype=np.int64), "t_us": np.ones(40)},
    ]
    joined = narrow.concat_columns(["a", "t_us"], parts, keep=("t_us",))
    assert joined["a"].dtype == np.int64 and not narrow.is_view(joined["a"])
    assert joined["a"].tolist() == [-1] * 40 + [5, 2**40] * 20
    assert parts == [{}, {}]  # handed over: every column popped
    same = [{"a": np.full(40, 3)}, {"a": np.full(50, 3)}]
    one = narrow.concat_columns(["a"], [narrow.compact_chunk(p) for p in same])["a"]
    assert narrow.is_view(one) and len(one) == 90 and one[0] == 3


def test_a_part_with_views_travels_as_one_value_and_merges_back():
    builder = TableBuilder()
    builder.chunks["kernels"].append((0, narrow.compact_chunk(
        {"ts_us": np.arange(100.0), "name_id": np.zeros(100, dtype=np.int64),
         "device": np.full(100, 3)})))
    exported = builder.export()
    raw = pickle.dumps(exported, protocol=5)
    assert len(raw) < 2000  # the one-value columns are not written row by row
    part: BuiltPart = pickle.loads(raw)
    target = TableBuilder()
    target.strings.id("something else first")
    target.merge(part)
    ((_, columns),) = target.chunks["kernels"]
    assert columns["device"].tolist() == [3] * 100
    assert narrow.is_view(columns["name_id"])


def _trace_with_wide_ids(path, correlation_base: int) -> None:
    trace = TraceBuilder(correlation=correlation_base)
    trace.step(1, 0.0, 2000.0)
    for i in range(80):
        trace.kernel("k", 10.0 + 20 * i, 20.0 + 20 * i, 5.0)
    trace.write(path)


def test_ids_past_int32_stay_int64_and_link_as_before(tmp_path):
    small, big = tmp_path / "small.json.gz", tmp_path / "big.json.gz"
    _trace_with_wide_ids(small, 10)
    _trace_with_wide_ids(big, 2**40)
    narrow_trace, wide_trace = load_trace(small), load_trace(big)
    assert narrow_trace.kernels.correlation.dtype == np.int32
    assert wide_trace.kernels.correlation.dtype == np.int64
    assert int(wide_trace.kernels.correlation.min()) >= 2**40
    for trace in (narrow_trace, wide_trace):
        assert (trace.kernels.launch_row >= 0).all()
        launched = trace.runtime.correlation[trace.kernels.launch_row]
        assert launched.tolist() == trace.kernels.correlation.tolist()
    assert wide_trace.kernels.ts_us.tolist() == narrow_trace.kernels.ts_us.tolist()


def test_smallest_takes_the_narrowest_type_that_holds_every_value():
    cases = [([0, -128, 127], np.int8), ([0, 128], np.int16), ([-40_000, 1], np.int32),
             ([0, 2**31], np.int64)]
    for values, dtype in cases:
        column = np.array(values, dtype=np.int64)
        small = narrow.smallest(column)
        assert small.dtype == dtype and small.tolist() == values
    floats = np.array([1.5, 2.0])
    assert narrow.smallest(floats) is floats
    assert narrow.smallest(np.zeros(0, np.int64)).dtype == np.int64
