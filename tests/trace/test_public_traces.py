"""GIVEN every real trace in ../shared/traces/public WHEN aiprof reads it THEN its tables hold
exactly the events an independent orjson pass counts, and `aiprof summary` exits 0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.conftest import DATA, REAL_TRACES, require
from tests.trace.reference import independent_counts

from aiprof import load_trace
from aiprof.cli.main import main

PUBLIC = sorted(REAL_TRACES.glob("*/*.json.gz"))
RECORDED_ON_H200 = sorted((DATA / "h200").glob("*.json.gz"))  # torch 2.11, CUDA 13, 2026-11-30
FILES = PUBLIC + RECORDED_ON_H200


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name + "/" + p.name[:30])
def test_tables_match_an_independent_count(path: Path) -> None:
    expected = independent_counts(path)
    trace = load_trace(path)
    assert trace.num_events == expected["events"]
    assert len(trace.kernels) == expected["kernels"]
    assert trace.kernels.dur_us.sum() == pytest.approx(expected["kernel_dur_us"], rel=1e-9)
    assert len(trace.memcpy) == expected["memcpy"]
    assert len(trace.memset) == expected["memset"]
    assert len(trace.runtime) == expected["runtime"]
    assert len(trace.cpu_ops) == expected["cpu_ops"]
    assert len(trace.python_functions) == expected["python"]
    assert len(trace.flows) == expected["flows"]
    assert len(trace.memory) == expected["memory"]
    if expected["steps"]:
        assert len(trace.steps) == expected["steps"]
        assert trace.step_source == "ProfilerStep"
    else:
        assert len(trace.steps) == 1 and trace.step_source == "whole trace"
    if expected["rank"] is not None:
        assert trace.rank == expected["rank"]
    assert trace.origin_us == pytest.approx(expected["first_ts"], abs=1e-3)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name + "/" + p.name[:30])
def test_summary_command_exits_zero(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(path)]) == 0
    assert "rank" in capsys.readouterr().out


def test_runtime_calls_link_to_their_kernels_by_correlation(public_traces: Path) -> None:
    trace = load_trace(public_traces / "nccl_parser_config" / "nccl_data.json.gz")
    kernels = trace.kernels
    linked = kernels.launch_row >= 0
    assert linked.all()
    np.testing.assert_array_equal(
        trace.runtime.correlation[kernels.launch_row], kernels.correlation
    )
    # the launching CPU op shares the kernel's External id (kineto-trace-format.md §6)
    with_op = kernels.op_row >= 0
    assert with_op.mean() > 0.99
    np.testing.assert_array_equal(
        trace.cpu_ops.external_id[kernels.op_row[with_op]], kernels.external_id[with_op]
    )


def test_kernel_launch_args_and_collective_args_are_columns(public_traces: Path) -> None:
    trace = load_trace(public_traces / "nccl_parser_config" / "nccl_data.json.gz")
    nccl = trace.strings.mask(trace.kernels.name_id, "^ncclKernel_AllReduce")
    assert nccl.sum() > 0
    k = trace.kernels.take(nccl)
    assert set(k.group_size.tolist()) == {2}
    assert {trace.strings[i] for i in k.collective_id} == {"allreduce"}
    assert (k.in_nelems > 0).all() and (k.threads_per_block > 0).all()
    assert trace.device is not None and trace.device.num_sms == 108
    assert trace.distributed is not None and trace.distributed.nccl_version == "2.17.1"


def test_ns_resolution_keeps_sub_microsecond_timestamps(public_traces: Path) -> None:
    name = "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    path = require(public_traces / name)
    trace = load_trace(path)
    absolute = trace.kernels.ts_us + trace.origin_us
    fractions = absolute - np.floor(absolute)
    assert (fractions > 1e-3).mean() > 0.5  # most kernels start between whole microseconds


def test_amd_trace_is_not_taken_for_hopper(public_traces: Path) -> None:
    trace = load_trace(public_traces / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    assert trace.devices and all(d.vendor == "amd" for d in trace.devices)
    assert trace.device is not None and trace.device.compute_capability is None
    assert len(trace.kernels) > 0 and (trace.kernels.launch_row >= 0).all()


def test_cpu_only_trace_has_no_gpu_and_a_rank_from_distributed_info(public_traces: Path) -> None:
    trace = load_trace(public_traces / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert not trace.has_gpu and trace.rank == 34 and trace.device is None


def test_h200_traces_carry_device_and_launch_links() -> None:
    trace = load_trace(DATA / "h200" / "h200_resnet50_bf16.trace.json.gz")
    assert trace.device is not None and trace.device.name == "NVIDIA H200"
    assert trace.device.num_sms == 132 and trace.device.compute_capability == "9.0"
    assert (trace.kernels.launch_row >= 0).mean() > 0.99
    assert (trace.kernels.op_row >= 0).mean() > 0.95
    assert (trace.cpu_ops.input_dims_id >= 0).any()  # record_shapes was on
