"""``aiprof reuse conv|gemm``: data-reuse factors of a convolution and a cache-sized GEMM tile."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command


def _pair(text: str) -> tuple[int, int]:
    parts = text.lower().replace("x", ",").split(",")
    if len(parts) == 1:
        parts = parts * 2
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError) as error:
        raise argparse.ArgumentTypeError(f"expected HxW like 224x224, got {text!r}") from error


def _size(text: str) -> int:
    units = {"kib": 1024, "mib": 1024**2, "kb": 1000, "mb": 1000**2, "b": 1}
    lowered = text.strip().lower()
    for unit, factor in units.items():
        if lowered.endswith(unit):
            lowered, scale = lowered[: -len(unit)], factor
            break
    else:
        scale = 1
    try:
        return int(float(lowered) * scale)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a size like 48KiB, got {text!r}") from error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=type(parser))
    verbs.required = True
    conv = verbs.add_parser("conv", help="input and weight reuse factors of a 2-D convolution")
    conv.add_argument("--batch", type=int, default=1, help="batch size N")
    conv.add_argument("--input", type=_pair, required=True, help="input H x W, e.g. 224x224")
    conv.add_argument("--kernel", type=_pair, required=True, help="kernel kh x kw, e.g. 3x3")
    conv.add_argument("--stride", type=int, default=1, help="stride (default 1)")
    conv.add_argument("--padding", type=int, default=0, help="padding (default 0)")
    conv.add_argument("--json", action="store_true", help="print JSON")
    gemm = verbs.add_parser("gemm", help="square GEMM tile that fits a cache, traffic, intensity")
    for name in ("m", "n", "k"):
        gemm.add_argument(
            f"--{name}", type=int, required=True, help=f"GEMM dimension {name.upper()}"
        )
    gemm.add_argument("--cache", type=_size, required=True, help="cache size, e.g. 48KiB")
    gemm.add_argument("--elem-bytes", type=int, default=4, help="bytes per element (default 4)")
    gemm.add_argument("--multiple", type=int, default=8, help="tile edge multiple (default 8)")
    gemm.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from aiprof.jsontext import dumps
    from aiprof.tensor.reuse import conv_reuse, gemm_tiling

    if args.verb == "conv":
        (in_h, in_w), (k_h, k_w) = args.input, args.kernel
        result: object = conv_reuse(
            args.batch, in_h, in_w, k_h, k_w, stride=args.stride, padding=args.padding
        )
    else:
        result = gemm_tiling(args.m, args.n, args.k, args.cache, args.elem_bytes, args.multiple)
    if args.json:
        print(dumps(result))
        return 0
    from aiprof.report.terminal import console

    out = console()
    for key, value in result.__dict__.items():
        out.print(
            f"{key:>24}: {value:,.4g}" if isinstance(value, float) else f"{key:>24}: {value:,}"
        )
    return 0


COMMAND = Command(
    name="reuse",
    help="how often a convolution reuses each input and weight; a GEMM tile that fits a cache",
    add_arguments=add_arguments,
    run=run,
    order=44,
)
