"""GIVEN the H200 recording of a loop that preprocesses its batch on the host outside any
DataLoader, and its fixed twin timed without the profiler (scripts/h200/host_busy_twins.py,
2026-12-01) WHEN the recording is diagnosed THEN host_busy is the top finding and its gain is
within ±30% of the measured one."""

from __future__ import annotations

import json
from pathlib import Path

from aiprof.diagnose import diagnose

DATA = Path(__file__).parents[1] / "data" / "diagnose" / "host_busy"


def test_host_preprocessing_is_the_top_finding_within_30_pct_of_its_fix() -> None:
    labels = json.loads((DATA / "labels.json").read_text())
    assert labels["device"] == "NVIDIA H200" and not labels["smoke"]
    for case in labels["cases"]:
        result = diagnose(DATA / f"{case['case']}.trace.json.gz")
        top = result.findings[0]
        assert top.category == case["category"] == "host_busy"
        assert abs(top.estimated_gain_pct - case["gain_pct"]) <= 0.3 * case["gain_pct"]
