"""``aiprof roofline TRACE_OR_RUN``: ops recorded with shapes on the device's roofline."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiprof.cli._command import Command

CEILINGS_FILE = "ceilings.json"
"""A run record's measured ceilings (``aiprof ceilings --save RUN/ceilings.json``)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="a trace file (.json/.json.gz) or a run record directory")
    parser.add_argument("--rank", type=int, default=0, help="rank of a run record (default 0)")
    parser.add_argument("--gpu", help="roofs of this GPU from the hardware database (e.g. H100)")
    parser.add_argument(
        "--ceilings", type=Path, help="measured roofs from 'aiprof ceilings --save FILE'"
    )
    parser.add_argument(
        "--tf32", action="store_true", help="fp32 matmuls ran in TF32 (use the TF32 roof)"
    )
    parser.add_argument(
        "--plot",
        type=Path,
        help="write the log-log roofline plot (SVG) here (default for a run "
        "record: RUN/roofline.svg)",
    )
    parser.add_argument("--lint", action="store_true", help="also the layout and alignment lints")
    parser.add_argument("--top", type=int, default=20, help="rows to print (default 20)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from aiprof.errors import InputError
    from aiprof.report.jsonout import dumps
    from aiprof.report.terminal import console
    from aiprof.tensor.ceilings_model import ceilings_for_gpu, load_ceilings
    from aiprof.tensor.trace_roofline import trace_roofline

    trace, run_ceilings = _load(Path(args.source), args.rank)
    if args.ceilings is not None:
        ceilings = load_ceilings(args.ceilings)
    elif args.gpu:
        ceilings = ceilings_for_gpu(args.gpu)
    else:
        ceilings = run_ceilings
    if args.top < 1:
        raise InputError(f"--top must be at least 1 (got {args.top})")
    result = trace_roofline(trace, ceilings, allow_tf32=args.tf32)
    source = Path(args.source)
    if args.plot is None and source.is_dir():
        from aiprof.record.runrecord import resolve_run_dir

        args.plot = resolve_run_dir(source) / "roofline.svg"
    if args.plot is not None:
        from aiprof.report.roofline_svg import roofline_svg

        points = [row.point for row in result.rows]
        args.plot.write_text(
            roofline_svg(points, result.ceilings, title=f"Roofline: {result.device}")
        )
    lints = None
    if args.lint:
        from aiprof.tensor.trace_lints import trace_lints

        lints = trace_lints(trace, result.ceilings)
    if args.json:
        print(dumps({"roofline": result, "lints": lints} if lints else result))
        return 0
    from aiprof.report.tensor_terminal import print_lints, print_trace_roofline

    out = console()
    print_trace_roofline(out, result, args.top)
    if args.plot is not None:
        out.print(f"roofline plot: {args.plot}")
    if lints is not None:
        print_lints(out, lints.layout, lints.alignment)
        out.print(
            f"NCHW<->NHWC conversion kernels in the trace: {lints.conversion_kernels_us:,.1f} µs"
        )
    return 0


def _load(source: Path, rank: int):  # type: ignore[no-untyped-def]
    from aiprof.tensor.ceilings_model import load_ceilings
    from aiprof.trace import load_trace

    if not source.is_dir():
        return load_trace(source), None
    from aiprof.record.runrecord import load_run

    record = load_run(source)
    if record.traces is None:
        from aiprof.errors import InputError

        raise InputError(f"run record {source} holds no trace")
    measured = record.path / CEILINGS_FILE
    return record.traces.rank(rank), load_ceilings(measured) if measured.is_file() else None


COMMAND = Command(
    name="roofline",
    help="place the ops of a trace (recorded with shapes) on the device's roofline",
    add_arguments=add_arguments,
    run=run,
    order=40,
)
