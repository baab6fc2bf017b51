"""Render one occupancy result, or a sweep of one launch parameter, as rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from aiprof.gpu.occupancy import Occupancy
from aiprof.gpu.occupancy_sweep import BestBlockSize, OccupancySweep


def render_occupancy(console: Console, result: Occupancy) -> None:
    table = Table(title=f"Occupancy on {result.arch}", show_header=False)
    rows = [
        ("block size / warps per block", f"{result.block_size} / {result.warps_per_block}"),
        ("registers per thread / per warp (allocated)",
         f"{result.registers_per_thread} / {result.registers_per_warp}"),
        ("shared memory per block (requested / allocated)",
         f"{result.shared_mem_per_block_bytes} / {result.allocated_shared_mem_per_block_bytes} B"),
        ("SM shared-memory config", f"{result.shared_mem_config_bytes} B"),
        ("block limit: registers", _limit(result.blocks_limit_registers)),
        ("block limit: shared memory", _limit(result.blocks_limit_shared_mem)),
        ("block limit: warps", str(result.blocks_limit_warps)),
        ("block limit: SM blocks", str(result.blocks_limit_blocks)),
        ("block limit: barriers", _limit(result.blocks_limit_barriers)),
        ("active blocks / warps per SM", f"{result.active_blocks_per_sm} / "
         f"{result.active_warps_per_sm} of {result.max_warps_per_sm}"),
        ("theoretical occupancy", f"{100 * result.occupancy:.1f}%"),
        ("limiter", ", ".join(result.limiters)),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def _limit(value: int | None) -> str:
    return "unlimited" if value is None else str(value)


def render_occupancy_sweep(console: Console, result: OccupancySweep,
                           best: BestBlockSize | None) -> None:
    """One row per value of the swept parameter; ``best`` (a block-size sweep's) below."""
    table = Table(title=f"Occupancy vs {result.parameter} on {result.base.arch}")
    for header in (result.parameter, "blocks/SM", "warps/SM", "occupancy", "limiter"):
        table.add_column(header, justify="right")
    for value, point in zip(result.values, result.points, strict=True):
        table.add_row(str(value), str(point.active_blocks_per_sm), str(point.active_warps_per_sm),
                      f"{100 * point.occupancy:.1f}%", point.limiter)
    console.print(table)
    if best is not None:
        console.print(f"block size cudaOccupancyMaxPotentialBlockSize would pick: "
                      f"{best.block_size} ({100 * best.occupancy.occupancy:.1f}%)")
