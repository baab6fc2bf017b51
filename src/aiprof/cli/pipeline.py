"""``aiprof pipeline``: pipeline bubble per schedule, and an optimal layer-to-stage split."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiprof.cli._command import Command
from aiprof.errors import InputError

SCHEMA = "aiprof.pipeline/1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stages", type=int, required=True, help="pipeline stages p")
    parser.add_argument("--microbatches", type=int, required=True, help="micro-batches per step m")
    parser.add_argument(
        "--chunks", type=int, default=2, help="model chunks per GPU v (interleaved)"
    )
    parser.add_argument(
        "--stage-time-us",
        type=float,
        help="forward+backward of one micro-batch on one stage, for the step time (default: the "
        "slowest stage of the --layers split; without either no step time is given)",
    )
    parser.add_argument(
        "--layers", type=int, help="split this many identical layers (see --layer-*)"
    )
    parser.add_argument("--layer-time-us", type=float, default=1.0, help="time per layer")
    parser.add_argument(
        "--layer-state-gb",
        type=float,
        default=0.0,
        help="parameters+grads+optimizer per layer (GB)",
    )
    parser.add_argument(
        "--layer-activation-gb",
        type=float,
        default=0.0,
        help="activations per layer per micro-batch (GB)",
    )
    parser.add_argument(
        "--layer-file",
        type=Path,
        help="CSV with columns time_us,state_bytes,activation_bytes, one row per layer",
    )
    parser.add_argument("--memory-cap-gb", type=float, help="GPU memory per stage (GB)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel degree t (TP volume)")
    parser.add_argument("--hidden", type=int, help="hidden size h (TP volume)")
    parser.add_argument("--seq", type=int, help="sequence length s (TP volume)")
    parser.add_argument("--micro-batch", type=int, default=1, help="micro-batch size b (TP volume)")
    parser.add_argument(
        "--full-recompute", action="store_true", help="TP: recompute adds 2 all-reduces"
    )
    parser.add_argument("--link", default="nvlink", help="link preset for TP all-reduce time")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _costs(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from aiprof.distributed.partition import StageCosts

    if args.layer_file is not None:
        import csv

        try:
            with args.layer_file.open() as handle:
                rows = list(csv.DictReader(handle))
            return StageCosts(
                time_us=[float(r["time_us"]) for r in rows],
                state_bytes=[float(r["state_bytes"]) for r in rows],
                activation_bytes=[float(r["activation_bytes"]) for r in rows],
            )
        except (OSError, KeyError, ValueError) as error:
            raise InputError(f"cannot read layers from {args.layer_file}: {error}") from None
    if args.layers is None:
        return None
    if args.layers < 1:
        raise InputError(f"--layers must be >= 1, got {args.layers}")
    n = args.layers
    return StageCosts(
        time_us=[args.layer_time_us] * n,
        state_bytes=[args.layer_state_gb * 1e9] * n,
        activation_bytes=[args.layer_activation_gb * 1e9] * n,
    )


def run(args: argparse.Namespace) -> int:
    import math

    from aiprof.distributed.bubble import SCHEDULES, pipeline_bubble
    from aiprof.distributed.partition import partition_layers
    from aiprof.jsontext import dumps

    costs = _costs(args)
    split = None
    if costs is not None:
        cap = math.inf if args.memory_cap_gb is None else args.memory_cap_gb * 1e9
        split = partition_layers(costs, args.stages, args.microbatches, cap)
    stage_time_us = args.stage_time_us
    if stage_time_us is None:  # the split's slowest stage sets the pace of every micro-batch
        stage_time_us = split.max_stage_time_us if split is not None else 0.0
    bubbles = []
    for schedule in SCHEDULES:
        if schedule == "interleaved" and args.microbatches % args.stages != 0:
            continue
        bubbles.append(
            pipeline_bubble(schedule, args.stages, args.microbatches, args.chunks, stage_time_us)
        )
    volume = _tp_volume(args, split)
    if args.json:
        print(
            dumps(
                {
                    "schema": SCHEMA,
                    "bubbles": bubbles,
                    "partition": split,
                    "tensor_parallel": volume,
                }
            )
        )
        return 0
    from aiprof.report.distributed_terminal import render_pipeline, render_tp_volume

    render_pipeline(bubbles, split)
    if volume is not None:
        render_tp_volume(volume)
    return 0


def _tp_volume(args: argparse.Namespace, split: object):  # type: ignore[no-untyped-def]
    """Megatron TP volume when --tp > 1 with --hidden and --seq; None otherwise."""
    if args.tp <= 1 and args.hidden is None:
        return None
    if args.hidden is None or args.seq is None:
        raise InputError("the tensor-parallel volume needs --hidden and --seq")
    from aiprof.distributed.links import link_preset
    from aiprof.distributed.tensor_parallel import tensor_parallel_volume

    layers = max(getattr(split, "layers_per_stage", [1]))
    return tensor_parallel_volume(
        micro_batch=args.micro_batch,
        seq_len=args.seq,
        hidden_size=args.hidden,
        tensor_parallel=args.tp,
        layers_per_stage=layers,
        num_microbatches=args.microbatches,
        full_recompute=args.full_recompute,
        link=link_preset(args.link),
    )


COMMAND = Command(
    name="pipeline",
    help="pipeline bubble (GPipe, 1F1B, interleaved) and stage split",
    add_arguments=add_arguments,
    run=run,
    order=62,
)
