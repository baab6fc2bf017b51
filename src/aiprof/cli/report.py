"""``aiprof report TRACE_OR_RUN -o report.html``: one self-contained HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiprof.cli._command import Command
from aiprof.cli._targets import add_target_argument, busy, load_traces
from aiprof.cli.diagnose import (
    add_ceilings_argument,
    add_profiler_arguments,
    profiler_options,
    read_ceilings,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser)
    parser.add_argument("-o", "--output", type=Path, default=Path("report.html"),
                        help="where to write the HTML file (default: report.html)")
    parser.add_argument("--json", action="store_true",
                        help="also print the diagnosis as aiprof.diagnosis/1 JSON")
    add_ceilings_argument(parser)
    add_profiler_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.views import report_views
    from aiprof.diagnose import DiagnoseOptions
    from aiprof.diagnose.report_data import report_data
    from aiprof.errors import InputError
    from aiprof.jsontext import dumps
    from aiprof.record.runrecord import SAMPLES_FILE, empty_samples, read_meta, read_samples
    from aiprof.record.targets import resolve
    from aiprof.report.html import render_report

    target = resolve(args.target)
    options = DiagnoseOptions(ceilings=read_ceilings(args, target), **profiler_options(args))
    title = f"aiprof report: {target.path.name}"
    traces = load_traces(args, args.target).without_flows()  # the flows are not read again
    with busy(args, "diagnosing and writing the report"):
        data = report_data(traces, title, options)
    run_dir = target.run_dir
    samples = read_samples(run_dir / SAMPLES_FILE) if run_dir is not None else empty_samples()
    views = report_views(list(traces), samples.columns)
    if run_dir is not None:
        from dataclasses import replace

        from aiprof.trial.record import read_try_record

        data = replace(data, trial=read_try_record(run_dir))
    try:
        meta = read_meta(run_dir) if run_dir is not None else None
        args.output.write_text(render_report(data, views, meta), encoding="utf-8")
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
