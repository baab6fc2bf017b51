"""Terminal rendering of a ``Diagnosis`` (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from aiprof.diagnose.finding import Diagnosis
from aiprof.report.profiler_text import profiler_line
from aiprof.report.terminal import text

_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}
_NUMERIC = ("#", "gain %", "ms/step")


def render_diagnosis(console: Console, diagnosis: Diagnosis) -> None:
    """Findings table, then each finding's evidence and fix, then the verdict."""
    device = diagnosis.device or "no GPU"
    replayed = (f" (replay model: {diagnosis.replay_step_us / 1000:.2f} ms)"
                if diagnosis.replay_step_us > 0 else "")
    console.print(
        f"device: {text(device)}   ranks: {diagnosis.num_ranks}   "
        f"step: {diagnosis.step_us / 1000:.2f} ms{replayed}"
    )
    if diagnosis.profiler:
        console.print(text(profiler_line(diagnosis.profiler)))
    if diagnosis.findings:
        table = Table(title="Findings (ranked by estimated gain; \"after X\": make X's fix "
                            "first)")
        for column in ("#", "category", "severity", "gain %", "ms/step", "finding"):
            table.add_column(column, justify="right" if column in _NUMERIC else "left")
        for f in diagnosis.findings:
            table.add_row(str(f.rank), f.label, f"[{_STYLE[f.severity]}]{f.severity}[/]",
                          f"{f.estimated_gain_pct:.1f}", f"{f.estimated_gain_ms_per_step:.3f}",
                          text(f.title))
        console.print(table)
        for f in diagnosis.findings:
            console.print(f"[bold]{f.rank}. {f.label}[/]: {text(f.title)}")
            console.print(f"   gain: {f.estimated_gain_ms_per_step:.3f} ms per step "
                          f"({f.estimated_gain_pct:.1f}% of the step)")
            evidence = {k: v for k, v in f.evidence.items() if k != "replay_removed"}
            console.print(f"   evidence: {text(_flat(evidence))}")
            if "replay_removed" in f.evidence:
                console.print(f"   replay removed: {text(_parts(f.evidence['replay_removed']))}")
            console.print(f"   fix: {text(f.fix)}")
            console.print(f"   model: {text(f.model)}")
    for note in diagnosis.notes:
        console.print(f"note: {text(note)}")
    console.print(f"[bold]verdict:[/] {text(diagnosis.verdict)}")


def _flat(evidence: dict[str, Any]) -> str:
    parts = []
    for key, value in evidence.items():
        if value is None or (isinstance(value, list | str) and not value):  # nothing to show
            continue
        if isinstance(value, list):
            value = "; ".join(_item(v) for v in value[:3])
        parts.append(f"{key}={value}")
    return ", ".join(parts)


def _parts(parts: dict[str, Any]) -> str:
    """``gpu time 1.2 + ... = 3.4 ms per step; ops: name (count, ms) ...``."""
    names = (("gpu_time_ms_per_step", "GPU time"), ("turnaround_ms_per_step", "turnaround"),
             ("cpu_time_ms_per_step", "CPU time"), ("sync_waits_ms_per_step", "sync waits"),
             ("profiler_time_before_syncs_ms_per_step", "profiler time before syncs"))
    terms = [f"{label} {parts[key]:.3f}" for key, label in names if parts.get(key)]
    line = f"{' + '.join(terms) or '0'} = {parts['parts_ms_per_step']:.3f} ms per step"
    ops = parts.get("ops") or []
    if ops:
        line += "; ops: " + "; ".join(
            f"{str(o['name'])[:60]} ({o['count_per_step']:g} a step, "
            f"{o['removed_ms_per_step']:.3f} ms)"
            for o in ops[:3])
    return line


def _item(value: Any) -> str:
    if isinstance(value, dict):
        name = value.get("name") or value.get("op") or value.get("kind") or ""
        rest = [f"{k}={v}" for k, v in value.items() if k not in ("name", "op", "kind")]
        return f"{str(name)[:60]} ({', '.join(rest)})"
    return str(value)
