"""Render the op view and the kernel view as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from aiprof.analysis.kernel_view import KernelView
from aiprof.analysis.ops import OpView
from aiprof.report.terminal import duration, shorten, text


def render_op_view(console: Console, view: OpView, limit: int) -> None:
    table = Table(title=f"rank {view.rank} ({text(view.path)}): ops by self CPU time",
                  title_justify="left")
    table.add_column("name", overflow="fold")
    if view.by_shape:
        table.add_column("input shapes", overflow="fold")
    for column in ("kind", "count", "self CPU", "total CPU", "self GPU", "total GPU"):
        table.add_column(column, justify="right")
    for r in view.rows[:limit]:
        cells = [text(shorten(r.name))]
        if view.by_shape:
            cells.append(text(shorten(r.input_shapes or "", 40)))
        cells += [r.kind, f"{r.count:,}", duration(r.self_cpu_us), duration(r.total_cpu_us),
                  duration(r.self_gpu_us), duration(r.total_gpu_us)]
        table.add_row(*cells)
    console.print(table)
    _more(console, len(view.rows), limit)


def render_kernel_view(console: Console, view: KernelView, limit: int) -> None:
    console.print(
        f"rank {view.rank} ({text(view.path)}): kernels {duration(view.kernel_us)}, on tensor "
        f"cores {duration(view.tensor_core_us)} ({view.tensor_core_pct:.1f}% of kernel time, "
        f"{view.tensor_core_pct_of_math:.1f}% of GEMM/conv/attention time)"
    )
    table = Table(title_justify="left")
    table.add_column("kernel", overflow="fold")
    for column in ("count", "total", "mean", "min", "max", "%", "tensor cores"):
        table.add_column(column, justify="right")
    for r in view.rows[:limit]:
        table.add_row(text(shorten(r.name)), f"{r.count:,}", duration(r.total_us),
                      duration(r.mean_us), duration(r.min_us), duration(r.max_us),
                      f"{r.pct:.1f}", "yes" if r.tensor_core else "no")
    console.print(table)
    _more(console, len(view.rows), limit)


def _more(console: Console, rows: int, limit: int) -> None:
    if rows > limit:
        console.print(f"({rows - limit} more rows: --limit N, or --json for all)")
