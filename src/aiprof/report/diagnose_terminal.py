"""Terminal rendering of a ``Diagnosis`` (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from aiprof.diagnose.finding import Diagnosis
from aiprof.report.profiler_text import profiler_line
from aiprof.report.terminal import text

_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}


def render_diagnosis(console: Console, diagnosis: Diagnosis) -> None:
    """Findings table, then each finding's evidence and fix, then the verdict."""
    device = diagnosis.device or "no GPU"
    console.print(
        f"device: {text(device)}   ranks: {diagnosis.num_ranks}   "
        f"step: {diagnosis.step_us / 1000:.2f} ms (replay model: "
        f"{diagnosis.replay_step_us / 1000:.2f} ms)"
    )
    if diagnosis.profiler:
        console.print(text(profiler_line(diagnosis.profiler)))
    if diagnosis.findings:
        table = Table(title="Findings (ranked by estimated gain)")
        for column in ("#", "category", "severity", "gain %", "finding"):
            table.add_column(column, justify="right" if column in ("#", "gain %") else "left")
        for f in diagnosis.findings:
            table.add_row(str(f.rank), f.category, f"[{_STYLE[f.severity]}]{f.severity}[/]",
                          f"{f.estimated_gain_pct:.1f}", text(f.title))
        console.print(table)
        for f in diagnosis.findings:
            console.print(f"[bold]{f.rank}. {f.category}[/]: {text(f.title)}")
            console.print(f"   evidence: {text(_flat(f.evidence))}")
            console.print(f"   fix: {text(f.fix)}")
            console.print(f"   model: {text(f.model)}")
    for note in diagnosis.notes:
        console.print(f"note: {text(note)}")
    console.print(f"[bold]verdict:[/] {text(diagnosis.verdict)}")


def _flat(evidence: dict[str, Any]) -> str:
    parts = []
    for key, value in evidence.items():
        if value is None or value == [] or value == "":  # nothing to show: leave the key out
            continue
        if isinstance(value, list):
            value = "; ".join(_item(v) for v in value[:3])
        parts.append(f"{key}={value}")
    return ", ".join(parts)


def _item(value: Any) -> str:
    if isinstance(value, dict):
        name = value.get("name") or value.get("op") or value.get("kind") or ""
        rest = [f"{k}={v}" for k, v in value.items() if k not in ("name", "op", "kind")]
        return f"{str(name)[:60]} ({', '.join(rest)})"
    return str(value)
