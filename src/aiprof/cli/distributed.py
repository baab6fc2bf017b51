"""``aiprof distributed``: collectives, overlap, stragglers and imbalance of a multi-rank run."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command
from aiprof.cli._targets import add_ray_argument, add_target_argument, load_ranks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "traces", many=True)
    add_ray_argument(parser)
    parser.add_argument("--step-annotation", help="annotation name that marks a step")
    parser.add_argument(
        "--straggler-wait-pct",
        type=float,
        default=15.0,
        help="others must wait this %% of a step for a rank to be a straggler",
    )
    parser.add_argument(
        "--compute-tolerance-pct",
        type=float,
        default=10.0,
        help="compute per step above the others' median by this %% is an outlier",
    )
    parser.add_argument("--steps", action="store_true", help="also print every step of every rank")
    parser.add_argument("--calls", action="store_true", help="also list every collective call")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from aiprof.distributed.analysis import DistributedOptions, analyze_distributed
    from aiprof.jsontext import dumps

    traces = load_ranks(args, args.traces, step_annotation=args.step_annotation)
    options = DistributedOptions(
        straggler_wait_pct=args.straggler_wait_pct,
        compute_tolerance_pct=args.compute_tolerance_pct,
        include_calls=args.calls,
    )
    report = analyze_distributed(traces, options)
    if args.json:
        print(dumps(report))
        return 0
    from aiprof.report.distributed_terminal import render_distributed

    render_distributed(report, show_steps=args.steps)
    return 0


COMMAND = Command(
    name="distributed",
    help="multi-rank analysis: collectives, overlap, stragglers",
    add_arguments=add_arguments,
    run=run,
    order=61,
)
