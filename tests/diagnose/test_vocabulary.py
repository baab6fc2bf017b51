"""The vocabulary is the list of rule objects: one module per category, nothing else lists them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


def test_the_report_diagnoses_each_rank_once_or_reuses_the_diagnosis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.kineto_synth import gpu_bound

    from aiprof.diagnose import engine
    from aiprof.diagnose.report_data import report_data
    from aiprof.trace import TraceSet, load_trace

    calls: list[int] = []
    original = engine.diagnose_trace

    def counting(trace, options=None):  # type: ignore[no-untyped-def]
        calls.append(trace.rank)
        return original(trace, options)

    monkeypatch.setattr(engine, "diagnose_trace", counting)
    traces = TraceSet((load_trace(gpu_bound(tmp_path / "t.json.gz")),), "single trace")
    data = report_data(traces, "t")
    assert len(calls) == 1 and data.diagnosis.findings is not None
    again = report_data(traces, "t", diagnosis=data.diagnosis)
    assert len(calls) == 1 and again.diagnosis is data.diagnosis
    assert len(again.ranks) == 1


def test_a_model_module_imports_first_in_a_fresh_interpreter() -> None:
    """``diagnose/compiled.py`` uses helpers of two rule modules, and ``unfused_elementwise``
    uses it: the vocabulary is discovered when it is first used, not when ``rules`` is imported,
    so importing the model first does not meet the rule half-built."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import aiprof.diagnose.compiled as c; "
         "from aiprof.diagnose.rules import RULES; print(len(RULES), c.compile_change.__name__)"],
        capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.split() == [str(len(RULES)), "compile_change"]
