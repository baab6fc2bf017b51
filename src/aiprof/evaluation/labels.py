"""The counterfactual suite's labels: every measured fix of every workload, and where its
traces are. Reads the suite's ``labels*.json`` (``scripts/h200/counterfactual_suite.py``) and
the older one-planted-fix-per-case ``labels.json`` of the diagnose suite."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiprof.errors import InputError


@dataclass(frozen=True)
class MeasuredFix:
    name: str
    category: str
    """The diagnosis category this fix is the measured truth for."""
    gain_pct: float | None
    """Step time saved, % of the base step; 0 for a fix with nothing to change; None when it
    could not be measured."""
    note: str = ""
    """Why it is 0 or unknown (not applicable, not capturable, skipped, error)."""


@dataclass(frozen=True)
class LabelledWorkload:
    name: str
    description: str
    causes: tuple[str, ...]
    fixes: tuple[MeasuredFix, ...]
    trace: Path
    """What to diagnose: the aiprof record folder, or a trace file (the plain trace where the
    record's capture failed)."""
    plain_trace: Path | None = None
    """The plain torch.profiler trace, when recorded."""


def _fix(row: dict[str, Any]) -> MeasuredFix:
    gain = row.get("gain_pct")
    note = str(row.get("reason") or row.get("skipped") or "")
    return MeasuredFix(str(row["name"]), str(row["category"]),
                       None if gain is None else float(gain), note)


def _from_suite(doc: dict[str, Any], folder: Path) -> list[LabelledWorkload]:
    out = []
    for w in doc["workloads"]:
        if "error" in w:
            continue
        traces = w.get("traces", {})
        plain = folder / str(traces["torch"]) if "torch" in traces else None
        record = folder / str(traces["aiprof"]) if "aiprof" in traces else None
        if record is None or not record.exists():  # a failed capture: its plain trace
            record = plain
        if record is None:
            continue
        out.append(LabelledWorkload(
            str(w["workload"]), str(w.get("description", "")), tuple(w.get("causes", ())),
            tuple(_fix(f) for f in w["fixes"]), record, plain))
    return out


def single_fix_as_suite(doc: dict[str, Any]) -> dict[str, Any]:
    """The diagnose suite's labels (one planted fix per case) in the counterfactual format:
    the planted fix is measured, every other fix is unknown (absent); healthy twins, which
    measured no fix, are left out."""
    workloads = []
    for case in doc["cases"]:
        category = str(case.get("category"))
        if "error" in case or category == "none":
            continue
        name = f"planted fix of {case['case']}"
        workloads.append({
            "workload": str(case["case"]), "description": "", "causes": [name],
            "fixes": [{"name": name, "category": category, "applicable": True,
                       "gain_pct": float(case["gain_pct"])}],
            "traces": {"aiprof": str(case["trace"])}})
    return {"workloads": workloads}


def _documents(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    files = sorted(folder.glob("labels*.json"))
    if not files:
        raise InputError(f"{folder}: no labels*.json; give the folder the counterfactual "
                         "suite (or the diagnose suite) wrote")
    docs = []
    for path in files:
        try:
            docs.append((path, json.loads(path.read_text())))
        except (OSError, ValueError) as error:
            raise InputError(f"{path}: not a readable labels file ({error})") from error
    return docs


def merged(folder: Path) -> dict[str, Any]:
    """One labels document from the suite's per-part files (``labels-part1.json``, ...): each
    part's header under ``parts``, every workload once (a measured row replaces a skipped one,
    a later file's row an earlier one's)."""
    parts, rows = {}, {}
    for path, doc in _documents(folder):
        if "workloads" not in doc:
            raise InputError(f"{path}: no 'workloads'; not a counterfactual suite's labels")
        parts[path.name] = {k: v for k, v in doc.items() if k != "workloads"}
        for row in doc["workloads"]:
            if "error" not in row or row["workload"] not in rows:
                rows[row["workload"]] = row
    return {"parts": parts, "workloads": list(rows.values())}


def load_suite(folder: Path) -> list[LabelledWorkload]:
    """Every labelled workload of a suite folder whose trace is present (one per name: where
    two files measured it, the one later in name order)."""
    workloads = []
    for path, doc in _documents(folder):
        if "workloads" in doc:
            workloads += _from_suite(doc, folder)
        elif "cases" in doc:
            workloads += _from_suite(single_fix_as_suite(doc), folder)
        else:
            raise InputError(f"{path}: neither 'workloads' nor 'cases'; not a suite's labels")
    by_name = {w.name: w for w in workloads}  # a re-run (labels-<tag>.json) replaces a row
    return [w for w in by_name.values() if w.trace.exists()]
