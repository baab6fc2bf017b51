"""The counterfactual suite's labels: every measured fix of every workload, and where its
traces are. Reads the suite's ``labels*.json`` (``scripts/h200/counterfactual_suite.py``) and
the older one-planted-fix-per-case ``labels.json`` of the diagnose suite."""

from __future__ import annotations

import json
import statistics
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


def _timed_fix(name: str, category: str, gain_pct: float, base_rounds_ms: list[float],
               fixed_rounds_ms: list[float]) -> dict[str, Any]:
    """A fix timed in the suite's protocol elsewhere, as a suite row's fix: each round's gain
    against the base block of the same round."""
    paired = [round(100.0 * (1.0 - f / b), 2)
              for b, f in zip(base_rounds_ms, fixed_rounds_ms, strict=True)]
    return {"name": name, "category": category, "applicable": True, "gain_pct": float(gain_pct),
            "rounds": len(paired), "round_gain_pct": paired,
            "base_rounds_ms": list(base_rounds_ms), "fixed_rounds_ms": list(fixed_rounds_ms)}


_TIMED_THEN_TRACED = (": the base and the fixed variant timed interleaved in the suite's "
                     "protocol, then traced apart")


def timed_pairs_as_suite(doc: dict[str, Any], categories: dict[str, str]) -> dict[str, Any]:
    """What ``scripts/h200/fix_twins.py`` (``pairs``: a workload's base and one fix),
    ``scripts/h200/compiled_steps.py`` (``workloads``: the base and its ``compile`` fix) or
    ``scripts/h200/read_feeders_twins.py`` (``workloads``: the base and variants, by name) timed,
    in the suite's protocol (interleaved rounds without the profiler), as suite rows, so that
    ``pooled_row`` pools each round's paired gain with the suite's own rounds of that fix.
    ``categories``: fix name to category (the suite's ``fix_categories``). The rows carry no
    traces: the suite's stay the ones diagnosed."""
    rows: dict[str, dict[str, Any]] = {}
    if "pairs" in doc:
        timed = [(str(p["workload"]), str(p["fix"]), p) for p in doc["pairs"]]
        method = "fix twins (scripts/h200/fix_twins.py)" + _TIMED_THEN_TRACED
    elif all("compile_rounds_ms" in w or "error" in w for w in doc["workloads"]):
        timed = [(str(w["workload"]), "compile", w) for w in doc["workloads"]]
        method = "compiled steps (scripts/h200/compiled_steps.py)" + _TIMED_THEN_TRACED
    else:  # variants timed together; those that are no suite fix (reads_only) stay out
        timed = [(str(w["workload"]), name, w) for w in doc["workloads"]
                 for name in w["rounds_ms"] if name in categories]
        method = ("read twins (scripts/h200/read_feeders_twins.py): the base and its variants "
                  "timed interleaved in the suite's protocol, then the base recorded")
    for workload, fix, found in timed:
        if "error" in found or found.get("gain_pct") is None:
            continue
        if "rounds_ms" in found:
            base, fixed = found["rounds_ms"]["base"], found["rounds_ms"][fix]
        else:
            base, fixed = found["base_rounds_ms"], found["compile_rounds_ms"]
        gain = found["gain_pct"]
        row = rows.setdefault(workload, {"workload": workload, "fixes": []})
        row["fixes"].append(_timed_fix(fix, categories[fix],
                                       gain[fix] if isinstance(gain, dict) else gain, base, fixed))
    return {"device": doc.get("device"), "torch": doc.get("torch"),
            "method": method,
            "fix_categories": categories, "workloads": list(rows.values())}


LABELS = "labels*.json"
"""Every labels file of a suite folder: its sessions, re-runs and pooled timed fixes."""


def truths_only(doc: dict[str, Any]) -> dict[str, Any]:
    """A session's labels as truths to pool into another recording's suite: every row as
    recorded, without its traces (those stay with the session's own folder, where the
    session is scored alone)."""
    return {**doc, "workloads": [{k: v for k, v in row.items() if k != "traces"}
                                 for row in doc["workloads"]]}


def _documents(folder: Path, pattern: str = LABELS) -> list[tuple[Path, dict[str, Any]]]:
    files = sorted(folder.glob(pattern))
    if not files:
        raise InputError(f"{folder}: no {pattern}; give the folder the counterfactual "
                         "suite (or the diagnose suite) wrote")
    docs = []
    for path in files:
        try:
            docs.append((path, json.loads(path.read_text())))
        except (OSError, ValueError) as error:
            raise InputError(f"{path}: not a readable labels file ({error})") from error
    return docs


def _rows_by_workload(docs: list[tuple[Path, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Every file's rows of each workload, in file order; a skipped or failed row only where
    no file measured that workload."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for path, doc in docs:
        if "workloads" in doc:
            found = doc["workloads"]
        elif "cases" in doc:
            found = single_fix_as_suite(doc)["workloads"]
        else:
            raise InputError(f"{path}: neither 'workloads' nor 'cases'; not a suite's labels")
        for row in found:
            rows.setdefault(str(row["workload"]), []).append(row)
    return {name: [r for r in same if "error" not in r] or same[-1:]
            for name, same in rows.items()}


def pooled_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One workload's row over several sessions of the suite: the first row that recorded
    traces, its fixes pooled.
    A fix measured in more than one session gets the median of every round's paired gain
    (each fix block against the base block of its round), so that a session whose host ran
    slower shifts neither side; a fix measured once keeps its own gain."""
    if len(rows) == 1:
        return rows[0]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        for fix in row.get("fixes", ()):
            by_name.setdefault(str(fix["name"]), []).append(fix)
    fixes = []
    for measured in by_name.values():
        sessions = [f for f in measured if f.get("gain_pct") is not None
                    and f.get("round_gain_pct")]
        if len(sessions) < 2:  # the one measurement, else the last file's reason why none
            fixes.append(sessions[0] if sessions else measured[-1])
            continue
        rounds = [float(g) for f in sessions for g in f["round_gain_pct"]]
        fixes.append({**sessions[-1], "gain_pct": round(float(statistics.median(rounds)), 2),
                      "round_gain_pct": rounds,
                      "reason": f"median of {len(rounds)} paired rounds over "
                                f"{len(sessions)} sessions"})
    recorded = [row for row in rows if row.get("traces")] or rows
    return {**recorded[0], "fixes": fixes}


def merged(folder: Path) -> dict[str, Any]:
    """One labels document from the suite's per-part files (``labels-part1.json``, ...): each
    part's header under ``parts``, every workload once (a measured row replaces a skipped one;
    a workload measured in several files is ``pooled_row``)."""
    docs = _documents(folder)
    parts = {}
    for path, doc in docs:
        if "workloads" not in doc:
            raise InputError(f"{path}: no 'workloads'; not a counterfactual suite's labels")
        parts[path.name] = {k: v for k, v in doc.items() if k != "workloads"}
    return {"parts": parts,
            "workloads": [pooled_row(same) for same in _rows_by_workload(docs).values()]}


def load_truths(folder: Path, pattern: str = LABELS) -> list[LabelledWorkload]:
    """Every measured workload of a suite folder, its fixes pooled as ``load_suite`` pools
    them, whether or not its traces are there (a truths-only recording, ``--no-traces``): for
    comparing sessions' truths (``reproducibility.truth_agreement``), not for scoring."""
    return [LabelledWorkload(str(w["workload"]), str(w.get("description", "")),
                             tuple(w.get("causes", ())), tuple(_fix(f) for f in w["fixes"]),
                             folder / f"{w['workload']}.aiprof")
            for w in _pooled_rows(folder, pattern) if "error" not in w]


def _pooled_rows(folder: Path, pattern: str) -> list[dict[str, Any]]:
    """Each workload's row of the folder's labels files, its fixes pooled (``pooled_row``)."""
    return [pooled_row(same) for same in _rows_by_workload(_documents(folder, pattern)).values()]


def load_suite(folder: Path, pattern: str = LABELS) -> list[LabelledWorkload]:
    """Every labelled workload of a suite folder whose trace is present, once: where several
    files measured it (a re-run, ``labels-<tag>.json``), its traces are the first file's and
    its fixes pooled (``pooled_row``). ``pattern`` picks the files: ``labels-part*.json``
    reads one session alone, its traces and the truths timed beside them."""
    workloads = _from_suite({"workloads": _pooled_rows(folder, pattern)}, folder)
    return [w for w in workloads if w.trace.exists()]


def base_rounds_ms(folder: Path, pattern: str = LABELS) -> dict[str, list[float]]:
    """Every timed base block of each workload (ms, a block's median or mean step), over every
    session the files of ``pattern`` hold: the host's speed while the truths were timed."""
    return {name: [float(t) for row in same for t in row.get("base_rounds_ms", ())]
            for name, same in _rows_by_workload(_documents(folder, pattern)).items()}
