"""GIVEN a real H200 run record WHEN the report is written THEN it has a section for every
view, with the run's own numbers, and opens in headless Chromium without console errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.conftest import DATA

from aiprof.analysis.views import MAX_POINTS, rank_views, report_views
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


@pytest.fixture(scope="module")
def two_ranks(public_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("two") / "two.html"
    assert main(["report", str(public_traces / "trace_filter"), "-o", str(out)]) == 0
    return out


PANES = ("ops", "kernels", "queue", "critical-path", "memory", "python", "gpu-samples")


def test_every_rank_has_its_sections(public_traces: Path, two_ranks: Path) -> None:
    from aiprof.record.targets import load_traces

    page = two_ranks.read_text()
    views = report_views(list(load_traces([public_traces / "trace_filter"])))
    for anchor in PANES:
        section = page.split(f'<section id="{anchor}">', 1)[1].split("</section>", 1)[0]
        assert [section.count(f'class="rank-pane" data-rank="{r}"') for r in (0, 1)] == [1, 1]
    for v in views.ranks:  # each rank's own numbers, not rank 0's twice
        assert v.kernels.rows[0].name.split("<")[0] in page
        assert views.rows[v.rank].kernel_us == pytest.approx(v.kernels.kernel_us)
    distributed = page.split('<section id="distributed">', 1)[1].split("</section>", 1)[0]
    assert "Critical path across the ranks" in distributed and distributed.count("<tr>") >= 3
    assert views.across is not None and views.across.num_unjoined > 0


@pytest.mark.parametrize("pick", ["1", "all"])
def test_rank_picker_in_chromium(two_ranks: Path, pick: str) -> None:
    run = open_page(two_ranks, fragment=f"rank={pick}")
    assert run.console_errors == [] and f'data-rank-shown="{pick}"' in run.dom
    hidden = {r: run.dom.count(f'class="rank-pane" data-rank="{r}" hidden') for r in (0, 1)}
    assert hidden == ({0: len(PANES), 1: 0} if pick == "1" else {0: 0, 1: 0})
