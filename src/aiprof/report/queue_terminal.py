"""Render ``QueueResult`` (launch queue length per stream) as a rich table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from aiprof.analysis.queue import QueueResult
from aiprof.report.terminal import text


def render_queues(console: Console, results: list[QueueResult]) -> None:
    for result in results:
        table = Table(
            title=f"rank {result.rank} ({text(result.path)}): launch queue length per stream",
            title_justify="left",
        )
        for column in ("device", "stream", "ops", "mean (time)", "max", "median (points)",
                       "empty %", "empty and idle %"):
            table.add_column(column, justify="right")
        for s in result.streams:
            table.add_row(
                str(s.device), str(s.stream), f"{s.num_ops:,}", f"{s.time_mean:.2f}",
                f"{s.hta_max:.0f}", f"{s.hta_p50:.0f}", f"{s.empty_pct:.1f}",
                f"{s.empty_idle_pct:.1f}",
            )
        console.print(table if result.streams else f"rank {result.rank}: no launched GPU ops")
    console.print(
        "empty %: share of the steps with nothing waiting on the stream; "
        "and idle: nothing running either (the GPU waited for the host)"
    )
