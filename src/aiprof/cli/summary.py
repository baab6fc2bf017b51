"""``aiprof summary TRACE_OR_DIR... [--json]``."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command
from aiprof.cli._targets import add_ray_argument, add_target_argument, busy, load_ranks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "targets", many=True)
    add_ray_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the aiprof.summary/1 JSON")
    parser.add_argument(
        "--step-annotation",
        metavar="NAME",
        help="record_function name delimiting iterations when there is no ProfilerStep#N",
    )


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.summary import summary
    from aiprof.jsontext import dumps
    from aiprof.report.summary_json import summary_document
    from aiprof.report.summary_terminal import render_summaries
    from aiprof.report.terminal import console

    traces = load_ranks(args, args.targets, step_annotation=args.step_annotation)
    with busy(args, "reading and summarizing"):
        summaries = summary(traces)
    if args.json:
        print(dumps(summary_document(summaries)))
    else:
        render_summaries(console(), summaries)
    return 0


COMMAND = Command(
    name="summary",
    help="summarize PyTorch profiler traces: steps, GPU busy, breakdowns, top kernels and ops",
    add_arguments=add_arguments,
    run=run,
    order=10,
)
