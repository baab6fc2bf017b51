"""``aiprof memory``: training memory per GPU by ZeRO stage / FSDP, with activations."""

from __future__ import annotations

import argparse
import dataclasses

from aiprof.cli._command import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--params", type=float, required=True, help="trainable parameters, e.g. 7.5e9"
    )
    parser.add_argument("--gpus", type=int, default=1, help="data-parallel (sharding) degree")
    parser.add_argument("--zero", type=int, default=0, choices=(0, 1, 2, 3), help="ZeRO stage")
    parser.add_argument(
        "--fsdp",
        choices=("full_shard", "shard_grad_op", "no_shard"),
        help="FSDP sharding strategy (sets the ZeRO stage: 3, 2, 0)",
    )
    parser.add_argument("--param-bytes", type=int, default=2, help="bytes per parameter (2: bf16)")
    parser.add_argument("--grad-bytes", type=int, default=2, help="bytes per gradient (2: bf16)")
    parser.add_argument(
        "--optimizer-bytes",
        type=int,
        default=12,
        help="optimizer bytes per parameter (12: fp32 master + Adam m, v)",
    )
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree")
    parser.add_argument(
        "--layers", type=int, default=0, help="transformer layers (for activations)"
    )
    parser.add_argument("--hidden", type=int, default=0, help="hidden size h")
    parser.add_argument("--heads", type=int, default=0, help="attention heads a")
    parser.add_argument("--seq", type=int, default=0, help="sequence length s")
    parser.add_argument("--micro-batch", type=int, default=1, help="micro-batch size b")
    parser.add_argument(
        "--sequence-parallel", action="store_true", help="Megatron sequence parallel"
    )
    parser.add_argument("--recompute", default="none", choices=("none", "selective", "full"))
    parser.add_argument("--flash", action="store_true", help="FlashAttention (no stored scores)")
    parser.add_argument("--json", action="store_true", help="print JSON")


ACTIVATION_SHAPE = ("layers", "hidden", "heads", "seq")
"""The model sizes the activation estimate needs; without them activations are not counted."""


def _missing_shape(args: argparse.Namespace) -> list[str]:
    """The activation sizes not given; an InputError when only some of them are."""
    missing = [f"--{name}" for name in ACTIVATION_SHAPE if not getattr(args, name)]
    if missing and len(missing) < len(ACTIVATION_SHAPE):
        from aiprof.errors import InputError

        raise InputError(f"activations need {', '.join(missing)} as well (or none of "
                         f"--{', --'.join(ACTIVATION_SHAPE)} to leave activations out)")
    return missing


def run(args: argparse.Namespace) -> int:
    from aiprof.distributed.memory import FSDP_STAGE, MemoryOptions, estimate_memory
    from aiprof.jsontext import dumps

    missing = _missing_shape(args)
    note = (f"activations not counted: give {', '.join(missing)} (and --micro-batch) to "
            "estimate them" if missing else "")

    stage = FSDP_STAGE[args.fsdp] if args.fsdp else args.zero
    options = MemoryOptions(
        num_params=args.params,
        num_gpus=args.gpus,
        zero_stage=stage,
        param_bytes=args.param_bytes,
        grad_bytes=args.grad_bytes,
        optimizer_bytes_per_param=args.optimizer_bytes,
        tensor_parallel=args.tp,
        pipeline_parallel=args.pp,
        num_layers=args.layers,
        hidden_size=args.hidden,
        num_heads=args.heads,
        seq_len=args.seq,
        micro_batch=args.micro_batch,
        sequence_parallel=args.sequence_parallel,
        recompute=args.recompute,
        flash_attention=args.flash,
    )
    estimate = estimate_memory(options)
    per_stage = {
        f"zero{s}": estimate_memory(dataclasses.replace(options, zero_stage=s)).total_gb_per_gpu
        for s in range(4)
    }
    if args.json:
        print(dumps({**dataclasses.asdict(estimate), "total_gb_per_gpu_by_zero_stage": per_stage,
                     "activations_counted": not missing, "notes": [note] if note else []}))
        return 0
    from aiprof.report.distributed_terminal import simple_table

    rows = [
        ("parameters (GB)", f"{estimate.params_gb_per_gpu:.3f}"),
        ("gradients (GB)", f"{estimate.grads_gb_per_gpu:.3f}"),
        ("optimizer states (GB)", f"{estimate.optimizer_gb_per_gpu:.3f}"),
        ("model states (GB)", f"{estimate.model_states_gb_per_gpu:.3f}"),
        ("activations (GB)",
         "not counted" if missing else f"{estimate.activations_gb_per_gpu:.3f}"),
        ("total (GB)" + (", without activations" if missing else ""),
         f"{estimate.total_gb_per_gpu:.3f}"),
    ]
    rows += [(f"total with ZeRO-{s} (GB)", f"{per_stage[f'zero{s}']:.3f}") for s in range(4)]
    simple_table(
        f"memory per GPU: {args.params:g} parameters, ZeRO-{stage}, {args.gpus} GPUs", rows
    )
    if note:
        print(f"note: {note}")
    return 0


COMMAND = Command(
    name="memory",
    help="training memory per GPU (ZeRO stages, FSDP, activations)",
    add_arguments=add_arguments,
    run=run,
    order=63,
)
