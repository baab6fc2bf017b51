"""``aiprof ceilings``: measure the real roofs of this device and save them for the roofline."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiprof.cli._command import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--save",
        type=Path,
        help="write the ceilings to this file, or to DIR/ceilings.json for a "
        "run record directory (read by roofline/model --ceilings and by 'aiprof roofline RUN')",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds, less exact)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per value (default 5)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from aiprof.errors import InputError
    from aiprof.jsontext import dumps
    from aiprof.tensor.ceilings_model import save_ceilings

    if args.repeats < 1:
        raise InputError(f"--repeats must be at least 1 (got {args.repeats})")
    from aiprof.optional import import_torch

    import_torch("aiprof ceilings")
    from aiprof.measure.tensor.ceilings import measure_ceilings
    measured = measure_ceilings(quick=args.quick, repeats=args.repeats)
    if args.save is not None:
        from aiprof.record.runrecord import CEILINGS_FILE, resolve_run_dir

        target = resolve_run_dir(args.save) / CEILINGS_FILE if args.save.is_dir() else args.save
        save_ceilings(measured.ceilings, target)
    if args.json:
        print(dumps(measured))
    else:
        from aiprof.report.tensor_terminal import print_ceilings
        from aiprof.report.terminal import console

        print_ceilings(console(), measured)
    return 0


COMMAND = Command(
    name="ceilings",
    help="measure this device's copy bandwidth, GEMM FLOP/s, host-device bandwidth, launch latency",
    add_arguments=add_arguments,
    run=run,
    order=41,
)
