"""Render a ``TraceDiff`` (B against A) as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from aiprof.analysis.diff import PARTS, TraceDiff
from aiprof.report.terminal import duration, shorten, text

PART_LABELS = {
    "compute_us": "compute",
    "communication_us": "communication (exposed)",
    "memory_us": "memory (copies, not hidden)",
    "host_idle_us": "idle, nothing queued (host)",
    "other_idle_us": "idle, work queued (waits)",
}


def render_diff(console: Console, diff: TraceDiff, limit: int) -> None:
    console.print(f"A: {text(diff.a_path)} ({diff.a.num_steps} steps)\n"
                  f"B: {text(diff.b_path)} ({diff.b.num_steps} steps)")
    table = Table(title="Step time, per step (B - A)", title_justify="left")
    for column in ("part", "A", "B", "B - A"):
        table.add_column(column, justify="right" if column != "part" else "left")
    table.add_row("step", duration(diff.a.step_us), duration(diff.b.step_us),
                  _signed(diff.delta_us("step_us")))
    for part in PARTS:
        table.add_row(PART_LABELS[part], duration(getattr(diff.a, part)),
                      duration(getattr(diff.b, part)), _signed(diff.delta_us(part)))
    console.print(table)
    moved = [c for c in diff.changes if c.status != "same"]
    table = Table(title="Ops and kernels that changed, per step, largest change first",
                  title_justify="left")
    table.add_column("name", overflow="fold")
    for column in ("", "status", "count A", "count B", "total A", "total B", "B - A"):
        table.add_column(column, justify="right")
    for c in moved[:limit]:
        table.add_row(text(shorten(c.name, 60)), c.kind, c.status, f"{c.a_count:.3g}",
                      f"{c.b_count:.3g}", duration(c.a_total_us), duration(c.b_total_us),
                      _signed(c.delta_total_us))
    console.print(table)
    if len(moved) > limit:
        console.print(f"({len(moved) - limit} more: --limit N, or --json for all)")


def _signed(us: float) -> str:
    return ("+" if us > 0 else "-" if us < 0 else "") + duration(abs(us))
