"""The ranking: by gain; a fix that needs another first names it in its label and the verdict."""

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


def test_a_graph_behind_a_cause_it_cannot_capture_ranks_by_its_gain() -> None:
    """The H200 suite's RL policy: a CUDA graph adds 90.2% once the per-step .item() reads are
    gone (it cannot capture them), the reads themselves 2.1%. The graph ranks first, labelled
    with the fix to make before it."""
    ranked = rank_findings([finding("host_sync", 2.1), finding("unfused_elementwise", 2.7),
                            finding("cpu_bound", 90.2, ("host_sync",))])
    assert categories(ranked) == ["cpu_bound", "unfused_elementwise", "host_sync"]
    assert [f.rank for f in ranked] == [1, 2, 3]
    assert ranked[0].label == "cpu_bound (after host_sync)"
    assert_ranked([{"rank": f.rank, "category": f.category, "needs_first": list(f.needs_first),
                    "estimated_gain_pct": f.estimated_gain_pct} for f in ranked])


def test_a_small_prerequisite_does_not_put_another_fix_above_the_largest() -> None:
    """The H200 suite's Llama inference step: transformers' padding check (`if torch.all(...)`)
    syncs once a step, 1.5%; compile 55.9%; graphs 92.7% (measured 91.8: the check is skipped
    while a stream captures). Ranked with prerequisites first, compile had come first."""
    ranked = rank_findings([finding("host_sync", 1.5), finding("unfused_elementwise", 55.9),
                            finding("cpu_bound", 92.7, ("host_sync",))])
    assert categories(ranked) == ["cpu_bound", "unfused_elementwise", "host_sync"]


def test_without_prerequisites_the_order_is_by_gain_then_category() -> None:
    ranked = rank_findings([finding("b", 5.0), finding("a", 5.0), finding("c", 9.0)])
    assert categories(ranked) == ["c", "a", "b"]


def test_the_verdict_names_the_fix_to_make_first() -> None:
    ranked = rank_findings([finding("cpu_bound", 90.2, ("host_sync",)), finding("host_sync", 2.1)])
    assert categories(ranked) == ["cpu_bound", "host_sync"]
    line = verdict(ranked, DiagnoseOptions(), True, 10_000.0, 90.5)
    assert "fix host_sync first, then cpu_bound: up to 90%" in line
    small = rank_findings([finding("cpu_bound", 4.0, ("host_sync",)), finding("host_sync", 2.1)])
    alone = verdict(small, DiagnoseOptions(), True, 10_000.0, 4.5)
    assert alone.startswith("Nothing worth fixing") and "largest: cpu_bound, 4.0%" in alone
