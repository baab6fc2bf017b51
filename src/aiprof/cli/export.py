"""``aiprof export --perfetto TRACE_OR_RUN... -o out.json``: one timeline with aiprof's results."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiprof.cli._command import Command
from aiprof.cli._targets import add_target_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "targets", many=True)
    parser.add_argument("--perfetto", action="store_true", required=True,
                        help="write a Chrome/Perfetto JSON trace (ui.perfetto.dev opens it)")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the file to write")
    parser.add_argument("--no-findings", action="store_true",
                        help="skip the diagnosis (faster): no finding slices")


def run(args: argparse.Namespace) -> int:
    from aiprof.analysis.finding_ranges import finding_ranges
    from aiprof.analysis.gpu_samples import gpu_sample_view
    from aiprof.analysis.queue import queue_length
    from aiprof.diagnose.engine import diagnose_trace
    from aiprof.errors import InputError
    from aiprof.record.runrecord import SAMPLES_FILE, empty_samples, read_samples
    from aiprof.record.targets import load_traces, resolve_all
    from aiprof.report import perfetto

    runs = [t.run_dir for t in resolve_all(args.targets) if t.run_dir is not None]
    traces = load_traces(args.targets)
    samples = read_samples(runs[0] / SAMPLES_FILE) if len(runs) == 1 else empty_samples()
    events: list[dict[str, object]] = []
    for index, trace in enumerate(traces):
        pid = trace.rank
        events += perfetto.rank_events(trace, pid, flow_offset=index << 40)
        events += perfetto.queue_counters(queue_length(trace), pid)
        if samples.num_samples and trace.base_time_ns is not None:
            events += perfetto.sample_counters(gpu_sample_view(trace, samples.columns), pid)
        if not args.no_findings:
            found, _ = diagnose_trace(trace)
            events += perfetto.finding_slices(
                [(f, finding_ranges(trace, f.category)) for f in found], pid)
    try:
        args.output.write_bytes(perfetto.encode(perfetto.document(events, list(traces))))
    except OSError as error:
        raise InputError(f"cannot write {args.output}: {error.strerror}") from None
    print(f"wrote {args.output} ({len(events):,} events, {len(traces)} rank(s))")
    return 0


COMMAND = Command(
    name="export",
    help="export traces with queue, NVML and findings tracks for Perfetto (--perfetto)",
    add_arguments=add_arguments,
    run=run,
    order=36,
)
