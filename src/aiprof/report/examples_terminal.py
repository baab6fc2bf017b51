"""Render the list of traces shipped with aiprof as a rich table."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from aiprof.record.examples import Example


def render_examples(console: Console, found: Sequence[Example]) -> None:
    table = Table(title="Traces shipped with aiprof: pass TARGET to any command that reads traces",
                  title_justify="left")
    for column in ("target", "size", "what", "license"):
        table.add_column(column, justify="right" if column == "size" else "left")
    for e in found:
        table.add_row(e.target, f"{e.size_bytes / 1024:,.0f} KiB", e.what, e.license)
    console.print(table)
    console.print("where each was recorded: aiprof examples --json (field 'origin')\n"
                  "for example: aiprof summary example:a100_nccl")
