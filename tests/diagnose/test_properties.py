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
