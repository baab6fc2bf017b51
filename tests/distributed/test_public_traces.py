"""``aiprof distributed`` on real traces, checked against an independent parse of the raw JSON."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from aiprof.cli.main import main
from aiprof.distributed.commtrace import collective_calls, compute_spans
from aiprof.distributed.overlap import step_overlaps
from aiprof.trace import load_trace

ELEM = {"Float": 4, "Long": 8, "Half": 2, "BFloat16": 2, "Int": 4}


def _raw(path):
    with gzip.open(path, "rt") as handle:
        return [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]


def _merged_length(items: list[tuple[float, float]]) -> float:
    """Plain-loop union length (independent of the vectorized one)."""
    total, end = 0.0, -np.inf
    for start, stop in sorted(items):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def _overlap_length(a, b) -> float:
    return _merged_length(a) + _merged_length(b) - _merged_length(a + b)


def test_nccl_parser_config_collectives_and_overlap(public_traces):
    path = public_traces / "nccl_parser_config" / "nccl_data.json.gz"
    events = [e for e in _raw(path) if e.get("cat") == "kernel"]
    nccl = [e for e in events if e["name"].startswith(("ncclKernel_", "ncclDevKernel_"))]
    other = [e for e in events if e not in nccl]
    calls = collective_calls(load_trace(path))
    assert len(calls.kind) == len(nccl) > 0
    expected_bytes = sum(
        max(e["args"]["In msg nelems"], e["args"]["Out msg nelems"]) * ELEM[e["args"]["dtype"]]
        for e in nccl
    )
    assert calls.num_bytes.sum() == expected_bytes
    assert sorted(set(calls.kind)) == sorted({e["args"]["Collective name"] for e in nccl})
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in nccl]
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in other]
    trace = load_trace(path)
    whole = step_overlaps(
        compute_spans(trace),
        (calls.ts_us, calls.ts_us + calls.dur_us),
        np.array([0]),
        np.array([-1e18]),
        np.array([1e18]),
    )[0]
    assert whole.comm_us == pytest.approx(_merged_length(comm), rel=1e-6)
    assert whole.overlapped_us == pytest.approx(_overlap_length(comm, comp), rel=1e-6)


def test_trace_filter_two_of_128_ranks(public_traces, capsys):
    folder = public_traces / "trace_filter"
    assert main(["distributed", str(folder), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "aiprof.distributed/1"
    assert report["num_ranks"] == 2 and report["world_size"] == 128
    for rank in report["ranks"]:
        raw = _raw(folder / f"sampled_rank-{rank['rank']}.json.gz")
        count = sum(e["name"].startswith("ncclKernel_") for e in raw if e.get("cat") == "kernel")
        mine = [c for c in report["collectives"] if c["rank"] == rank["rank"]]
        assert sum(c["num_calls"] for c in mine) == count
        assert 0 <= rank["overlap_pct"] <= 100
        assert rank["exposed_comm_us_per_step"] <= rank["comm_us_per_step"] + 1e-6
    assert any("128" in note for note in report["notes"])
    assert main(["distributed", str(folder)]) == 0  # the table renders too


def test_directory_without_traces_is_one_line_exit_2(tmp_path, capsys):
    assert main(["distributed", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    (tmp_path / "rank0.trace.json").write_text("{not json")
    assert main(["distributed", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_sizes_fall_back_to_record_param_comms(public_traces):
    """Kernels without collective args (older PyTorch) take sizes from the launching CPU op."""
    import dataclasses

    trace = load_trace(public_traces / "nccl_parser_config" / "nccl_data.json.gz")
    expected = collective_calls(trace)
    k = trace.kernels
    blank = np.full(len(k.in_nelems), -1, dtype=k.in_nelems.dtype)
    stripped = dataclasses.replace(
        k,
        in_nelems=blank,
        out_nelems=blank.copy(),
        group_size=blank.copy(),
        dtype_id=blank.copy(),
        collective_id=blank.copy(),
    )
    got = collective_calls(dataclasses.replace(trace, kernels=stripped))
    assert got.kind == expected.kind
    assert np.array_equal(got.num_bytes, expected.num_bytes)
    assert np.array_equal(got.group_size, expected.group_size)


def test_every_call_with_its_bandwidth(public_traces, capsys):
    path = public_traces / "nccl_parser_config" / "nccl_data.json.gz"
    assert main(["distributed", str(path), "--calls", "--json"]) == 0
    calls = json.loads(capsys.readouterr().out)["calls"]
    raw = sorted(
        (e for e in _raw(path) if e["name"].startswith("ncclKernel_")), key=lambda e: e["ts"]
    )
    assert len(calls) == len(raw)
    for call, event in zip(calls, raw, strict=True):
        args = event["args"]
        size = max(args["In msg nelems"], args["Out msg nelems"]) * ELEM[args["dtype"]]
        factor = (
            2 * (args["Group size"] - 1) / args["Group size"]
            if call["collective"] == "allreduce"
            else 1
        )
        assert call["num_bytes"] == size and call["dur_us"] == pytest.approx(event["dur"])
        assert call["busbw_gbps"] == pytest.approx(size / event["dur"] / 1e3 * factor)
