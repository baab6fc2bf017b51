"""``aiprof ops TRACE_OR_DIR... [--by-shape | --kernels | --memory] [--json]``: op, kernel and
memory-by-op views."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from aiprof.cli._command import Command
from aiprof.cli._targets import add_target_argument

if TYPE_CHECKING:
    from aiprof.trace import TraceSet


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "targets", many=True)
    parser.add_argument("--kernels", action="store_true",
                        help="the kernel view (time per kernel, tensor-core use) instead")
    parser.add_argument("--memory", action="store_true",
                        help="memory by op instead (needs profile_memory=True): peak, alive, "
                             "allocations per op")
    parser.add_argument("--curve", action="store_true",
                        help="with --memory --json: include the live-bytes curve")
    parser.add_argument("--by-shape", action="store_true",
                        help="group ops by name and input shapes (needs record_shapes)")
    parser.add_argument("--limit", type=int, default=25, help="rows shown (default 25)")
    parser.add_argument("--json", action="store_true",
                        help="print the aiprof.ops/1 (or aiprof.kernels/1) JSON, every row")


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.kernel_view import kernel_view
    from aiprof.analysis.ops import op_view
    from aiprof.errors import InputError
    from aiprof.jsontext import dumps
    from aiprof.record.targets import load_traces
    from aiprof.report.ops_terminal import render_kernel_view, render_op_view
    from aiprof.report.terminal import console
    from aiprof.report.views_json import kernels_document, ops_document

    if args.limit < 1:
        raise InputError(f"--limit must be at least 1, got {args.limit}")
    traces = load_traces(args.targets)
    out = console()
    if args.memory:
        return _memory(args, traces)
    if args.kernels:
        kernels = [kernel_view(t) for t in traces]
        if args.json:
            print(dumps(kernels_document(kernels)))
        for view in [] if args.json else kernels:
            render_kernel_view(out, view, args.limit)
        return 0
    ops = [op_view(t, by_shape=args.by_shape) for t in traces]
    if args.json:
        print(dumps(ops_document(ops)))
    for op in [] if args.json else ops:
        render_op_view(out, op, args.limit)
    return 0


def _memory(args: argparse.Namespace, traces: TraceSet) -> int:
    from aiprof.analysis.memory_ops import memory_by_op
    from aiprof.jsontext import dumps
    from aiprof.report.memory_ops_terminal import render_memory_view
    from aiprof.report.terminal import console
    from aiprof.report.views_json import memory_document

    views = [memory_by_op(t) for t in traces]
    if args.json:
        print(dumps(memory_document(views, curve=args.curve)))
    for view in [] if args.json else views:
        render_memory_view(console(), view, args.limit)
    return 0


COMMAND = Command(
    name="ops",
    help="operator view (self/total CPU and GPU time by op and shapes) or --kernels view",
    add_arguments=add_arguments,
    run=run,
    order=31,
)
