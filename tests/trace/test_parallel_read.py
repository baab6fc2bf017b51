"""GIVEN a trace read by one process or split over several (helpers take every n-th batch)
WHEN the tables are compared THEN they are the same, row for row, name for name; a cut that
fails in a helper falls back to whole-document decoding; a bad value in a helper's batch
is one TraceFormatError; parcels and forked maps give back exactly what was sent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import require

from aiprof import TraceFormatError, load_trace
from aiprof.forked import map_forked
from aiprof.trace import parcel, split

from .same_tables import assert_same_tables

pytestmark = pytest.mark.cpu_hog


def _events(count: int, name: str = "aten::add") -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    for i in range(count):
        events.append(
            {
                "ph": "X", "cat": "cpu_op", "name": f"{name}_{i % 7}", "pid": 1, "tid": 1,
                "ts": 1000.0 + i, "dur": 0.5,
                "args": {"External id": i, "Input Dims": [[i % 5, 3]], "Input type": ["float"]},
            }
        )  # fmt: skip
    return events


def _write(path: Path, events: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1))
    return path


@pytest.mark.parametrize(
    ("trace", "parts"),
    [
        ("df_index_resolver/df_index_resolver.json.gz", 2),
        ("df_index_resolver/df_index_resolver.json.gz", 3),
        ("nccl_parser_config/nccl_data.json.gz", 2),  # collective names and dtypes renumbered
    ],
)
def test_split_read_equals_serial_read_on_a_real_trace(
    public_traces: Path, trace: str, parts: int
) -> None:
    path = require(public_traces / trace)
    serial = load_trace(path, parts=1)
    assert_same_tables(serial, load_trace(path, parts=parts))


def test_split_read_keeps_shapes_and_file_order(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.json", _events(60_000))
    assert path.stat().st_size > 3 * (2 << 20)  # several batches to share out
    serial, split_read = load_trace(path, parts=1), load_trace(path, parts=3)
    assert_same_tables(serial, split_read)
    assert np.all(np.diff(split_read.cpu_ops.ts_us) > 0)  # file order kept across parts
    assert split_read.json_value(int(split_read.cpu_ops.input_dims_id[7])) == [[2, 3]]


def test_a_cut_inside_a_string_falls_back_to_whole_decoding(tmp_path: Path) -> None:
    events = _events(60_000)
    # names holding '}, {' make some cuts land inside a string: those payloads do not decode
    for event in events[::50]:
        event["name"] = "x" + "}, {" * 40
    path = _write(tmp_path / "t.json", events)
    trace = load_trace(path, parts=2)
    assert len(trace.cpu_ops) == 60_000
    assert_same_tables(load_trace(path, parts=1), trace)


def test_a_bad_value_in_a_helpers_batch_is_one_trace_format_error(tmp_path: Path) -> None:
    events = _events(60_000)
    events[-10]["ts"] = "soon"  # far into the file, in a batch a helper decodes
    path = _write(tmp_path / "t.json", events)
    with pytest.raises(TraceFormatError, match=r"t\.json: .*ts"):
        load_trace(path, parts=2)
    with pytest.raises(TraceFormatError, match=r"t\.json: .*ts"):
        load_trace(path, parts=1)


def test_helpers_leave_no_process_or_file_behind(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.json", _events(60_000))
    before = set(os.listdir(tmp_path))
    load_trace(path, parts=3)
    assert set(os.listdir(tmp_path)) == before
    import multiprocessing

    assert multiprocessing.active_children() == []


def test_parcel_round_trip_gives_equal_writable_arrays_and_removes_its_file() -> None:
    value = {
        "f": np.arange(1000, dtype=np.float64) / 3,
        "b": np.array([True, False, True]),  # 3 bytes: the next buffer must still be aligned
        "i": np.arange(5, dtype=np.int64),
        "empty": np.zeros(0),
        "text": ["a", "b"],
    }
    sent = parcel.pack(value)
    assert sent.path is not None and Path(sent.path).exists()
    got = parcel.unpack(sent)
    assert not Path(sent.path).exists()
    for key in ("f", "b", "i", "empty"):
        assert np.array_equal(got[key], value[key]) and got[key].dtype == value[key].dtype
    assert got["i"].ctypes.data % parcel.ALIGN_BYTES == 0
    got["f"][0] = 42.0  # copy-on-write mapping: writable, the file untouched
    assert got["text"] == ["a", "b"]
    assert parcel.unpack(parcel.pack(("no", "arrays"))) == ("no", "arrays")


def test_map_forked_returns_results_in_order() -> None:
    items = [np.full(10, i) for i in range(7)]
    assert map_forked(_total, items) == [10 * i for i in range(7)]
    assert map_forked(_total, items[:1]) == [0]


def _total(values: np.ndarray) -> int:
    return int(values.sum())


def test_gzip_size_estimate_reads_the_recorded_length(public_traces: Path) -> None:
    path = require(public_traces / "df_index_resolver" / "df_index_resolver.json.gz")
    import gzip

    assert split.json_bytes(path) == len(gzip.decompress(path.read_bytes()))


def test_a_bad_rank_among_good_ones_fails_cleanly_and_leaves_no_parcel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from aiprof import load_traces

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # the forked workers inherit it
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for rank in range(3):
        _write(ranks / f"rank{rank}.json", _events(2_000))
    (ranks / "rank1.json").write_text('{"traceEvents": [{"ph": "X", "ts": "soon"}]}')
    with pytest.raises(TraceFormatError, match=r"rank1\.json"):
        load_traces(ranks, workers=2)
    assert list(scratch.iterdir()) == []
    assert len(load_traces([ranks / "rank0.json", ranks / "rank2.json"], workers=2)) == 2
    assert list(scratch.iterdir()) == []
