"""GIVEN Python frames with known nesting and launches WHEN the call tree is built THEN calls
merge per call path, self and total CPU and the launched GPU time match the hand count; a
real with_stack session's tree accounts for every frame's time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from views_synth import Builder

from aiprof import load_trace
from aiprof.analysis.python_tree import python_call_tree
from aiprof.cli.main import main


def _frame(b: Builder, name: str, ts: float, dur: float, pyid: int, parent: int | None) -> None:
    b.span("python_function", name, ts, dur, **{"Python id": pyid, "Python parent id": parent})


@pytest.fixture
def two_calls(tmp_path: Path) -> Path:
    """main calls step twice; each step launches a kernel from inside forward."""
    b = Builder()
    b.step(1, 0, 300)
    _frame(b, "train.py(10): main", 0, 300, 1, None)
    for i, t in enumerate((10.0, 150.0)):
        _frame(b, "train.py(5): step", t, 100, 10 + 2 * i, 1)
        _frame(b, "model.py(3): forward", t + 10, 40, 11 + 2 * i, 10 + 2 * i)
        b.kernel("gemm_kernel", t + 20, t + 30, 25 + i * 10)  # launch call inside forward
    return b.write(tmp_path / "py.json")


def test_tree_merges_calls_and_counts_cpu_and_gpu(two_calls: Path) -> None:
    tree = python_call_tree(load_trace(two_calls))
    assert [(n.name, n.depth, n.count) for n in tree.nodes] == [
        ("train.py(10): main", 0, 1), ("train.py(5): step", 1, 2), ("model.py(3): forward", 2, 2)]
    main_, step, forward = tree.nodes
    assert (main_.total_cpu_us, main_.self_cpu_us) == (300, 100)
    assert (step.total_cpu_us, step.self_cpu_us) == (200, 120)
    assert (forward.self_gpu_us, step.self_gpu_us, main_.total_gpu_us) == (60, 0, 60)
    assert forward.parent == 1 and step.parent == 0


def test_cli_json_and_pandas(two_calls: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hotspots", "--json", str(two_calls)]) == 0
    (rank,) = json.loads(capsys.readouterr().out)["ranks"]
    assert rank["nodes"][2]["total_gpu_us"] == 60
    assert main(["hotspots", "--min-pct", "-1", str(two_calls)]) == 2
    pytest.importorskip("pandas")
    assert python_call_tree(load_trace(two_calls)).to_pandas()["count"].tolist() == [1, 2, 2]


def test_real_with_stack_session(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    def layer(x: object) -> object:
        return torch.relu(x @ x).sum()  # type: ignore[operator]

    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        for _ in range(3):
            layer(torch.randn(32, 32))
    path = tmp_path / "stack.json"
    prof.export_chrome_trace(str(path))
    trace = load_trace(path)
    everything = python_call_tree(trace, harness=True)
    frames = trace.python_functions
    roots = frames.parent_id < 0
    assert everything.total_cpu_us == pytest.approx(float(frames.dur_us[roots].sum()))
    assert sum(n.self_cpu_us for n in everything.nodes) == pytest.approx(
        everything.total_cpu_us)
    tree = python_call_tree(trace)
    assert sum(n.self_cpu_us for n in tree.nodes) == pytest.approx(tree.total_cpu_us)
    assert 0 < tree.total_cpu_us <= everything.total_cpu_us
    assert any(n.name.endswith(": layer") and n.count == 3 for n in tree.nodes)
