"""``aiprof memtimeline TRACE``: allocated memory over time from profile_memory events."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiprof.cli._command import Command
from aiprof.cli._targets import add_rank_argument, add_target_argument, load_rank


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "trace")
    add_rank_argument(parser)
    parser.add_argument("--device", type=int, help="device id (default: the busiest GPU)")
    parser.add_argument("--top", type=int, default=10, help="largest blocks at the peak to list")
    parser.add_argument("--plot", type=Path, help="write the allocated-memory timeline (SVG)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from aiprof.errors import InputError
    from aiprof.jsontext import dumps
    from aiprof.tensor.memtimeline import trace_memory_timeline

    if args.top < 1:
        raise InputError(f"--top must be at least 1 (got {args.top})")
    trace, _ = load_rank(args, args.trace, args.rank)
    timeline = trace_memory_timeline(trace, args.device, top=args.top)
    if args.plot is not None:
        from aiprof.report.svg import Series, line_chart

        xs = (timeline.ts_us / 1e3).tolist()
        series = Series("allocated", xs, (timeline.allocated_bytes / 2**20).tolist(), "step")
        args.plot.write_text(
            line_chart([series], title="Allocated memory", x_label="time (ms)", y_label="MiB")
        )
    if args.json:
        print(dumps({**timeline.__dict__, "lifetimes": len(timeline.lifetimes)}))
        return 0
    from aiprof.report.tensor_terminal import print_memory
    from aiprof.report.terminal import console

    print_memory(console(), timeline)
    return 0


COMMAND = Command(
    name="memtimeline",
    help="peak and timeline of allocated memory, tensor lifetimes, largest blocks at the peak",
    add_arguments=add_arguments,
    run=run,
    order=43,
)
