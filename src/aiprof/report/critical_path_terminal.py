"""Render a ``CriticalPath`` as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from aiprof.analysis.critical_path import BOUNDS, CriticalPath
from aiprof.report.terminal import duration, shorten, text


def render_critical_path(console: Console, cp: CriticalPath, limit: int) -> None:
    console.print(f"rank {cp.rank}, {text(cp.window)}: window {duration(cp.window_us)}, "
                  f"critical path {duration(cp.length_us)} ({len(cp.edge_type)} edges)")
    table = Table(title="Critical path by what bounds it", title_justify="left")
    table.add_column("bound by")
    table.add_column("time", justify="right")
    table.add_column("% of path", justify="right")
    for bound in BOUNDS:
        table.add_row(bound, duration(cp.by_bound_us[bound]), f"{cp.pct(bound):.1f}")
    console.print(table)
    table = Table(title="Ops and kernels on the critical path", title_justify="left")
    table.add_column("name", overflow="fold")
    for column in ("bound by", "edges", "time", "% of path"):
        table.add_column(column, justify="right")
    for op in cp.ops[:limit]:
        pct = 100.0 * op.time_us / cp.length_us if cp.length_us else 0.0
        table.add_row(text(shorten(op.name or "(launch to start)")), op.bound_by, str(op.count),
                      duration(op.time_us), f"{pct:.1f}")
    console.print(table)
    if len(cp.ops) > limit:
        console.print(f"({len(cp.ops) - limit} more: --limit N, or --json for all)")
