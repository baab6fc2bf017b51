"""2-D shared-memory tiles: column reads (as in a transpose) and the padding that fixes them."""

from __future__ import annotations

from dataclasses import dataclass

from aiprof.errors import InputError
from aiprof.gpu.banks import WARP_SIZE, BankConflicts, bank_conflicts


@dataclass(frozen=True, kw_only=True)
class TileAccess:
    """Cost of reading one column of ``T tile[rows][cols + pad]`` with one lane per row."""

    rows: int
    """Tile rows (lanes 0..rows-1 read one element each)."""
    cols: int
    """Tile columns before padding."""
    pad: int
    """Extra elements per row (``tile[rows][cols + pad]``)."""
    elem_bytes: int
    """Element size in bytes."""
    column_read: BankConflicts
    """Worst column read over all columns."""
    row_read: BankConflicts
    """A row read (lane ``t`` reads column ``t`` of one row)."""
    suggested_pad: int
    """Smallest padding (elements) that makes every column read conflict-free."""


def tile_column_access(rows: int, cols: int, pad: int, elem_bytes: int = 4,
                       column: int = 0) -> list[int | None]:
    """Lane addresses when lane ``t`` reads ``tile[t][column]`` of ``T tile[rows][cols + pad]``."""
    if not (1 <= rows <= WARP_SIZE) or cols < 1 or pad < 0 or not (0 <= column < cols):
        raise InputError(f"need 1 <= rows <= {WARP_SIZE}, cols >= 1, pad >= 0, 0 <= column < cols")
    pitch = (cols + pad) * elem_bytes
    return [t * pitch + column * elem_bytes if t < rows else None for t in range(WARP_SIZE)]


def _worst_column(rows: int, cols: int, pad: int, elem_bytes: int) -> BankConflicts:
    reads = [bank_conflicts(tile_column_access(rows, cols, pad, elem_bytes, c), elem_bytes)
             for c in range(cols)]
    return max(reads, key=lambda r: r.wavefronts)


def suggest_padding(rows: int, cols: int, elem_bytes: int = 4, max_pad: int = 32) -> int:
    """Smallest padding (elements per row) that removes column-read conflicts."""
    for pad in range(max_pad + 1):
        if _worst_column(rows, cols, pad, elem_bytes).conflicts == 0:
            return pad
    raise InputError(f"no padding up to {max_pad} elements removes the conflicts")


def tile_access(rows: int, cols: int, pad: int = 0, elem_bytes: int = 4) -> TileAccess:
    """Column- and row-read costs of a ``rows x cols`` tile with ``pad`` and the padding to use."""
    if elem_bytes not in (4, 8, 16):
        raise InputError(f"element size must be 4, 8 or 16 bytes, not {elem_bytes}")
    width = min(cols, WARP_SIZE)
    row = bank_conflicts([t * elem_bytes if t < width else None for t in range(WARP_SIZE)],
                         elem_bytes)
    return TileAccess(rows=rows, cols=cols, pad=pad, elem_bytes=elem_bytes,
                      column_read=_worst_column(rows, cols, pad, elem_bytes), row_read=row,
                      suggested_pad=suggest_padding(rows, cols, elem_bytes))
