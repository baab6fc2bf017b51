"""GIVEN steps whose longest dependency chain is known WHEN the critical path is found THEN
its length and bounds match the hand count; on the public critical_path traces HTA 0.5's
path is reproduced (length, time by bound, every edge's weight)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import DATA, require
from views_synth import Builder

from aiprof import load_trace
from aiprof.analysis.critical_path import critical_path
from aiprof.cli.main import main

HTA = json.loads((DATA / "views" / "hta_0.5.0.json").read_text())["critical_path"]


def _gpu_bound(path: Path) -> Path:
    """One op launches a 100 µs kernel then waits on it (cudaDeviceSynchronize)."""
    b = Builder()
    b.step(1, 0, 200)
    op = b.op("aten::mm", 10, 10)
    corr = b.kernel("gemm_kernel", 12, 20, 100, external=op)
    b.span("cuda_runtime", "cudaDeviceSynchronize", 30, 95, correlation=corr + 1)
    b.span("cuda_sync", "Context Sync", 119, 1, pid=0, tid=7, device=0, stream=-1,
           correlation=corr + 1)
    b.op("aten::relu", 130, 20)
    return b.write(path)


def test_path_follows_the_kernel_through_the_sync(tmp_path: Path) -> None:
    cp = critical_path(load_trace(_gpu_bound(tmp_path / "t.json")))
    # mm 10-12 (2), launch 12 -> kernel start 20 (8), kernel 100, sync -> call end 125,
    # gap to relu (dependency, 0), relu 20: 130 µs; the 95 µs in the sync call is not on it
    assert cp.length_us == pytest.approx(130)
    assert cp.by_bound_us["gpu_compute_bound"] == pytest.approx(100)
    assert cp.by_bound_us["gpu_kernel_launch_overhead"] == pytest.approx(8)
    assert cp.by_bound_us["cpu_bound"] == pytest.approx(22)
    assert {o.name for o in cp.ops} >= {"gemm_kernel", "aten::relu"}


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _gpu_bound(tmp_path / "t.json")
    assert main(["critical-path", "--json", "--edges", str(path)]) == 0
    (rank,) = json.loads(capsys.readouterr().out)["ranks"]
    assert rank["length_us"] == pytest.approx(130) and rank["window"] == "step 1"
    assert sum(rank["edges"]["weight_us"]) == pytest.approx(130)
    assert main(["critical-path", "--step", "7", str(path)]) == 2
    pytest.importorskip("pandas")
    assert critical_path(load_trace(path)).to_pandas()["weight_us"].sum() == pytest.approx(130)


@pytest.mark.parametrize("file", sorted(HTA))
def test_hta_critical_path(public_traces: Path, file: str) -> None:
    hta = HTA[file]
    cp = critical_path(load_trace(public_traces / "critical_path" / file),
                       annotation=hta["annotation"], instance=hta["instance"])
    assert cp.length_us == pytest.approx(hta["length_us"])
    for bound, value in hta["by_bound_us"].items():
        if bound:
            assert cp.by_bound_us[bound] == pytest.approx(value), bound
    # every edge with time, but launch delays (HTA attributes those to no event)
    ours = [w for w, t in zip(cp.edge_weight_us.tolist(), cp.edge_type, strict=True)
            if w > 0 and t != "launch_delay"]
    assert sorted(ours) == pytest.approx(sorted(w for _, w in hta["events"]))


def test_queue_lengths_of_a_window_are_those_of_the_whole_trace(public_traces: Path) -> None:
    """``_queue_at`` orders only the points up to the window's last: the same lengths."""
    import numpy as np

    from aiprof.analysis.critical_graph import _queue_at

    trace = load_trace(require(public_traces / "critical_path" / sorted(HTA)[0]))
    every = np.arange(len(trace.gpu_ops))
    whole_launch, whole_start = _queue_at(trace, every)
    assert (whole_launch >= 0).sum() > 10
    window = every[len(every) // 3: len(every) // 2]
    at_launch, at_start = _queue_at(trace, window)
    assert np.array_equal(at_launch, whole_launch[window])
    assert np.array_equal(at_start, whole_start[window])


def test_kernels_whose_launch_calls_are_not_launches_have_no_queue_and_no_error(
        tmp_path: Path) -> None:
    """GIVEN kernels correlated to runtime calls no launch name matches (a mutated or foreign
    trace), WHEN the critical path is built, THEN it is built (the queue lengths unknown), not
    an IndexError from an empty list of launches (found by the hostile-input campaign)."""
    from tests.support.kineto_synth import TraceBuilder

    builder = TraceBuilder()
    for i in range(3):
        builder.kernel("k", 10.0 * i, 10.0 * i + 2.0, 5.0)
    for event in builder.events:
        if event["cat"] == "cuda_runtime":
            event["name"] = "cudaSomethingElse"
    builder.step(0, 0.0, 40.0)
    path = critical_path(load_trace(builder.write(tmp_path / "t.json.gz")))
    assert path is not None
