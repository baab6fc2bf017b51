"""Reading raw trace files with the standard library, independently of aiprof's reader."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

WORKLOADS = Path(__file__).parent / "workloads"


def raw_trace(path: Path) -> dict[str, Any]:
    """The trace JSON read with the standard library (independent of aiprof's reader)."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def step_names(trace: dict[str, Any]) -> list[str]:
    """Names of the ProfilerStep#N spans, in step order."""
    return sorted(
        (event["name"] for event in trace["traceEvents"]
         if event.get("ph") == "X" and str(event.get("name", "")).startswith("ProfilerStep#")),
        key=lambda name: int(name.split("#")[1]))
