"""The gain models behind issue 15's failure classes 1-3, each on a trace that shows it.

1. Launch overhead: the replay's queues (a step whose queue never drains gains nothing from
   launching faster), the profiler's cost read off the trace's nesting, a GPU that ran slower
   under the profiler.
2. Implicit syncs: the op Python called (``is_nonzero``, ``index``) named as the construct.
3. Precision paths: bf16 autocast halves the float32 memory-bound kernels, not only GEMMs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.kineto_synth import TraceBuilder, gpu_bound, launch_bound

from aiprof.diagnose import DiagnoseOptions, diagnose
from aiprof.diagnose.context import Context
from aiprof.diagnose.precision import op_base_name, tf32_rows
from aiprof.diagnose.profiler_cost import MIN_SAMPLES, estimated_overhead_us, first_child_gaps_us
from aiprof.diagnose.replay import simulate
from aiprof.trace import load_trace
from aiprof.trace.capture_timing import KEY, timing_document

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
SGEMM = "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_cublas"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
SOFTMAX = "void at::native::cunn_SoftMaxForward<4, float, float, float>"


def _profiled_looks_launch_bound(path: Path, kernels: int = 40, **meta: Any) -> tuple[Path, float]:
    """Each kernel (40 µs) launched from ``aten::linear`` -> ``aten::t`` + ``aten::addmm`` after
    60 µs of recorded CPU work: under the profiler the GPU waits 20 µs before every kernel.
    Returns the path and the step's GPU time (kernels back to back)."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start = t
        for _ in range(kernels):
            ext = b.cpu_op("aten::linear", t, 50.0)
            b.cpu_op("aten::t", t + 3.0, 8.0)
            b.cpu_op("aten::addmm", t + 15.0, 30.0)
            b.kernel(GEMM, t + 30.0, t + 40.0, 40.0, launch_dur=8.0, external=ext)
            t += 60.0
        b.step(s, start, t - start + 45.0)
        t += 46.0
    return b.write(path, **meta), kernels * 41.0


def test_queue_that_never_drains_leaves_cuda_graphs_nothing(tmp_path: Path) -> None:
    """Class 1: under the profiler the GPU waits for launches a third of the step; the
    unprofiled step (timed by the capture) is the GPU's own time, so the host was ahead:
    the replay's queues never drain and a CUDA graph gains nothing."""
    gpu_us = _profiled_looks_launch_bound(tmp_path / "probe.json.gz")[1]
    path, _ = _profiled_looks_launch_bound(
        tmp_path / "t.json.gz", **{KEY: timing_document("cuda_events", [gpu_us] * 3)})
    recorded = diagnose(path, DiagnoseOptions(profiler_overhead_us=0.0))
    as_recorded = {f.category: f.estimated_gain_pct for f in recorded.findings}
    assert as_recorded["cpu_bound"] > 20.0  # what the profiled trace alone suggests
    result = diagnose(path)
    gains = {f.category: f.estimated_gain_pct for f in result.findings}
    assert gains.get("cpu_bound", 0.0) <= 5.0
    ctx = Context(load_trace(path), DiagnoseOptions())
    replayed = ctx.base_replayed
    assert replayed.step_us / 3 == pytest.approx(gpu_us + 45.0, rel=0.05)
    assert replayed.busiest_host_wait_us < 0.05 * replayed.step_us


def test_launch_bound_queue_drains_before_every_kernel(tmp_path: Path) -> None:
    """The other side: tiny kernels launched 20 µs apart drain the queue every time."""
    ctx = Context(load_trace(launch_bound(tmp_path / "t.json.gz")),
                  DiagnoseOptions(profiler_overhead_us=0.0))
    replayed = simulate(ctx.timeline)
    assert replayed.num_drained >= 0.9 * replayed.num_ops
    assert replayed.busiest_host_wait_us > 0.5 * replayed.step_us
    busy = simulate(Context(load_trace(gpu_bound(tmp_path / "g.json.gz")),
                            DiagnoseOptions(profiler_overhead_us=0.0)).timeline)
    assert busy.num_drained <= 3  # the first kernel of each step only


def _gpu_bound_with_sync(path: Path, kernels: int = 20, kernel_us: float = 500.0) -> Path:
    """GEMMs launched 10 µs apart, then ``cudaDeviceSynchronize`` until the last one ends."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start, gpu = t, t + 12.0
        for _ in range(kernels):
            b.kernel(GEMM, t, gpu, kernel_us, launch_dur=4.0)
            gpu += kernel_us + 1.0
            t += 10.0
        b.runtime("cudaDeviceSynchronize", t, gpu - t + 2.0)
        b.step(s, start, gpu + 3.0 - start)
        t = gpu + 4.0
    return b.write(path)


def test_gpu_slower_under_the_profiler_is_scaled_to_the_unprofiled_step(tmp_path: Path) -> None:
    """A GPU-bound step that ran 20% faster unprofiled: no CPU-side cost can explain that, so
    the GPU ops are replayed 0.8x as long (not the step left host-bound at a default cost)."""
    path = _gpu_bound_with_sync(tmp_path / "t.json.gz")
    step_us = Context(load_trace(path), DiagnoseOptions()).step_us
    ctx = Context(load_trace(path), DiagnoseOptions(unprofiled_step_us=0.8 * step_us))
    assert ctx.calibration.gpu_scale == pytest.approx(0.8, abs=0.01)
    assert ctx.base_us / 3 == pytest.approx(0.8 * step_us, rel=0.01)
    assert "slower under the profiler" in ctx.calibration.note
    assert diagnose(path, DiagnoseOptions(unprofiled_step_us=0.8 * step_us)).profiler is not None


def _sync_bound(path: Path, kernels: int = 10, kernel_us: float = 500.0,
                own_us: float = 300.0) -> Path:
    """Each GEMM waited for by a ``cudaDeviceSynchronize`` that returns ``own_us`` after it
    ends: the GPU idles while the host finishes each call (busy 62% of the step)."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start = t
        for _ in range(kernels):
            b.kernel(GEMM, t, t + 12.0, kernel_us, launch_dur=4.0)
            b.runtime("cudaDeviceSynchronize", t + 5.0, 7.0 + kernel_us + own_us)
            t += 12.0 + kernel_us + own_us
        b.step(s, start, t - start)
        t += 1.0
    return b.write(path)


def test_a_step_the_gpu_does_not_fill_keeps_its_gpu_when_nothing_explains_the_unprofiled_step(
        tmp_path: Path) -> None:
    """The other side of the GPU's slowdown: where the replay's step is the host's calls
    between the syncs, not the GPU's work, a GPU slower under the profiler cannot explain an
    unprofiled step 30% shorter either (the suite's UNet with empty_cache, 2026-12-03: its
    capture's unprofiled steps 27.8 ms, its timed base 32.1, the replay's floor of GPU work
    and serialized cudaFree calls 31 ms; replayed at 0.78x its GPU, its layout fix fell from
    17.7% to 5.6% against 29.9% measured). The ops keep their durations and the note says
    the unprofiled step is out of the model's reach."""
    path = _sync_bound(tmp_path / "t.json.gz")
    step_us = Context(load_trace(path), DiagnoseOptions()).step_us
    ctx = Context(load_trace(path), DiagnoseOptions(unprofiled_step_us=0.7 * step_us))
    assert ctx.calibration.gpu_scale == 1.0
    assert "busy 6" in ctx.calibration.note and "kept" in ctx.calibration.note
    assert ctx.base_us / 3 > 0.9 * step_us


def test_profiler_cost_from_nesting_on_a_real_profiler_trace(tmp_path: Path) -> None:
    """A real torch.profiler CPU trace: parent ops' first children start a few µs in, and the
    estimate is that quartile times the factor (µs per event, positive, not absurd)."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(20)])
    x = torch.randn(4, 16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            model(x).sum().backward()
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    trace = load_trace(path)
    gaps = first_child_gaps_us(trace)
    assert len(gaps) >= MIN_SAMPLES and (gaps >= 0).all()
    estimate = estimated_overhead_us(trace)
    assert estimate is not None and 0.05 < estimate < 100.0


def test_without_nesting_the_default_cost_stays(tmp_path: Path) -> None:
    ctx = Context(load_trace(gpu_bound(tmp_path / "t.json.gz")), DiagnoseOptions())
    assert ctx.calibration.source == "default"


def _sync_trace(path: Path, outer: str, inner: str) -> Path:
    """A GEMM, then ``outer`` -> ``inner`` copying a count to the host and synchronizing."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start = t
        b.kernel(GEMM, t, t + 10, 300.0)
        b.cpu_op(outer, t + 8, 330.0)
        b.cpu_op(inner, t + 9, 328.0)
        b.memcpy("Memcpy DtoH (Device -> Pinned)", t + 10, 3.0, t + 312, 2.0, 8)
        b.runtime("cudaStreamSynchronize", t + 14, 305.0)
        b.kernel(GEMM, t + 345, t + 360, 300.0)
        t += 700.0
        b.step(s, start, 700.0)
    return b.write(path)


@pytest.mark.parametrize(("outer", "inner", "construct"), [
    ("aten::index", "aten::nonzero", "boolean-mask indexing x[mask]"),
    ("aten::is_nonzero", "aten::_local_scalar_dense", "Python `if`/`bool()` on a tensor"),
])
def test_implicit_sync_named_by_the_op_python_called(tmp_path: Path, outer: str, inner: str,
                                                     construct: str) -> None:
    """Class 2: the sync sits in ``nonzero``/``_local_scalar_dense``; the finding names the
    construct (mask indexing, ``if`` on a tensor) and replays the GPU not draining."""
    result = diagnose(_sync_trace(tmp_path / "t.json.gz", outer, inner),
                      DiagnoseOptions(profiler_overhead_us=0.0))
    found = {f.category: f for f in result.findings}
    sync = found["host_sync"]
    callers = sync.evidence["callers"]
    assert isinstance(callers, list) and callers[0]["op"] == outer
    assert callers[0]["construct"] == construct
    assert sync.estimated_gain_pct > 5.0  # the second GEMM no longer waits for the round trip
    # the replay's CPU waits for the first GEMM to drain (about 300 µs a step)
    assert 0.2 < sync.evidence["replayed_drain_wait_ms_per_step"] < 0.32


def _fp32_block(path: Path, typed: bool = True) -> Path:
    """Per step: an FP32 GEMM (1 ms), an FP32 add (400 µs) and an FP32 softmax (400 µs)."""
    b = TraceBuilder()
    types = {"Input type": ["float", "float"]} if typed else {}
    b.synced_steps([(SGEMM, "aten::mm", types, 1000.0), (ADD, "aten::add", types, 400.0),
                    (SOFTMAX, "aten::_softmax", types, 400.0)])
    return b.write(path)


def test_bf16_autocast_halves_the_float32_memory_bound_kernels(tmp_path: Path) -> None:
    """Class 3: TF32 changes the GEMM only; bf16 autocast also halves the add's bytes and
    takes three quarters of the softmax's (autocast keeps softmax in float32)."""
    ctx_path = _fp32_block(tmp_path / "t.json.gz")
    result = diagnose(ctx_path, DiagnoseOptions(profiler_overhead_us=0.0))
    tc = {f.category: f for f in result.findings}["tensor_cores_unused"]
    step = 1000.0 + 400.0 + 400.0
    tf32 = 100.0 * (1000.0 - 1000.0 * 66.9 / 494.7) / step
    bf16 = 100.0 * (1000.0 - 1000.0 * 66.9 / 989.4 + 400.0 * 0.5 + 400.0 * 0.25) / step
    assert tc.evidence["tf32_gain_pct"] == pytest.approx(tf32, abs=2.0)
    assert tc.evidence["bf16_autocast_gain_pct"] == pytest.approx(bf16, abs=2.0)
    assert tc.estimated_gain_pct == pytest.approx(bf16, abs=2.0)
    assert "autocast" in tc.fix.split(":")[0]
    # without record_shapes nothing places the memory-bound kernels: GEMMs only
    untyped = diagnose(_fp32_block(tmp_path / "u.json.gz", typed=False),
                       DiagnoseOptions(profiler_overhead_us=0.0))
    plain = {f.category: f for f in untyped.findings}["tensor_cores_unused"]
    assert plain.evidence["fp32_memory_bound_ms_per_step"] is None
    gemm_only = 100.0 * (1000.0 - 1000.0 * 66.9 / 989.4) / step
    assert plain.evidence["bf16_autocast_gain_pct"] == pytest.approx(gemm_only, abs=2.0)


FMHA = "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float>)"
DEPTHWISE_FP32 = "void at::native::conv_depthwise2d_forward_kernel<3, float, int>"
CONV_SIMT = "void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false>"
CONV_TF32 = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16"


def _tf32_mix(path: Path, cudnn_tf32: bool) -> Path:
    """Per step, each 500 µs on float32 inputs: a cuBLAS SGEMM, a fused-attention kernel,
    PyTorch's depthwise convolution, a cuDNN FP32 convolution and (``cudnn_tf32``) a cuDNN
    convolution that ran TF32 (the cuDNN flag on)."""
    fp32 = {"Input type": ["float", "float"]}
    ops = [(SGEMM, "aten::mm", fp32, 500.0),
           (FMHA, "aten::_efficient_attention_forward", fp32, 500.0),
           (DEPTHWISE_FP32, "aten::_conv_depthwise2d", fp32, 500.0),
           (CONV_SIMT, "aten::cudnn_convolution", fp32, 500.0)]
    if cudnn_tf32:
        ops.append((CONV_TF32, "aten::cudnn_convolution", fp32, 500.0))
    b = TraceBuilder()
    b.synced_steps(ops)
    return b.write(path)


@pytest.mark.parametrize("cudnn_tf32", [False, True])
def test_tf32_reaches_only_the_kernels_its_flags_govern(tmp_path: Path, cudnn_tf32: bool) -> None:
    """Class 3: the TF32 flags move cuBLAS matmuls and cuDNN convolutions, not fused attention
    (its kernel follows the dtype) nor PyTorch's depthwise kernels; and not cuDNN's FP32 kernels
    where cuDNN already ran one on tensor cores (its flag was on: the FP32 one is its choice)."""
    ctx = Context(load_trace(_tf32_mix(tmp_path / "t.json.gz", cudnn_tf32)), DiagnoseOptions())
    names = {ctx.trace.name(int(ctx.trace.gpu_ops.name_id[r]))
             for r in tf32_rows(ctx.trace, ctx.tensor_cores)}
    assert names == ({SGEMM} if cudnn_tf32 else {SGEMM, CONV_SIMT})
    assert {FMHA, DEPTHWISE_FP32} <= {ctx.trace.name(int(ctx.trace.gpu_ops.name_id[r]))
                                 for r in ctx.tensor_cores.fp32_rows}
    found = {f.category: f for f in diagnose(
        tmp_path / "t.json.gz", DiagnoseOptions(profiler_overhead_us=0.0)).findings}
    evidence = found["tensor_cores_unused"].evidence
    moved_ms = 0.5 * len(names)
    assert evidence["tf32_gemm_ms_per_step"] == pytest.approx(moved_ms, abs=0.01)
    # bf16 autocast reaches all of them; the depthwise kernel at half its bytes
    assert evidence["bf16_autocast_gain_pct"] > evidence["tf32_gain_pct"]


def test_backward_ops_count_with_their_forward() -> None:
    assert op_base_name("aten::_softmax_backward_data") == "softmax"
    assert op_base_name("aten::native_layer_norm_backward") == "native_layer_norm"
    assert op_base_name("aten::add_") == "add_"


def test_nesting_factor_is_the_median_ratio_on_the_fitted_recordings() -> None:
    """``NESTING_TO_EVENT_COST``: the median of fitted cost / nesting quartile over every H200
    recording whose cost could be fitted (2026-12-01), and the estimate is nearer the fitted
    cost than the single default on them (median error factor 1.23 against 1.57)."""
    import json
    import math
    import statistics

    from aiprof.diagnose.calibration import DEFAULT_OVERHEAD_US
    from aiprof.diagnose.profiler_cost import NESTING_TO_EVENT_COST

    suite = Path(__file__).parents[1] / "data" / "diagnose"
    folders = [suite, suite / "item_sync_captured",
               *sorted((suite / "more_suites").glob("*"))]
    ratios, estimate_err, default_err = [], [], []
    for folder in folders:
        for case in json.loads((folder / "labels.json").read_text())["cases"]:
            path = folder / str(case.get("trace", ""))
            if "error" in case or not path.is_file():
                continue
            trace = load_trace(path)
            cal = Context(trace, DiagnoseOptions()).calibration
            if cal.source != "fitted" or cal.overhead_us <= 0.05:
                continue
            estimate = estimated_overhead_us(trace)
            assert estimate is not None
            ratios.append(cal.overhead_us * NESTING_TO_EVENT_COST / estimate)
            estimate_err.append(abs(math.log(estimate / cal.overhead_us)))
            default_err.append(abs(math.log(DEFAULT_OVERHEAD_US / cal.overhead_us)))
    assert len(ratios) >= 20
    assert NESTING_TO_EVENT_COST == pytest.approx(statistics.median(ratios), abs=0.05)
    assert statistics.median(estimate_err) < 0.75 * statistics.median(default_err)


def test_hand_written_attention_found_in_a_real_profiler_trace(tmp_path: Path) -> None:
    """The scores matmul and the values matmul of a hand-written attention, recorded by
    torch.profiler with record_shapes on the CPU: one region per layer, shapes read off."""
    torch = pytest.importorskip("torch")
    from aiprof.diagnose.attention import find_attention

    def attend(q: Any, k: Any, v: Any) -> Any:
        scores = (q @ k.transpose(-2, -1)) / 8.0
        return torch.nn.functional.dropout(scores.softmax(-1), 0.1) @ v

    q, k, v = (torch.randn(2, 4, 128, 32, requires_grad=True) for _ in range(3))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        for _ in range(2):
            attend(q, k, v).sum().backward()
    path = tmp_path / "attention.json"
    prof.export_chrome_trace(str(path))
    found = find_attention(load_trace(path), 989e12, 4.8e12)
    assert len(found) == 2
    assert {(a.heads_x_batch, a.seq_q, a.seq_k, a.head_dim, a.half) for a in found} == {
        (8, 128, 128, 32, False)}


def test_fused_attention_replaces_the_scores_round_trip(tmp_path: Path) -> None:
    """Class 3: bf16 scores matmul (300 µs), softmax (200 µs), values matmul (300 µs) at
    N=64, S=512, D=64: a fused kernel's roofline is 4.3 µs (4 N S^2 D FLOPs at 989 TFLOP/s),
    so the replay keeps about that of the 800 µs."""
    bmm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_batched"
    types = ["c10::BFloat16", "c10::BFloat16"]
    b = TraceBuilder()
    b.synced_steps([(name, op, {"Input Dims": dims, "Input type": types}, dur)
                    for name, op, dims, dur in (
                        (bmm, "aten::matmul", [[8, 8, 512, 64], [8, 8, 64, 512]], 300.0),
                        (SOFTMAX, "aten::softmax", [[8, 8, 512, 512], [], []], 200.0),
                        (bmm, "aten::matmul", [[8, 8, 512, 512], [8, 8, 512, 64]], 300.0))])
    result = diagnose(b.write(tmp_path / "t.json.gz"), DiagnoseOptions(profiler_overhead_us=0.0))
    unfused = {f.category: f for f in result.findings}["unfused_elementwise"]
    assert unfused.evidence["attention_blocks"] == 3
    fused = 4.0 * 64 * 512 * 512 * 64 / 989.4e12 * 1e6
    assert unfused.change is not None
    new = unfused.change.gpu_dur_us
    assert sorted(d for d in new.values() if d > 0) == pytest.approx([fused] * 3, rel=0.01)
    assert sum(1 for d in new.values() if d == 0.0) == 2 * 3  # the other two kernels a step
    # the step: 800 µs of GPU time become ~4 µs; the compiled call's host cost comes before
    step = 3 * 1.0 + 800.0 + 9.0 + 2.0
    assert 50.0 < unfused.estimated_gain_pct < 100.0 * (1.0 - fused / step)


BN_NCHW = "void cudnn::bn_fw_tr_1C11_kernel_NCHW<__nv_bfloat16, float>"
DEPTHWISE = ("void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<3, "
             "c10::BFloat16, int>")


def _conversion_bn_depthwise(path: Path, depthwise_us: float) -> Path:
    """Three steps of a layout conversion (50 µs), a bf16 NCHW training BatchNorm
    (64 x 128 x 56 x 56, 500 µs) and an ATen depthwise convolution (``depthwise_us``)."""
    b = TraceBuilder()
    dims = [[64, 128, 56, 56], [128], [128]]
    nchw = {"Input Dims": dims, "Input type": ["c10::BFloat16", "float", "float"],
            "Input Strides": [[401408, 3136, 56, 1], [1], [1]]}
    kernels = [("void cudnn::ops::nchwToNhwcKernel<__nv_bfloat16>", "aten::conv2d", {}, 50.0),
               (BN_NCHW, "aten::cudnn_batch_norm", nchw, 500.0),
               (DEPTHWISE, "aten::_conv_depthwise2d", {}, depthwise_us)]
    b.synced_steps(kernels)
    return b.write(path)


def test_channels_last_also_gives_batch_norm_its_nhwc_passes(tmp_path: Path) -> None:
    """Class 3: a bf16 NCHW BatchNorm (500 µs) next to a layout conversion (50 µs) and a short
    depthwise convolution (20 µs): channels_last removes the conversion and the BatchNorm takes
    the time of PyTorch's NHWC kernels, the statistics reading the input and the transform
    reading it again and writing the output (3 x 51.4 MB at 41% of 4.8 TB/s: 78.4 µs), plus
    4.9 µs for each of its 3 kernels: 93.1 µs, not the roofline's 32.1 µs."""
    from aiprof.diagnose.context import Context as Ctx

    path = _conversion_bn_depthwise(tmp_path / "t.json.gz", depthwise_us=20.0)
    ctx = Ctx(load_trace(path), DiagnoseOptions(profiler_overhead_us=0.0))
    bandwidth = ctx.memory_bytes_per_s()
    assert bandwidth
    nhwc_us = 3 * 64 * 128 * 56 * 56 * 2 / (0.41 * bandwidth) * 1e6 + 3 * 4.9
    assert nhwc_us == pytest.approx(93.1, abs=0.1)
    result = diagnose(path, DiagnoseOptions(profiler_overhead_us=0.0))
    layout = {f.category: f for f in result.findings}["layout_conversion"]
    assert layout.evidence["nhwc_batch_norm_ms_per_step"] == pytest.approx(
        nhwc_us / 1000.0, abs=0.002)
    assert layout.evidence["aten_depthwise_conv_ms_per_step"] == pytest.approx(0.02)
    step = 9.0 + 3 * 1.0 + 570.0 + 2.0
    expected = 100.0 * (1.0 - (step - 550.0 + nhwc_us) / step)
    assert layout.estimated_gain_pct == pytest.approx(expected, abs=3.0)
    assert not any("layout_conversion" in n for n in result.notes)


def test_channels_last_not_estimated_where_depthwise_convs_outweigh_it(tmp_path: Path) -> None:
    """The same step with 900 µs of ATen depthwise convolution: channels_last would send it to
    cuDNN, whose time the NCHW trace does not show, and it outweighs the ~0.52 ms the fix would
    save; no layout_conversion finding, a note that says why instead."""
    path = _conversion_bn_depthwise(tmp_path / "t.json.gz", depthwise_us=900.0)
    result = diagnose(path, DiagnoseOptions(profiler_overhead_us=0.0))
    assert "layout_conversion" not in {f.category for f in result.findings}
    note = next(n for n in result.notes if n.startswith("layout_conversion not estimated"))
    assert "0.90 ms per step of depthwise convolutions" in note


def test_low_occupancy_leaves_nchw_batch_norm_to_the_layout(tmp_path: Path) -> None:
    """An NCHW BatchNorm launches one block per channel (128 < 132 SMs) whatever the batch, so
    a larger batch or split-K cannot fill the GPU: its fix is channels_last, which
    layout_conversion estimates. A small-grid GEMM (16 blocks) stays low_occupancy's; the same
    BatchNorm on a channels_last tensor would too."""
    from aiprof.diagnose.rules.low_occupancy import small_grids

    nchw = {"Input Dims": [[64, 128, 56, 56], [128], [128]],
            "Input type": ["c10::BFloat16", "float", "float"],
            "Input Strides": [[401408, 3136, 56, 1], [1], [1]]}
    nhwc = {**nchw, "Input Strides": [[401408, 1, 7168, 128], [1], [1]]}
    b = TraceBuilder()
    t = gpu = 0.0
    for s in range(3):
        start = t
        for kernel, op, args, grid in ((BN_NCHW, "aten::cudnn_batch_norm", nchw, 128),
                                       (GEMM, "aten::mm", {}, 16),
                                       (BN_NCHW, "aten::cudnn_batch_norm", nhwc, 128)):
            ext = b.cpu_op(op, t, 6.0, **args)
            gpu = max(gpu, t + 9.0)
            b.kernel(kernel, t + 1.0, gpu, 300.0, grid=(grid, 1, 1), external=ext)
            gpu += 301.0
            t += 8.0
        b.runtime("cudaDeviceSynchronize", t, gpu - t + 2.0)
        b.step(s, start, gpu - start + 5.0)
        t = gpu + 6.0
    ctx = Context(load_trace(b.write(tmp_path / "t.json.gz")), DiagnoseOptions())
    rows, blocks = small_grids(ctx)
    names = sorted((ctx.trace.name(int(ctx.trace.gpu_ops.name_id[r])), int(n))
                   for r, n in zip(rows, blocks, strict=True))
    assert names == sorted([(GEMM, 16)] * 3 + [(BN_NCHW, 128)] * 3)


SIMT = "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>"
REDUCE = "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false>"


def _split_k_layers(path: Path, layers: int, long_us: float) -> Path:
    """Launch-bound steps of ``layers`` FP32 ``aten::addmm`` ops, each a SIMT GEMM (5 µs)
    and cuBLASLt's split-K reduce (1.8 µs) launched 3 µs after the GEMM's 6 µs launch call
    returns, 40 µs of host work per op; then one addmm whose GEMM lasts ``long_us`` (also
    split)."""
    b = TraceBuilder()
    fp32 = {"Input type": ["float", "float", "float"]}
    t = 0.0
    for s in range(3):
        start = t
        for i in range(layers + 1):
            gemm_us = long_us if i == layers else 5.0
            ext = b.cpu_op("aten::addmm", t + 20.0, 20.0, **fp32)
            b.kernel(SIMT, t + 21.0, t + 30.0, gemm_us, launch_dur=6.0, external=ext)
            b.kernel(REDUCE, t + 30.0, t + 31.0 + gemm_us, 1.8, launch_dur=6.0, external=ext)
            t += 40.0 + (gemm_us if i == layers else 0.0)
        b.runtime("cudaDeviceSynchronize", t, 5.0)
        b.step(s, start, t + 6.0 - start)
        t += 10.0
    return b.write(path)


def test_a_gemm_the_new_path_runs_shorter_than_its_reduce_runs_unsplit(tmp_path: Path) -> None:
    """Class 3 on a launch-bound step: the TF32 (and bf16) path drops the split-K reduce of
    each FP32 GEMM whose new time is below the reduce's, with its launch (from the end of the
    GEMM's launch call to the end of the reduce's: 9 µs each), and keeps the reduce of the
    long GEMM at its own duration (FP32 partials, no math mode changes their bytes)."""
    from aiprof.diagnose.precision import reduce_launch_spans, split_k, unsplit
    from aiprof.diagnose.rules import tensor_cores_unused

    ctx = Context(load_trace(_split_k_layers(tmp_path / "t.json.gz", 10, 400.0)),
                  DiagnoseOptions(profiler_overhead_us=0.0))
    rows = tf32_rows(ctx.trace, ctx.tensor_cores)
    factor = 66.9 / 494.7  # the H200's dense FP32 / TF32 peaks (datasheet)
    assert len(split_k(ctx.trace, rows).reduce_rows) == 3 * 11
    gone = unsplit(ctx.trace, rows, factor)
    assert len(gone.reduce_rows) == 3 * 10
    assert {float(d) for d in ctx.trace.gpu_ops.dur_us[gone.gemm_rows]} == {5.0}
    spans = reduce_launch_spans(ctx.trace, rows, factor)
    assert len(spans[0]) == 30 and set((spans[1] - spans[0]).round(6).tolist()) == {9.0}
    fix = tensor_cores_unused.paths(ctx)["tf32"]
    dur = ctx.trace.gpu_ops.dur_us
    kept = [r for r in split_k(ctx.trace, rows).reduce_rows.tolist()
            if r not in set(gone.reduce_rows.tolist())]
    assert all(fix.gpu_dur_us[r] == dur[r] for r in kept)
    assert all(fix.gpu_dur_us[r] == 0.0 for r in gone.reduce_rows.tolist())
    # the step is the host's: the GEMMs' GPU time gains nothing, the launches gone do
    saved_us = ctx.base_us - ctx.base_us * (1.0 - ctx.gain_pct(fix) / 100.0)
    assert saved_us == pytest.approx(3 * 10 * 9.0, rel=0.15)


FIX_TWINS = Path(__file__).parents[1] / "data" / "diagnose" / "fix_twins"


@pytest.mark.parametrize(("workload", "unsplit_at_least", "unsplit_at_most"),
                         [("mlp_deep_b32_infer", 48, 48), ("vit_small_fp32_train", 1, 6)])
def test_the_split_k_reduces_tf32_dropped_on_the_h200(workload: str, unsplit_at_least: int,
                                                       unsplit_at_most: int) -> None:
    """The fix twins (H200, 2026-12-01): with TF32 the 48-layer MLP's 48 split-K reduces per
    step went (every GEMM 4.7-5.1 µs FP32, 0.6 µs at the TF32 rate, against a 1.8 µs reduce);
    ViT-S's weight-gradient GEMMs (77 µs FP32, K = 12,608) kept 31 of their 37 (6 of one shape
    went): the model keeps 36, whose GEMMs outlast their reduce on the TF32 path too."""
    from aiprof.diagnose.precision import split_k, unsplit

    base = Context(load_trace(FIX_TWINS / f"{workload}.base.trace.json.gz"), DiagnoseOptions())
    fixed = load_trace(FIX_TWINS / f"{workload}.tf32.trace.json.gz")
    rows = tf32_rows(base.trace, base.tensor_cores)
    factor = float(base.peak_flops("fp32") or 0) / float(base.peak_flops("tf32") or 1)
    pairs, gone = split_k(base.trace, rows), unsplit(base.trace, rows, factor)
    assert unsplit_at_least <= len(gone.reduce_rows) <= unsplit_at_most
    reduces = sum("splitKreduce" in fixed.name(int(i)) for i in fixed.gpu_ops.name_id)
    assert reduces <= len(pairs.reduce_rows) - len(gone.reduce_rows)


def test_tf32_on_the_launch_bound_mlp_saves_what_its_twin_measured() -> None:
    """The 48-layer MLP's TF32 gain is its 48 split-K reduce launches per step: on the fix
    twin's base trace the replay saves 0.30 ms per step, inside the twin's three paired rounds
    (0.21-0.43 ms, 8.6%; H200, 2026-12-01), though the GEMMs' GPU time moves nothing."""
    pair = next(p for p in json.loads((FIX_TWINS / "fix_twins.json").read_text())["pairs"]
                if p["workload"] == "mlp_deep_b32_infer")
    rounds = pair["rounds_ms"]
    saved_ms = [b - f for b, f in zip(rounds["base"], rounds["tf32"], strict=True)]
    result = diagnose(FIX_TWINS / "mlp_deep_b32_infer.base.trace.json.gz")
    tc = {f.category: f for f in result.findings}["tensor_cores_unused"]
    assert min(saved_ms) <= tc.estimated_gain_ms_per_step <= max(saved_ms)
    assert tc.evidence["split_k_reduces_gone_per_step"] == 48.0
    assert 0.3 < tc.evidence["split_k_launch_ms_per_step"] < 0.6  # as recorded, profiler's cost in
