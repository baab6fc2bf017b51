"""``aiprof report TRACE_OR_RUN -o report.html``: one self-contained HTML page."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from aiprof.cli._command import Command
from aiprof.cli._targets import add_ray_argument, add_target_argument, busy, load_ranks
from aiprof.cli.diagnose import (
    add_ceilings_argument,
    add_profiler_arguments,
    profiler_options,
    read_ceilings,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser)
    add_ray_argument(parser)
    parser.add_argument("-o", "--output", type=Path, default=Path("report.html"),
                        help="where to write the HTML file (default: report.html)")
    parser.add_argument("--json", action="store_true",
                        help="also print the diagnosis as aiprof.diagnosis/1 JSON")
    add_ceilings_argument(parser)
    add_profiler_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from aiprof.diagnose import DiagnoseOptions
    from aiprof.errors import InputError
    from aiprof.jsontext import dumps
    from aiprof.record.runrecord import SAMPLES_FILE, empty_samples, read_meta, read_samples
    from aiprof.record.targets import resolve
    from aiprof.report.html import render_report

    target = resolve(args.target)
    options = DiagnoseOptions(ceilings=read_ceilings(args, target), **profiler_options(args))
    title = f"aiprof report: {target.path.name}"
    traces = load_ranks(args, args.target)
    run_dir = target.run_dir
    samples = read_samples(run_dir / SAMPLES_FILE) if run_dir is not None else empty_samples()
    with busy(args, "diagnosing and writing the report"):
        data, views = _report_parts(traces, title, options, samples.columns)
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


def _report_parts(traces: Any, title: str, options: Any, samples: Any) -> tuple[Any, Any]:
    """The report's data and the views of its lowest rank (every rank on the timeline)."""
    from dataclasses import replace

    from aiprof.analysis.timeline_steps import merged_timeline
    from aiprof.analysis.views import rank_views
    from aiprof.diagnose.report_data import report_data, report_stream
    from aiprof.trace.stream import TraceStream

    if isinstance(traces, TraceStream):
        data, timeline, shifts_us = report_stream(traces, title, options)
        lowest = replace(traces, files=(Path(data.ranks[0].summary.path),), check=None)
        views = lowest.map(partial(views_on_common_clock, shift_us=shifts_us[0],
                                   samples=samples)).results[0]
        return data, (replace(views, timeline=timeline) if len(traces) > 1 else views)
    data = report_data(traces, title, options)
    views = rank_views(traces.rank(data.ranks[0].summary.rank), samples)
    if len(traces) > 1:  # every rank on the timeline
        views = replace(views, timeline=merged_timeline(list(traces)))
    return data, views


def views_on_common_clock(trace: Any, shift_us: float, samples: Any) -> Any:
    """``rank_views`` of a rank read alone, moved first onto the job's common clock."""
    from aiprof.analysis.views import rank_views

    return rank_views(trace.shifted(shift_us), samples)


COMMAND = Command(
    name="report",
    help="write a self-contained HTML report: overview, findings, timeline, top kernels",
    add_arguments=add_arguments,
    run=run,
    order=13,
)
