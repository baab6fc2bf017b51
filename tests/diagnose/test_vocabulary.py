"""The vocabulary is the list of rule objects: one module per category, nothing else lists them."""

from __future__ import annotations

import re
from pathlib import Path

from aiprof.diagnose.rule import Rule
from aiprof.diagnose.rules import CATEGORIES, HOST_SIDE, RULES, rule

DOCS = Path(__file__).resolve().parents[2] / "docs" / "diagnose.md"
RULES_DIR = Path(__file__).resolve().parents[2] / "src" / "aiprof" / "diagnose" / "rules"


def test_every_rule_module_is_one_category() -> None:
    modules = sorted(p.stem for p in RULES_DIR.glob("*.py") if not p.name.startswith("_"))
    assert sorted(CATEGORIES) == modules  # the module is named after its category
    assert len(set(CATEGORIES)) == len(CATEGORIES)
    for r in RULES:
        assert isinstance(r, Rule) and r.meaning
        assert (r.find is None) != (r.find_ranks is None)  # per trace or across ranks
        assert re.fullmatch(r"[a-z0-9_]+", r.category)
        assert rule(r.category) is r
    assert HOST_SIDE <= set(CATEGORIES)
    assert {r.category for r in RULES if r.blocks_capture} == {
        "host_sync", "h2d_transfer", "allocator_churn"}


def test_every_category_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for category in CATEGORIES:
        assert f"| `{category}` |" in text, f"docs/diagnose.md has no row for {category}"
