"""``aiprof gpu-samples RUN [--json [--curves]]``: NVML samples of a run aligned to its steps."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN",
                        help="a run record written by 'aiprof run' (runs/ means runs/latest)")
    parser.add_argument("--json", action="store_true", help="print the aiprof.gpu_samples/1 JSON")
    parser.add_argument("--curves", action="store_true",
                        help="with --json: every sample on the trace's clock")


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.gpu_samples import gpu_sample_view
    from aiprof.errors import InputError
    from aiprof.jsontext import dumps
    from aiprof.record.runrecord import load_run
    from aiprof.record.targets import resolve
    from aiprof.report.gpu_samples_terminal import render_samples
    from aiprof.report.terminal import console
    from aiprof.report.views_json import samples_document

    run_dir = resolve(args.run_dir).run_dir
    if run_dir is None:
        raise InputError(f"{args.run_dir}: not a run record; GPU samples are recorded by "
                         "'aiprof run'")
    record = load_run(run_dir)
    if record.traces is None:
        raise InputError(f"{args.run_dir}: the run record has no trace to align samples to")
    views = [gpu_sample_view(t, record.samples.columns) for t in record.traces]
    if args.json:
        print(dumps(samples_document(views, curves=args.curves)))
    for view in [] if args.json else views:
        render_samples(console(), view)
    return 0


COMMAND = Command(
    name="gpu-samples",
    help="NVML samples of a run record (SM/memory use, power, clocks) per step",
    add_arguments=add_arguments,
    run=run,
    order=35,
)
