"""GIVEN traces holding values no analysis can use (negative or absurd times, two GPUs,
ns timestamps, step numbers beyond 64 bits, implausible args and deviceProperties)
WHEN they are read THEN the numbers are the known answers, each repair is one warning
naming the file and the field, and nothing raises."""

from __future__ import annotations

import gzip
import json
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aiprof import load_trace, summary
from aiprof.trace.validate import TraceRepairWarning


def _span(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    pid = 0 if cat == "kernel" else 1
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": 7, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def _step(ts: float, dur: float, number: int | str = 1) -> dict[str, Any]:
    return _span("user_annotation", f"ProfilerStep#{number}", ts, dur)


def _write(tmp_path: Path, events: list[dict[str, Any]], **top: Any) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return path


def _load(path: Path) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = load_trace(path)
    return trace, [str(w.message) for w in caught if w.category is TraceRepairWarning]


def test_a_negative_duration_counts_zero_not_minus_400(tmp_path: Path) -> None:
    path = _write(tmp_path, [_step(0, 1000), _span("kernel", "k", 100, -400, device=0),
                             _span("kernel", "k", 300, 100, device=0)])  # fmt: skip
    trace, notes = _load(path)
    (top,) = summary(trace)[0].top_kernels
    assert top.total_us == 100.0 and top.count == 2
    assert len(notes) == 1 and str(path) in notes[0] and "dur" in notes[0]


def test_a_kernel_at_ts_1e300_is_dropped_and_busy_is_the_rest(tmp_path: Path) -> None:
    path = _write(tmp_path, [_step(0, 1000), _span("kernel", "a", 100, 400, device=0),
                             _span("kernel", "b", 1e300, 10, device=0)])  # fmt: skip
    trace, notes = _load(path)
    assert len(trace.kernels) == 1
    assert summary(trace)[0].gpu_busy_pct == pytest.approx(40.0)
    assert any("ts or dur" in n and "dropped" in n for n in notes)


def test_two_gpus_each_40_pct_busy_at_different_times_are_40_not_80(tmp_path: Path) -> None:
    events = [_step(0, 1000),
              _span("kernel", "a", 0, 400, device=0),
              {**_span("kernel", "b", 500, 400, device=1), "pid": 1}]  # fmt: skip
    trace, _ = _load(_write(tmp_path, events))
    assert summary(trace)[0].gpu_busy_pct == pytest.approx(40.0)
    from aiprof.analysis.breakdown import gpu_busy_pct_by_device

    assert gpu_busy_pct_by_device(trace) == {0: pytest.approx(40.0), 1: pytest.approx(40.0)}


def test_epoch_us_timestamps_keep_their_ns(tmp_path: Path) -> None:
    # 1.7e15 µs: float64 steps by 0.25 µs there; these gaps are 0.047, 0.1 and 0.9 µs
    text = (
        '{"traceEvents": ['
        '{"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":1712195495519689.000,"dur":1},'
        '{"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"ts":1712195495519690.047,"dur":1},'
        '{"ph":"X","cat":"kernel","name":"c","pid":0,"tid":7,"ts":1712195495519691.147,"dur":1},'
        '{"ph":"X","cat":"kernel","name":"d","pid":0,"tid":7,"ts":1712195495519693.047,"dur":1}'
        "]}"
    )
    path = tmp_path / "ns.json"
    path.write_text(text)
    trace = load_trace(path)
    gaps = trace.kernels.ts_us[1:] - trace.kernels.end_us[:-1]
    assert gaps == pytest.approx([0.047, 0.1, 0.9], abs=1e-9)


def test_no_sub_us_gap_of_the_public_ns_trace_is_lost(public_traces: Path) -> None:
    (path,) = (public_traces / "ns_resolution_trace").glob("*.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    kernels = sorted(
        (Decimal(e["ts"]), Decimal(e["dur"]))
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "kernel"
    )
    pairs = zip(kernels[:-1], kernels[1:], strict=True)
    exact = np.array([float(b[0] - a[0] - a[1]) for a, b in pairs])
    table = load_trace(path).kernels
    order = np.argsort(table.ts_us, kind="stable")
    starts, ends = table.ts_us[order], table.end_us[order]
    got = starts[1:] - ends[:-1]
    sub_us = (exact > 0) & (exact < 1)
    assert sub_us.sum() > 3000  # the trace's 3,597 sub-µs gaps (some kernels share a ts)
    assert np.max(np.abs(got - exact)) < 1e-6  # float parsing alone is off by up to 0.125


def test_a_step_number_beyond_64_bits_renumbers_the_steps(tmp_path: Path) -> None:
    huge = "1" + "0" * 30
    path = _write(tmp_path, [_step(0, 100, huge), _step(200, 100, 5)])
    trace, notes = _load(path)
    assert trace.steps.number.tolist() == [0, 1]
    assert any("ProfilerStep" in n and str(path) in n for n in notes)
    assert summary(trace)[0].num_steps == 2


@pytest.mark.parametrize(
    ("args", "column"),
    [
        ({"device": 2**62}, "device"),
        ({"device": 2_000_000_000}, "device"),
        ({"device": -5}, "device"),
        ({"grid": [-2, 1, 1]}, "grid_x"),
        ({"block": [0, 1, 1]}, "block_x"),
        ({"registers per thread": 100_000}, "registers_per_thread"),
        ({"shared memory": -4}, "shared_mem_bytes"),
        ({"correlation": -7}, "correlation"),
    ],
)
def test_implausible_args_become_absent(tmp_path: Path, args: dict[str, Any], column: str) -> None:
    path = _write(tmp_path, [_step(0, 1000), _span("kernel", "k", 10, 10, **args)])
    trace, notes = _load(path)
    assert getattr(trace.kernels, column).tolist() == [-1]
    assert len(notes) == 1 and str(path) in notes[0]
    summary(trace)


def test_negative_input_dims_are_treated_as_absent(tmp_path: Path) -> None:
    op = _span("cpu_op", "aten::mm", 10, 10, **{"Input Dims": [[-4, 8], [8, 4]]})
    good = _span("cpu_op", "aten::mm", 30, 10, **{"Input Dims": [[4, 8], [8, 4]]})
    trace, notes = _load(_write(tmp_path, [_step(0, 100), op, good]))
    assert trace.cpu_ops.input_dims_id[0] == -1 and trace.cpu_ops.input_dims_id[1] >= 0
    assert any("Input Dims" in n for n in notes)


@pytest.mark.parametrize(
    "value", [None, "132", [1], {"a": 1}, 0, -3, 2**70, 1e300, float("1e-3"), True]
)
@pytest.mark.parametrize("key", ["numSms", "computeMajor", "warpSize", "totalGlobalMem", "id"])
def test_implausible_device_properties_are_ignored(tmp_path: Path, key: str, value: Any) -> None:
    props = {"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0,
             "numSms": 132, "warpSize": 32, "totalGlobalMem": 150_000_000_000}  # fmt: skip
    props[key] = value
    path = _write(tmp_path, [_step(0, 100), _span("kernel", "k", 10, 10, device=0)],
                  deviceProperties=[props])  # fmt: skip
    trace, notes = _load(path)
    (device,) = trace.devices
    kept = device.raw.get(key)
    assert kept is None or (type(kept) is int and kept >= 0)
    summary(trace)


def test_implausible_distributed_info_is_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, [_step(0, 100)],
                  distributedInfo={"rank": 2**80, "world_size": "two", "backend": 3})  # fmt: skip
    trace, notes = _load(path)
    assert trace.rank == 0 and trace.distributed is not None
    assert trace.distributed.world_size is None and trace.distributed.backend is None
    assert len(notes) == 3
