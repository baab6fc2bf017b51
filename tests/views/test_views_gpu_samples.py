"""GIVEN a real H200 run record WHEN its NVML samples are aligned to the steps THEN each step
gets the mean of the samples inside it (or the one held from before), computed here again
from the CSV and the trace's baseTimeNanoseconds."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from tests.conftest import DATA

from aiprof.analysis.gpu_samples import gpu_sample_view
from aiprof.cli.main import main
from aiprof.record.runrecord import load_run

RUN = DATA / "capture" / "h200_resnet50_run"


def _csv_rows() -> list[dict[str, str]]:
    with (RUN / "gpu_samples.csv").open() as f:
        return list(csv.DictReader(f))


def test_steps_take_the_samples_inside_or_the_one_held() -> None:
    record = load_run(RUN)
    assert record.traces is not None
    trace = record.traces[0]
    (device,) = gpu_sample_view(trace, record.samples.columns).devices
    base_us = trace.base_time_ns / 1000 + trace.origin_us  # type: ignore[operator]
    rows = sorted(_csv_rows(), key=lambda r: int(r["time_unix_ns"]))
    times = [int(r["time_unix_ns"]) / 1000 - base_us for r in rows]
    for i, (start, end) in enumerate(zip(trace.steps.start_us, trace.steps.end_us, strict=True)):
        inside = [float(r["power_w"]) for r, t in zip(rows, times, strict=True)
                  if start <= t <= end]
        before = [float(r["power_w"]) for r, t in zip(rows, times, strict=True) if t <= end]
        expected = sum(inside) / len(inside) if inside else before[-1]
        assert device.step_num_samples[i] == len(inside)
        assert device.step_means["power_w"][i] == pytest.approx(expected)
    assert len(device.t_us) == len(rows)


def test_cli_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["gpu-samples", "--json", "--curves", str(RUN)]) == 0
    (rank,) = json.loads(capsys.readouterr().out)["ranks"]
    (device,) = rank["devices"]
    assert len(device["curves"]["t_us"]) == len(_csv_rows())
    assert len(device["steps"]["gpu_util_pct"]) == len(device["steps"]["number"])
    assert main(["gpu-samples", str(tmp_path)]) == 2
    pytest.importorskip("pandas")
    record = load_run(RUN)
    assert record.traces is not None
    frame = gpu_sample_view(record.traces[0], record.samples.columns).devices[0].to_pandas()
    assert list(frame.columns[:3]) == ["t_us", "gpu_util_pct", "mem_util_pct"]
