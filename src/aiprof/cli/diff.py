"""``aiprof diff A B [--json] [--hta]``: what changed between two traces or runs."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command
from aiprof.cli._targets import TARGET_HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="the baseline: " + TARGET_HELP)
    parser.add_argument("b", metavar="B", help="the one compared with it (the same kinds)")
    parser.add_argument("--json", action="store_true", help="print the aiprof.diff/1 JSON")
    parser.add_argument("--hta", action="store_true",
                        help="HTA 0.5's TraceDiff table: first iteration, counts and totals")
    parser.add_argument("--min-change-pct", type=float, default=1.0,
                        help="a count or total moving less than this %% is 'same' (default 1)")
    parser.add_argument("--limit", type=int, default=25, help="rows shown (default 25)")
    parser.add_argument("--step-annotation", metavar="NAME",
                        help="record_function name delimiting iterations without ProfilerStep#N")


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.diff import trace_diff
    from aiprof.analysis.diff_hta import hta_compare_traces
    from aiprof.errors import InputError
    from aiprof.jsontext import dumps
    from aiprof.record.targets import load_traces
    from aiprof.report.diff_terminal import render_diff
    from aiprof.report.terminal import console
    from aiprof.report.views_json import diff_document, hta_diff_document

    if args.limit < 1 or args.min_change_pct < 0:
        raise InputError("--limit must be at least 1 and --min-change-pct at least 0")
    a = load_traces(args.a, step_annotation=args.step_annotation)
    b = load_traces(args.b, step_annotation=args.step_annotation)
    if len(a) != len(b):
        raise InputError(f"A has {len(a)} ranks and B {len(b)}: compare the same number "
                         "(one rank file of each, or two runs of the same job)")
    pairs = list(zip(a, b, strict=True))
    if args.hta:
        print(dumps(hta_diff_document([hta_compare_traces(x, y) for x, y in pairs])))
        return 0
    diffs = [trace_diff(x, y, min_change_pct=args.min_change_pct) for x, y in pairs]
    if args.json:
        print(dumps(diff_document(diffs)))
    for diff in [] if args.json else diffs:
        render_diff(console(), diff, args.limit)
    return 0


COMMAND = Command(
    name="diff",
    help="compare two traces or runs: step time by category, ops and kernels changed",
    add_arguments=add_arguments,
    run=run,
    order=32,
)
