"""``aiprof coldstart``: model read, deserialization, move to device, first against warm inference;
with ``--cuda-graph``, graph capture and the replay gain."""

from __future__ import annotations

import argparse
from typing import Any

from aiprof.cli._command import Command
from aiprof.cli.infer_stages import DEFAULT_MODEL


def _ints(text: str) -> tuple[int, ...]:
    from aiprof.cli.batching import _ints as parse

    return parse(text)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=DEFAULT_MODEL, metavar="MODULE:FACTORY",
                        help="function returning a model, or (model, make_input(batch))")
    parser.add_argument("--input-shape", type=_ints, default=(3, 224, 224),
                        help="one sample's shape when the factory returns only a model")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--cuda-graph", action="store_true",
                        help="also capture a CUDA graph and time replay against eager")
    parser.add_argument("--compile", action="store_true",
                        help="also time torch.compile's first call and compiled against eager")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _run(args: argparse.Namespace) -> int:
    import torch

    from aiprof.jsontext import dumps
    from aiprof.measure.inference.bench import load_factory
    from aiprof.measure.inference.coldstart import measure_coldstart

    factory = load_factory(args.model)
    made = factory()
    if isinstance(made, tuple):
        make_input = made[1]

        def build() -> Any:
            return factory()[0]
    else:
        shape = tuple(args.input_shape)

        def make_input(batch: int) -> Any:
            return torch.randn(batch, *shape)

        build = factory
    report = measure_coldstart(build, make_input, device=args.device,
                               batch_size=args.batch_size, iters=args.iters)
    graph = None
    if args.cuda_graph:
        from aiprof.measure.inference.cudagraph import measure_cuda_graph

        graph = measure_cuda_graph(build(), make_input(args.batch_size), device=args.device,
                                   iters=args.iters)
    compiled = None
    if args.compile:
        from aiprof.measure.inference.coldstart import measure_compile

        compiled = measure_compile(build(), make_input(args.batch_size), device=args.device,
                                   iters=args.iters)
    if args.json:
        print(dumps({"schema": "aiprof.coldstart/1", "coldstart": report, "cuda_graph": graph,
                     "compile": compiled}))
    else:
        from rich.console import Console

        from aiprof.report.inference_terminal import render_coldstart

        render_coldstart(Console(), report, graph, compiled)
    return 0


COMMAND = Command(
    name="coldstart",
    help="break down a model's cold start (read, load, to device, first run) against warm runs",
    add_arguments=_add_arguments,
    run=_run,
)
