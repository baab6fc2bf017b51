"""The ranking's contract, checked on a diagnosis document's findings."""

from __future__ import annotations

from typing import Any


def assert_ranked(findings: list[dict[str, Any]]) -> None:
    """Ranks 1..n; by estimated gain (highest first), except that a finding comes after every
    present category it ``needs_first``, and right after the last of them."""
    assert [f["rank"] for f in findings] == list(range(1, len(findings) + 1))
    present = {f["category"]: i for i, f in enumerate(findings)}
    free = [f["estimated_gain_pct"] for f in findings
            if not any(c in present for c in f["needs_first"])]
    assert free == sorted(free, reverse=True), free
    for i, f in enumerate(findings):
        before = [present[c] for c in f["needs_first"] if c in present]
        if before:
            assert max(before) < i, (f["category"], f["needs_first"])
            between = findings[max(before) + 1:i]
            # only others released by the same prerequisite sit between it and that one
            assert all(g["needs_first"] for g in between), (
                f["category"], [g["category"] for g in between])
