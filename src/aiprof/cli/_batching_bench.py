"""``aiprof batching bench``: the measuring verb of ``aiprof batching`` (torch needed)."""

from __future__ import annotations

import argparse
from typing import Any

DTYPES = ("float32", "bfloat16", "float16")


def _ints(text: str) -> tuple[int, ...]:
    from aiprof.cli.batching import _ints as parse

    return parse(text)


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of numbers") from None


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``batching bench``."""
    parser.add_argument("--model", required=True, metavar="MODULE:FACTORY",
                        help="function returning a torch model, or (model, make_input(batch))")
    parser.add_argument("--input-shape", type=_ints, help="one sample's shape, e.g. 3,224,224")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--dtype", choices=DTYPES, default="float32",
                        help="model (and floating input) precision")
    parser.add_argument("--batch-sizes", type=_ints, default=(1, 2, 4, 8, 16, 32),
                        help="sizes of the serving curve measured alone")
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--max-delay-ms", type=float, default=2.0)
    parser.add_argument("--instances", type=int, default=2,
                        help="model instances (buffer sets) sharing the device queue")
    parser.add_argument("--load-pct", type=_floats, default=(40.0, 80.0),
                        help="open-loop Poisson loads in %% of capacity")
    parser.add_argument("--concurrency", type=_ints, default=(1, 2, 4, 8, 16, 32, 64),
                        help="closed-loop client counts")
    parser.add_argument("--duration-s", type=float, default=2.0, help="length of each load run")
    parser.add_argument("--min-requests", type=int, default=200)
    parser.add_argument("--calibration-requests", type=int, default=200,
                        help="lone requests that measure the serving overhead per batch")
    parser.add_argument("--p99-ms", type=float,
                        help="the tuner's SLO (default: 2 x a full batch alone + the delay)")
    parser.add_argument("--no-tune", action="store_true", help="skip the tuner's check")
    parser.add_argument("--tune-requests", type=int, default=2000,
                        help="simulated requests per policy and rate the tuner tries")
    parser.add_argument("--overload", type=float, default=10.0,
                        help="overload run at this many times capacity (0: none)")
    parser.add_argument("--slots", type=int, default=64, help="distinct registered inputs")
    parser.add_argument("--no-cuda-graphs", action="store_true", help="run the forward eagerly")
    parser.add_argument("--cpu-threads", type=int, default=1, help="torch threads on a CPU")
    parser.add_argument("--assembly", default="auto", choices=("auto", "gather", "take", "direct"),
                        help="how a batch's rows reach the model's input buffer (auto: every "
                             "way timed on these inputs, alone and under load, and the lowest "
                             "P99 under load served with; direct needs CUDA)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--curve-out", metavar="CSV",
                        help="write the device curve (for 'batching simulate' and 'tune')")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON")


def _write_curve(path: str, curve: Any) -> None:
    from aiprof.errors import InputError

    lines = ["batch_size,latency_ms,host_ms,call_ms"]
    for row in zip(curve.batch_sizes, curve.device_us, curve.host_us, curve.wall_us,
                   strict=True):
        lines.append(f"{row[0]},{row[1] / 1e3:.6f},{row[2] / 1e3:.6f},{row[3] / 1e3:.6f}")
    try:
        with open(path, "w") as handle:
            handle.write("\n".join(lines) + "\n")
    except OSError as error:
        raise InputError(f"cannot write {path}: {error.strerror}") from error


def _config(args: argparse.Namespace) -> Any:
    from aiprof.measure.inference.comparison import BenchConfig

    return BenchConfig(
        batch_sizes=args.batch_sizes, max_batch=args.max_batch,
        max_delay_us=args.max_delay_ms * 1e3, load_pcts=args.load_pct,
        concurrencies=args.concurrency, duration_s=args.duration_s,
        min_requests=args.min_requests, overload_factor=args.overload,
        slo_us=None if args.p99_ms is None else args.p99_ms * 1e3, tune=not args.no_tune,
        tune_requests=args.tune_requests, calibration_requests=args.calibration_requests,
        warmup=args.warmup, iters=args.iters, seed=args.seed)


def run_bench(args: argparse.Namespace) -> int:
    """Build the serving engine around the model, run the comparison, render it."""
    from aiprof.errors import InputError
    from aiprof.jsontext import dumps
    from aiprof.measure.inference.assembly_timing import assembly_for
    from aiprof.measure.inference.bench import import_torch, load_model
    from aiprof.measure.inference.comparison import run_comparison
    from aiprof.measure.inference.engine import ServingEngine, is_cuda, registered_inputs
    from aiprof.report.serving_terminal import assembly_line, bench_document, render_bench

    config = _config(args)
    if args.slots < 1 or args.instances < 1:
        raise InputError("--slots and --instances must be at least 1")
    torch = import_torch()
    model, make_input = load_model(args.model, args.input_shape)
    dtype = getattr(torch, args.dtype)
    inputs = registered_inputs(make_input, args.slots, dtype)
    if is_cuda(args.device):  # direct copies from pinned rows; the others read them as well
        inputs = inputs.pin_memory()
    assembly, costs = assembly_for(inputs, args.max_batch, args.device, args.assembly)
    engine = ServingEngine(model.to(dtype), inputs, device=args.device,
                           max_batch=args.max_batch, num_buffers=args.instances,
                           cuda_graphs=not args.no_cuda_graphs, cpu_threads=args.cpu_threads,
                           assembly=assembly)
    result = run_comparison(engine, config)
    if args.curve_out:
        _write_curve(args.curve_out, result.curve)
    if args.json:
        timed = {way: {condition: {str(size): stats for size, stats in by_size.items()}
                       for condition, by_size in found.items()} if "error" not in found else found
                 for way, found in costs.items()}
        print(dumps({**bench_document(result),
                     "assembly": {"used": assembly, "asked": args.assembly, "timed": timed}}))
    else:
        print(assembly_line(assembly, args.assembly, costs))
        render_bench(result)
    return 0

