"""Diagnose on every public trace, the recorded H200 traces, and the planted-bottleneck suite."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from aiprof.analysis.breakdown import gpu_busy_pct
from aiprof.diagnose import diagnose
from aiprof.diagnose.finding import CATEGORIES, HOST_SIDE
from aiprof.trace import load_trace, load_traces

TESTS = Path(__file__).parents[1]
PUBLIC = TESTS.parents[1] / "shared" / "traces" / "public"
PUBLIC_TRACES = sorted(PUBLIC.glob("*/*.json.gz")) if PUBLIC.is_dir() else []
LARGE = {"df_index_resolver", "trace_diff"}
H200 = sorted((TESTS / "data" / "h200").glob("*.trace.json.gz")) + [
    TESTS / "data" / "capture" / "h200_resnet50_run"  # a run record: aiprof run, GPU busy 91%
]
SUITE = TESTS / "data" / "diagnose"
LABELS = SUITE / "labels.json"


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
    gains = [f["estimated_gain_pct"] for f in doc["findings"]]
    assert gains == sorted(gains, reverse=True) and all(0 <= g <= 100 for g in gains)
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


def _suite_cases() -> list[dict[str, object]]:
    if not LABELS.is_file():
        return []
    cases = json.loads(LABELS.read_text())["cases"]
    return [c for c in cases if "error" not in c and (SUITE / str(c["trace"])).is_file()]


needs_suite = pytest.mark.skipif(not _suite_cases(), reason="H200 suite data not recorded yet")
PLANTED = [c for c in _suite_cases() if c["category"] != "none"]


# Re-recorded on the H200 (2026-11-30) as a single cause (one element read back after each of
# 12 bf16 GEMMs): removing the syncs gains 17.0%; aiprof ranks host_sync first but estimates
# 28.5%, outside the +-30% band. A known miss, checked strictly so a fix shows up.
GAIN_MISSES = {"item_sync_per_layer": "host_sync gain overestimated (28.5% vs 17.0%)"}


def _case(case: dict[str, object], misses: dict[str, str] | None = None) -> object:
    reason = (misses or {}).get(str(case["case"]))
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(case, id=str(case["case"]), marks=marks)


@needs_suite
@pytest.mark.parametrize("case", [_case(c) for c in PLANTED])
def test_top_finding_is_the_planted_cause(case: dict[str, object]) -> None:
    result = diagnose(SUITE / str(case["trace"]))
    assert result.findings, result.verdict
    assert result.findings[0].category == case["category"]


@needs_suite
@pytest.mark.parametrize("case", [_case(c, GAIN_MISSES) for c in PLANTED])
def test_estimated_gain_within_30_pct_of_measured(case: dict[str, object]) -> None:
    result = diagnose(SUITE / str(case["trace"]))
    found = {f.category: f.estimated_gain_pct for f in result.findings}
    measured = float(case["gain_pct"])  # type: ignore[arg-type]
    estimated = found.get(str(case["category"]), 0.0)
    assert abs(estimated - measured) <= 0.3 * abs(measured), (estimated, measured)


@needs_suite
def test_healthy_suite_case_has_no_host_side_finding() -> None:
    for case in _suite_cases():
        if case["category"] != "none":
            continue
        result = diagnose(SUITE / str(case["trace"]))
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
            result = diagnose(SUITE / str(case["trace"]))
            assert all(f.estimated_gain_pct <= 5.0 for f in result.findings
                       if f.category in HOST_SIDE)


def test_trace_set_merges_ranks_and_finds_the_straggler() -> None:
    folder = PUBLIC / "trace_filter"
    if not folder.is_dir():
        pytest.skip("public traces not present")
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
    """The JSON contract: sorted by ``estimated_gain_pct``, no other reordering."""
    gains = [f["estimated_gain_pct"] for f in diagnose(SUITE / str(case["trace"])).document()[
        "findings"]]
    assert gains == sorted(gains, reverse=True)


REPEATS = SUITE / "item_sync_repeats"


@pytest.mark.parametrize("trace", sorted(REPEATS.glob("*.trace.json.gz")), ids=lambda p: p.name)
def test_syncs_outrank_cuda_graphs_while_graphs_cannot_capture_them(trace: Path) -> None:
    """Three more recordings of the .item() case: host_sync first by its gain; cpu_bound counts
    only what graphs add once the syncs are gone (the step is then GPU-bound: little)."""
    result = diagnose(trace)
    assert result.findings[0].category == "host_sync"
    graphs = next((f for f in result.findings if f.category == "cpu_bound"), None)
    if graphs is not None:
        assert graphs.evidence["after_fixing_first"] == ["host_sync"]
        assert graphs.estimated_gain_pct < result.findings[0].estimated_gain_pct - 10.0


def _item_recordings() -> list[dict[str, object]]:
    first = next(c for c in _suite_cases() if c["case"] == "item_sync_per_layer")
    repeats = json.loads((REPEATS / "labels.json").read_text())["cases"]
    return [{**first, "path": SUITE / str(first["trace"])}] + [
        {**c, "path": REPEATS / str(c["trace"])} for c in repeats
    ]


@needs_suite
def test_repeated_recordings_show_how_much_the_measured_gain_itself_varies() -> None:
    """The documented spread (docs/diagnose.md): one case, eight recordings the same morning."""
    gains = sorted(float(c["gain_pct"]) for c in _item_recordings())  # type: ignore[arg-type]
    assert len(gains) == 8 and gains[0] < 16.0 and gains[-1] > 25.0


@needs_suite
def test_item_case_pooled_over_recordings_is_within_30_pct() -> None:
    """Median estimate against median measured gain over the eight recordings (each recording
    alone misses in 6 of 8: docs/diagnose.md, item_sync_per_layer)."""
    recordings = _item_recordings()
    measured = statistics.median(float(c["gain_pct"]) for c in recordings)  # type: ignore[arg-type]
    estimated = statistics.median(
        next(f.estimated_gain_pct for f in diagnose(c["path"]).findings
             if f.category == "host_sync")
        for c in recordings
    )
    assert abs(estimated - measured) <= 0.3 * measured, (estimated, measured)


def test_profiler_overhead_default_lies_in_the_measured_range() -> None:
    """DiagnoseOptions.profiler_overhead_us against torch.profiler's cost measured on the H200."""
    from aiprof.diagnose.context import DiagnoseOptions

    calls = json.loads((SUITE / "profiler_overhead_h200.json").read_text())["calls"]
    measured = {name: c for name, c in calls.items() if "error" not in c}
    per_op = {name: c["overhead_us"] / c["cpu_ops_per_call"] for name, c in measured.items()}
    default = DiagnoseOptions().profiler_overhead_us
    assert min(per_op.values()) <= default <= max(per_op.values())
    # the item case's own layer (a GEMM and two element reads, 18 recorded ops)
    assert per_op["item_sync_layer"] == pytest.approx(default, rel=0.3)
