"""``aiprof diagnose TRACE_OR_RUN [--json]``: ranked findings with evidence, gain and fix."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiprof.cli._command import Command
from aiprof.cli._targets import (
    TARGET_HELP,
    add_quiet_argument,
    add_ray_argument,
    busy,
    load_ranks,
)
from aiprof.diagnose.calibration import DEFAULT_OVERHEAD_US
from aiprof.errors import InputError

if TYPE_CHECKING:
    from aiprof.record.targets import Target
    from aiprof.tensor.ceilings_model import Ceilings


def add_ceilings_argument(parser: argparse.ArgumentParser) -> None:
    """``--ceilings FILE`` (shared with ``aiprof report``)."""
    parser.add_argument("--ceilings", type=Path, metavar="FILE",
                        help="measured roofs ('aiprof ceilings --save FILE'); default: a run "
                             "record's ceilings.json, else the datasheet of the trace's GPU")


def read_ceilings(args: argparse.Namespace, target: Target | None) -> Ceilings | None:
    """The ``--ceilings`` file, else ``ceilings.json`` beside a run record's traces, else None.

    ``target`` is the resolved ``aiprof.record.targets.Target`` (None: no target yet)."""
    from aiprof.tensor.ceilings_model import load_ceilings

    if args.ceilings is not None:
        return load_ceilings(args.ceilings)
    beside = target.ceilings_file if target is not None else None
    return load_ceilings(beside) if beside is not None else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from aiprof.cli._diagnose_try import add_try_arguments

    parser.add_argument("target", metavar="TRACE", nargs="?",
                        help=TARGET_HELP + "; none with --try (the run it captures)")
    parser.add_argument("--json", action="store_true", help="print the aiprof.diagnosis/1 JSON")
    parser.add_argument("--min-gain", type=float, default=1.0, metavar="PCT",
                        help="drop findings whose estimated gain is below PCT (default 1)")
    add_ceilings_argument(parser)
    add_profiler_arguments(parser)
    add_try_arguments(parser)
    add_ray_argument(parser)
    add_quiet_argument(parser)


def add_profiler_arguments(parser: argparse.ArgumentParser) -> None:
    """``--unprofiled-step-ms`` and ``--profiler-overhead`` (shared with ``aiprof report``)."""
    parser.add_argument("--unprofiled-step-ms", type=float, metavar="MS",
                        help="the step's time measured without the profiler: the profiler's "
                             "cost per event is fitted to it (default: the time an aiprof "
                             "capture wrote into the trace)")
    parser.add_argument("--profiler-overhead", type=float, metavar="US",
                        help="CPU µs the profiler added per recorded op or runtime call, taken "
                             f"out of the replay (default: fitted to the unprofiled step, else "
                             f"{DEFAULT_OVERHEAD_US:g}; 0: as recorded)")


def profiler_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``DiagnoseOptions`` fields of ``add_profiler_arguments``."""
    step_ms = args.unprofiled_step_ms
    if step_ms is not None and not step_ms > 0:
        raise InputError(f"--unprofiled-step-ms must be a positive time in ms, got {step_ms:g}")
    return {"profiler_overhead_us": args.profiler_overhead,
            "unprofiled_step_us": step_ms * 1000.0 if step_ms is not None else None}


def run(args: argparse.Namespace) -> int:
    from aiprof.diagnose import DiagnoseOptions, diagnose
    from aiprof.jsontext import dumps
    from aiprof.record.targets import resolve
    from aiprof.report.diagnose_terminal import render_diagnosis
    from aiprof.report.terminal import console
    from aiprof.trace.model import TraceSet

    if args.target is None and not args.try_fixes:
        raise InputError("give a trace or run record, or --try -- python train.py")
    target = resolve(args.target) if args.target is not None else None
    options = DiagnoseOptions(min_gain_pct=args.min_gain, ceilings=read_ceilings(args, target),
                              **profiler_options(args))
    if args.try_fixes:
        from aiprof.cli._diagnose_try import run_with_try

        return run_with_try(args, options)
    traces = load_ranks(args, args.target)
    if isinstance(traces, TraceSet):
        traces = traces.without_flows()  # the flows are not read again
    with busy(args, "diagnosing"):
        result = diagnose(traces, options)
    if args.json:
        print(dumps(result.document()))
    else:
        render_diagnosis(console(), result)
    return 0


COMMAND = Command(
    name="diagnose",
    help="rank the causes of lost GPU time, with evidence, estimated gain and a fix",
    add_arguments=add_arguments,
    run=run,
    order=12,
)
