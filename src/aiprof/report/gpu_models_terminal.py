"""Render the warp-level models (bank conflicts, coalescing, divergence) as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from aiprof.gpu.banks import BankConflicts
from aiprof.gpu.coalescing import Coalescing
from aiprof.gpu.divergence import Divergence


def render_bank_conflicts(console: Console, title: str, rows: list[tuple[str, BankConflicts]],
                          suggested_pad: int | None) -> None:
    """One row per labelled request; ``suggested_pad`` (of a tile) is printed below."""
    table = Table(title=escape(f"Shared-memory bank conflicts: {title}"))
    for header in ("request", "wavefronts", "ideal", "conflicts", "ways", "packed"):
        table.add_column(header, justify="right")
    for label, r in rows:
        table.add_row(label, str(r.wavefronts), str(r.ideal_wavefronts), str(r.conflicts),
                      f"{r.ways}-way", "yes" if r.packed else "no")
    console.print(table)
    if suggested_pad is not None:
        console.print(f"padding that removes column-read conflicts: {suggested_pad} "
                      "element(s) per row")


def render_coalescing(console: Console, rows: list[tuple[str, Coalescing]]) -> None:
    """One row per labelled warp request (a stride, or ``addresses``)."""
    table = Table(title="Global-memory coalescing per warp request (sm_70+: 32-byte sectors)")
    for header in ("stride", "sectors/req", "ideal", "useful B", "fetched B", "efficiency",
                   "128 B lines (legacy)", "legacy eff."):
        table.add_column(header, justify="right")
    for label, r in rows:
        table.add_row(label, str(r.sectors_per_request), str(r.ideal_sectors_per_request),
                      str(r.bytes_useful), str(r.bytes_fetched), f"{100 * r.efficiency:.1f}%",
                      str(r.legacy_transactions), f"{100 * r.legacy_efficiency:.1f}%")
    console.print(table)


def render_divergence(console: Console, result: Divergence) -> None:
    table = Table(title="Warp divergence (one warp, paths serialized)", show_header=False)
    paths = ", ".join(f"{p}: {n} lanes" for p, n in result.lanes_per_path.items())
    for key, value in (("paths taken", paths),
                       ("serialized cost", f"{result.serialized_cost:g}"),
                       ("cost without divergence", f"{result.converged_cost:g}"),
                       ("slowdown", f"{result.slowdown:.2f}x"),
                       ("avg active threads / instruction",
                        f"{result.avg_active_threads_per_instruction:.2f} of 32"),
                       ("SIMT efficiency", f"{100 * result.simt_efficiency:.1f}%")):
        table.add_row(key, value)
    console.print(table)
    console.print(result.note)
