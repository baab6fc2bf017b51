"""GIVEN two traces WHEN diffed THEN the parts' changes sum to the step time's, ops and
kernels are matched by name (and shapes) and classed; on ``trace_diff`` HTA 0.5's
``compare_traces`` table is reproduced row for row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import DATA, require
from views_synth import Builder

from aiprof import load_trace
from aiprof.analysis.diff import PARTS, trace_diff
from aiprof.analysis.diff_hta import hta_compare_traces
from aiprof.cli.main import main


def _run(path: Path, kernel_us: float, extra: bool) -> Path:
    """Two steps of 100 µs; a kernel of ``kernel_us`` per step, launched at +10."""
    b = Builder()
    for i in range(2):
        t = 100.0 * i
        b.step(i + 1, t, 100)
        op = b.op("aten::mm", t + 5, 10, **{"Input Dims": [[4, 4], [4, 4]]})
        b.kernel("gemm_kernel", t + 10, t + 20, kernel_us, external=op)
        if extra:
            b.op("aten::relu", t + 40, 5)
    return b.write(path)


def test_parts_sum_to_the_step_change_and_changes_are_classed(tmp_path: Path) -> None:
    a = load_trace(_run(tmp_path / "a.json", 30, extra=False))
    b = load_trace(_run(tmp_path / "b.json", 50, extra=True))
    d = trace_diff(a, b)
    assert sum(d.delta_us(p) for p in PARTS) == pytest.approx(d.delta_us("step_us"))
    assert d.delta_us("compute_us") == pytest.approx(20)
    assert d.a.host_idle_us + d.a.other_idle_us == pytest.approx(70)
    by = {(c.table, c.name): c for c in d.changes}
    assert by[("op", "aten::relu")].status == "added" and by[("op", "aten::relu")].b_count == 1
    assert by[("kernel", "gemm_kernel")].status == "changed"
    assert by[("kernel", "gemm_kernel")].delta_total_us == pytest.approx(20)
    assert by[("op", "aten::mm")].status == "same"
    assert by[("op", "aten::mm")].input_shapes == "[[4, 4], [4, 4]]"
    assert not any(c.name.startswith("ProfilerStep") for c in d.changes)
    back = trace_diff(b, a)
    assert {(c.table, c.name): c.status for c in back.changes}[("op", "aten::relu")] == "removed"


def test_cli_json_and_pandas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path / "a.json", 30, False), _run(tmp_path / "b.json", 50, True)
    assert main(["diff", "--json", str(a), str(b)]) == 0
    (pair,) = json.loads(capsys.readouterr().out)["pairs"]
    assert pair["delta_us"]["compute_us"] == pytest.approx(20)
    assert main(["diff", str(a), str(tmp_path / "missing.json")]) == 2
    pytest.importorskip("pandas")
    frame = trace_diff(load_trace(a), load_trace(b)).to_pandas()
    assert set(frame["status"]) == {"added", "changed", "same"}


def test_hta_compare_traces(public_traces: Path) -> None:
    hta = {r["name"]: r for r in json.loads((DATA / "views" / "hta_0.5.0.json").read_text())
           ["trace_diff"]}
    runs = require(public_traces / "trace_diff")
    rows = hta_compare_traces(load_trace(runs / "control.json.gz"),
                              load_trace(runs / "test.json.gz"))
    assert {r.name for r in rows} == set(hta)
    for r in rows:
        h = hta[r.name]
        assert (r.control_counts, r.test_counts) == (h["control_counts"], h["test_counts"])
        assert r.control_total_duration_us == pytest.approx(h["control_total_duration"])
        assert r.test_total_duration_us == pytest.approx(h["test_total_duration"])
