"""Invariants of the passes and the diagnosis on random hand-built traces (Hypothesis)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.kineto_synth import TraceBuilder
from tests.support.ranking import assert_ranked

from aiprof.analysis.idle import stream_idle
from aiprof.analysis.launch import launch_overhead
from aiprof.diagnose import diagnose
from aiprof.trace import load_trace

NAMES = ["ampere_sgemm_128x64_nn", "void at::native::vectorized_elementwise_kernel<4, Mul>",
         "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "void cudnn::ops::nchwToNhwcKernel<float>"]
KERNELS = st.lists(
    st.tuples(st.floats(5.0, 50.0), st.floats(0.5, 300.0), st.integers(0, 3),
              st.sampled_from([7, 13])),
    min_size=1, max_size=40,
)


def _trace(kernels: list[tuple[float, float, int, int]], folder: Path) -> Path:
    """One CPU thread: launches (4 µs calls) at least 5 µs apart, as a thread issues them."""
    b = TraceBuilder()
    t, stream_end = 0.0, {7: 0.0, 13: 0.0}
    for cpu_gap, dur, name, stream in kernels:
        start = max(t + 8.0, stream_end[stream] + 1.0)
        b.kernel(NAMES[name], t, start, dur, stream=stream, launch_dur=4.0)
        stream_end[stream] = start + dur
        t += cpu_gap
    b.step(0, 0.0, t)
    return b.write(folder / "t.json.gz")


@settings(max_examples=25, deadline=None)
@given(KERNELS)
def test_idle_parts_add_up_and_gains_are_percentages(kernels: list) -> None:
    with tempfile.TemporaryDirectory() as folder:
        trace = load_trace(_trace(kernels, Path(folder)))
        idle = stream_idle(trace)
        for s in idle.streams:
            assert s.busy_us + s.idle_us == pytest.approx(idle.window_us)
            parts = s.host_wait_us + s.kernel_wait_us + s.other_us
            assert parts == pytest.approx(s.idle_us, abs=1e-6)
        assert launch_overhead(trace).num_launches == len(kernels)
        result = diagnose(trace)
        assert all(0.0 <= f.estimated_gain_pct <= 100.0 for f in result.findings)
        assert_ranked(result.document()["findings"])
        assert result.replay_step_us == pytest.approx(result.step_us, rel=0.05)


SIMT = "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>"
REDUCE = "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false>"
SPLIT_K_LAYERS = st.lists(st.tuples(st.floats(0.5, 200.0), st.floats(1.0, 6.0),
                                    st.floats(0.0, 20.0)), min_size=1, max_size=20)


def _split_k_trace(layers: list[tuple[float, float, float]], folder: Path) -> Path:
    """One step of FP32 addmm ops, each a SIMT GEMM and its split-K reduce (GEMM µs, reduce
    µs, host µs between the two launch calls)."""
    b = TraceBuilder()
    fp32 = {"Input type": ["float", "float", "float"]}
    t = gpu = 0.0
    for gemm_us, reduce_us, between_us in layers:
        ext = b.cpu_op("aten::addmm", t, 14.0 + between_us, **fp32)
        gpu = max(gpu, t + 6.0) + 1.0
        b.kernel(SIMT, t + 1.0, gpu, gemm_us, launch_dur=5.0, external=ext)
        gpu += gemm_us + 1.0
        b.kernel(REDUCE, t + 6.0 + between_us, gpu, reduce_us, launch_dur=5.0, external=ext)
        gpu += reduce_us
        t += 20.0 + between_us
    b.runtime("cudaDeviceSynchronize", t, max(gpu - t, 0.0) + 2.0)
    b.step(0, 0.0, max(t, gpu) + 5.0)
    return b.write(folder / "t.json.gz")


@settings(max_examples=15, deadline=None)
@given(SPLIT_K_LAYERS)
def test_split_k_reductions_go_only_where_the_new_gemm_is_shorter(layers: list) -> None:
    """The TF32 path drops a reduction only where its GEMM at the TF32 rate lasts less than
    it, never lengthens a kernel, removes at most the host time from each dropped pair's GEMM
    launch end to its reduce launch end, and removing that time never slows the replay."""
    from aiprof.analysis import intervals as iv
    from aiprof.diagnose import DiagnoseOptions
    from aiprof.diagnose.context import Context
    from aiprof.diagnose.precision import split_k, tf32_rows, unsplit
    from aiprof.diagnose.replay import Change, replay
    from aiprof.diagnose.rules import tensor_cores_unused

    with tempfile.TemporaryDirectory() as folder:
        ctx = Context(load_trace(_split_k_trace(layers, Path(folder))),
                      DiagnoseOptions(profiler_overhead_us=0.0))
        rows = tf32_rows(ctx.trace, ctx.tensor_cores)
        factor = float(ctx.peak_flops("fp32") or 0) / float(ctx.peak_flops("tf32") or 1)
        dur = ctx.trace.gpu_ops.dur_us
        pairs, gone = split_k(ctx.trace, rows), unsplit(ctx.trace, rows, factor)
        assert len(pairs.reduce_rows) == len(layers)
        dropped = set(gone.reduce_rows.tolist())
        for g, r in zip(pairs.gemm_rows.tolist(), pairs.reduce_rows.tolist(), strict=True):
            assert (r in dropped) == (dur[g] * factor < dur[r])
        fix = tensor_cores_unused.paths(ctx)["tf32"]
        assert all(0.0 <= us <= dur[row] + 1e-9 for row, us in fix.gpu_dur_us.items())
        most = sum(5.0 + b for (g_us, r_us, b) in layers if g_us * factor < r_us)
        assert iv.length(fix.removed_cpu) <= most + 1e-6
        kernels_only = Change(gpu_dur_us=fix.gpu_dur_us)
        assert replay(ctx.timeline, fix) <= replay(ctx.timeline, kernels_only) + 1e-6
        assert 0.0 <= ctx.gain_pct(fix) <= 100.0
