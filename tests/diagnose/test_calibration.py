"""The profiler's per-event cost fitted to the step measured without the profiler."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from tests.support.kineto_synth import cpu_bound_with_ops, gpu_bound

from aiprof.cli.main import main
from aiprof.diagnose import diagnose
from aiprof.diagnose.calibration import DEFAULT_OVERHEAD_US
from aiprof.diagnose.context import Context, DiagnoseOptions
from aiprof.errors import TraceFormatError
from aiprof.trace import load_trace
from aiprof.trace.capture_timing import KEY, timing_document

SUITE = Path(__file__).parents[1] / "data" / "diagnose"


def _context(path: Path, **options: float) -> Context:
    return Context(load_trace(path), DiagnoseOptions(**options))  # type: ignore[arg-type]


def test_fit_recovers_the_cost_per_recorded_event(tmp_path: Path) -> None:
    # GIVEN a launch-bound step whose CPU time is recorded events, and the same step run
    # without the profiler 3 µs per event shorter
    path, events = cpu_bound_with_ops(tmp_path / "t.json.gz")
    recorded = _context(path, profiler_overhead_us=0.0)
    step_us = recorded.base_us / len(recorded.trace.steps)
    ctx = _context(path, unprofiled_step_us=step_us - 3.0 * events)
    # THEN the fitted cost is 3 µs and the replay lasts the unprofiled step
    assert ctx.calibration.source == "fitted"
    assert ctx.calibration.overhead_us == pytest.approx(3.0, abs=0.02)
    assert ctx.base_us / len(ctx.trace.steps) == pytest.approx(step_us - 3.0 * events, rel=1e-3)


def test_the_capture_timing_in_the_trace_is_used(tmp_path: Path) -> None:
    path, events = cpu_bound_with_ops(tmp_path / "t.json.gz")
    step_us = _context(path, profiler_overhead_us=0.0).base_us / 3
    timed, _ = cpu_bound_with_ops(
        tmp_path / "timed.json.gz",
        **{KEY: timing_document("cuda_events", [step_us - 2.0 * events] * 3)})
    assert _context(timed).calibration.overhead_us == pytest.approx(2.0, abs=0.02)
    document = diagnose(timed).document()
    assert document["profiler"]["source"] == "fitted"
    assert document["profiler"]["unprofiled_step_us"] == pytest.approx(step_us - 2.0 * events)
    # a cost given explicitly wins over the fit
    assert _context(timed, profiler_overhead_us=1.0).calibration.source == "given"


def test_unprofiled_step_as_long_as_the_trace_means_no_cost(tmp_path: Path) -> None:
    path, _ = cpu_bound_with_ops(tmp_path / "t.json.gz")
    step_us = _context(path, profiler_overhead_us=0.0).base_us / 3
    assert _context(path, unprofiled_step_us=step_us * 1.05).calibration.overhead_us == 0.0


def test_gpu_bound_step_cannot_be_fitted_and_keeps_the_default(tmp_path: Path) -> None:
    # GIVEN a step the GPU bounds; the unprofiled run was shorter (its kernels were faster)
    path = gpu_bound(tmp_path / "t.json.gz")
    ctx = _context(path, unprofiled_step_us=0.8 * _context(path).step_us)
    assert ctx.calibration.source == "default"
    assert ctx.calibration.overhead_us == DEFAULT_OVERHEAD_US
    assert "cannot" in ctx.calibration.note or "shorter" in ctx.calibration.note


def test_bad_timing_metadata_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    path, _ = cpu_bound_with_ops(tmp_path / "t.json.gz", **{KEY: {"unprofiled_step_us": [-1]}})
    with pytest.raises(TraceFormatError, match=KEY):
        diagnose(path)
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and KEY in err


def test_bad_unprofiled_step_option_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    path, _ = cpu_bound_with_ops(tmp_path / "t.json.gz")
    assert main(["diagnose", str(path), "--unprofiled-step-ms", "0"]) == 2
    assert "--unprofiled-step-ms" in capsys.readouterr().err


def _suite() -> list[dict[str, object]]:
    labels = SUITE / "labels.json"
    return json.loads(labels.read_text())["cases"] if labels.is_file() else []


RECORDINGS = [SUITE, SUITE / "item_sync_captured", *sorted((SUITE / "more_suites").glob("*"))]


@pytest.mark.skipif(not _suite(), reason="H200 suite data not recorded")
def test_default_cost_is_the_median_fitted_on_the_h200_suite() -> None:
    """``DEFAULT_OVERHEAD_US``: the median of the costs fitted on every recording of the suite
    (2026-12-01), each to the unprofiled steps its capture timed (the cases whose step the CPU
    bounds)."""
    fitted = []
    for folder in RECORDINGS:
        for case in json.loads((folder / "labels.json").read_text())["cases"]:
            path = folder / str(case.get("trace", ""))
            if "error" in case or not path.is_file():
                continue
            cal = _context(path).calibration
            if cal.source == "fitted" and cal.overhead_us > 0:
                fitted.append(cal.overhead_us)
    assert len(fitted) >= 20
    assert DEFAULT_OVERHEAD_US == pytest.approx(statistics.median(fitted), abs=0.05)
    measured = json.loads((SUITE / "profiler_overhead_h200.json").read_text())["calls"]
    per_event = [c["overhead_us"] / (c["cpu_ops_per_call"] + c["runtime_calls_per_call"])
                 for c in measured.values() if "error" not in c]
    # and it lies among the costs measured call by call on the same H200 (2026-11-30)
    assert min(per_event) <= DEFAULT_OVERHEAD_US <= max(per_event)


def test_the_cli_help_shows_the_default_cost_without_loading_the_rules() -> None:
    """The help reads ``DEFAULT_OVERHEAD_US`` itself; the lazy ``aiprof.diagnose`` keeps the
    rules, the replay and numpy out of the parser (a fresh interpreter checks)."""
    import subprocess
    import sys

    code = ("import sys, aiprof.cli.diagnose as d; "
            "print(d.DEFAULT_OVERHEAD_US, 'aiprof.diagnose.rules' in sys.modules, "
            "'aiprof.diagnose.replay' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(DEFAULT_OVERHEAD_US), "False", "False"]
