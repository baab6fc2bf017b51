"""``aiprof.profile`` / ``aiprof.step`` in user code, with a fake NVML injected."""

from __future__ import annotations

import numpy as np
import pytest
from capture_helpers import raw_trace, step_names
from fake_nvml import FakeGpu, FakeNvml

from aiprof.capture import profile, step
from aiprof.record.runrecord import load_run, read_meta

torch = pytest.importorskip("torch")


def train(num_steps: int, marker) -> None:
    model = torch.nn.Linear(16, 16)
    for _ in range(num_steps):
        model(torch.randn(8, 16)).sum().backward()
        marker()


def test_profile_block_with_p_step_and_gpu_samples(tmp_path):
    fake = FakeNvml([FakeGpu(gpu_util=70), FakeGpu(gpu_util=20)])
    out = tmp_path / "runs" / "x"
    with profile(out, skip_steps=1, warmup_steps=1, active_steps=2, sample_rate_hz=50,
                 nvml_module=fake) as p:
        train(6, p.step)
        torch.randn(1).numpy()  # some time for the sampler thread
    meta = read_meta(out)
    assert meta.ended == "completed" and meta.capture["num_steps_seen"] == 6
    assert step_names(raw_trace(out / "rank0.trace.json.gz")) == ["ProfilerStep#2",
                                                                  "ProfilerStep#3"]
    assert meta.samples["source"] == "nvml" and fake.shut_down
    assert [gpu["name"] for gpu in meta.gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert meta.versions["driver"] == "570.86.15"
    assert not (tmp_path / "runs" / "latest").exists()  # an explicit directory: no link beside
    record = load_run(out)
    assert record.samples.num_samples == meta.samples["num_samples"] >= 2
    by_device = {int(d): record.samples["gpu_util_pct"][record.samples["device"] == d]
                 for d in np.unique(record.samples["device"])}
    assert np.all(by_device[0] == 70) and np.all(by_device[1] == 20)


def test_module_level_step_reports_to_the_active_profile(tmp_path):
    with profile(tmp_path / "r", skip_steps=0, warmup_steps=1, active_steps=1,
                 sample_gpus=False):
        train(3, step)
    assert read_meta(tmp_path / "r").capture["step_source"] == "user"
    step()  # no active capture: a no-op


def test_exception_inside_the_block_is_recorded_and_propagates(tmp_path):
    with pytest.raises(ValueError), profile(tmp_path / "r", skip_steps=0, warmup_steps=0,
                                            active_steps=5, sample_gpus=False) as p:
        train(2, p.step)
        raise ValueError("bad batch")
    meta = read_meta(tmp_path / "r")
    assert (meta.ended, meta.error) == ("exception", "ValueError: bad batch")
    assert len(step_names(raw_trace(tmp_path / "r" / "rank0.trace.json.gz"))) >= 2


def test_a_failing_trace_export_does_not_break_the_script(tmp_path):
    out = tmp_path / "r"
    with profile(out, skip_steps=0, warmup_steps=1, active_steps=1, sample_gpus=False) as p:
        p.session.trace_path.mkdir()  # a directory where the trace file should go
        train(4, p.step)  # the export runs inside a step and fails
    meta = read_meta(out)
    assert meta.ended == "completed" and not meta.capture["trace_written"]
    assert any(note.startswith("trace export failed") for note in meta.notes)


def test_unprofiled_steps_are_timed_into_the_trace_and_meta(tmp_path):
    # GIVEN 5 steps left out of the profile (the default): steps 3-5 are timed on the host
    import time

    from aiprof.trace import load_trace
    from aiprof.trace.capture_timing import KEY, unprofiled_steps_us

    def slow_step() -> None:  # at least 2 ms a step, so the timing has something to find
        time.sleep(0.002)
        p.step()

    with profile(tmp_path / "r", skip_steps=5, warmup_steps=1, active_steps=2,
                 sample_gpus=False) as p:
        train(8, slow_step)
    # THEN the trace carries them (the diagnosis reads them there) and so does meta.json
    raw = raw_trace(tmp_path / "r" / "rank0.trace.json.gz")
    assert raw[KEY]["clock"] == ("cuda_events" if torch.cuda.is_available() else "host")
    times = unprofiled_steps_us(load_trace(tmp_path / "r" / "rank0.trace.json.gz"))
    assert len(times) == 3 and all(t >= 2000.0 for t in times)
    meta = read_meta(tmp_path / "r")
    assert meta.capture["unprofiled_step_us"] == pytest.approx(times, abs=1e-3)


def test_too_few_unprofiled_steps_write_no_timing(tmp_path):
    from aiprof.trace.capture_timing import KEY

    with profile(tmp_path / "r", skip_steps=2, warmup_steps=1, active_steps=1,
                 sample_gpus=False) as p:
        train(5, p.step)
    assert KEY not in raw_trace(tmp_path / "r" / "rank0.trace.json.gz")
    assert read_meta(tmp_path / "r").capture["unprofiled_step_us"] == []
