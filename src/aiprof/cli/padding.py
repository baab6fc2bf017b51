"""``aiprof padding LENGTHS_FILE``: compute wasted by fixed, dynamic, bucketed, packed padding."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from aiprof.cli._command import Command

if TYPE_CHECKING:
    from aiprof.inference.padding import PaddingReport

SCHEMA = "aiprof.padding/1"


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "lengths_file",
        metavar="LENGTHS_FILE",
        help="text file with one sequence length (tokens) per line",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="sequences per batch for dynamic padding (default 32)",
    )
    parser.add_argument(
        "--buckets", type=int, default=4, help="number of bucket boundaries to optimize (default 4)"
    )
    parser.add_argument(
        "--cost",
        choices=("linear", "quadratic"),
        default="linear",
        help="compute per sequence: linear in tokens, or quadratic (attention)",
    )
    parser.add_argument(
        "--max-length",
        type=int,
        default=None,
        help="fixed padding length and packing row size (default: the longest)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def to_json(report: PaddingReport) -> dict[str, Any]:
    """The ``aiprof.padding/1`` document of a :class:`PaddingReport`."""
    return {
        "schema": SCHEMA,
        "num_sequences": report.num_sequences,
        "num_tokens": report.num_tokens,
        "max_length": report.max_length,
        "cost": report.cost,
        "batch_size": report.batch_size,
        "fixed": {"waste_pct": report.fixed_waste_pct},
        "dynamic": {
            "waste_pct": report.dynamic_waste_pct,
            "sorted_waste_pct": report.sorted_waste_pct,
        },
        "buckets": {
            "boundaries": list(report.buckets.boundaries),
            "waste_pct": report.buckets.waste_pct,
        },
        "packing": {"rows": report.packing_rows, "waste_pct": report.packing_waste_pct},
    }


def _run(args: argparse.Namespace) -> int:
    from aiprof.inference.padding import PaddingOptions, analyze_padding, read_lengths
    from aiprof.jsontext import dumps

    options = PaddingOptions(
        batch_size=args.batch_size,
        num_buckets=args.buckets,
        cost=args.cost,
        max_length=args.max_length,
    )
    report = analyze_padding(read_lengths(args.lengths_file), options)
    if args.json:
        print(dumps(to_json(report)))
    else:
        from rich.console import Console

        from aiprof.report.inference_terminal import render_padding

        render_padding(Console(), report)
    return 0


COMMAND = Command(
    name="padding",
    help="waste of fixed, dynamic, optimally bucketed and packed padding for given lengths",
    add_arguments=_add_arguments,
    run=_run,
)
