"""GIVEN a hand-built trace whose numbers are known WHEN it is summarized THEN every figure
matches the hand computation, and the JSON follows the aiprof.summary/1 contract."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiprof import load_trace, summary
from aiprof.analysis import intervals as iv
from aiprof.cli.main import main


def _span(cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _kernel(name: str, ts: float, dur: float, corr: int, stream: int = 7) -> list[dict]:
    launch = _span("cuda_runtime", "cudaLaunchKernel", ts - 5, 3, correlation=corr)
    return [
        launch,
        _span(
            "kernel", name, ts, dur, pid=0, tid=stream, correlation=corr, stream=stream, device=0
        ),
    ]


@pytest.fixture
def two_step_trace(tmp_path: Path) -> Path:
    events = [
        _span("user_annotation", "ProfilerStep#1", 1000, 100),
        _span("user_annotation", "ProfilerStep#2", 1100, 100),
        _span("cpu_op", "aten::mm", 1001, 50),
        _span("cpu_op", "aten::add", 1101, 20),
        *_kernel("gemm", 1010, 30, 1),  # step 1: compute 1010-1040
        *_kernel("ncclDevKernel_AllReduce", 1030, 30, 2, stream=20),  # comm 1030-1060
        *_kernel("gemm", 1110, 10, 3),  # step 2: compute 1110-1120
        _span(
            "gpu_memcpy",
            "Memcpy HtoD (Pinned -> Device)",
            1150,
            20,
            pid=0,
            tid=7,
            correlation=4,
            bytes=1024,
        ),
    ]
    path = tmp_path / "trace.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": events,
                "deviceProperties": [
                    {
                        "id": 0,
                        "name": "NVIDIA H200",
                        "computeMajor": 9,
                        "computeMinor": 0,
                        "numSms": 132,
                    }
                ],
            }
        )
    )
    return path


def test_numbers_match_the_hand_computation(two_step_trace: Path) -> None:
    (s,) = summary(load_trace(two_step_trace))
    assert s.num_steps == 2 and s.device == "NVIDIA H200"
    assert s.step_time.mean_us == pytest.approx(100)
    # busy: 1010-1060 (50) + 1110-1120 (10) + 1150-1170 (20) = 80 of 200
    assert s.gpu_busy_pct == pytest.approx(40.0)
    t = s.temporal
    assert (t.compute_us, t.communication_us, t.memory_us, t.idle_us) == pytest.approx(
        (40, 20, 20, 120)
    )
    assert sum(s.steps.per_step_us.values()) == pytest.approx(100)
    assert [k.name for k in s.top_kernels] == ["gemm", "ncclDevKernel_AllReduce"]
    assert s.top_kernels[0].total_us == 40 and s.top_kernels[0].count == 2


def test_json_contract(two_step_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", "--json", str(two_step_trace)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "aiprof.summary/1"
    (rank,) = doc["ranks"]
    assert {
        "rank",
        "device",
        "num_steps",
        "step_time_us",
        "gpu_busy_pct",
        "temporal_breakdown",
        "step_breakdown",
        "top_kernels",
        "top_ops",
    } <= set(rank)
    assert set(rank["step_time_us"]) == {"mean", "median", "min", "max"}
    assert {
        "compute_us",
        "communication_us",
        "memory_us",
        "idle_us",
        "compute_pct",
        "communication_pct",
        "memory_pct",
        "idle_pct",
    } <= set(rank["temporal_breakdown"])
    assert set(rank["top_kernels"][0]) == {"name", "count", "total_us", "mean_us", "pct"}
    parts = rank["temporal_breakdown"]
    assert sum(
        parts[k] for k in ("compute_pct", "communication_pct", "memory_pct", "idle_pct")
    ) == pytest.approx(100)


def test_step_annotation_fallback(tmp_path: Path) -> None:
    events = [_span("user_annotation", "train_step", 100 * i, 50) for i in range(4)]
    events += [_span("cpu_op", "aten::mm", 100 * i + 1, 10) for i in range(4)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert len(load_trace(path).steps) == 1  # no ProfilerStep: one step over the trace
    trace = load_trace(path, step_annotation="train_step")
    assert len(trace.steps) == 4 and trace.step_source == "annotation 'train_step'"


intervals = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)), max_size=12)


def _cover(pairs: list[tuple[int, int]]) -> np.ndarray:
    grid = np.zeros(80, dtype=bool)
    for start, length in pairs:
        grid[start : start + length] = True
    return grid


def _as_set(pairs: list[tuple[int, int]]) -> iv.Intervals:
    starts = np.array([p[0] for p in pairs], dtype=float)
    return iv.union(starts, starts + np.array([p[1] for p in pairs], dtype=float))


@settings(max_examples=300, deadline=None)
@given(intervals, intervals)
def test_interval_algebra_matches_a_grid(a: list, b: list) -> None:
    ga, gb = _cover(a), _cover(b)
    sa, sb = _as_set(a), _as_set(b)
    assert iv.length(sa) == ga.sum()
    assert iv.length(iv.intersect(sa, sb)) == (ga & gb).sum()
    assert iv.length(iv.subtract(sa, sb)) == (ga & ~gb).sum()
    assert iv.length(iv.union_all(sa, sb)) == (ga | gb).sum()
    assert iv.length(iv.between(sa, 10, 40)) == ga[10:40].sum()
