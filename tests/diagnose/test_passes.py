"""Each analysis pass on hand-built traces whose answers are known by construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.support.kineto_synth import TraceBuilder, gpu_bound, launch_bound

from aiprof.analysis.allocator import allocator_calls
from aiprof.analysis.copies import copies
from aiprof.analysis.dataloader import dataloader_time
from aiprof.analysis.fusion_chains import fusion_chains
from aiprof.analysis.idle import stream_idle
from aiprof.analysis.launch import launch_overhead
from aiprof.analysis.layout import layout_conversions
from aiprof.analysis.occupancy import occupancy_pass
from aiprof.analysis.shapes import misaligned_shapes
from aiprof.analysis.sync import sync_points
from aiprof.analysis.tensor_cores import tensor_core_usage
from aiprof.trace import load_trace

EW = "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>"
GEMM_BF16 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def test_idle_of_a_launch_bound_trace_is_host_wait(tmp_path: Path) -> None:
    # GIVEN 50 kernels of 4 µs per step launched every 20 µs (3 steps)
    trace = load_trace(launch_bound(tmp_path / "t.json.gz", steps=3, kernels=50))
    result = stream_idle(trace)
    stream = result.streams[0]
    # THEN busy = 150 kernels x 4 µs, and each of the 49 gaps inside a step is host wait
    assert stream.busy_us == pytest.approx(150 * 4.0)
    gaps_inside = 3 * 49 * (20.0 - 4.0)
    gaps_between_steps = 2 * (20.0 + 1.0 - 4.0)  # step ends after the last launch's slot
    assert stream.host_wait_us == pytest.approx(gaps_inside + gaps_between_steps)
    assert stream.kernel_wait_us == 0.0


def test_idle_of_a_gpu_bound_trace_is_kernel_wait(tmp_path: Path) -> None:
    trace = load_trace(gpu_bound(tmp_path / "t.json.gz", steps=2, kernels=10))
    stream = stream_idle(trace).streams[0]
    # queued kernels 1 µs apart: 9 gaps per step of 1 µs, none waiting for the host
    assert stream.kernel_wait_us == pytest.approx(2 * 9 * 1.0)
    assert stream.host_wait_us < 25.0  # only the step boundary


def test_launch_overhead_counts_short_kernels(tmp_path: Path) -> None:
    trace = load_trace(launch_bound(tmp_path / "t.json.gz", steps=2, kernels=30, kernel_us=4.0))
    result = launch_overhead(trace)
    assert result.num_launches == 60
    assert result.launches_per_step == 30
    assert result.launch_us == pytest.approx(60 * 5.0)  # every launch call lasts 5 µs
    assert result.shorter_than_launch_pct == 100.0  # 4 µs kernels < 5 µs launches
    assert result.median_kernel_us == 4.0


def _sync_trace(path: Path) -> Path:
    b = TraceBuilder()
    b.step(0, 0.0, 1000.0)
    b.kernel(GEMM_BF16, 10.0, 20.0, 300.0)
    ext = b.cpu_op("aten::_local_scalar_dense", 30.0, 300.0)
    b.memcpy("Memcpy DtoH (Device -> Pageable)", 40.0, 285.0, 320.0, 2.0, 4)
    b.events[-2]["args"]["External id"] = ext
    b.runtime("cudaStreamSynchronize", 400.0, 50.0)
    b.kernel(GEMM_BF16, 600.0, 610.0, 300.0)
    return b.write(path)


def test_sync_points_and_idle_after(tmp_path: Path) -> None:
    trace = load_trace(_sync_trace(tmp_path / "t.json.gz"))
    result = sync_points(trace)
    assert result.kind == ["copy: Memcpy DtoH (Device -> Pageable)", "cudaStreamSynchronize"]
    assert result.site[0] == "aten::_local_scalar_dense"
    assert result.num_scalar_ops == 1
    assert result.blocked_us == pytest.approx(285.0 + 50.0)
    # after the copy's call (ends 325) the GPU was done at 322 and restarts at 610
    assert result.idle_after_us[0] == pytest.approx(610.0 - 322.0)


def test_copies_direction_bytes_bandwidth(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(0, 0.0, 2000.0)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 0.0, 1000.0, 10.0, 1000.0, 10_000_000)
    b.memcpy("Memcpy HtoD (Pinned -> Device)", 1100.0, 5.0, 1110.0, 200.0, 10_000_000)
    trace = load_trace(b.write(tmp_path / "t.json.gz"))
    groups = {(g.direction, g.host_memory): g for g in copies(trace).groups}
    pageable, pinned = groups[("HtoD", "pageable")], groups[("HtoD", "pinned")]
    assert pageable.achieved_gbps == pytest.approx(10e6 / 1000e-6 / 1e9)  # 10 GB/s
    assert pinned.achieved_gbps == pytest.approx(50.0)
    assert pageable.num_synchronous == 1 and pinned.num_synchronous == 0


def test_dataloader_time_per_step(tmp_path: Path) -> None:
    b = TraceBuilder()
    for s, load in enumerate([100.0, 300.0]):
        t = s * 1000.0
        b.step(s, t, 900.0)
        b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 1, load)
        b.kernel(GEMM_BF16, t + load + 5, t + load + 20, 100.0)
    result = dataloader_time(load_trace(b.write(tmp_path / "t.json.gz")))
    assert result.per_step_us == pytest.approx([100.0, 300.0])


def test_allocator_calls_after_the_first_step(tmp_path: Path) -> None:
    b = TraceBuilder()
    for s in range(3):
        t = s * 1000.0
        b.step(s, t, 900.0)
        b.runtime("cudaMalloc", t + 10, 40.0)
        b.runtime("cudaFree", t + 60, 30.0)
        b.kernel(GEMM_BF16, t + 100, t + 110, 100.0)
    result = allocator_calls(load_trace(b.write(tmp_path / "t.json.gz")))
    assert (result.num_mallocs, result.num_frees) == (2, 2)  # steps 1 and 2 only
    assert result.malloc_us == pytest.approx(80.0) and result.free_us == pytest.approx(60.0)


def _kernels_trace(path: Path, names: list[str], grid: int = 1024, **op: object) -> Path:
    b = TraceBuilder()
    b.step(0, 0.0, 10_000.0)
    t = 10.0
    for name in names:
        ext = b.cpu_op(str(op.get("name", "aten::mm")), t, 8.0, **op.get("args", {})) if op else 0
        b.kernel(name, t + 1, t + 20, 100.0, grid=(grid, 1, 1), external=ext)
        t += 200.0
    return b.write(path)


def test_layout_conversion_kernels(tmp_path: Path) -> None:
    names = ["void cudnn::ops::nchwToNhwcKernel<__half>", GEMM_BF16,
             "void cudnn::ops::nhwcToNchwKernel<__half>"]
    result = layout_conversions(load_trace(_kernels_trace(tmp_path / "t.json.gz", names)))
    assert len(result.rows) == 2 and result.total_us == pytest.approx(200.0)


def test_fp32_gemms_found_by_name_and_by_type(tmp_path: Path) -> None:
    names = ["ampere_sgemm_128x64_nn", GEMM_BF16, "sm80_xmma_gemm_f32f32_tf32f32_f32_nn"]
    result = tensor_core_usage(load_trace(_kernels_trace(tmp_path / "t.json.gz", names)))
    assert len(result.gemm_rows) == 3 and len(result.fp32_rows) == 1
    assert result.fp32_pct_of_gemm == pytest.approx(100.0 / 3)


def test_misaligned_linear_dims(tmp_path: Path) -> None:
    args = {"Input Dims": [[8192, 4095], [4095, 4095]], "Input type": ["c10::BFloat16"] * 2}
    path = _kernels_trace(tmp_path / "t.json.gz", [GEMM_BF16], name="aten::mm", args=args)
    result = misaligned_shapes(load_trace(path))
    assert result.num_checked_ops == 1
    op = result.ops[0]
    assert op.dims == {"M": 8192, "N": 4095, "K": 4095}
    assert set(op.misaligned) == {"N", "K"} and op.padded_dims["K"] == 4096
    assert op.padded_flops == 2 * 8192 * 4096 * 4096


def test_fusion_chain_between_gemms(tmp_path: Path) -> None:
    names = [GEMM_BF16, EW, EW, EW, EW, GEMM_BF16, EW, EW, GEMM_BF16]
    trace = load_trace(_kernels_trace(tmp_path / "t.json.gz", names))
    result = fusion_chains(trace)  # runs of 2 or more: what Inductor fuses
    assert [len(c.rows) for c in result.chains] == [4, 2]
    assert result.chain_us == pytest.approx(600.0)
    longer = fusion_chains(trace, min_length=3)
    assert len(longer.chains) == 1 and len(longer.chains[0].rows) == 4


def test_small_grids_on_132_sms(tmp_path: Path) -> None:
    path = _kernels_trace(tmp_path / "t.json.gz", [GEMM_BF16, GEMM_BF16], grid=33)
    result = occupancy_pass(load_trace(path))
    assert result.supported and result.num_sms == 132
    assert np.array_equal(result.small_grid_blocks, [33, 33])
    assert result.small_grid_us == pytest.approx(200.0)
