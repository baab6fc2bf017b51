"""GIVEN a real H200 run record WHEN the report is written THEN it has a section for every
view, with the run's own numbers, and opens in headless Chromium without console errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.conftest import DATA

from aiprof.analysis.views import MAX_POINTS, rank_views
from aiprof.cli.main import main
from aiprof.record.runrecord import load_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from chromium import open_page  # noqa: E402

RUN = DATA / "capture" / "h200_resnet50_run"
SECTIONS = ("timeline-all", "ops", "kernels", "queue", "critical-path", "memory", "python",
            "gpu-samples")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "run.html"
    assert main(["report", str(RUN), "-o", str(out)]) == 0
    return out


def test_every_view_has_its_section(report: Path) -> None:
    page = report.read_text()
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in page, anchor
    record = load_run(RUN)
    assert record.traces is not None
    views = rank_views(record.traces[0], record.samples.columns)
    top_kernel = views.kernels.rows[0].name
    assert top_kernel.split("<")[0] in page
    assert "NVML utilization" in page and "Launch queue over the steps" in page
    assert all(len(c.xs) <= MAX_POINTS + 2 for c in views.queue_curves)
    assert views.critical is not None and f"{views.critical.pct('cpu_bound'):.1f}" in page


def test_report_opens_in_chromium(report: Path) -> None:
    run = open_page(report)
    assert 'data-ready="1"' in run.dom and run.console_errors == []
    assert run.dom.count('<div class="chart"><svg') >= 2
    record = load_run(RUN)
    assert record.traces is not None
    timeline = rank_views(record.traces[0], record.samples.columns).timeline
    drawn = run.dom.split('id="tl-all"', 1)[1].split("</svg>", 1)[0]
    assert drawn.count("<rect") == len(timeline.steps[0].lane)  # one bar per span of step 1
    assert f'data-steps="{len(timeline.steps)}"' in run.dom
    lanes = {timeline.lanes[i] for i in timeline.steps[0].lane.tolist()}
    assert any(n.startswith("thread") for n in lanes) and any(n.startswith("GPU") for n in lanes)


def test_all_ranks_share_one_timeline(public_traces: Path, tmp_path: Path) -> None:
    from aiprof.analysis.timeline_steps import merged_timeline, step_timeline
    from aiprof.record.targets import load_traces

    traces = list(load_traces(public_traces / "trace_filter"))
    merged = merged_timeline(traces)
    alone = [step_timeline(t) for t in traces]
    assert len(merged.steps[0].lane) == sum(len(t.steps[0].lane) for t in alone)
    ranks = {merged.lanes[i].split()[1] for i in merged.steps[0].lane.tolist()}
    assert ranks == {str(t.rank) for t in traces} and len(ranks) == 2
    out = tmp_path / "two.html"
    assert main(["report", str(public_traces / "trace_filter"), "-o", str(out)]) == 0
    run = open_page(out)
    assert run.console_errors == [] and ">rank 1 GPU" in run.dom
