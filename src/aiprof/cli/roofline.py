"""``aiprof roofline TRACE_OR_RUN``: ops recorded with shapes on the device's roofline."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiprof.cli._command import Command
from aiprof.cli._targets import add_rank_argument, add_target_argument, load_rank


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "source")
    add_rank_argument(parser)
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
    from aiprof.jsontext import dumps
    from aiprof.report.terminal import console
    from aiprof.tensor.ceilings_model import Ceilings, ceilings_for_gpu, load_ceilings
    from aiprof.tensor.trace_roofline import trace_roofline

    trace, target = load_rank(args, args.source, args.rank)
    ceilings: Ceilings | None
    if args.ceilings is not None:
        ceilings = load_ceilings(args.ceilings)
    elif args.gpu:
        ceilings = ceilings_for_gpu(args.gpu)
    else:
        ceilings = load_ceilings(target.ceilings_file) if target.ceilings_file else None
    if args.top < 1:
        raise InputError(f"--top must be at least 1 (got {args.top})")
    result = trace_roofline(trace, ceilings, allow_tf32=args.tf32)
    if args.plot is None and target.run_dir is not None:
        args.plot = target.run_dir / "roofline.svg"
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


COMMAND = Command(
    name="roofline",
    help="place the ops of a trace (recorded with shapes) on the device's roofline",
    add_arguments=add_arguments,
    run=run,
    order=40,
)
