"""``aiprof critical-path TRACE_OR_DIR... [--step N] [--json]``: the longest dependency path of
each rank, and with several ranks the path across them (joined at their collectives)."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command
from aiprof.cli._targets import add_target_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "targets", many=True)
    parser.add_argument("--step", type=int, default=None,
                        help="step number N of ProfilerStep#N (default: the second step)")
    parser.add_argument("--annotation", default=None,
                        help="analyze a record_function's span instead ('' = whole trace)")
    parser.add_argument("--instance", type=int, default=0,
                        help="with --annotation: which span of that name (default 0)")
    parser.add_argument("--json", action="store_true",
                        help="print the aiprof.critical_path/1 JSON")
    parser.add_argument("--edges", action="store_true", help="with --json: every path edge")
    parser.add_argument("--limit", type=int, default=20, help="rows shown (default 20)")


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.critical_path import critical_path
    from aiprof.analysis.critical_ranks import ranks_critical_path
    from aiprof.jsontext import dumps
    from aiprof.record.targets import load_traces
    from aiprof.report.critical_path_terminal import (
        render_critical_path,
        render_ranks_critical_path,
    )
    from aiprof.report.terminal import console
    from aiprof.report.views_json import critical_path_document

    traces = load_traces(args.targets)
    paths = [critical_path(t, step=args.step, annotation=args.annotation,
                           instance=args.instance) for t in traces]
    across = ranks_critical_path(list(traces), step=args.step, annotation=args.annotation,
                                 instance=args.instance) if len(traces) > 1 else None
    if args.json:
        print(dumps(critical_path_document(paths, edges=args.edges, across=across)))
        return 0
    for cp in paths:
        render_critical_path(console(), cp, args.limit)
    if across is not None:
        render_ranks_critical_path(console(), across, args.limit)
    return 0


COMMAND = Command(
    name="critical-path",
    help="critical path of a step: longest dependency path, by what bounds it, ops on it",
    add_arguments=add_arguments,
    run=run,
    order=33,
)
