"""``aiprof divergence``: serialized cost of a divergent warp and threads per instruction."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from aiprof.cli._command import Command
from aiprof.errors import InputError


def _costs(text: str) -> dict[str, float]:
    costs = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            costs[name.strip()] = float(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"cost must be NAME=NUMBER, not {item!r}") from error
        if not sep:
            raise argparse.ArgumentTypeError(f"cost must be NAME=NUMBER, not {item!r}")
    return costs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--costs", type=_costs, default={"even": 100.0, "odd": 10.0},
                        help="cost of each path, e.g. even=100,odd=10 (cycles or instructions)")
    parser.add_argument("--lanes", default="even-odd",
                        help="'even-odd', or 32 comma-separated path names ('-' = inactive)")
    parser.add_argument("--common", type=float, default=0.0,
                        help="cost of code all active lanes run outside the branch")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _lanes(text: str) -> list[str | None]:
    if text == "even-odd":
        return ["even" if t % 2 == 0 else "odd" for t in range(32)]
    lanes = [p.strip() for p in text.split(",")]
    if len(lanes) != 32:
        raise InputError(f"--lanes needs 32 path names, got {len(lanes)}")
    return [None if p == "-" else p for p in lanes]


def run(args: argparse.Namespace) -> int:
    from aiprof.gpu.divergence import divergence
    from aiprof.jsontext import dumps

    result = divergence(_lanes(args.lanes), args.costs, common_cost=args.common)
    if args.json:
        print(dumps(asdict(result)))
        return 0
    from rich.console import Console

    from aiprof.report.gpu_models_terminal import render_divergence

    render_divergence(Console(), result)
    return 0


COMMAND = Command(name="divergence", help="cost of warp divergence and average active threads "
                  "per instruction", add_arguments=add_arguments, run=run, order=33)
