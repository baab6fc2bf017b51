"""``aiprof infer-stages``: time decode, resize, normalize, copies, forward and postprocess."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command

DEFAULT_MODEL = "aiprof.measure.inference.demo_models:small_cnn"


def _image_shape(text: str) -> tuple[int, int, int]:
    from aiprof.cli.batching import _ints

    shape = _ints(text)
    if len(shape) != 3 or shape[0] != 3 or min(shape) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an RGB image shape 3,H,W (the pipeline decodes color images)")
    return (shape[0], shape[1], shape[2])


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=DEFAULT_MODEL, metavar="MODULE:FACTORY",
                        help="image classifier taking Nx3xHxW (default: a small built-in CNN)")
    parser.add_argument("--input-shape", type=_image_shape, default=(3, 224, 224),
                        metavar="3,H,W",
                        help="the image the model takes, channels first (default 3,224,224): "
                             "decoded images are resized to H x W")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="print JSON")


def _run(args: argparse.Namespace) -> int:
    from aiprof.jsontext import dumps
    from aiprof.measure.inference.bench import load_model
    from aiprof.measure.inference.stages import run_stages

    model, _ = load_model(args.model, input_shape=args.input_shape)
    report = run_stages(model, device=args.device, batch_size=args.batch_size,
                        input_hw=(args.input_shape[1], args.input_shape[2]),
                        iters=args.iters, warmup=args.warmup, model_name=args.model)
    if args.json:
        print(dumps({"schema": "aiprof.infer_stages/1", "report": report}))
    else:
        from rich.console import Console

        from aiprof.report.inference_terminal import render_stages

        render_stages(Console(), report)
    return 0


COMMAND = Command(
    name="infer-stages",
    help="time each stage of an image-inference pipeline; say if it is CPU- or GPU-bound",
    add_arguments=_add_arguments,
    run=_run,
)
