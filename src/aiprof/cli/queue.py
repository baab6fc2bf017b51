"""``aiprof queue TRACE_OR_DIR... [--json] [--hta]``: launch queue length per GPU stream."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command
from aiprof.cli._targets import add_target_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "targets", many=True)
    parser.add_argument("--json", action="store_true", help="print the aiprof.queue/1 JSON")
    parser.add_argument("--series", action="store_true",
                        help="with --json: include every stream's time series")
    parser.add_argument("--hta", action="store_true",
                        help="HTA 0.5's definition: its launch calls only, last step dropped")
    parser.add_argument("--step-annotation", metavar="NAME",
                        help="record_function name delimiting iterations without ProfilerStep#N")


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.queue import queue_length
    from aiprof.jsontext import dumps
    from aiprof.record.targets import load_traces
    from aiprof.report.queue_terminal import render_queues
    from aiprof.report.terminal import console
    from aiprof.report.views_json import queue_document

    traces = load_traces(args.targets, step_annotation=args.step_annotation)
    results = [queue_length(t, hta=args.hta) for t in traces]
    if args.json:
        print(dumps(queue_document(results, series=args.series)))
    else:
        render_queues(console(), results)
    return 0


COMMAND = Command(
    name="queue",
    help="launch queue length per GPU stream: ops launched but not started, empty share",
    add_arguments=add_arguments,
    run=run,
    order=30,
)
