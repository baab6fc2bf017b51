"""The gain models of issue 15's second pass: each mechanism on a synthetic trace and on the
H200 counterfactual recordings it was written for."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.support.kineto_synth import TraceBuilder, cpu_bound_with_ops

from aiprof.analysis import intervals as iv
from aiprof.diagnose import DiagnoseOptions, diagnose
from aiprof.diagnose.context import Context
from aiprof.diagnose.replay import Change, kept_starts, replay
from aiprof.diagnose.rules import h2d_transfer, misaligned_shapes, unfused_elementwise
from aiprof.record.targets import load_traces

SUITE = Path(__file__).parents[1] / "data" / "diagnose" / "counterfactual"


def _context(path: Path, **options: float) -> Context:
    return Context(load_traces(path)[0], DiagnoseOptions(**options))  # type: ignore[arg-type]


def test_an_event_nested_in_removed_time_keeps_no_profiler_cost_of_its_own() -> None:
    starts = np.array([0.0, 10.0, 12.0, 20.0, 30.0])
    removed = iv.union(np.array([10.0]), np.array([25.0]))
    # 10.0 opens the removed span (its enter callback ran before it): kept; 12 and 20 nested
    assert kept_starts(starts, removed).tolist() == [0.0, 10.0, 30.0]
    assert kept_starts(starts, iv.EMPTY) is starts


def test_removing_cpu_time_never_saves_more_than_that_time(tmp_path: Path) -> None:
    path, _ = cpu_bound_with_ops(tmp_path / "t.json.gz", ops_per_launch=4, op_gap_us=10.0)
    ctx = _context(path, profiler_overhead_us=2.0)
    tl = ctx.timeline
    # the first launch's four ops (0..32 µs): removed, they save at most their 32 µs
    span = iv.union(np.array([tl.start_us]), np.array([tl.start_us + 32.0]))
    saved = replay(tl) - replay(tl, Change(removed_cpu=span))
    assert 0.0 < saved <= 32.0 + 1e-6


def _pageable_copy_then_compute(path: Path, copy_us: float, compute_us: float) -> Path:
    """Each step copies 6.4 MB from pageable memory (``copy_us`` as recorded, 100 µs at the
    H200's pinned 64 GB/s), then runs ``compute_us`` of kernels that were queued behind it."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start = t
        b.memcpy("Memcpy HtoD (Pageable -> Device)", t, copy_us + 5.0, t + 2.0, copy_us,
                 6_400_000)
        t += copy_us + 6.0
        gpu = t + 3.0
        for _ in range(10):
            b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", t, gpu,
                     compute_us / 10, launch_dur=4.0)
            gpu += compute_us / 10 + 1.0
            t += 5.0
        b.step(s, start, gpu - start)
        t = gpu + 1.0
    return b.write(path)


def test_a_prefetched_copy_leaves_the_compute_stream_and_the_step_outlasts_it(
        tmp_path: Path) -> None:
    path = _pageable_copy_then_compute(tmp_path / "h2d.json.gz", 1000.0, 2000.0)
    ctx = _context(path, profiler_overhead_us=0.0)
    fix = h2d_transfer.change(ctx)
    assert fix is not None and fix.side_stream_rows
    steps = len(ctx.trace.steps)
    after_us = replay(ctx.timeline, fix) / steps
    # made asynchronous on its own stream: the step is the compute (~2010 µs of kernels),
    # not the 100 µs pinned copy in front of it as well
    assert after_us == pytest.approx(2000.0, rel=0.03)
    without_side = Change(gpu_dur_us=fix.gpu_dur_us, unblocked=fix.unblocked)
    assert replay(ctx.timeline, without_side) / steps > after_us + 90.0
    # a copy longer than the compute: the step lasts at least the pinned copy
    long_copy = _pageable_copy_then_compute(tmp_path / "long.json.gz", 30_000.0, 200.0)
    ctx = _context(long_copy, profiler_overhead_us=0.0)
    fix = h2d_transfer.change(ctx)
    assert fix is not None
    pinned_us = 6_400_000 / 64e9 * 1e6
    assert replay(ctx.timeline, fix) / len(ctx.trace.steps) >= pinned_us


needs_suite = pytest.mark.skipif(not (SUITE / "unet_bn_nchw_empty_cache_train.aiprof").exists(),
                                 reason="counterfactual suite not committed")


@needs_suite
def test_compile_runs_nchw_batch_norm_at_its_roofline_on_the_bn_unet() -> None:
    ctx = _context(SUITE / "unet_bn_nchw_empty_cache_train.aiprof")
    fix = unfused_elementwise.change(ctx)
    assert fix is not None
    gpu = ctx.trace.gpu_ops
    names = {r: ctx.trace.name(int(gpu.name_id[r])) for r in fix.gpu_dur_us}
    bn = [r for r, n in names.items() if "batch_norm_backward_kernel" in n]
    assert bn and all(0.0 < fix.gpu_dur_us[r] < gpu.dur_us[r] for r in bn)
    found = {f.category: f.estimated_gain_pct for f in diagnose(ctx.trace).findings}
    assert found["unfused_elementwise"] > 31.9  # measured 45.5 (-30%: 31.9)


@needs_suite
def test_padding_copies_of_misaligned_convolutions_go_with_the_padding() -> None:
    ctx = _context(SUITE / "conv_misaligned_bf16_infer.aiprof")
    ops = [o.op_row for o in ctx.shapes.ops]
    rows = misaligned_shapes.padding_rows(ctx, ops)
    names = {ctx.trace.name(int(ctx.trace.gpu_ops.name_id[r])) for r in rows}
    assert rows.size and all("AddPadding" in n or n.startswith("Memset") for n in names)
    fix = misaligned_shapes.change(ctx)
    assert fix is not None and all(fix.gpu_dur_us[int(r)] == 0.0 for r in rows)
    # an aligned GEMM net (RoBERTa's misaligned vocabulary has no cuDNN padding copy)
    roberta = _context(SUITE / "roberta_eager_bf16_infer.aiprof")
    assert misaligned_shapes.padding_rows(roberta, [o.op_row for o in roberta.shapes.ops]).size == 0


def _misaligned_and_aligned_gemm(path: Path) -> Path:
    """Each step: a bf16 ``aten::mm`` 8192 x 4095 x 4095 (274.7 GFLOP, 2000 µs: 137 TFLOP/s),
    then an aligned one 8192 x 4096 x 4096 (274.9 GFLOP, 500 µs: 550 TFLOP/s)."""
    b = TraceBuilder()
    gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
    b.synced_steps([(gemm, "aten::mm", {"Input Dims": [[8192, n], [n, n]],
                                        "Input type": ["c10::BFloat16"] * 2}, dur)
                    for n, dur in ((4095, 2000.0), (4096, 500.0))])
    return b.write(path)


def test_a_padded_gemm_runs_at_the_rate_the_aligned_gemms_of_the_trace_reach(
        tmp_path: Path) -> None:
    """Padding moves the misaligned GEMM to the kernels its aligned twin ran (550 TFLOP/s in
    this trace), not to the datasheet's 989 TFLOP/s: 2000 µs -> 500 µs, not -> 278 µs."""
    ctx = _context(_misaligned_and_aligned_gemm(tmp_path / "t.json.gz"), profiler_overhead_us=0.0)
    rate = ctx.shapes.aligned_flops_per_s["bf16"]
    assert rate == pytest.approx(2 * 8192 * 4096 * 4096 / 500e-6)
    assert misaligned_shapes.padded_rate(ctx, "bf16") == pytest.approx(rate)
    fix = misaligned_shapes.change(ctx)
    assert fix is not None
    new = sorted(set(round(v, 1) for v in fix.gpu_dur_us.values()))
    assert new == [pytest.approx(500.0, abs=0.5)]
    step = 9.0 + 2 * 1.0 + 2500.0 + 2.0
    finding = next(f for f in diagnose(ctx.trace, DiagnoseOptions(profiler_overhead_us=0.0))
                   .findings if f.category == "misaligned_shapes")
    assert finding.estimated_gain_pct == pytest.approx(100.0 * 1500.0 / step, abs=2.0)


@needs_suite
def test_the_lm_head_padded_runs_at_the_aligned_gemms_rate_of_its_trace() -> None:
    """GPT-2's 50257-wide LM head runs cuBLAS's ``align1`` fallback kernels at 92-144 TFLOP/s;
    the trace's aligned bf16 GEMMs reach about 610 TFLOP/s, and that is the padded rate."""
    ctx = _context(SUITE / "gpt2_vocab_bf16_train.aiprof")
    rate = ctx.shapes.aligned_flops_per_s["bf16"]
    assert 4e14 < rate < 8e14
    peak = ctx.peak_flops("bf16")
    assert peak and rate < peak
    lm_head = [o for o in ctx.shapes.ops if 50257 in o.dims.values()]
    assert len(lm_head) >= 3
    assert all(o.padded_flops / (o.kernel_us * 1e-6) < rate / 3 for o in lm_head)


def _sync_then_host_work(path: Path, host_us: float) -> Path:
    """Per step: five 100 µs kernels launched back to back, a ``cudaStreamSynchronize`` that
    waits for them to drain, then ``host_us`` of Python before the next step's launches."""
    b = TraceBuilder()
    t = 0.0
    for s in range(4):
        start, gpu = t, t + 7.0
        for _ in range(5):
            b.kernel(GEMM_BF16, t, gpu, 100.0, launch_dur=5.0)
            gpu += 100.0 + 1.0
            t += 5.0
        b.runtime("cudaStreamSynchronize", t, gpu - t + 2.0)
        t = gpu + 2.0 + host_us
        b.step(s, start, t - start)
    return b.write(path)


GEMM_BF16 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


@pytest.mark.parametrize("host_us", [200.0, 600.0])
def test_a_sync_costs_the_overlap_it_loses_not_the_whole_wait(tmp_path: Path,
                                                              host_us: float) -> None:
    """The host waits ~480 µs a step for the queue to drain, then the GPU idles while it works
    (``host_us``): what the sync costs is that idle, as far as the host's own work (launches
    and Python, ``25 + host_us``) does not take longer than the GPU's 505 µs."""
    path = _sync_then_host_work(tmp_path / "t.json.gz", host_us)
    result = diagnose(path, DiagnoseOptions(profiler_overhead_us=0.0))
    sync = {f.category: f for f in result.findings}["host_sync"]
    step = 5 * 101.0 + 2.0 + 2.0 + host_us + 2.0  # kernels, turnaround, sync, host, latency
    fixed = max(5 * 101.0, 25.0 + host_us)
    assert sync.estimated_gain_pct == pytest.approx(100.0 * (1.0 - fixed / step), abs=3.0)
    assert sync.evidence["replayed_drain_wait_ms_per_step"] == pytest.approx(0.48, abs=0.03)
