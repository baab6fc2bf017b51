"""Render ``RankSummary`` objects as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from aiprof.analysis.step_breakdown import CATEGORIES
from aiprof.analysis.summary import RankSummary
from aiprof.analysis.top import NameTotal
from aiprof.report.terminal import duration, shorten, text


def render_summaries(console: Console, summaries: list[RankSummary]) -> None:
    for s in summaries:
        render_summary(console, s)


def device_text(s: RankSummary) -> str:
    """The GPU's name; a trace with GPU activity but no ``deviceProperties`` is not CPU-only."""
    if s.device:
        return s.device
    if s.gpu_busy_pct > 0 or s.top_kernels:
        return "a GPU, not named (the trace has no deviceProperties)"
    return "none (CPU only)"


def render_summary(console: Console, s: RankSummary) -> None:
    t = s.step_time
    console.print(
        f"[bold]rank {s.rank}[/bold]  {text(s.path)}\n"
        f"device: {text(device_text(s))}   events: {s.num_events:,}   "
        f"steps: {s.num_steps} (from {text(s.step_source)})\n"
        f"step time: mean {duration(t.mean_us)}, median {duration(t.median_us)}, "
        f"min {duration(t.min_us)}, max {duration(t.max_us)}   "
        f"GPU busy: {s.gpu_busy_pct:.1f}%"
    )
    if s.gpu_busy_pct > 0 or s.device:
        console.print(_temporal_table(s))
    else:
        console.print("no GPU activity in this trace")
    console.print(_step_table(s))
    if s.top_kernels:
        console.print(_top_table("Top kernels (GPU time in the steps)", s.top_kernels))
    if s.top_ops:
        title = "Top CPU ops (inclusive time in the steps; % of step time; ops nest)"
        console.print(_top_table(title, s.top_ops))
    console.print()


def _temporal_table(s: RankSummary) -> Table:
    b = s.temporal
    table = Table(title="GPU time over the steps", title_justify="left")
    table.add_column("part")
    table.add_column("time", justify="right")
    table.add_column("%", justify="right")
    rows = [
        ("compute", b.compute_us),
        ("communication (exposed)", b.communication_us),
        ("memory (copies, not hidden)", b.memory_us),
        ("idle", b.idle_us),
    ]
    for name, value in rows:
        table.add_row(name, duration(value), f"{b.pct(value):.1f}")
    return table


def _step_table(s: RankSummary) -> Table:
    table = Table(title="Step time by category (tb-profiler's)", title_justify="left")
    table.add_column("category")
    table.add_column("per step", justify="right")
    table.add_column("%", justify="right")
    for category in CATEGORIES:
        table.add_row(
            category, duration(s.steps.per_step_us[category]), f"{s.steps.pct(category):.1f}"
        )
    return table


def _top_table(title: str, rows: list[NameTotal]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("name", overflow="fold")
    table.add_column("count", justify="right")
    table.add_column("total", justify="right")
    table.add_column("mean", justify="right")
    table.add_column("%", justify="right")
    for r in rows:
        table.add_row(
            text(shorten(r.name)),
            f"{r.count:,}",
            duration(r.total_us),
            duration(r.mean_us),
            f"{r.pct:.1f}",
        )
    return table
