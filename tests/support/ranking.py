"""The ranking's contract, checked on a diagnosis document's findings."""

from __future__ import annotations

from typing import Any

from aiprof.diagnose.engine import SAME_GAIN_PCT


def assert_ranked(findings: list[dict[str, Any]]) -> None:
    """Ranks 1..n, each the largest estimated gain among the findings left (a fix that needs
    another first ranks by its own gain: its label names the other)."""
    assert [f["rank"] for f in findings] == list(range(1, len(findings) + 1))
    for i, f in enumerate(findings):
        open_ = findings[i:]
        # a broader fix that performs this one too, within SAME_GAIN_PCT of it, ranks after it
        rivals = [g for g in open_ if not (f["category"] in g.get("includes", ()) and
                                           g["estimated_gain_pct"] - f["estimated_gain_pct"]
                                           <= SAME_GAIN_PCT + 0.01)]  # JSON rounds to 0.01
        assert f["estimated_gain_pct"] >= max(g["estimated_gain_pct"] for g in rivals), (
            f["category"], [(g["category"], g["estimated_gain_pct"]) for g in open_])
