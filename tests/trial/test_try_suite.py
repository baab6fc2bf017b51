"""The H200 suite's pairing of each fix with its twin and the acceptance rule (no GPU needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "h200" / "try_suite.py"


def _suite() -> ModuleType:
    spec = importlib.util.spec_from_file_location("try_suite", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(name: str, gain: float | None, *, edited: bool = False,
         status: str = "measured") -> dict[str, object]:
    return {"name": name, "edited": edited, "status": status, "measured_gain_pct": gain,
            "interval_pct": None, "round_gains_pct": [], "verdict": None,
            "median_step_us": None, "peak_memory_bytes": None, "reason": "",
            "compile_s": None, "numerics": None}


def test_agreement_is_10_pct_relative_or_2_points() -> None:
    suite = _suite()
    assert suite.agreement(31.0, 30.0)["agree"] is True      # 1 point
    assert suite.agreement(36.0, 40.0)["agree"] is True      # 10% of 40
    assert suite.agreement(35.0, 40.0)["agree"] is False     # 12.5% of 40
    assert suite.agreement(1.5, -0.4)["agree"] is True       # small gains: 2 points
    assert suite.agreement(None, 3.0)["agree"] is None


def test_each_fix_is_paired_with_its_twin() -> None:
    suite = _suite()
    document = {"fixes": [_row("tf32", 20.0), _row("tf32_twin", 21.0, edited=True),
                          _row("bf16", None, status="failed"),
                          _row("bf16_twin", 30.0, edited=True)]}
    pairs = {p["fix"]: p for p in suite.compare(document, ["tf32", "bf16"])}
    assert pairs["tf32"]["agree"] is True and pairs["tf32"]["difference_points"] == -1.0
    assert pairs["bf16"]["aiprof"]["status"] == "failed" and pairs["bf16"]["agree"] is None


def test_every_twin_names_a_known_fix_and_a_script_of_the_suite() -> None:
    from aiprof.trial.catalog import BY_NAME

    suite = _suite()
    twins = {name: suite.twins_of(name) for name in suite.SCRIPTS}
    assert sum(len(t) for t in twins.values()) >= 20
    assert {fix for t in twins.values() for fix in t} == set(BY_NAME)  # every fix has a twin
    assert all(fix in BY_NAME for t in twins.values() for fix in t)
    assert sum("compile" in t for t in twins.values()) <= 3
