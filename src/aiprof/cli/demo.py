"""``aiprof demo``: profile a small bundled workload here and summarize it and a real H200 trace."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from aiprof.cli._command import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for the demo's trace and report (default: a new temporary one)",
    )
    parser.add_argument(
        "--no-workload",
        action="store_true",
        help="skip the PyTorch workload; only summarize the bundled H200 trace",
    )


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.summary import summary
    from aiprof.demo import bundled_trace_path, profile_small_training
    from aiprof.errors import MissingDependencyError
    from aiprof.report.demo_terminal import render_demo_diagnosis
    from aiprof.report.summary_terminal import render_summaries
    from aiprof.report.terminal import console, text
    from aiprof.trace import load_trace

    out = console()
    if not args.no_workload:
        out.rule("1. A small CNN trained for 4 steps on this machine, under torch.profiler")
        try:
            path = profile_small_training(args.out)
        except MissingDependencyError as error:
            out.print(f"skipped: {text(str(error))}")
        else:
            render_summaries(out, summary(load_trace(path)))
            out.print(f"trace written to {text(str(path))}")
    out.rule("2. A real trace recorded on an NVIDIA H200 (ships with aiprof)")
    h200 = load_trace(bundled_trace_path())
    render_summaries(out, summary(h200))
    out.rule("3. What to change on the H200 run, and how much it would gain")
    report_dir = args.out or Path(tempfile.mkdtemp(prefix="aiprof-demo-"))
    report_dir.mkdir(parents=True, exist_ok=True)
    render_demo_diagnosis(out, h200, report_dir / "report.html")
    return 0


COMMAND = Command(
    name="demo",
    help="profile a small bundled workload and summarize it, plus a real H200 trace",
    add_arguments=add_arguments,
    run=run,
    order=1,
)
