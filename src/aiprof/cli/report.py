"""``aiprof report TRACE_OR_RUN -o report.html``: one self-contained HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiprof.cli._command import Command
from aiprof.cli.diagnose import (
    add_ceilings_argument,
    add_profiler_arguments,
    profiler_options,
    read_ceilings,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TRACE_OR_RUN",
                        help="a trace file, a directory of rank traces, or a run record")
    parser.add_argument("-o", "--output", type=Path, default=Path("report.html"),
                        help="where to write the HTML file (default: report.html)")
    parser.add_argument("--json", action="store_true",
                        help="also print the diagnosis as aiprof.diagnosis/1 JSON")
    add_ceilings_argument(parser)
    add_profiler_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from aiprof.diagnose import DiagnoseOptions
    from aiprof.diagnose.report_data import report_data
    from aiprof.errors import InputError
    from aiprof.report.html import render_report
    from aiprof.report.jsonout import dumps
    from aiprof.trace import load_traces

    options = DiagnoseOptions(ceilings=read_ceilings(args), **profiler_options(args))
    title = f"aiprof report: {Path(args.target).name}"
    data = report_data(load_traces(args.target), title, options)
    if Path(args.target).is_dir():
        from dataclasses import replace

        from aiprof.record.runrecord import resolve_run_dir
        from aiprof.trial.record import read_try_record

        data = replace(data, trial=read_try_record(resolve_run_dir(args.target)))
    try:
        args.output.write_text(render_report(data), encoding="utf-8")
    except OSError as error:
        raise InputError(f"cannot write {args.output}: {error.strerror}") from None
    if args.json:
        print(dumps(data.diagnosis.document()))
    else:
        print(f"report written to {args.output}")
    return 0


COMMAND = Command(
    name="report",
    help="write a self-contained HTML report: overview, findings, timeline, top kernels",
    add_arguments=add_arguments,
    run=run,
    order=13,
)
