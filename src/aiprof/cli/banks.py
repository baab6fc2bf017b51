"""``aiprof banks``: shared-memory bank conflicts of a warp access or a 2-D tile."""

from __future__ import annotations

import argparse
import re
from dataclasses import asdict
from typing import TYPE_CHECKING

from aiprof.cli._command import Command
from aiprof.errors import InputError

if TYPE_CHECKING:
    from aiprof.gpu.banks import BankConflicts


def _tile(text: str) -> tuple[int, int]:
    match = re.match(r"^\s*(\d+)\s*[xX*]\s*(\d+)\s*$", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"tile must be ROWSxCOLS, e.g. 32x32, not {text!r}")
    return int(match.group(1)), int(match.group(2))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stride", type=int, default=None,
                        help="lane t reads s[t * stride] (elements)")
    parser.add_argument("--tile", type=_tile, default=None,
                        help="ROWSxCOLS tile read by columns (a transpose), e.g. 32x32")
    parser.add_argument("--pad", type=int, default=0, help="extra elements per tile row")
    parser.add_argument("--elem-bytes", type=int, default=4, help="4, 8 or 16 bytes")
    parser.add_argument("--json", action="store_true", help="print JSON")


Rows = list[tuple[str, "BankConflicts"]]


def _rows(args: argparse.Namespace) -> tuple[str, Rows, dict[str, object]]:
    from aiprof.gpu.banks import strided_shared
    from aiprof.gpu.tiles import tile_access

    if (args.stride is None) == (args.tile is None):
        raise InputError("give exactly one of --stride N or --tile ROWSxCOLS")
    if args.stride is not None:
        result = strided_shared(args.stride, args.elem_bytes)
        return (f"s[t * {args.stride}], {args.elem_bytes}-byte elements",
                [("access", result)], {"access": asdict(result)})
    rows, cols = args.tile
    tile = tile_access(rows, cols, args.pad, args.elem_bytes)
    title = f"tile[{rows}][{cols} + {args.pad}], {args.elem_bytes}-byte elements"
    return title, [("column read", tile.column_read), ("row read", tile.row_read)], asdict(tile)


def _render(title: str, rows: list[tuple[str, BankConflicts]], extra: dict[str, object]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"Shared-memory bank conflicts: {title}"))
    for header in ("request", "wavefronts", "ideal", "conflicts", "ways", "packed"):
        table.add_column(header, justify="right")
    for label, r in rows:
        table.add_row(label, str(r.wavefronts), str(r.ideal_wavefronts), str(r.conflicts),
                      f"{r.ways}-way", "yes" if r.packed else "no")
    console = Console()
    console.print(table)
    if "suggested_pad" in extra:
        console.print(f"padding that removes column-read conflicts: {extra['suggested_pad']} "
                      "element(s) per row")


def run(args: argparse.Namespace) -> int:
    from aiprof.jsontext import dumps

    title, rows, data = _rows(args)
    if args.json:
        print(dumps(data))
    else:
        _render(title, rows, data)
    return 0


COMMAND = Command(name="banks", help="shared-memory bank conflicts of strided accesses and "
                  "2-D tiles, with the padding that removes them", add_arguments=add_arguments,
                  run=run, order=32)
