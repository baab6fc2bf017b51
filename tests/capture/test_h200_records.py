"""Assertions on run records recorded on an H200 by scripts/h200/capture_run.sh.

The records are committed under tests/data/capture/ (copied from $OUT/capture/); the tests
skip when that data is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from aiprof.record.runrecord import load_run

DATA = Path(__file__).resolve().parents[1] / "data" / "capture"
RECORDS = sorted(p.parent for p in DATA.glob("**/meta.json") if not p.parent.is_symlink())
H200_SMS = 132  # cudaDeviceProp.multiProcessorCount measured on an H200 (reference: gpu-models.md)


@pytest.fixture(params=RECORDS or [None], ids=lambda p: p.name if p else "none")
def record(request):
    if request.param is None:
        pytest.skip("no H200 run records under tests/data/capture/")
    return load_run(request.param)


def test_meta_has_the_gpu_specs(record):
    gpus = record.meta.gpus
    assert gpus and all("H200" in gpu["name"] for gpu in gpus)
    assert all(gpu.get("num_sms") in (None, H200_SMS) for gpu in gpus)
    assert any(gpu.get("compute_capability") == "9.0" for gpu in gpus)
    assert record.meta.versions.get("driver") and record.meta.versions.get("cuda")


def test_trace_has_kernels_inside_its_steps(record):
    assert record.traces is not None
    trace = record.traces[0]
    assert len(trace.kernels) > 0 and len(trace.steps) == record.meta.capture["active_steps"]


def test_nvml_samples_show_the_gpu_working(record):
    samples = record.samples
    assert samples.num_samples > 0 and record.meta.samples["source"] == "nvml"
    assert np.nanmax(samples["gpu_util_pct"]) > 0
    assert np.nanmax(samples["power_w"]) > 0
    times = samples["time_unix_ns"]
    assert times.min() >= record.meta.start_unix_ns
    assert times.max() <= record.meta.end_unix_ns
    # 20 Hz per device: gaps between ticks of one device are near 50 ms
    one = np.sort(times[samples["device"] == samples["device"][0]])
    assert np.median(np.diff(one)) / 1e6 == pytest.approx(50, rel=0.5)


def test_overhead_on_the_gpu_is_at_most_3_pct():
    path = next((p for p in (DATA / "h200_overhead.json", DATA / "overhead.json") if p.is_file()),
                None)
    if path is None:
        pytest.skip("no overhead.json from scripts/h200/capture_overhead.sh")
    result = json.loads(path.read_text())
    assert result["settings"]["device"] == "cuda"
    plain = [r["all_step_ms"] for r in result["reps"] if r["mode"] == "plain"]
    aiprof = [r["all_step_ms"] for r in result["reps"] if r["mode"] == "aiprof"]
    # recomputed from the repetitions, not taken from the script's own summary
    extra_pct = 100.0 * (float(np.median(aiprof)) / float(np.median(plain)) - 1.0)
    assert extra_pct <= 3.0
    assert result["summary"]["extra_paired_active_step_pct"] <= 3.0


DDP_RECORD = DATA.parent / "distributed" / "run_ddp"


def test_nproc_2_nccl_record_has_aligned_ranks():
    """``aiprof run --nproc 2`` on two H200s (NCCL): every all-reduce kernel ends at nearly
    the same wall time on both ranks once each trace's baseTimeNanoseconds is applied."""
    if not (DDP_RECORD / "meta.json").is_file():
        pytest.skip("no 2-GPU run record under tests/data/distributed/run_ddp")
    import gzip

    ends = []
    for rank in (0, 1):
        with gzip.open(DDP_RECORD / f"rank{rank}.trace.json.gz", "rt") as handle:
            trace = json.load(handle)
        base = trace["baseTimeNanoseconds"]
        kernels = sorted((e["ts"], e["dur"]) for e in trace["traceEvents"]
                         if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower())
        ends.append([base + (ts + dur) * 1000 for ts, dur in kernels])
    assert len(ends[0]) == len(ends[1]) > 0
    assert max(abs(a - b) for a, b in zip(*ends, strict=True)) < 1e6  # ns: under 1 ms
    record = load_run(DDP_RECORD)
    assert record.meta.world_size == 2 and record.traces is not None
    assert record.traces.ranks == [0, 1] and "wall clock" in record.traces.alignment
    assert all(len(trace.kernels) > 0 for trace in record.traces)


TIMED_RUN = DATA / "h200_gpt2_small_timed_run"


def test_gpu_capture_times_its_unprofiled_steps_and_diagnose_fits_to_them():
    """``aiprof run`` on the H200 (2026-12-01, 2-layer GPT-2, default skip 5): steps 3-5 timed
    with CUDA events, written into the trace; the diagnosis fits the profiler's cost to them."""
    if not TIMED_RUN.is_dir():
        pytest.skip("timed H200 run record not present")
    from aiprof import load_traces
    from aiprof.diagnose import diagnose
    from aiprof.diagnose.context import Context, DiagnoseOptions
    from aiprof.trace.capture_timing import unprofiled_step_us, unprofiled_steps_us

    meta = load_run(TIMED_RUN).meta
    assert meta.capture["step_timing_clock"] == "cuda_events"
    trace = load_traces(TIMED_RUN)[0]
    assert unprofiled_steps_us(trace) == pytest.approx(meta.capture["unprofiled_step_us"])
    unprofiled = unprofiled_step_us(trace)
    assert unprofiled is not None and unprofiled < 0.8 * Context(trace, DiagnoseOptions()).step_us
    result = diagnose(TIMED_RUN)
    assert result.profiler.source == "fitted"
    ctx = Context(trace, DiagnoseOptions())
    assert ctx.base_us / len(trace.steps) == pytest.approx(unprofiled, rel=0.01)
