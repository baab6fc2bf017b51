"""``aiprof coalescing``: sectors per request and efficiency of a warp's global access."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from aiprof.cli._command import Command
from aiprof.errors import InputError

if TYPE_CHECKING:
    from aiprof.gpu.coalescing import Coalescing


def _int_list(text: str) -> list[int]:
    try:
        return [int(v, 0) for v in text.split(",") if v.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") \
            from error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stride", type=_int_list, default=[1],
                        help="stride in elements, or several: 1,2,4,32")
    parser.add_argument("--elem-bytes", type=int, default=4, help="element size (1, 2, 4, 8)")
    parser.add_argument("--offset", type=int, default=0, help="offset in elements (misalignment)")
    parser.add_argument("--vector-width", type=int, default=1,
                        help="elements per lane access (float4 = 4)")
    parser.add_argument("--addresses", type=_int_list, default=None,
                        help="32 explicit byte addresses instead of a stride (-1: inactive lane)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _results(args: argparse.Namespace) -> list[tuple[str, Coalescing]]:
    from aiprof.gpu.coalescing import coalescing, strided

    if args.addresses is not None:
        lanes = [None if a < 0 else a for a in args.addresses]
        return [("addresses", coalescing(lanes, args.elem_bytes * args.vector_width))]
    if any(s < 0 for s in args.stride):
        raise InputError("strides must be >= 0")
    return [(str(s), strided(s, args.elem_bytes, args.offset, args.vector_width))
            for s in args.stride]


def run(args: argparse.Namespace) -> int:
    from aiprof.jsontext import dumps

    rows = _results(args)
    if args.json:
        print(dumps([{"label": label, **_as_dict(r)} for label, r in rows]))
        return 0
    from rich.console import Console

    from aiprof.report.gpu_models_terminal import render_coalescing

    render_coalescing(Console(), rows)
    return 0


def _as_dict(result: Coalescing) -> dict[str, object]:
    from dataclasses import asdict

    return asdict(result)


COMMAND = Command(name="coalescing", help="sectors per request and efficiency of a warp's "
                  "global loads (strided, offset, vectorized)", add_arguments=add_arguments,
                  run=run, order=31)
