"""NVML samples of a run record as curves on the trace's clock, and their values per step.

``aiprof run`` samples every GPU with NVML (``gpu_samples.csv``: SM and memory utilization,
memory used, power, SM and memory clocks, temperature, PCIe). A sample's wall-clock time
maps onto a rank's trace through its ``baseTimeNanoseconds`` (Kineto: wall-clock ns =
base + ts × 1000): ``t_us = time_unix_ns / 1000 - base / 1000 - origin_us``. NVML's
utilization is itself an average over its last sampling period (NVML API reference,
``nvmlDeviceGetUtilizationRates``), so a step without a sample inside it takes the last
sample before its end (the value held); ``num_samples`` says how many fell inside.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.analysis.frames import data_frame
from aiprof.errors import InputError
from aiprof.trace import Trace

Columns = Mapping[str, np.ndarray]
"""``GpuSamples.columns`` of a run record: ``time_unix_ns``, ``device`` and one column per
metric (``record.runrecord.SAMPLE_COLUMNS``)."""
KEYS = ("time_unix_ns", "device")


@dataclass(frozen=True, eq=False)
class DeviceSamples:
    """One GPU's samples: ``t_us`` on the trace's clock, a curve per metric, per-step means."""

    device: int
    t_us: np.ndarray
    curves: dict[str, np.ndarray]
    step_number: np.ndarray
    step_num_samples: np.ndarray
    step_means: dict[str, np.ndarray]
    """Per metric, one value per step (mean inside it, else the value held)."""

    def steps_mean(self, metric: str) -> float:
        values = self.step_means[metric]
        values = values[~np.isnan(values)]
        return float(values.mean()) if len(values) else float("nan")

    def to_pandas(self) -> Any:
        return data_frame({"t_us": self.t_us, **self.curves})


@dataclass(frozen=True, eq=False)
class SampleView:
    rank: int
    devices: list[DeviceSamples]


def gpu_sample_view(trace: Trace, samples: Columns) -> SampleView:
    """Every sampled GPU aligned to ``trace`` (see the module docstring)."""
    if len(samples.get("time_unix_ns", ())) == 0:
        return SampleView(trace.rank, [])
    base = trace.base_time_ns
    if base is None:
        raise InputError(f"{trace.path}: no baseTimeNanoseconds, so GPU samples cannot be "
                         "placed on its clock; record with aiprof run (torch 2.1 or newer)")
    t_us = samples["time_unix_ns"] / 1000.0 - base / 1000.0 - trace.origin_us
    devices = []
    for device in np.unique(samples["device"]):
        mine = np.flatnonzero(samples["device"] == device)
        mine = mine[np.argsort(t_us[mine], kind="stable")]
        curves = {m: samples[m][mine] for m in samples if m not in KEYS}
        numbers, counts, means = _per_step(trace, t_us[mine], curves)
        devices.append(DeviceSamples(int(device), t_us[mine], curves, numbers, counts, means))
    return SampleView(trace.rank, devices)


def _per_step(
    trace: Trace, t_us: np.ndarray, curves: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    steps = trace.steps
    first = np.searchsorted(t_us, steps.start_us, side="left")
    last = np.searchsorted(t_us, steps.end_us, side="right")
    counts = last - first
    held = last - 1  # the last sample at or before the step's end
    means: dict[str, np.ndarray] = {}
    for metric, values in curves.items():
        sums = np.concatenate([[0.0], np.cumsum(np.nan_to_num(values))])
        valid = np.concatenate([[0], np.cumsum(~np.isnan(values))])
        n = valid[last] - valid[first]
        inside = np.where(n > 0, (sums[last] - sums[first]) / np.maximum(n, 1), np.nan)
        hold = np.where(held >= 0, values[np.maximum(held, 0)], np.nan) if len(values) else \
            np.full(len(steps), np.nan)
        means[metric] = np.where(n > 0, inside, hold)
    return steps.number.copy(), counts, means
