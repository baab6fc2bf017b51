"""GIVEN the results of scripts/h200/tensor_h200.py committed under tests/data/tensor WHEN read
on a CPU THEN the H200's measured roofs sit under its datasheet, GEMMs/convs run near the compute
roof and elementwise ops near the memory roof, and the lints' claims hold on measured timings.
Skipped until the data is committed."""

from __future__ import annotations

import json

import pytest
from tests.conftest import DATA

TENSOR = DATA / "tensor"
pytestmark = pytest.mark.skipif(
    not (TENSOR / "ceilings.json").is_file(), reason="H200 results not committed yet"
)
BF16_DENSE = 989.4e12  # gpu-models.md §6.4, H200 SXM dense BF16
HBM_BYTES_PER_S = 4.8e12  # gpu-models.md §6.4


def _time_weighted_roof_pct(rows, families, bounds=("compute", "memory")) -> float:
    chosen = [
        r.point
        for r in rows
        if r.point.family in families and r.point.bound in bounds and r.point.measured_us
    ]
    total = sum(p.measured_us for p in chosen)
    assert total > 0, f"no {families} rows"
    return sum(p.roof_pct * p.measured_us for p in chosen) / total


def test_measured_ceilings_are_under_the_datasheet() -> None:
    from aiprof.tensor.ceilings_model import load_ceilings

    ceilings = load_ceilings(TENSOR / "ceilings.json")
    assert 0.3 * BF16_DENSE < ceilings.matmul_flops_per_s["bf16"] <= 1.02 * BF16_DENSE
    assert 0.5 * HBM_BYTES_PER_S < ceilings.memory_bytes_per_s <= 1.02 * HBM_BYTES_PER_S
    assert ceilings.launch_latency_us and ceilings.launch_latency_us > 0


@pytest.mark.parametrize("name", ["resnet50_cl", "gpt2"])
def test_traces_on_the_roofline(name) -> None:
    from aiprof.tensor.ceilings_model import ceilings_for_gpu
    from aiprof.tensor.trace_roofline import trace_roofline
    from aiprof.trace import load_trace

    path = TENSOR / f"{name}.trace.json.gz"
    assert path.stat().st_size < 3_000_000
    result = trace_roofline(load_trace(path), ceilings_for_gpu("H200"))
    for row in result.rows:  # a FLOP overcount would show as achieved > peak
        if row.point.achieved_flops_per_s:
            assert row.point.achieved_flops_per_s <= 1.05 * row.point.peak_flops_per_s, row
    compute = _time_weighted_roof_pct(result.rows, {"matmul", "convolution", "attention"})
    memory = _time_weighted_roof_pct(result.rows, {"elementwise", "normalization"}, ("memory",))
    assert compute >= 30.0
    assert memory >= 30.0


def test_layout_lint_and_measured_channels_last_gain() -> None:
    layout = json.loads((TENSOR / "layout.json").read_text())
    assert layout["nchw"]["convs_checked"] > 50  # ResNet-50 forward: 53 convolutions
    assert layout["nchw"]["nchw_half_convs"] == layout["nchw"]["convs_checked"]
    assert layout["cl"]["nchw_half_convs"] == 0
    assert layout["cl"]["step_ms"] < layout["nchw"]["step_ms"]


def test_alignment_lint_and_measured_4096_gain() -> None:
    data = json.loads((TENSOR / "linear_alignment.json").read_text())
    odd, even = data["layers"]["4095"], data["layers"]["4096"]
    assert [f["misaligned"] for f in odd["findings"] if f["kind"] == "dimension"] == [["N", "K"]]
    assert [f for f in even["findings"] if f["kind"] == "dimension"] == []
    assert even["tflops"] >= odd["tflops"]


def test_roofline_cli_with_measured_ceilings(tmp_path, capsys) -> None:
    from aiprof.cli.main import main

    trace = TENSOR / "resnet50_cl.trace.json.gz"
    plot = tmp_path / "roofline.svg"
    code = main(
        ["roofline", str(trace), "--ceilings", str(TENSOR / "ceilings.json"), "--plot", str(plot)]
    )
    assert code == 0 and plot.read_text().startswith("<svg")
    assert "Roofline on" in capsys.readouterr().out
