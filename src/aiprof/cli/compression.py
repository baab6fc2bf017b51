"""``aiprof compression``: what fp16/bf16 and PowerSGD gradient hooks save and cost."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command
from aiprof.errors import InputError

SCHEMA = "aiprof.compression/1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shapes", help="gradient shapes, e.g. '4096x4096,4096,1024x4096'")
    parser.add_argument(
        "--params",
        type=float,
        help="or: a parameter count, taken as square matrices of --matrix-dim",
    )
    parser.add_argument("--matrix-dim", type=int, default=4096, help="side of the square matrices")
    parser.add_argument("--ranks", type=int, required=True, help="data-parallel ranks d")
    parser.add_argument("--rank", type=int, default=1, help="PowerSGD matrix_approximation_rank r")
    parser.add_argument("--grad-bytes", type=int, default=4, help="bytes per gradient (4: fp32)")
    parser.add_argument("--tflops", type=float, default=50.0, help="achieved TFLOP/s for the GEMMs")
    parser.add_argument("--memory-gbps", type=float, default=2000.0, help="achieved memory GB/s")
    parser.add_argument("--bandwidth-gbps", type=float, help="your bus bandwidth: does it pay?")
    parser.add_argument("--json", action="store_true", help="print JSON")


def parse_shapes(text: str) -> list[tuple[int, ...]]:
    """``'4096x4096,4096'`` -> ``[(4096, 4096), (4096,)]``."""
    try:
        return [
            tuple(int(d) for d in part.lower().split("x"))
            for part in text.split(",")
            if part.strip()
        ]
    except ValueError:
        raise InputError(f"cannot read shapes from {text!r}; write e.g. 4096x4096,4096") from None


def _shapes(args: argparse.Namespace) -> list[tuple[int, ...]]:
    if args.shapes:
        return parse_shapes(args.shapes)
    if args.params is None or args.params <= 0 or args.matrix_dim < 1:
        raise InputError("give --shapes, or a positive --params (and --matrix-dim)")
    side = args.matrix_dim
    count = max(1, round(args.params / side**2))
    return [(side, side)] * count


def run(args: argparse.Namespace) -> int:
    from aiprof.distributed.compression import CompressionOptions, compression_tradeoffs
    from aiprof.jsontext import dumps

    options = CompressionOptions(
        shapes=_shapes(args),
        num_ranks=args.ranks,
        grad_bytes=args.grad_bytes,
        rank=args.rank,
        compute_tflops=args.tflops,
        memory_gbps=args.memory_gbps,
    )
    rows = compression_tradeoffs(options)
    if args.json:
        print(dumps({"schema": SCHEMA, "num_ranks": args.ranks, "methods": rows}))
        return 0
    from aiprof.report.distributed_terminal import render_compression

    render_compression(rows, args.bandwidth_gbps)
    return 0


COMMAND = Command(
    name="compression",
    help="gradient compression trade-offs (fp16/bf16, PowerSGD)",
    add_arguments=add_arguments,
    run=run,
    order=64,
)
