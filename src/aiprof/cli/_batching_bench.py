"""``aiprof batching bench``: the measuring verb of ``aiprof batching`` (torch needed)."""

from __future__ import annotations

import argparse
from typing import Any


def _ints(text: str) -> tuple[int, ...]:
    from aiprof.cli.batching import _ints as parse

    return parse(text)


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``batching bench``."""
    parser.add_argument("--model", required=True, metavar="MODULE:FACTORY",
                        help="function returning a torch model, or (model, make_input(batch))")
    parser.add_argument("--input-shape", type=_ints, help="one sample's shape, e.g. 3,224,224")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--batch-sizes", type=_ints, default=(1, 2, 4, 8))
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rate", type=float, help="open-loop Poisson load, requests/s")
    parser.add_argument("--concurrency", type=int, help="closed-loop: requests outstanding")
    parser.add_argument("--requests", type=int, default=500, help="requests per load run")
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--max-delay-ms", type=float, default=0.0)
    parser.add_argument("--curve-out", metavar="CSV", help="write the measured latency curve")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON")


def _write_curve(path: str, measured: Any) -> None:
    from aiprof.errors import InputError

    lines = ["batch_size,latency_ms,p90_ms,p99_ms"]
    for batch, t in zip(measured.batch_sizes, measured.timings, strict=True):
        lines.append(f"{batch},{t.p50_us / 1e3:.6f},{t.p90_us / 1e3:.6f},{t.p99_us / 1e3:.6f}")
    try:
        with open(path, "w") as handle:
            handle.write("\n".join(lines) + "\n")
    except OSError as error:
        raise InputError(f"cannot write {path}: {error.strerror}") from error


def _closed(model_fn: Any, policy: Any, concurrency: int, requests: int, sample: Any) -> Any:
    from aiprof.inference.batcher import DynamicBatcher
    from aiprof.inference.loadgen import closed_loop, run_precise

    async def scenario() -> Any:
        batcher = DynamicBatcher(model_fn, policy)
        batcher.start()
        await closed_loop(batcher, concurrency, requests, lambda _: sample)
        await batcher.close()
        return batcher.metrics()

    return run_precise(scenario())


def run_bench(args: argparse.Namespace) -> int:
    """Measure the curves; serve open- and/or closed-loop load; compare with the simulator.

    The simulator gets the *serving* curve (the batcher's model function timed per batch size:
    host stacking, copies, forward, split), not the bare forward, plus the batcher's own overhead
    per batch calibrated from lone requests."""
    from aiprof.inference.agreement import calibrate_overhead_us, measure_real
    from aiprof.inference.arrivals import poisson_arrivals
    from aiprof.inference.policy import BatchPolicy
    from aiprof.inference.simulator import SimulationOptions, simulate, simulate_closed_loop
    from aiprof.jsontext import dumps
    from aiprof.measure.inference.bench import (
        batch_function,
        load_model,
        measure_curve,
        measure_serving_curve,
    )

    model, make_input = load_model(args.model, args.input_shape)
    measured = measure_curve(model, make_input, args.batch_sizes, device=args.device,
                             warmup=args.warmup, iters=args.iters)
    if args.curve_out:
        _write_curve(args.curve_out, measured)
    policy = BatchPolicy(max_batch_size=args.max_batch, max_queue_delay_us=args.max_delay_ms * 1e3)
    model_fn = batch_function(model, args.device)
    sample = make_input(1)[0]
    sizes = sorted({*args.batch_sizes, args.max_batch})
    serving = measure_serving_curve(model_fn, sample, sizes, iters=args.iters)
    curve = serving.curve()
    overhead = calibrate_overhead_us(model_fn, curve, 100, lambda _: sample)
    options = SimulationOptions(overhead_us=overhead)
    out: dict[str, Any] = {"schema": "aiprof.batching.bench/1", "curve": measured,
                           "serving_curve": serving, "overhead_us": overhead, "policy": policy}
    if args.rate:
        arrivals = poisson_arrivals(args.rate, args.requests, seed=args.seed)
        out["open_loop"] = {"rate_rps": args.rate, "overhead_us": overhead,
                            "real": measure_real(model_fn, policy, arrivals, lambda _: sample),
                            "simulated": simulate(arrivals, curve, policy, options)}
    if args.concurrency:
        predicted = simulate_closed_loop(args.concurrency, args.requests, curve, policy, options)
        out["closed_loop"] = {"concurrency": args.concurrency, "overhead_us": overhead,
                              "real": _closed(model_fn, policy, args.concurrency, args.requests,
                                              sample),
                              "simulated": predicted}
    if args.json:
        print(dumps(out))
    else:
        _render(out)
    return 0


def _curve_table(measured: Any, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for column in ("batch", "P50 ms", "P90 ms", "P99 ms", "items/s at P50"):
        table.add_column(column, justify="right")
    for batch, t in zip(measured.batch_sizes, measured.timings, strict=True):
        table.add_row(str(batch), f"{t.p50_us / 1e3:.3f}", f"{t.p90_us / 1e3:.3f}",
                      f"{t.p99_us / 1e3:.3f}", f"{batch / t.p50_us * 1e6:.0f}")
    Console().print(table)


def _render(out: dict[str, Any]) -> None:
    from aiprof.cli.batching import render_metrics

    measured = out["curve"]
    _curve_table(measured, f"Forward latency on {measured.device}")
    _curve_table(out["serving_curve"], "Serving path per batch (stack, copy, forward, split)")
    if "open_loop" in out:
        rate = out["open_loop"]["rate_rps"]
        render_metrics(out["open_loop"]["real"], f"Real batcher, Poisson {rate:g} req/s")
        overhead = out["open_loop"]["overhead_us"]
        render_metrics(out["open_loop"]["simulated"],
                       f"Simulator: same arrivals, serving curve, {overhead:.0f} us per batch")
    if "closed_loop" in out:
        closed = out["closed_loop"]
        render_metrics(closed["real"], f"Real batcher, concurrency {closed['concurrency']}")
        render_metrics(closed["simulated"], "Simulator: same concurrency, serving curve, "
                                            f"{closed['overhead_us']:.0f} us per batch")
