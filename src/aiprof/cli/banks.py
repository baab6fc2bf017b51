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


def _rows(args: argparse.Namespace) -> tuple[str, Rows, dict[str, object], int | None]:
    """Title, labelled results, the JSON data and, for a tile, the padding that fixes it."""
    from aiprof.gpu.banks import strided_shared
    from aiprof.gpu.tiles import tile_access

    if (args.stride is None) == (args.tile is None):
        raise InputError("give exactly one of --stride N or --tile ROWSxCOLS")
    if args.stride is not None:
        result = strided_shared(args.stride, args.elem_bytes)
        return (f"s[t * {args.stride}], {args.elem_bytes}-byte elements",
                [("access", result)], {"access": asdict(result)}, None)
    rows, cols = args.tile
    tile = tile_access(rows, cols, args.pad, args.elem_bytes)
    title = f"tile[{rows}][{cols} + {args.pad}], {args.elem_bytes}-byte elements"
    reads = [("column read", tile.column_read), ("row read", tile.row_read)]
    return title, reads, asdict(tile), tile.suggested_pad


def run(args: argparse.Namespace) -> int:
    from aiprof.jsontext import dumps

    title, rows, data, pad = _rows(args)
    if args.json:
        print(dumps(data))
        return 0
    from rich.console import Console

    from aiprof.report.gpu_models_terminal import render_bank_conflicts

    render_bank_conflicts(Console(), title, rows, pad)
    return 0


COMMAND = Command(name="banks", help="shared-memory bank conflicts of strided accesses and "
                  "2-D tiles, with the padding that removes them", add_arguments=add_arguments,
                  run=run, order=32)
