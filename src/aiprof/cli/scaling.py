"""``aiprof scaling``: predict data-parallel step time and efficiency at N ranks from one trace."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiprof.cli._command import Command
from aiprof.cli._targets import add_rank_argument, add_target_argument, load_rank


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser, "trace")
    add_rank_argument(parser)
    parser.add_argument("--ranks", default="2-64", help="rank counts: '2,4,8' or '2-64' (default)")
    parser.add_argument(
        "--params", type=float, help="parameters (else: the trace's all-reduce bytes)"
    )
    parser.add_argument("--grad-bytes", type=int, default=4, help="bytes per gradient (default 4)")
    parser.add_argument(
        "--backward-share",
        type=float,
        default=2 / 3,
        help="share of compute that is backward (default 2/3)",
    )
    parser.add_argument(
        "--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb (default 25)"
    )
    parser.add_argument("--link", help="a link preset (nvlink, ...) instead of the link the "
                        "trace's own all-reduces measured (the default; nvlink when the trace "
                        "has none)")
    parser.add_argument(
        "--from-bench", type=Path, help="α/β fitted by 'aiprof comm bench --output'"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from aiprof.cli.comm import _measured_link
    from aiprof.distributed.links import link_preset
    from aiprof.distributed.scaling import inputs_from_trace, parse_ranks, predict_scaling
    from aiprof.distributed.trace_link import trace_link
    from aiprof.jsontext import dumps

    trace, _ = load_rank(args, args.trace, args.rank)
    inputs = inputs_from_trace(
        trace,
        params=args.params,
        grad_elem_bytes=args.grad_bytes,
        backward_share=args.backward_share,
    )
    measured = args.from_bench is not None
    ring_only = measured
    if measured:
        link = _measured_link(args.from_bench, "allreduce")
        source = f"link: fitted by 'aiprof comm bench' ({args.from_bench})"
    elif args.link:
        link = link_preset(args.link)
        source = (f"link: the {link.name} preset (α {link.alpha_us:g} µs, "
                  f"{link.bandwidth_gbps:g} GB/s), given with --link, not measured")
    else:
        found = trace_link(trace)
        if found is not None:
            link, ring_only = found.link, True
            source = f"link: {found.how}"
        else:
            link = link_preset("nvlink")
            source = (f"link: the nvlink preset (α {link.alpha_us:g} µs, "
                      f"{link.bandwidth_gbps:g} GB/s), assumed: the trace has no sized "
                      "all-reduce at two or more ranks (give --link or --from-bench)")
    report = predict_scaling(
        inputs,
        parse_ranks(args.ranks),
        link,
        bucket_bytes=int(args.bucket_mb * 1024 * 1024),
        ring_only=ring_only,
        link_source=source,
    )
    if args.json:
        print(dumps(report))
        return 0
    from aiprof.report.distributed_terminal import render_scaling

    render_scaling(report)
    return 0


COMMAND = Command(
    name="scaling",
    help="data-parallel what-if: step time and efficiency at N ranks",
    add_arguments=add_arguments,
    run=run,
    order=65,
)
