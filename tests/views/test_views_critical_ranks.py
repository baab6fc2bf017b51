"""GIVEN several ranks WHEN the critical path is found across them THEN it is joined at the
collectives: the path runs through whichever rank entered a collective last, leaves it at the
collective's end for the rank that works longest afterwards, and says which rank each stretch
is on. Checked on a hand count, on a real 2-rank gloo run recorded by the test (the ranks are
slow in turn), on the public 8-rank set, and on two real ranks of a 128-rank job."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import require
from tests.support.gloo import run_ranks
from views_synth import Builder

from aiprof import load_trace
from aiprof.analysis.critical_path import critical_path
from aiprof.analysis.critical_ranks import RanksCriticalPath, ranks_critical_path
from aiprof.cli.main import main
from aiprof.record.targets import load_traces
from aiprof.trace import Trace

pytestmark = pytest.mark.cpu_hog

WORKER = Path(__file__).with_name("gloo_two_phase_worker.py")
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _rank(path: Path, rank: int, shift: float = 0.0) -> Path:
    """Rank 1 computes 400 µs before the all-reduce, rank 0 100 µs (then waits 380 µs in it);
    after it, rank 0 computes 200 µs, rank 1 10 µs. ``shift`` moves the whole rank's clock."""
    b = Builder()
    b.step(1, shift, 1000)
    before, after, wait = (100, 200, 380) if rank == 0 else (400, 10, 100)
    op = b.op("aten::mm", shift + 10, 10)
    b.kernel("gemm_kernel", shift + 12, shift + 20, before, external=op)
    comm = b.op("record_param_comms", shift + 130, 10)
    start = shift + 520 - wait
    b.kernel(NCCL, shift + 132, start, wait, external=comm)
    op = b.op("aten::relu", shift + 150, 10)
    b.kernel("elementwise_kernel", shift + 152, shift + 520, after, external=op)
    return b.write(path / f"rank{rank}.json", rank=rank)


@pytest.mark.parametrize("shift", [0.0, 5000.0])
def test_hand_count(tmp_path: Path, shift: float) -> None:
    for rank in (0, 1):
        _rank(tmp_path, rank, shift if rank == 1 else 0.0)
    cp = ranks_critical_path(list(load_traces([tmp_path])))
    # rank 1: mm 2 (10-12), launch 8, gemm 400, then the all-reduce's transfer 100 (rank 1
    # entered last: its kernel is the shortest), to rank 0's end of it, then rank 0's 200 µs
    # kernel; rank 0 alone, its 380 µs in the all-reduce weighing only the transfer, is 430
    assert cp.length_us == pytest.approx(710)
    assert [(s.rank, s.top_name) for s in cp.stretches] == [(1, "gemm_kernel"),
                                                            (0, "elementwise_kernel")]
    assert cp.by_rank_us == pytest.approx({1: 510, 0: 200})
    assert cp.by_bound_us["gpu_communication_bound"] == pytest.approx(100)
    assert cp.by_bound_us["gpu_compute_bound"] == pytest.approx(600)
    assert cp.num_joined == 1 and cp.num_unjoined == 0
    assert "collective" in cp.edge_type and cp.last_by == "shortest span"


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real gloo ranks under torch.profiler, recorded now (about 5 s)."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("gloo_two_phase")
    return run_ranks(WORKER, out, timeout_s=180)


def _spans(trace: Trace, name: str, lo: float, hi: float) -> np.ndarray:
    ops = trace.cpu_ops
    rows = trace.strings.mask(ops.name_id, f"^{name}$") & (ops.ts_us >= lo) & (ops.ts_us <= hi)
    return np.asarray(ops.dur_us[rows])


def _on_path(cp: RanksCriticalPath, name: str) -> tuple[set[int], float]:
    mine = [i for i, n in enumerate(cp.edge_name) if n == name and cp.edge_weight_us[i] > 0]
    return {int(cp.edge_rank[i]) for i in mine}, float(cp.edge_weight_us[mine].sum())


def test_gloo_path_goes_through_the_slow_rank_of_each_phase(gloo_run: Path) -> None:
    traces = list(load_traces([gloo_run]))
    cp = ranks_critical_path(traces, step=2)
    windows = {t.rank: (float(t.steps.cpu_start_us[1]), float(t.steps.cpu_end_us[1]))
               for t in traces}
    slow = {"aten::mm": 1, "aten::bmm": 0}  # the worker's large matmul of each phase
    for name, rank in slow.items():
        ranks, time_us = _on_path(cp, name)
        assert ranks == {rank}, name
        # all of the slow rank's op is on the path (the fast rank's would be ~100x shorter)
        t = next(t for t in traces if t.rank == rank)
        assert time_us == pytest.approx(_spans(t, name, *windows[rank]).max(), rel=0.05)
    assert [s.rank for s in cp.stretches][:2] == [1, 0] and cp.num_rank_changes >= 1
    assert cp.num_joined == 2 and cp.pct("cpu_communication_bound") > 0
    assert cp.last_by == "latest start (one host)"
    # on one clock the path is a chain of events in time: never longer than the time it spans
    span = float(cp.edge_end_us.max() - cp.edge_start_us.min())
    assert cp.length_us <= span + 1.0
    assert sum(cp.by_rank_us.values()) == pytest.approx(cp.length_us)
    assert np.all(cp.edge_end_us[:-1] <= cp.edge_start_us[1:] + 1e-6)


def test_gloo_cli(gloo_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["critical-path", "--json", "--edges", str(gloo_run)]) == 0
    doc = json.loads(capsys.readouterr().out)
    across = doc["across_ranks"]
    assert len(doc["ranks"]) == 2 and across["ranks"] == [0, 1]
    assert across["last_by"] == "latest start (one host)"
    assert sum(across["edges"]["weight_us"]) == pytest.approx(across["length_us"])
    assert {s["rank"] for s in across["stretches"]} == {0, 1}
    assert main(["critical-path", str(gloo_run)]) == 0
    assert "Stretches of the path, by rank" in capsys.readouterr().out


def test_eight_rank_public_set(public_traces: Path) -> None:
    """benchmarks/ingest.py's 8-rank set: 8 copies of a real NCCL rank. Every all-reduce is
    joined, and with identical ranks no rank waits: the path is the one rank's own."""
    trace = load_trace(require(public_traces / "df_index_resolver" / "df_index_resolver.json.gz"))
    ranks = [dataclasses.replace(trace, rank=k) for k in range(8)]
    cp = ranks_critical_path(ranks)
    alone = critical_path(trace)
    assert cp.length_us == pytest.approx(alone.length_us)
    lo, hi = alone.start_us, alone.end_us
    launched = trace.strings.mask(trace.kernels.name_id, "^nccl") & (
        trace.runtime.ts_us[trace.kernels.launch_row] >= lo) & (
        trace.runtime.ts_us[trace.kernels.launch_row] <= hi)
    assert cp.num_joined == int(launched.sum()) > 100 and cp.num_unjoined == 0
    assert len(cp.stretches) == 1


def test_point_to_point_is_left_unjoined(public_traces: Path) -> None:
    """Two ranks sampled from a 128-rank job: their only NCCL kernels are SendRecv, whose peer
    the trace does not name; the path is the longer rank's own."""
    traces = list(load_traces([public_traces / "trace_filter"]))
    cp = ranks_critical_path(traces)
    alone = {t.rank: critical_path(t).length_us for t in traces}
    assert cp.num_joined == 0 and cp.num_unjoined > 0
    assert cp.length_us == pytest.approx(max(alone.values()))
    assert [s.rank for s in cp.stretches] == [max(alone, key=lambda r: alone[r])]


def test_to_pandas(tmp_path: Path) -> None:
    for rank in (0, 1):
        _rank(tmp_path, rank)
    cp = ranks_critical_path(list(load_traces([tmp_path])))
    pytest.importorskip("pandas")
    frame = cp.to_pandas()
    assert frame["weight_us"].sum() == pytest.approx(710)
    assert frame.groupby("rank")["weight_us"].sum().to_dict() == pytest.approx({0: 200, 1: 510})
