"""GIVEN traces of several ranks WHEN they are loaded together THEN ranks come from
distributedInfo (compact JSON too) and clocks share a common zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiprof import load_trace, load_traces


def _trace(rank: int, first_ts: float, base_ns: int | None) -> dict:
    doc = {
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": first_ts,
                "dur": 10,
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::add",
                "pid": 1,
                "tid": 1,
                "ts": first_ts + 100,
                "dur": 10,
            },
        ],
    }
    if base_ns is not None:
        doc["baseTimeNanoseconds"] = base_ns
    return doc


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc, separators=(",", ":")))  # compact: "rank":3
    return path


def test_rank_from_compact_json(tmp_path: Path) -> None:
    path = _write(tmp_path / "trace.json", _trace(3, 5.0, None))
    assert '"rank":3' in path.read_text()
    assert load_trace(path).rank == 3


def test_wall_clock_alignment_with_base_time(tmp_path: Path) -> None:
    # rank 1's process clock starts elsewhere, but its wall clock is 250 µs after rank 0's
    _write(tmp_path / "a.json", _trace(0, 1_000.0, 1_700_000_000_000_000_000))
    _write(
        tmp_path / "b.json",
        _trace(1, 9_000_000.0, 1_700_000_000_000_000_000 - 8_999_000_000 + 250_000),
    )
    traces = load_traces(tmp_path)
    assert traces.ranks == [0, 1] and "baseTimeNanoseconds" in traces.alignment
    assert traces.rank(0).cpu_ops.ts_us[0] == pytest.approx(0.0)
    assert traces.rank(1).cpu_ops.ts_us[0] == pytest.approx(250.0)


def test_shared_clock_alignment_without_base_time(tmp_path: Path) -> None:
    _write(tmp_path / "rank0.json", _trace(0, 1_000.0, None))
    _write(tmp_path / "rank1.json", _trace(1, 1_040.0, None))
    traces = load_traces(tmp_path, workers=1)
    assert [t.cpu_ops.ts_us[0] for t in traces] == pytest.approx([0.0, 40.0])


def test_without_flows_empties_only_the_flow_table_and_the_diagnosis_is_the_same() -> None:
    """The flows link launches to kernels while the trace is built; no analysis reads them
    after, so ``report`` and ``diagnose`` let them go (docs/scale.md)."""
    from aiprof.diagnose import diagnose
    from aiprof.trace.model import Trace

    traces = load_traces("example:h200_resnet50")
    lean = traces.without_flows()
    (before,), (after,) = traces.traces, lean.traces
    assert isinstance(after, Trace) and len(before.flows) > 0 and len(after.flows) == 0
    for (name, table), (_, same) in zip(before.tables(), after.tables(), strict=True):
        assert name == "flows" or same is table
    assert diagnose(lean).document() == diagnose(traces).document()


def test_aiprof_diagnose_is_callable_once_its_package_is_imported() -> None:
    """Importing any module of the aiprof.diagnose package binds ``aiprof.diagnose`` to the
    package; calling it still diagnoses (it was 'module' object is not callable)."""
    import sys

    import aiprof.diagnose.engine  # noqa: F401
    from aiprof.diagnose import diagnose

    package = sys.modules["aiprof.diagnose"]
    trace = load_traces("example:h200_resnet50")
    assert package(trace).document() == diagnose(trace).document()
