"""The NVML sampler, driven by a fake NVML module and a fake clock."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from fake_nvml import FakeGpu, FakeNvml
from hypothesis import given, settings
from hypothesis import strategies as st

from aiprof.capture.nvml import device_specs, driver_versions, open_nvml
from aiprof.capture.sampler import NvmlSampler, SamplerOptions
from aiprof.errors import InputError
from aiprof.record.runrecord import read_samples


class StepClock:
    """A clock that advances a fixed 50 ms per reading."""

    def __init__(self, start_ns: int = 1_700_000_000_000_000_000) -> None:
        self.now_ns = start_ns

    def time_ns(self) -> int:
        self.now_ns += 50_000_000
        return self.now_ns

    def monotonic(self) -> float:
        return self.now_ns / 1e9


def sample(tmp_path, gpus, ticks=1, **options):
    status = open_nvml(FakeNvml(gpus))
    assert status.handle is not None
    path = tmp_path / "gpu_samples.csv"
    clock = StepClock()
    sampler = NvmlSampler(status.handle, path, SamplerOptions(**options), clock)
    sampler.open()
    for tick in range(ticks):
        sampler.sample_once(tick)
    sampler.stop()
    return read_samples(path), sampler, clock


def test_units_are_converted_from_nvml_units(tmp_path):
    gpu = FakeGpu()
    samples, sampler, _ = sample(tmp_path, [gpu])
    assert samples.num_samples == sampler.num_samples == 1
    assert samples["gpu_util_pct"][0] == 87 and samples["mem_util_pct"][0] == 41
    assert samples["sm_clock_mhz"][0] == 1980 and samples["mem_clock_mhz"][0] == 2619
    assert samples["power_w"][0] == pytest.approx(512.345)  # NVML gives milliwatts
    assert samples["memory_used_bytes"][0] == 40 * 2**30
    assert samples["temperature_c"][0] == 61
    assert samples["pcie_tx_bytes_per_s"][0] == 1500 * 1024  # NVML gives KB/s
    assert samples["pcie_rx_bytes_per_s"][0] == 250_000 * 1024


def test_one_row_per_device_with_the_clock_time(tmp_path):
    samples, _, clock = sample(tmp_path, [FakeGpu(gpu_util=10), FakeGpu(gpu_util=90)], ticks=3)
    assert samples.num_samples == 6
    assert samples["device"].tolist() == [0, 1] * 3
    assert samples["gpu_util_pct"].tolist() == [10, 90] * 3
    times = samples["time_unix_ns"]
    assert np.all(np.diff(times[::2]) == 50_000_000)  # one clock reading per tick
    assert times[-1] == clock.now_ns


def test_unsupported_values_are_missing_not_fatal(tmp_path):
    gpu = FakeGpu(unsupported={"power", "pcie0", "pcie1", "temperature"})
    samples, _, _ = sample(tmp_path, [gpu])
    assert math.isnan(samples["power_w"][0]) and math.isnan(samples["temperature_c"][0])
    assert math.isnan(samples["pcie_tx_bytes_per_s"][0])
    assert samples["gpu_util_pct"][0] == 87


def test_pcie_is_read_only_every_nth_sample(tmp_path):
    samples, _, _ = sample(tmp_path, [FakeGpu()], ticks=6, pcie_every=3)
    read = ~np.isnan(samples["pcie_tx_bytes_per_s"])
    assert read.tolist() == [True, False, False, True, False, False]


def test_no_nvml_degrades_to_a_note():
    status = open_nvml(FakeNvml([], init_error="Driver Not Loaded"))
    assert status.handle is None and "Driver Not Loaded" in status.note
    assert open_nvml(FakeNvml([])).handle is None


def test_static_specs_and_versions():
    handle = open_nvml(FakeNvml([FakeGpu()])).handle
    assert handle is not None
    (spec,) = device_specs(handle)
    assert spec["name"] == "NVIDIA H200" and spec["power_limit_w"] == 700.0
    assert spec["memory_total_bytes"] == 80 * 2**30
    assert driver_versions(handle)["driver"] == "570.86.15"


@pytest.mark.timing
def test_thread_samples_at_the_requested_rate(tmp_path):
    handle = open_nvml(FakeNvml([FakeGpu()])).handle
    assert handle is not None
    sampler = NvmlSampler(handle, tmp_path / "s.csv", SamplerOptions(rate_hz=50.0))
    sampler.start()
    time.sleep(0.5)
    sampler.stop()
    samples = read_samples(tmp_path / "s.csv")
    # 50 Hz for 0.5 s is 25 ticks; allow for a busy shared machine (late ticks are skipped)
    assert 5 <= samples.num_samples <= 27
    gaps_s = np.diff(samples["time_unix_ns"]) / 1e9
    assert 0.015 <= np.median(gaps_s) <= 0.045


def test_pcie_is_read_once_a_second_by_default():
    assert SamplerOptions(rate_hz=20).pcie_period == 20
    assert SamplerOptions(rate_hz=1).pcie_period == 1
    assert SamplerOptions(rate_hz=50, pcie_every=5).pcie_period == 5


@pytest.mark.parametrize("rate", [0.5, 51.0, float("nan")])
def test_rate_outside_1_to_50_hz_is_rejected(rate):
    with pytest.raises(InputError):
        SamplerOptions(rate_hz=rate)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(0, 10**6)),
                min_size=1, max_size=4))
def test_values_survive_the_csv_round_trip(tmp_path_factory, readings):
    gpus = [FakeGpu(gpu_util=g, mem_util=m, power_mw=p) for g, m, p in readings]
    samples, _, _ = sample(tmp_path_factory.mktemp("s"), gpus)
    assert samples["gpu_util_pct"].tolist() == [g for g, _, _ in readings]
    assert samples["mem_util_pct"].tolist() == [m for _, m, _ in readings]
    assert samples["power_w"].tolist() == pytest.approx([p / 1000 for _, _, p in readings])
