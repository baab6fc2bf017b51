"""``aiprof model MODULE:FACTORY --input-shape ...``: FLOPs, bytes and roofline time per op of a
model's forward (and backward) pass, predicted on a target GPU even without one; lints."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from aiprof.cli._command import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "factory", help="MODULE:FUNCTION or path/file.py:FUNCTION returning a model"
    )
    parser.add_argument(
        "--input-shape",
        action="append",
        required=True,
        metavar="D0,D1,...",
        help="shape of one input (repeat for several inputs), e.g. 64,3,224,224",
    )
    parser.add_argument("--input-dtype", default="float32", help="float32, bfloat16, int64 ...")
    parser.add_argument("--vocab", type=int, default=1000, help="int inputs: values in [0, vocab)")
    parser.add_argument("--dtype", help="cast the model and float inputs to this dtype")
    parser.add_argument("--channels-last", action="store_true", help="model and 4-D inputs NHWC")
    parser.add_argument("--device", default="cpu", help="device to run on (default cpu)")
    parser.add_argument("--backward", action="store_true", help="also record the backward pass")
    parser.add_argument("--gpu", help="predict times on this GPU (hardware database), e.g. H100")
    parser.add_argument("--ceilings", type=Path, help="predict with measured ceilings instead")
    parser.add_argument("--tf32", action="store_true", help="fp32 matmuls in TF32 on the target")
    parser.add_argument("--measure", action="store_true", help="also time each op on --device")
    parser.add_argument("--lint", action="store_true", help="layout and alignment lints")
    parser.add_argument("--fusion", action="store_true", help="fusion analysis (forward ops)")
    parser.add_argument("--verify", action="store_true", help="measure torch.compile's gain")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--top", type=int, default=20, help="rows to print (default 20)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from aiprof.measure.tensor.model_analysis import analyze_model
    from aiprof.measure.tensor.model_loading import build_inputs, load_factory, prepare_model
    from aiprof.tensor.ceilings_model import ceilings_for_gpu, load_ceilings

    ceilings = load_ceilings(args.ceilings) if args.ceilings else None
    if ceilings is None and args.gpu:
        ceilings = ceilings_for_gpu(args.gpu)
    model = prepare_model(load_factory(args.factory), args.dtype, args.device, args.channels_last)
    inputs = build_inputs(
        args.input_shape,
        args.input_dtype,
        args.dtype,
        args.device,
        args.channels_last,
        args.vocab,
        args.seed,
    )
    analysis = analyze_model(
        model,
        inputs,
        target=ceilings,
        backward=args.backward,
        measure=args.measure,
        allow_tf32=args.tf32,
    )
    result: dict[str, Any] = {"analysis": analysis}
    calls = [op.call for op in analysis.recorded]
    times = [op.measured_us for op in analysis.recorded]
    if args.lint:
        from aiprof.tensor.alignment import lint_alignment
        from aiprof.tensor.layout import lint_layout

        result["layout"] = lint_layout(calls, ceilings, times)
        result["alignment"] = lint_alignment(
            calls, ceilings, times, check_pointers=args.device.startswith("cuda")
        )
    if args.fusion or args.verify:
        from aiprof.tensor.fusion import analyze_fusion

        forward = [op.call for op in analysis.recorded if op.phase == "forward"]
        result["fusion"] = analyze_fusion(forward, ceilings)
    if args.verify:
        from aiprof.measure.tensor.fusion_verify import verify_fusion

        result["verify"] = verify_fusion(model, inputs)
    _render(args, result)
    return 0


def _render(args: argparse.Namespace, result: dict[str, Any]) -> None:
    if args.json:
        from aiprof.jsontext import dumps

        analysis = result["analysis"]
        plain = {**result, "analysis": {**analysis.__dict__, "recorded": len(analysis.recorded)}}
        print(dumps(plain))
        return
    from aiprof.report.tensor_terminal import print_fusion, print_lints, print_model
    from aiprof.report.terminal import console

    out = console()
    print_model(out, result["analysis"], args.top)
    if "layout" in result:
        print_lints(out, result["layout"], result["alignment"])
    if "fusion" in result:
        print_fusion(out, result["fusion"])
    if "verify" in result:
        v = result["verify"]
        out.print(
            f"torch.compile ({v.backend}) on {v.device}: eager {v.eager_us:,.1f} µs, compiled "
            f"{v.compiled_us:,.1f} µs, speedup {v.speedup:.2f}x ({v.saved_pct:.1f}% saved)"
        )


COMMAND = Command(
    name="model",
    help="FLOPs, bytes and predicted time per op of a PyTorch model; layout/alignment/fusion lints",
    add_arguments=add_arguments,
    run=run,
    order=42,
)
