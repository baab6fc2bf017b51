"""The ranking's contract, checked on a diagnosis document's findings."""

from __future__ import annotations

from typing import Any


def assert_ranked(findings: list[dict[str, Any]]) -> None:
    """Ranks 1..n, each the largest estimated gain among the findings left whose
    ``needs_first`` categories (those present) rank above it: without prerequisites, the
    order of the gains."""
    assert [f["rank"] for f in findings] == list(range(1, len(findings) + 1))
    present = {f["category"] for f in findings}
    for i, f in enumerate(findings):
        above = {g["category"] for g in findings[:i]}
        open_ = [g for g in findings[i:]
                 if all(c in above or c not in present for c in g["needs_first"])]
        assert f in open_, (f["category"], f["needs_first"])
        assert f["estimated_gain_pct"] >= max(g["estimated_gain_pct"] for g in open_), (
            f["category"], [(g["category"], g["estimated_gain_pct"]) for g in open_])
