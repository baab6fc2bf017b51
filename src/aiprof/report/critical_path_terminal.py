"""Render a ``CriticalPath`` as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from aiprof.analysis.critical_join import JOINED_BOUNDS
from aiprof.analysis.critical_path import BOUNDS, CriticalPath
from aiprof.analysis.critical_ranks import RanksCriticalPath
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


def render_ranks_critical_path(console: Console, cp: RanksCriticalPath, limit: int) -> None:
    ranks = ", ".join(str(r) for r in cp.ranks)
    console.print(f"across ranks {ranks}, {text(cp.window)}: critical path "
                  f"{duration(cp.length_us)} ({len(cp.edge_type)} edges, "
                  f"{len(cp.stretches)} stretches; {cp.num_joined} collectives joined, "
                  f"{cp.num_unjoined} collective spans left on their rank)")
    table = Table(title="Stretches of the path, by rank", title_justify="left")
    for column in ("rank", "from", "to", "path time", "edges"):
        table.add_column(column, justify="right")
    table.add_column("most time in", overflow="fold")
    for s in cp.stretches[:limit]:
        table.add_row(str(s.rank), duration(s.start_us), duration(s.end_us),
                      duration(s.length_us), str(s.num_edges), text(shorten(s.top_name)))
    console.print(table)
    if len(cp.stretches) > limit:
        console.print(f"({len(cp.stretches) - limit} more stretches: --json for all)")
    table = Table(title="Across ranks, by what bounds it", title_justify="left")
    table.add_column("bound by")
    table.add_column("time", justify="right")
    table.add_column("% of path", justify="right")
    for bound in JOINED_BOUNDS:
        table.add_row(bound, duration(cp.by_bound_us[bound]), f"{cp.pct(bound):.1f}")
    console.print(table)
