"""Render a ``MemoryView`` (memory by op) as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from aiprof.analysis.memory_ops import MemoryView
from aiprof.report.terminal import duration, shorten, text


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.2f} MiB"


def render_memory_view(console: Console, view: MemoryView, limit: int) -> None:
    if not view.devices:
        console.print(f"rank {view.rank}: no [memory] events (record with profile_memory=True)")
    for d in view.devices:
        where = d.label
        stack = " > ".join(text(shorten(n, 50)) for n in d.ops_at_peak) or "no op"
        console.print(f"rank {view.rank}, {where}: peak {mib(d.peak_bytes)} at "
                      f"{duration(d.peak_us)}, {d.num_alive_at_peak:,} blocks alive; "
                      f"running then: {stack}")
        table = Table(title_justify="left")
        table.add_column("op (own allocator events)", overflow="fold")
        for column in ("allocs", "allocated", "frees", "freed", "net", "alive at peak"):
            table.add_column(column, justify="right")
        for o in d.ops[:limit]:
            table.add_row(text(shorten(o.name)), f"{o.num_allocations:,}", mib(o.allocated_bytes),
                          f"{o.num_frees:,}", mib(o.freed_bytes), mib(o.net_bytes),
                          mib(o.alive_at_peak_bytes))
        console.print(table)
