"""``aiprof hotspots TRACE_OR_DIR... [--min-pct P] [--json]``: the Python call tree."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command
from aiprof.cli._targets import add_target_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "targets", many=True)
    parser.add_argument("--min-pct", type=float, default=1.0,
                        help="hide nodes under this %% of the CPU time in frames (default 1)")
    parser.add_argument("--harness", action="store_true",
                        help="also show aiprof's, runpy's and threading's frames above the "
                             "script (hidden by default)")
    parser.add_argument("--json", action="store_true",
                        help="print the aiprof.python/1 JSON (every node)")


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.python_tree import python_call_tree
    from aiprof.errors import InputError
    from aiprof.jsontext import dumps
    from aiprof.record.targets import load_traces
    from aiprof.report.python_terminal import render_call_tree
    from aiprof.report.terminal import console
    from aiprof.report.views_json import python_document

    if args.min_pct < 0:
        raise InputError(f"--min-pct must be at least 0, got {args.min_pct}")
    trees = [python_call_tree(t, harness=args.harness) for t in load_traces(args.targets)]
    if args.json:
        print(dumps(python_document(trees)))
    for tree in [] if args.json else trees:
        render_call_tree(console(), tree, args.min_pct)
    return 0


COMMAND = Command(
    name="hotspots",
    help="Python call tree from with_stack traces: CPU time and the GPU time each launched",
    add_arguments=add_arguments,
    run=run,
    order=34,
)
