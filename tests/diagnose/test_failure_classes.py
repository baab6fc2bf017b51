"""Issue 15, failure classes 5-7, each on a trace built here: the missing finding (host work
while the GPU idles), robustness (no kernel events, kernels without launches, MTIA, a cold first
iteration) and unexplained numbers (a fusion gain above its chains, a copy gain above its
copies, a replay off the measured step). The CPU-only gloo run is in test_gloo_communication.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.kineto_synth import TraceBuilder

from aiprof.cli.main import main
from aiprof.diagnose import DiagnoseOptions, diagnose

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>"
SENDRECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"


# -- class 5: GPU idle while the host does other work than launching ----------------------------

def test_preprocessing_outside_a_dataloader_is_host_busy(tmp_path: Path) -> None:
    """Each step resizes a clip on the CPU (570 µs, no launch) and then runs 430 µs of GEMMs:
    the GPU waits 57% of the step for the host. The top finding says so, names the op, and
    gains about that share; cpu_bound does not claim the preprocessing as launch overhead."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start = t
        b.cpu_op("aten::upsample_bilinear2d", t + 1, 570.0)
        b.cpu_op("aten::empty", t + 2, 3.0)  # a child op: launches nothing either
        t += 575.0
        gpu = t + 6
        for _ in range(4):
            b.kernel(GEMM, t, gpu, 106.0, launch_dur=4.0)
            gpu += 107.0
            t += 6.0
        b.runtime("cudaStreamSynchronize", t, gpu - t + 2)  # the loss read at the step's end
        b.step(s, start, gpu + 3 - start)
        t = gpu + 4
    result = diagnose(b.write(tmp_path / "t.json.gz"))
    top = result.findings[0]
    assert top.category == "host_busy"
    assert top.evidence["host_ops"][0]["name"] == "aten::upsample_bilinear2d"
    assert top.evidence["host_work_while_gpu_idle_ms_per_step"] == pytest.approx(0.57, abs=0.01)
    assert top.estimated_gain_pct == pytest.approx(57.0, abs=4.0)
    assert all(f.estimated_gain_pct < 5.0 for f in result.findings if f.category == "cpu_bound")


def test_a_long_blocking_copy_is_not_nothing_worth_fixing(tmp_path: Path) -> None:
    """Half of each step the host sits in one 493 ms cudaMemcpy of 60 bytes while the GPU is
    idle (the copy itself takes 2 µs): a finding of about 50%, naming the call."""
    b = TraceBuilder()
    t = 0.0
    for s in range(2):
        start = t
        b.kernel(GEMM, t, t + 8, 490_000.0)
        b.runtime("cudaStreamSynchronize", t + 6, 490_010.0)
        t += 490_020.0
        b.memcpy("Memcpy HtoD (Pageable -> Device)", t, 493_000.0, t + 492_990.0, 2.0, 60)
        b.events[-2]["name"] = "cudaMemcpy"  # the copy's runtime call: synchronous
        t += 493_010.0
        b.step(s, start, t - start)
    result = diagnose(b.write(tmp_path / "t.json.gz"))
    assert not result.verdict.startswith("Nothing worth fixing")
    busy = next(f for f in result.findings if f.category == "host_busy")
    assert busy.evidence["host_ops"][0]["name"] == "cudaMemcpy"
    assert busy.estimated_gain_pct == pytest.approx(50.0, abs=5.0)
    assert result.findings[0].estimated_gain_pct >= 45.0


# -- class 6: robustness -----------------------------------------------------------------------

def test_runtime_calls_without_gpu_events_give_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = TraceBuilder()
    for i in range(1862):
        b.runtime("cudaLaunchKernel", i * 10.0, 4.0)
    b.step(0, 0.0, 18_620.0)
    path = b.write(tmp_path / "t.json.gz")
    for argv in (["diagnose", str(path)], ["report", str(path), "-o", str(tmp_path / "r.html")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "1862 GPU runtime calls but no GPU events" in err
        assert "Traceback" not in err


def test_kernels_without_launch_events_are_diagnosed_with_a_note(tmp_path: Path) -> None:
    b = TraceBuilder()
    for s in range(3):
        for k in range(5):
            args = {"device": 0, "stream": 7, "correlation": 50_000 + 10 * s + k}
            b.events.append({"ph": "X", "cat": "kernel", "name": GEMM, "pid": 0, "tid": 7,
                             "ts": s * 1000.0 + k * 110, "dur": 100.0, "args": args})
        b.step(s, s * 1000.0, 900.0)
    result = diagnose(b.write(tmp_path / "t.json.gz"))
    assert any("no GPU op has a launch call" in n for n in result.notes)
    assert all(0.0 <= f.estimated_gain_pct <= 100.0 for f in result.findings)


def test_mtia_device_events_say_what_is_not_analysed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = TraceBuilder()
    for i in range(20):
        b.events.append({"ph": "X", "cat": "mtia_runtime", "name": "mtiaLaunchKernel",
                         "pid": 1, "tid": 1, "ts": i * 50.0, "dur": 5.0, "args": {}})
        b.events.append({"ph": "X", "cat": "mtia_ccp_events", "name": "fused_kernel_0",
                         "pid": 0, "tid": 3, "ts": i * 50.0 + 8, "dur": 40.0, "args": {}})
    b.step(0, 0.0, 1000.0)
    path = b.write(tmp_path / "t.json.gz")
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err
    assert "20 MTIA device events" in err and "nothing on the device was analysed" in err
    assert "idle" not in err


def test_a_cold_first_iteration_is_not_read_as_steady_state(tmp_path: Path) -> None:
    """ProfilerStep#0 alone, with the allocator growing its pool: no "after warm-up" finding,
    and a note that the trace is not a steady state. The same calls in a later step are
    churn."""
    def trace(number: int, path: Path) -> Path:
        b = TraceBuilder()
        t = 0.0
        for _ in range(6):
            b.runtime("cudaMalloc", t, 300.0)
            b.kernel(GEMM, t + 305, t + 312, 100.0)
            t += 420.0
        b.step(number, 0.0, t)
        return b.write(path)

    cold = diagnose(trace(0, tmp_path / "cold.json.gz"))
    assert "allocator_churn" not in {f.category for f in cold.findings}
    assert any("not a steady state" in n for n in cold.notes)
    later = diagnose(trace(7, tmp_path / "later.json.gz"))
    assert "allocator_churn" in {f.category for f in later.findings}
    assert not any("not a steady state" in n for n in later.notes)


# -- class 7: every number explained ------------------------------------------------------------

def test_fusion_gain_is_at_most_the_chain_it_removes(tmp_path: Path) -> None:
    """A chain of elementwise kernels whose second kernel waited for a 5 ms NCCL transfer on
    another stream: fusing the chain removes that kernel, not the wait. The gain is at most
    the removed kernels and their turnaround (the replay once dropped the wait with the
    kernel: a 5 ms gain per step from a few µs of kernels)."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        b.kernel(SENDRECV, t + 1, t + 10, 5000.0, stream=9)
        gpu = t + 12
        b.kernel(ADD, t + 2, gpu, 4.0)
        b.kernel(MUL, t + 3, t + 5012, 4.0)  # starts 2 µs after the transfer ends
        b.kernel(ADD, t + 4, t + 5018, 50.0)
        b.kernel(MUL, t + 5, t + 5070, 4.0)
        b.kernel(GEMM, t + 6, t + 5076, 2000.0)  # the step's end waits for the chain
        b.step(s, t, 20.0)
        t += 7100.0
    result = diagnose(b.write(tmp_path / "t.json.gz"), DiagnoseOptions(min_gain_pct=0.0))
    fusion = next(f for f in result.findings if f.category == "unfused_elementwise")
    removed = fusion.evidence["replay_removed"]
    assert removed["gpu_time_ms_per_step"] < 0.1  # a few short kernels, not the 5 ms wait
    assert fusion.estimated_gain_ms_per_step <= removed["parts_ms_per_step"] + 0.003
    assert "replay_gain_ms_per_step" not in removed  # the replay itself stays within them


def test_copy_gain_beyond_its_copies_is_capped_and_the_replay_drift_is_said(
    tmp_path: Path,
) -> None:
    """A stream whose queued kernels follow each other after 1 µs or 50 µs (a filtered trace
    looks like this): the replay uses the median turnaround for all and runs about 2 ms a step
    longer than the trace. A tiny pageable copy after the queue has drained then waits for that
    longer queue in the replay only, and delays the launches after it: the replay gains 2 ms a
    step from 14 µs of copies and waits. The copy's gain is capped at what the trace shows it cost
    (its wait, and the profiler time before it), its evidence keeps the replay's own number,
    and a note says the replay is off the measured step."""
    b = TraceBuilder()
    t = 0.0
    for s in range(3):
        start, gpu = t, t + 10
        for k in range(100):
            b.kernel(GEMM, t + k * 2.0, gpu, 30.0, launch_dur=1.5)
            gpu += 30.0 + (50.0 if k % 5 < 3 else 1.0)
        t = gpu + 5  # host work while the queue runs; the queue has drained at the copy
        b.memcpy("Memcpy HtoD (Pageable -> Device)", t, 12.0, t + 2, 2.0, 16)
        t += 20.0
        for _ in range(40):  # then launch-bound work on another stream
            b.kernel(GEMM, t, t + 7, 5.0, stream=8, launch_dur=4.0)
            t += 50.0
        b.step(s, start, t - start)
    result = diagnose(b.write(tmp_path / "t.json.gz"), DiagnoseOptions(min_gain_pct=0.0))
    assert any("% off the measured step" in n for n in result.notes)
    copy = next(f for f in result.findings if f.category == "h2d_transfer")
    parts = copy.evidence["replay_removed"]
    assert copy.estimated_gain_ms_per_step <= parts["parts_ms_per_step"] + 0.003
    assert parts["replay_gain_ms_per_step"] > 1.0 > parts["parts_ms_per_step"]
