"""``aiprof quantize``: per-layer INT8 sensitivity and which layers to keep in higher precision."""

from __future__ import annotations

import argparse
import dataclasses

from aiprof.cli._command import Command
from aiprof.cli.infer_stages import DEFAULT_MODEL


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from aiprof.cli.coldstart import _ints

    parser.add_argument("--model", default=DEFAULT_MODEL, metavar="MODULE:FACTORY",
                        help="function returning a model, or (model, make_input(batch))")
    parser.add_argument("--input-shape", type=_ints, default=(3, 224, 224))
    parser.add_argument("--batch-size", type=int, default=8, help="calibration batch")
    parser.add_argument("--threshold-db", type=float, default=30.0,
                        help="keep layers whose model-output SQNR is below this in high precision")
    parser.add_argument("--no-speed", action="store_true", help="skip the INT8 speed measurement")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _run(args: argparse.Namespace) -> int:
    import torch

    from aiprof.jsontext import dumps
    from aiprof.measure.inference.bench import load_model
    from aiprof.measure.inference.quantize import analyze_quantization, measure_int8_speed

    torch.manual_seed(0)
    model, make_input = load_model(args.model, args.input_shape)
    example = make_input(args.batch_size)
    report = analyze_quantization(model, example, threshold_db=args.threshold_db)
    if not args.no_speed:
        report = dataclasses.replace(report, **measure_int8_speed(model, example))
    if args.json:
        print(dumps({"schema": "aiprof.quantize/1", "report": report}))
    else:
        from rich.console import Console

        from aiprof.report.inference_terminal import render_quantization

        render_quantization(Console(), report)
    return 0


COMMAND = Command(
    name="quantize",
    help="INT8 fake-quantization sensitivity per layer; which layers to keep in higher precision",
    add_arguments=_add_arguments,
    run=_run,
)
