"""``aiprof demo``: profile a small bundled workload here and summarize it and a real H200 trace."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from aiprof.cli._command import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="keep the demo's trace and HTML report in this directory (default: a temporary "
        "one, removed when the demo ends)",
    )
    parser.add_argument(
        "--no-workload",
        action="store_true",
        help="skip the PyTorch workload; only summarize the bundled H200 trace",
    )


def run(args: argparse.Namespace) -> int:
    from aiprof.report.terminal import console

    out = console()
    with tempfile.TemporaryDirectory(prefix="aiprof-demo-") as scratch:
        folder = args.out or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        _demo(args, out, folder)
    if args.out is None:
        out.print("the demo's trace and report were temporary: pass --out DIR to keep them")
    return 0


def _demo(args: argparse.Namespace, out: Any, folder: Path) -> None:
    from aiprof.analysis.summary import summary
    from aiprof.demo import bundled_trace_path, profile_small_training
    from aiprof.errors import MissingDependencyError
    from aiprof.report.demo_terminal import render_demo_diagnosis
    from aiprof.report.summary_terminal import render_summaries
    from aiprof.report.terminal import text
    from aiprof.trace import load_trace

    if not args.no_workload:
        out.rule("1. A small CNN trained for 4 steps on this machine, under torch.profiler")
        try:
            path = profile_small_training(folder)
        except MissingDependencyError as error:
            out.print(f"skipped: {text(str(error))}")
        else:
            render_summaries(out, summary(load_trace(path)))
            if args.out is not None:
                out.print(f"trace written to {text(str(path))}")
    out.rule("2. A real trace recorded on an NVIDIA H200 (ships with aiprof)")
    h200 = load_trace(bundled_trace_path())
    render_summaries(out, summary(h200))
    out.rule("3. What to change on the H200 run, and how much it would gain")
    render_demo_diagnosis(out, h200, folder / "report.html", say_where=args.out is not None)


COMMAND = Command(
    name="demo",
    help="profile a small bundled workload and summarize it, plus a real H200 trace",
    add_arguments=add_arguments,
    run=run,
    order=1,
)
