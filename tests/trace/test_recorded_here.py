"""GIVEN a trace recorded now by torch.profiler (torch 2.x, this machine) WHEN aiprof reads it
THEN steps, shapes and memory events come through."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiprof import load_trace
from aiprof.cli.main import main

torch = pytest.importorskip("torch")


def test_fresh_cpu_trace(tmp_path: Path) -> None:
    from aiprof.demo import profile_small_training

    trace = load_trace(profile_small_training(tmp_path, steps=3))
    assert len(trace.steps) == 3 and trace.step_source == "ProfilerStep"
    conv = trace.strings.mask(trace.cpu_ops.name_id, "^aten::conv2d$")
    assert conv.sum() == 2 * 3  # two convolutions per step
    dims = [trace.json_value(i) for i in trace.cpu_ops.input_dims_id[conv]]
    assert all(d[0][1:] in ([3, 32, 32], [32, 32, 32]) for d in dims)
    assert len(trace.memory) > 0 and (trace.memory.device_type == 0).all()
    assert trace.metadata.get("record_shapes") == 1


def test_demo_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200" in out and "steps: 4" in out and "steps: 3" in out
    assert "Findings" in out and (tmp_path / "report.html").stat().st_size > 10_000
