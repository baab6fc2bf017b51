"""Rules on planted synthetic traces: the right top cause, gains checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.kineto_synth import TraceBuilder, gpu_bound, launch_bound
from tests.support.ranking import assert_ranked

from aiprof.cli.main import main
from aiprof.diagnose import diagnose
from aiprof.diagnose.rules import CATEGORIES
from aiprof.trace import load_trace

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def _gain(path: Path, category: str) -> float:
    found = {f.category: f for f in diagnose(path).findings}
    return found[category].estimated_gain_pct


def test_dataloader_wait_is_the_top_cause(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 1, 600.0)
        gpu = t + 620.0
        for k in range(4):
            b.kernel(GEMM, t + 605 + k * 6, gpu, 100.0)
            gpu += 101.0
        b.step(s, t, 630.0)  # CPU span; extended to the last kernel's end
        t = gpu + 1
    trace = load_trace(b.write(tmp_path / "t.json.gz"))
    result = diagnose(trace)
    top = result.findings[0]
    assert top.category == "dataloader" and top.rank == 1
    share = 100.0 * 600.0 / (trace.steps.duration_us.mean())  # the loader's share of a step
    assert top.estimated_gain_pct == pytest.approx(share, abs=3.0)


def test_launch_bound_is_cpu_bound_with_gain_below_idle_share(tmp_path: Path) -> None:
    path = launch_bound(tmp_path / "t.json.gz")
    trace = load_trace(path)
    result = diagnose(trace)
    assert result.findings[0].category == "cpu_bound"
    idle_pct = 100.0 - 100.0 * trace.kernels.dur_us.sum() / trace.steps.duration_us.sum()
    assert 0.5 * idle_pct <= result.findings[0].estimated_gain_pct <= idle_pct + 1e-6


def test_per_layer_sync_is_host_sync(tmp_path: Path) -> None:
    b = TraceBuilder()
    t, layers = 0.0, 10
    for _ in range(layers):
        b.kernel(GEMM, t, t + 10, 200.0)
        b.runtime("cudaStreamSynchronize", t + 6, 210.0)  # returns 6 µs after the kernel
        t += 6 + 210 + 40  # 40 µs of Python before the next layer
    b.step(0, 0.0, t)
    path = b.write(tmp_path / "t.json.gz")
    result = diagnose(path)
    assert result.findings[0].category == "host_sync"
    # without the syncs the kernels queue back to back: 10 x 200 µs after the first latency
    expected = 100.0 * (1.0 - (10.0 + layers * 200.0) / t)
    assert result.findings[0].estimated_gain_pct == pytest.approx(expected, abs=3.0)


def test_scalar_reads_go_with_their_copies_and_cpu_time(tmp_path: Path) -> None:
    """``.item()`` after each layer: the fix keeps the value on the GPU, so the replay drops
    the read's CPU time and its device-to-host copy, not only the wait."""
    from aiprof.analysis import intervals as iv
    from aiprof.diagnose.context import Context, DiagnoseOptions
    from aiprof.diagnose.rules.host_sync import change as _sync_change

    b = TraceBuilder()
    t, layers = 0.0, 10
    for _ in range(layers):
        b.kernel(GEMM, t, t + 10, 200.0, launch_dur=4.0)  # runs 10..210 after t
        b.cpu_op("aten::item", t + 5, 220.0)
        b.cpu_op("aten::_local_scalar_dense", t + 6, 218.0)
        b.memcpy("Memcpy DtoH (Device -> Pinned)", t + 8, 3.0, t + 212, 2.0, 2)
        b.runtime("cudaStreamSynchronize", t + 12, 205.0)  # returns at t + 217
        t += 5 + 220 + 40  # 40 µs of Python after the read
    b.step(0, 0.0, t)
    trace = load_trace(b.write(tmp_path / "t.json.gz"))
    ctx = Context(trace, DiagnoseOptions(profiler_overhead_us=0.0))
    change = _sync_change(ctx)
    assert change is not None and len(change.gpu_dur_us) == layers  # every copy removed
    assert set(change.gpu_dur_us.values()) == {0.0}
    assert iv.length(change.removed_cpu) == pytest.approx(layers * 220.0)  # the item spans
    # the GEMMs then queue back to back (1.5 µs turnaround, H200 default): 10 x 200 µs
    expected = 100.0 * (1.0 - (10.0 + layers * 200.0 + (layers - 1) * 1.5) / t)
    found = {f.category: f for f in diagnose(trace, DiagnoseOptions(profiler_overhead_us=0.0))
             .findings}
    assert found["host_sync"].estimated_gain_pct == pytest.approx(expected, abs=2.0)


def test_pageable_copy_is_h2d_transfer(tmp_path: Path) -> None:
    b = TraceBuilder()
    nbytes = 64_000_000  # 64 MB at 10 GB/s: 6.4 ms; at H200's 64 GB/s per direction: 1 ms
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 0.0, 6410.0, 5.0, 6400.0, nbytes)
    b.kernel(GEMM, 6415.0, 6420.0, 500.0)
    b.step(0, 0.0, 6425.0)  # CPU span; the step extends to the kernel's end at 6920
    result = diagnose(b.write(tmp_path / "t.json.gz"))
    top = result.findings[0]
    assert top.category == "h2d_transfer"
    # the copy at 64 GB/s, prefetched on a side stream: the kernel no longer queues behind
    # it, and the step lasts until the copy ends (1 ms, longer than the 0.5 ms kernel)
    fixed = 5.0 + nbytes / 64e9 * 1e6
    assert top.estimated_gain_pct == pytest.approx(100.0 * (1 - fixed / 6920.0), abs=3.0)


def test_fp32_gemms_replayed_at_tf32_rate(tmp_path: Path) -> None:
    b = TraceBuilder()
    for k in range(5):
        b.kernel("ampere_sgemm_128x64_nn", k * 5.0, 10.0 + k * 1001.0, 1000.0)
    b.step(0, 0.0, 30.0)  # the CPU span; the step extends to the last kernel's end (5014)
    top = diagnose(b.write(tmp_path / "t.json.gz")).findings[0]
    assert top.category == "tensor_cores_unused"
    ratio = 66.9 / 494.7  # H100/H200 SXM datasheet fp32 vs dense tf32 TFLOP/s
    fixed = 10.0 + 5 * 1000.0 * ratio + 4 * 1.0
    assert top.evidence["tf32_gain_pct"] == pytest.approx(100.0 * (1 - fixed / 5014.0), abs=3.0)
    # bf16 autocast: the same GEMMs at the dense bf16 peak (989.4 TFLOP/s), nothing else to
    # halve (no memory-bound kernels): the better path, so the headline
    bf16 = 10.0 + 5 * 1000.0 * 66.9 / 989.4 + 4 * 1.0
    assert top.evidence["bf16_autocast_gain_pct"] == pytest.approx(
        100.0 * (1 - bf16 / 5014.0), abs=3.0)
    assert top.estimated_gain_pct == pytest.approx(top.evidence["bf16_autocast_gain_pct"], abs=0.05)


def test_healthy_trace_says_nothing_worth_fixing(tmp_path: Path) -> None:
    result = diagnose(gpu_bound(tmp_path / "t.json.gz"))
    assert all(f.estimated_gain_pct < 5.0 for f in result.findings)
    assert result.verdict.startswith("Nothing worth fixing")


def test_json_contract_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = launch_bound(tmp_path / "t.json.gz")
    assert main(["diagnose", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "aiprof.diagnosis/1" and isinstance(doc["verdict"], str)
    assert_ranked(doc["findings"])
    for f in doc["findings"]:
        assert f["category"] in CATEGORIES and f["fix"] and isinstance(f["evidence"], dict)
        assert f["severity"] in ("high", "medium", "low")


def test_cli_terminal_output_and_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = launch_bound(tmp_path / "t.json.gz")
    assert main(["diagnose", str(path)]) == 0
    out = capsys.readouterr().out
    assert "cpu_bound" in out and "verdict:" in out
    assert main(["diagnose", str(tmp_path / "missing.json")]) == 2
    assert main(["diagnose", str(path), "--min-gain", "-3"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["diagnose", str(bad)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_measured_ceilings_replace_the_datasheet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = TraceBuilder()
    for k in range(5):
        b.kernel("ampere_sgemm_128x64_nn", k * 5.0, 10.0 + k * 1001.0, 1000.0)
    b.step(0, 0.0, 30.0)
    path = b.write(tmp_path / "t.json.gz")
    ceilings = tmp_path / "ceilings.json"
    ceilings.write_text(json.dumps({
        "name": "NVIDIA H200", "memory_bytes_per_s": 4.0e12, "vector_flops_per_s": 50e12,
        "matmul_flops_per_s": {"fp32": 50e12, "tf32": 100e12},
    }))
    assert main(["diagnose", str(path), "--json", "--ceilings", str(ceilings)]) == 0
    top = json.loads(capsys.readouterr().out)["findings"][0]
    assert top["evidence"]["fp32_peak_tflops"] == 50.0
    fixed = 10.0 + 5 * 1000.0 * 0.5 + 4 * 1.0  # at half the time: 50 vs 100 TFLOP/s
    assert top["estimated_gain_pct"] == pytest.approx(100.0 * (1 - fixed / 5014.0), abs=3.0)
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert main(["diagnose", str(path), "--ceilings", str(bad)]) == 2
