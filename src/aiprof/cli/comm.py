"""``aiprof comm model|bench``: collective cost models and a torch.distributed benchmark."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from aiprof.cli._command import Command
from aiprof.errors import InputError

MODEL_SCHEMA = "aiprof.comm_model/1"
SWEEP_SCHEMA = "aiprof.comm_model_sweep/1"


def _add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--collective",
        default="allreduce",
        help="allreduce, allgather, reducescatter or broadcast (default allreduce)",
    )
    parser.add_argument("--ranks", type=int, required=True, help="number of ranks p")
    parser.add_argument(
        "--bytes", required=True, help="message size S as nccl-tests counts it, e.g. 256MiB"
    )
    parser.add_argument(
        "--link", default="nvlink", help="nvlink, pcie, pcie4, infiniband, example (default nvlink)"
    )
    parser.add_argument("--alpha-us", type=float, help="custom link latency per message (µs)")
    parser.add_argument(
        "--bandwidth-gbps", type=float, help="custom link bandwidth per direction (GB/s)"
    )
    parser.add_argument(
        "--reduce-gbps", type=float, default=0.0, help="reduction throughput (GB/s); 0 = free"
    )
    parser.add_argument(
        "--from-bench", type=Path, help="use α/β fitted by 'aiprof comm bench --output FILE'"
    )
    parser.add_argument(
        "--model",
        choices=("alpha-beta", "nccl"),
        default="alpha-beta",
        help="alpha-beta algorithms (default) or NCCL's tuner shape (Ring/Tree × LL/LL128/Simple)",
    )
    parser.add_argument("--nodes", type=int, default=1, help="--model nccl: nodes")
    parser.add_argument(
        "--intra", default="nvlink", choices=("nvlink", "pci"), help="--model nccl: link in a node"
    )
    parser.add_argument(
        "--bus-bandwidth-gbps", type=float, default=370.0, help="--model nccl: busBw (GB/s)"
    )
    parser.add_argument(
        "--algorithms",
        help="comma-separated algorithms to compare (e.g. ring,double_binary_tree: NCCL's pair)",
    )
    parser.add_argument(
        "--max-bytes", help="sweep sizes from --bytes up to this, ×4 per row (which algorithm when)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def _add_bench(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--collectives",
        default="allreduce,allgather,reducescatter,broadcast",
        help="comma-separated collectives to time",
    )
    parser.add_argument("--min-bytes", default="8", help="smallest size (default 8)")
    parser.add_argument("--max-bytes", default="1GiB", help="largest size (default 1GiB)")
    parser.add_argument(
        "--step-factor", type=int, default=2, help="size multiplier between points (default 2)"
    )
    parser.add_argument("--iters", type=int, default=20, help="timed calls per size (default 20)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per size (default 5)")
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed blocks per size, median kept (default 5)"
    )
    parser.add_argument(
        "--fit-min-bytes", default="1MiB", help="fit α/β on sizes from here up (default 1MiB)"
    )
    parser.add_argument(
        "--backend", choices=("gloo", "nccl"), help="default: nccl with CUDA, else gloo"
    )
    parser.add_argument(
        "--nproc",
        type=int,
        default=2,
        help="processes to start when not launched by torchrun (default 2)",
    )
    parser.add_argument(
        "--output", type=Path, help="also write the JSON result to this file (rank 0)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=type(parser))
    verbs.required = True
    _add_model(verbs.add_parser("model", help="predict a collective's time per algorithm (α-β-γ)"))
    _add_bench(verbs.add_parser("bench", help="time collectives like nccl-tests and fit α/β"))


def _link(args: argparse.Namespace, collective: str) -> Any:
    from aiprof.distributed.links import LinkParams, link_preset

    if args.from_bench is not None:
        return _measured_link(args.from_bench, collective)
    if args.alpha_us is not None or args.bandwidth_gbps is not None:
        if args.alpha_us is None or args.bandwidth_gbps is None:
            raise InputError("a custom link needs both --alpha-us and --bandwidth-gbps")
        return LinkParams(
            name="custom",
            alpha_us=args.alpha_us,
            bandwidth_gbps=args.bandwidth_gbps,
            reduce_gbps=args.reduce_gbps,
        )
    return link_preset(args.link)


def _measured_links(path: Path, collective: str) -> dict[str, Any]:
    """One link per protocol regime fitted by comm bench (else the single fit), named by range."""
    from aiprof.distributed.links import LinkParams
    from aiprof.distributed.sizes import format_bytes

    try:
        data = json.loads(path.read_text())
        rows = [f for f in data.get("protocol_fits", []) if f["collective"] == collective]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InputError(f"cannot read comm bench fits from {path}: {error}") from None
    if not rows:
        return {"ring (measured)": _measured_link(path, collective)}
    links = {}
    for f in rows:
        span = f"{format_bytes(f['fit_min_bytes'])}..{format_bytes(f['fit_max_bytes'])}"
        links[f"ring, fit {span}"] = LinkParams(
            name="measured",
            alpha_us=max(float(f["alpha_us"]), 0.0),
            bandwidth_gbps=float(f["bandwidth_gbps"]),
        )
    return links


def _measured_link(path: Path, collective: str) -> Any:
    from aiprof.distributed.links import LinkParams

    try:
        data = json.loads(path.read_text())
        fits = {fit["collective"]: fit for fit in data["fits"]}
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InputError(f"cannot read comm bench fits from {path}: {error}") from None
    fit = fits.get(collective) or fits.get("allreduce")
    if fit is None:
        raise InputError(
            f"{path} has no fitted parameters; rerun 'aiprof comm bench --output {path}'"
        )
    return LinkParams(
        name="measured",
        alpha_us=max(float(fit["alpha_us"]), 0.0),
        bandwidth_gbps=float(fit["bandwidth_gbps"]),
    )


def _run_model(args: argparse.Namespace) -> int:
    from aiprof.distributed.busbw import canonical_collective
    from aiprof.distributed.collectives import model_collective
    from aiprof.distributed.sizes import parse_bytes
    from aiprof.jsontext import dumps

    collective = canonical_collective(args.collective)
    if args.ranks < 1:
        raise InputError(f"--ranks must be >= 1, got {args.ranks}")
    if args.model == "nccl":
        return _run_nccl(args, collective)
    link = _link(args, collective)
    algorithms = ("ring",) if link.name == "measured" else None
    if args.algorithms:
        algorithms = tuple(a.strip() for a in args.algorithms.split(",") if a.strip())
    if args.max_bytes is not None:
        return _run_sweep(args, collective, link, algorithms)
    if args.from_bench is not None:
        from aiprof.distributed.collectives import model_with_links

        links = _measured_links(args.from_bench, collective)
        cost = model_with_links(collective, parse_bytes(args.bytes), args.ranks, links)
    else:
        cost = model_collective(collective, parse_bytes(args.bytes), args.ranks, link, algorithms)
    if args.json:
        print(dumps({"schema": MODEL_SCHEMA, **_as_dict(cost)}))
        return 0
    from aiprof.report.distributed_terminal import render_comm_model

    render_comm_model(cost)
    return 0


def _run_nccl(args: argparse.Namespace, collective: str) -> int:
    from aiprof.distributed.nccl_model import NcclTopology, model_nccl
    from aiprof.distributed.sizes import parse_bytes
    from aiprof.jsontext import dumps
    from aiprof.measure.distributed.bench import size_sweep

    topo = NcclTopology(
        num_ranks=args.ranks,
        num_nodes=args.nodes,
        intra_link=args.intra,
        bus_bandwidth_gbps=args.bus_bandwidth_gbps,
    )
    low = parse_bytes(args.bytes)
    high = parse_bytes(args.max_bytes) if args.max_bytes is not None else low
    if high < low:
        raise InputError(f"--max-bytes ({high}) is below --bytes ({low})")
    sizes = size_sweep(max(low, 1), high, 4) if high > low else [low]
    costs = [model_nccl(collective, n, topo) for n in sizes]
    from aiprof.report.distributed_terminal import render_comm_model, render_comm_sweep

    if args.json:
        if len(costs) == 1:
            print(dumps({"schema": MODEL_SCHEMA, **_as_dict(costs[0])}))
        else:
            print(dumps({"schema": SWEEP_SCHEMA, "points": [_as_dict(c) for c in costs]}))
    elif len(costs) == 1:
        render_comm_model(costs[0])
    else:
        render_comm_sweep(costs)
    return 0


def _run_sweep(args: argparse.Namespace, collective: str, link: Any, algorithms: Any) -> int:
    from aiprof.distributed.collectives import model_collective
    from aiprof.distributed.sizes import parse_bytes
    from aiprof.jsontext import dumps
    from aiprof.measure.distributed.bench import size_sweep

    low, high = max(parse_bytes(args.bytes), 1), parse_bytes(args.max_bytes)
    if high < low:
        raise InputError(f"--max-bytes ({high}) is below --bytes ({low})")
    costs = [
        model_collective(collective, n, args.ranks, link, algorithms)
        for n in size_sweep(low, high, 4)
    ]
    if args.json:
        print(dumps({"schema": SWEEP_SCHEMA, "points": [_as_dict(c) for c in costs]}))
        return 0
    from aiprof.report.distributed_terminal import render_comm_sweep

    render_comm_sweep(costs)
    return 0


def _as_dict(obj: Any) -> dict[str, Any]:
    import msgspec

    return dict(msgspec.to_builtins(obj))


def _run_bench(args: argparse.Namespace) -> int:
    from aiprof.distributed.busbw import canonical_collective
    from aiprof.distributed.sizes import parse_bytes
    from aiprof.jsontext import dumps
    from aiprof.measure.distributed.bench import BenchOptions, bench_spawn, bench_torchrun

    options = BenchOptions(
        collectives=tuple(
            canonical_collective(c) for c in args.collectives.split(",") if c.strip()
        ),
        min_bytes=parse_bytes(args.min_bytes),
        max_bytes=parse_bytes(args.max_bytes),
        step_factor=args.step_factor,
        iters=args.iters,
        warmup=args.warmup,
        repeats=args.repeats,
        fit_min_bytes=parse_bytes(args.fit_min_bytes),
    )
    _require_torch()
    if "WORLD_SIZE" in os.environ:
        result = bench_torchrun(options, args.backend)
        if int(os.environ.get("RANK", "0")) != 0:
            return 0
    else:
        result = bench_spawn(options, args.nproc, args.backend or "gloo")
    text = dumps(result)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
    if args.json:
        print(text)
    else:
        from aiprof.report.distributed_terminal import render_comm_bench

        render_comm_bench(result)
    return 0


def _require_torch() -> None:
    from aiprof.optional import import_torch

    import_torch("aiprof comm bench")


def run(args: argparse.Namespace) -> int:
    return _run_model(args) if args.verb == "model" else _run_bench(args)


COMMAND = Command(
    name="comm",
    help="collective cost model (comm model) and benchmark (comm bench)",
    add_arguments=add_arguments,
    run=run,
    order=60,
)
