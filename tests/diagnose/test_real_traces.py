"""Diagnose on every public trace, the recorded H200 traces, and the planted-bottleneck suite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from tests.conftest import REAL_TRACES
from tests.support.ranking import assert_ranked

from aiprof import load_trace, load_traces
from aiprof.analysis.breakdown import gpu_busy_pct
from aiprof.diagnose import DiagnoseOptions, Diagnosis, diagnose
from aiprof.diagnose.rules import CATEGORIES, HOST_SIDE

TESTS = Path(__file__).parents[1]
PUBLIC = REAL_TRACES  # AIPROF_PUBLIC_TRACES, ../shared/traces/public, else the shipped subset
PUBLIC_TRACES = sorted(PUBLIC.glob("*/*.json.gz"))
LARGE = {"df_index_resolver", "trace_diff"}
H200 = sorted((TESTS / "data" / "h200").glob("*.trace.json.gz")) + [
    TESTS / "data" / "capture" / "h200_resnet50_run"  # a run record: aiprof run, GPU busy 91%
]
SUITE = TESTS / "data" / "diagnose"
LABELS = SUITE / "labels.json"


@cache
def _diagnosed(path: Path) -> Diagnosis:
    """One diagnosis (frozen results) per trace for this module: several checks read each."""
    return diagnose(path)


@pytest.fixture(scope="module", autouse=True)
def _forget_the_diagnoses() -> Iterator[None]:
    yield
    _diagnosed.cache_clear()  # the traces they hold are not kept past this module


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=f"{p.parent.name}/{p.name}",
                  marks=[pytest.mark.slow] if p.parent.name in LARGE else [])
     for p in PUBLIC_TRACES],
)
def test_diagnose_runs_on_every_public_trace(path: Path) -> None:
    result = diagnose(path)
    doc = result.document()
    json.dumps(doc)  # plain JSON
    assert all(f["category"] in CATEGORIES for f in doc["findings"])
    assert_ranked(doc["findings"])
    assert all(0 <= f["estimated_gain_pct"] <= 100 for f in doc["findings"])
    if result.replay_step_us > 0:  # the replay reproduces the measured step
        assert result.replay_step_us == pytest.approx(result.step_us, rel=0.2)


@pytest.mark.parametrize("path", H200, ids=[p.name for p in H200])
def test_healthy_h200_traces_have_no_host_side_finding(path: Path) -> None:
    """Large-batch bf16 ResNet-50 / GPT-2: no dataloader, sync or copy finding above 5%.

    Under the profiler these steps are launch-bound (the profiler adds CPU time per op), so a
    ``cpu_bound`` finding is honest there; it may not claim more than the GPU's idle share.
    """
    trace = load_trace(path) if path.is_file() else load_traces(path)[0]
    result = diagnose(trace)
    for finding in result.findings:
        if finding.category in HOST_SIDE - {"cpu_bound"}:
            assert finding.estimated_gain_pct <= 5.0, finding
        if finding.category == "cpu_bound":
            assert finding.estimated_gain_pct <= 100.0 - gpu_busy_pct(trace) + 1e-6


def _suite_cases(folder: Path = SUITE) -> list[dict[str, object]]:
    labels = folder / "labels.json"
    if not labels.is_file():
        return []
    cases = json.loads(labels.read_text())["cases"]
    return [{**c, "path": folder / str(c["trace"])} for c in cases
            if "error" not in c and (folder / str(c["trace"])).is_file()]


needs_suite = pytest.mark.skipif(not _suite_cases(), reason="H200 suite data not recorded yet")
PLANTED = [c for c in _suite_cases() if c["category"] != "none"]


def _case(case: dict[str, object]) -> object:
    return pytest.param(case, id=str(case["case"]))


@needs_suite
@pytest.mark.parametrize("case", [_case(c) for c in PLANTED])
def test_top_finding_is_the_planted_cause(case: dict[str, object]) -> None:
    _assert_top_finding(_diagnosed(SUITE / str(case["trace"])), case)


def _assert_top_finding(result: object, case: dict[str, object]) -> None:
    assert result.findings, result.verdict  # type: ignore[attr-defined]
    assert result.findings[0].category == case["category"]  # type: ignore[attr-defined]


@needs_suite
@pytest.mark.parametrize("case", [_case(c) for c in PLANTED])
def test_estimated_gain_within_30_pct_of_measured(case: dict[str, object]) -> None:
    """Each trace carries the unprofiled step times its capture measured (aiprof.profile):
    the profiler's cost is fitted to them, as for any ``aiprof run`` record."""
    _assert_within_30_pct(_diagnosed(SUITE / str(case["trace"])), case)


def _assert_within_30_pct(result: object, case: dict[str, object]) -> None:
    found = {f.category: f.estimated_gain_pct for f in result.findings}  # type: ignore[attr-defined]
    measured = float(case["gain_pct"])  # type: ignore[arg-type]
    estimated = found.get(str(case["category"]), 0.0)
    assert abs(estimated - measured) <= 0.3 * abs(measured), (estimated, measured)


MORE_SUITES = SUITE / "more_suites"
"""Three more recordings of the whole suite the same morning (docs/diagnose.md)."""
KNOWN_MISSES = {
    ("b", "item_sync_per_layer", "gain"): "23.7% against 17.9%: recorded before the timed "
    "rounds were split around the capture; the capture's unprofiled steps (3.04-3.12 ms) came "
    "after rounds of 2.71-2.98 ms",
    ("d", "empty_cache_each_step", "top"): "ranked by gain, a CUDA graph claimed to add 44.7% "
    "once the planted empty_cache is gone ranks above that fix (35.4% claimed); this recording "
    "timed no graph of the step, so the planted label is its only truth",
}


def _more_suites() -> list[Path]:
    return sorted(p for p in MORE_SUITES.iterdir() if p.is_dir()) if MORE_SUITES.is_dir() else []


def _more_cases(check: str) -> list[object]:
    params = []
    for folder in _more_suites():
        for case in _suite_cases(folder):
            if case["category"] == "none":
                continue
            reason = KNOWN_MISSES.get((folder.name, str(case["case"]), check))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            params.append(pytest.param(case, id=f"{folder.name}/{case['case']}", marks=marks))
    return params


@pytest.mark.parametrize("case", _more_cases("top"))
def test_top_finding_in_the_other_recordings(case: dict[str, object]) -> None:
    _assert_top_finding(_diagnosed(case["path"]), case)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", _more_cases("gain"))
def test_gain_within_30_pct_in_the_other_recordings(case: dict[str, object]) -> None:
    _assert_within_30_pct(_diagnosed(case["path"]), case)  # type: ignore[arg-type]


@needs_suite
def test_healthy_suite_case_has_no_host_side_finding() -> None:
    for case in _suite_cases():
        if case["category"] != "none":
            continue
        result = _diagnosed(SUITE / str(case["trace"]))
        worst = max((f.estimated_gain_pct for f in result.findings
                     if f.category in HOST_SIDE - {"cpu_bound"}), default=0.0)
        assert worst <= 5.0


def test_gpu_bound_resnet50_run_has_no_host_side_finding_at_all() -> None:
    """The ResNet-50 bf16 run recorded by ``aiprof run`` on the H200 (GPU busy 91%)."""
    run = TESTS / "data" / "capture" / "h200_resnet50_run"
    if not run.is_dir():
        pytest.skip("run record not present")
    result = diagnose(run)
    assert all(f.estimated_gain_pct <= 5.0 for f in result.findings if f.category in HOST_SIDE)


@needs_suite
def test_healthy_suite_case_not_even_cpu_bound() -> None:
    for case in _suite_cases():
        if case["category"] == "none":
            result = _diagnosed(SUITE / str(case["trace"]))
            assert all(f.estimated_gain_pct <= 5.0 for f in result.findings
                       if f.category in HOST_SIDE)


def test_trace_set_merges_ranks_and_finds_the_straggler() -> None:
    folder = PUBLIC / "trace_filter"
    result = diagnose(folder)
    assert result.num_ranks == 2
    categories = [f.category for f in result.findings]
    assert len(categories) == len(set(categories))  # one finding per category
    for f in result.findings:
        if f.category != "straggler":
            assert set(f.evidence["ranks_affected"]) <= {0, 1}
    straggler = next(f for f in result.findings if f.category == "straggler")
    assert straggler.evidence["rank"] in (0, 1)


@needs_suite
@pytest.mark.parametrize("case", [_case(c) for c in _suite_cases()])
def test_findings_are_sorted_by_estimated_gain(case: dict[str, object]) -> None:
    """The JSON contract: sorted by ``estimated_gain_pct``, a fix that needs another first
    right after it, no other reordering."""
    assert_ranked(_diagnosed(SUITE / str(case["trace"])).document()["findings"])


REPEATS = SUITE / "item_sync_repeats"
"""The .item() case recorded 7 times on 2026-11-30 with plain torch.profiler (no timing)."""
CAPTURED = SUITE / "item_sync_captured"
"""The .item() case recorded 8 times on 2026-12-01 by aiprof.profile in fresh processes."""


def _recordings(folder: Path) -> list[object]:
    return [pytest.param(c, id=str(c["trace"])) for c in _suite_cases(folder)]


@pytest.mark.parametrize("case", _recordings(REPEATS) + _recordings(CAPTURED))
def test_syncs_outrank_cuda_graphs_while_graphs_cannot_capture_them(case: dict) -> None:
    """Every recording of the .item() case: host_sync first by its gain; cpu_bound counts only
    what graphs add once the syncs are gone (the step is then GPU-bound: little)."""
    result = _diagnosed(case["path"])
    assert result.findings[0].category == "host_sync"
    graphs = next((f for f in result.findings if f.category == "cpu_bound"), None)
    if graphs is not None:
        assert graphs.evidence["after_fixing_first"] == ["host_sync"]
        assert graphs.estimated_gain_pct < result.findings[0].estimated_gain_pct - 10.0


@pytest.mark.parametrize("case", _recordings(CAPTURED))
def test_item_case_in_fresh_processes_within_30_pct(case: dict) -> None:
    """Eight more captures of the .item() case, each with its capture's own unprofiled timing."""
    result = _diagnosed(case["path"])
    assert result.profiler.source == "fitted"
    _assert_within_30_pct(result, case)


@pytest.mark.parametrize("case", _recordings(REPEATS))
def test_item_case_plain_traces_within_30_pct_given_the_unprofiled_step(case: dict) -> None:
    """The 2026-11-30 torch.profiler recordings carry no timing; given the unprofiled step the
    suite measured beside each (as a user who timed the step passes --unprofiled-step-ms),
    the profiler's cost is fitted to it: 1.8 to 13.6 µs per event between these recordings."""
    options = DiagnoseOptions(unprofiled_step_us=1000.0 * float(case["planted_step_ms"]))
    result = diagnose(case["path"], options)
    assert result.profiler.source == "fitted"
    _assert_within_30_pct(result, case)


@needs_suite
def test_repeated_recordings_show_how_much_the_measured_gain_itself_varies() -> None:
    """The documented spread (docs/diagnose.md): one case, nineteen recordings on two days."""
    folders = [REPEATS, CAPTURED, SUITE, *_more_suites()]
    gains = sorted(float(c["gain_pct"]) for f in folders for c in _suite_cases(f)  # type: ignore[arg-type]
                   if c["case"] == "item_sync_per_layer")
    assert len(gains) == 19 and gains[0] < 16.0 and gains[-1] > 30.0
