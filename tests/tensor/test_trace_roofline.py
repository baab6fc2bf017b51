"""GIVEN real profiler traces WHEN their ops are placed on the roofline THEN device time, FLOPs
and bytes agree with independent numpy sums and hand formulas; the CLI renders and fails cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import require

from aiprof.cli.main import main
from aiprof.tensor.ceilings_model import ceilings_for_gpu
from aiprof.tensor.trace_roofline import trace_roofline

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def a100_trace(public_traces):
    from aiprof.trace import load_trace

    return load_trace(require(public_traces / "negative_queue_length_values_check/rank0.json.gz"))


def test_device_time_is_the_launched_work(a100_trace) -> None:
    result = trace_roofline(a100_trace)
    assert result.device == "A100 SXM4 80GB"
    k, s, c = a100_trace.kernels, a100_trace.memset, a100_trace.memcpy
    dtod = np.array(["DtoD" in a100_trace.name(int(i)) for i in c.name_id], dtype=bool)
    expected = (
        k.dur_us[k.op_row >= 0].sum()
        + s.dur_us[s.op_row >= 0].sum()
        + c.dur_us[(c.op_row >= 0) & dtod].sum()
    )
    assert result.device_us + result.device_us_communication == pytest.approx(expected)
    assert result.num_ops_without_model < result.num_ops


def test_an_elementwise_row_by_hand(a100_trace) -> None:
    result = trace_roofline(a100_trace)
    row = next(
        r
        for r in result.rows
        if r.op == "mul" and r.shapes == "[(1, 4096), (1, 4096)]" and r.dtypes == "float,float"
    )
    assert row.point.bytes_total == row.num_calls * 3 * 4096 * 4  # two fp32 inputs, one output
    assert row.point.flops == row.num_calls * 4096
    assert row.point.bound == "latency"  # 49 KB per call: 0.01 us at 2 TB/s, far below a launch
    assert row.point.roof_time_us == pytest.approx(row.point.bytes_total / 2.039e12 * 1e6)


def test_trace_without_shapes_counts_every_op_as_uncosted(public_traces) -> None:
    from aiprof.trace import load_trace

    trace = load_trace(
        public_traces / "critical_path" / "benchmark_result_2869224_1695835535_trace.json.gz"
    )
    result = trace_roofline(trace, ceilings_for_gpu("A100 SXM4 40GB"))
    assert result.num_ops > 0 and result.num_ops_without_model == result.num_ops
    assert result.device_us_without_model == pytest.approx(result.device_us)


def test_cli_json_and_plot(public_traces, tmp_path, capsys) -> None:
    path = require(public_traces / "negative_queue_length_values_check" / "rank0.json.gz")
    plot = tmp_path / "roof.svg"
    assert main(["roofline", str(path), "--json", "--plot", str(plot)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "A100 SXM4 80GB" and data["rows"]
    svg = plot.read_text()
    assert svg.startswith("<svg") and "roof bf16" in svg
    assert main(["roofline", str(path), "--top", "3"]) == 0
    assert "Roofline on A100" in capsys.readouterr().out


def test_cli_errors_are_one_line(public_traces, tmp_path, capsys) -> None:
    assert main(["roofline", str(tmp_path / "missing.json")]) == 2
    cpu = public_traces / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    assert main(["roofline", str(cpu)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("aiprof roofline: error:") for line in err)


NCHW_TRACE = DATA / "tensor_fixtures" / "nchw_conv_trace.json"


def test_trace_lints_measure_conversion_kernels() -> None:
    # A hand-written Kineto trace: an fp16 NCHW cudnn_convolution that launched two conversion
    # kernels (12 + 11 us) around its GEMM, and a bf16 mm with K = 4095 that ran 300 us.
    from aiprof.tensor.trace_lints import trace_lints
    from aiprof.trace import load_trace

    h200 = ceilings_for_gpu("H200")
    lints = trace_lints(load_trace(NCHW_TRACE), h200)
    assert lints.conversion_kernels_us == pytest.approx(23.0)
    (conv,) = lints.layout.findings
    assert conv.kind == "nchw_half_conv" and conv.measured_us == pytest.approx(23.0)
    assert conv.converted_bytes == 2 * 2 * (8 * 64 * 56 * 56) * 2  # input and output, fp16
    (mm,) = lints.alignment
    assert mm.misaligned == ("K",) and mm.measured_us == pytest.approx(300.0)
    assert mm.max_gain_us == pytest.approx(300.0 - mm.padded_roof_us)


def test_cli_lint_on_a_trace(capsys) -> None:
    assert main(["roofline", str(NCHW_TRACE), "--lint"]) == 0
    out = capsys.readouterr().out
    assert "nchw_half_conv" in out and "conversion kernels in the trace: 23.0" in out


def test_run_record_uses_its_measured_ceilings(tmp_path, capsys) -> None:
    import shutil

    from aiprof.record.runrecord import RunMeta, trace_file_name, write_meta
    from aiprof.tensor.ceilings_model import Ceilings, save_ceilings

    run = tmp_path / "run"
    run.mkdir()
    write_meta(run, RunMeta(name="h200"))
    shutil.copy(DATA / "tensor_fixtures" / "nchw_conv_trace.json.gz", run / trace_file_name(0))
    measured = Ceilings(
        name="measured H200",
        memory_bytes_per_s=4e12,
        matmul_flops_per_s={"fp16": 7e14, "bf16": 7e14},
        vector_flops_per_s=5e13,
    )
    save_ceilings(measured, run / "ceilings.json")
    assert main(["roofline", str(run), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "measured H200"
    assert (run / "roofline.svg").read_text().startswith("<svg")
