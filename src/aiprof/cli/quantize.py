"""``aiprof quantize``: per-layer INT8 sensitivity and which layers to keep in higher precision."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

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


def _render(report: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="INT8 sensitivity per layer (worst first)")
    for column in ("layer", "kind", "layer SQNR dB", "model SQNR dB", "model rel err",
                   "input range", "outlier x", "saturated %"):
        table.add_column(column, justify="left" if column in ("layer", "kind") else "right")
    for r in report.layers:
        table.add_row(r.name, r.kind, f"{r.layer_sqnr_db:.1f}", f"{r.model_sqnr_db:.1f}",
                      f"{r.model_rel_error:.4f}", f"{r.input_min:.3g}..{r.input_max:.3g}",
                      f"{r.outlier_ratio:.2f}", f"{r.saturation_pct:.3f}")
    console = Console()
    console.print(table)
    console.print(f"all layers INT8: model SQNR {report.all_layers_model_sqnr_db:.1f} dB")
    keep = ", ".join(report.keep_high_precision) or "none"
    console.print(f"keep in higher precision (model SQNR < {report.threshold_db:g} dB): {keep}")
    if report.int8_latency_us is not None:
        console.print(f"CPU speed: FP32 {report.fp32_latency_us / 1e3:.3f} ms, INT8 "
                      f"{report.int8_latency_us / 1e3:.3f} ms ({report.int8_backend})")
    elif report.int8_note:
        console.print(report.int8_note)


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
        _render(report)
    return 0


COMMAND = Command(
    name="quantize",
    help="INT8 fake-quantization sensitivity per layer; which layers to keep in higher precision",
    add_arguments=_add_arguments,
    run=_run,
)
