"""The ranking: by gain, a fix that needs another first only once that one ranks above it."""

from __future__ import annotations

from tests.support.ranking import assert_ranked

from aiprof.diagnose import DiagnoseOptions
from aiprof.diagnose.engine import rank_findings
from aiprof.diagnose.finding import Finding
from aiprof.diagnose.verdict import verdict


def finding(category: str, gain_pct: float, needs_first: tuple[str, ...] = ()) -> Finding:
    return Finding(category=category, title=category, estimated_gain_pct=gain_pct, evidence={},
                   fix="", model="", needs_first=needs_first)


def categories(findings: list[Finding]) -> list[str]:
    return [f.category for f in findings]


def test_a_graph_behind_a_cause_it_cannot_capture_ranks_after_it() -> None:
    """The H200 suite's Llama step: compile 36.3, allocator churn 19.4, and a CUDA graph that
    adds 37.8 once empty_cache is gone (it cannot be captured before)."""
    ranked = rank_findings([finding("cpu_bound", 37.8, ("allocator_churn",)),
                            finding("unfused_elementwise", 36.3),
                            finding("allocator_churn", 19.4), finding("low_occupancy", 2.0)])
    assert categories(ranked) == ["unfused_elementwise", "allocator_churn", "cpu_bound",
                                  "low_occupancy"]
    assert [f.rank for f in ranked] == [1, 2, 3, 4]
    assert_ranked([{"rank": f.rank, "category": f.category, "needs_first": list(f.needs_first),
                    "estimated_gain_pct": f.estimated_gain_pct} for f in ranked])


def test_once_its_prerequisite_ranks_a_finding_takes_its_place_by_gain() -> None:
    ranked = rank_findings([finding("a", 30.0), finding("p", 10.0), finding("b", 5.0),
                            finding("c", 3.0, ("p",)), finding("d", 50.0, ("p",))])
    assert categories(ranked) == ["a", "p", "d", "b", "c"]


def test_a_prerequisite_not_reported_does_not_hold_a_finding_back() -> None:
    ranked = rank_findings([finding("host_sync", 3.0),
                            finding("cpu_bound", 40.0, ("h2d_transfer",))])
    assert categories(ranked) == ["cpu_bound", "host_sync"]


def test_without_prerequisites_the_order_is_by_gain_then_category() -> None:
    ranked = rank_findings([finding("b", 5.0), finding("a", 5.0), finding("c", 9.0)])
    assert categories(ranked) == ["c", "a", "b"]


def test_the_verdict_names_the_fix_to_make_first() -> None:
    ranked = rank_findings([finding("cpu_bound", 90.2, ("host_sync",)), finding("host_sync", 2.1)])
    assert categories(ranked) == ["host_sync", "cpu_bound"]
    line = verdict(ranked, DiagnoseOptions(), True, 10_000.0, 90.5)
    assert "fix host_sync first, then cpu_bound: up to 90%" in line
    small = rank_findings([finding("cpu_bound", 4.0, ("host_sync",)), finding("host_sync", 2.1)])
    alone = verdict(small, DiagnoseOptions(), True, 10_000.0, 4.5)
    assert alone.startswith("Nothing worth fixing") and "largest: cpu_bound, 4.0%" in alone
