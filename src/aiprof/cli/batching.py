"""``aiprof batching simulate|tune|bench``: predict, tune and measure dynamic batching."""

from __future__ import annotations

import argparse
from typing import Any

from aiprof.cli._command import Command


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers"
        ) from None


def _add_load(parser: argparse.ArgumentParser) -> None:
    curve = parser.add_mutually_exclusive_group(required=True)
    curve.add_argument(
        "--latency-curve",
        metavar="CSV",
        help="CSV with columns batch_size, latency_ms (from 'batching bench')",
    )
    curve.add_argument(
        "--linear-ms",
        metavar="FIXED,PER_ITEM",
        help="latency(b) = FIXED + PER_ITEM * b, in milliseconds",
    )
    parser.add_argument("--arrivals", choices=("poisson", "bursty"), default="poisson")
    parser.add_argument(
        "--replay", metavar="FILE", help="recorded arrival timestamps in microseconds, one per line"
    )
    parser.add_argument("--requests", type=int, default=20_000, help="requests to simulate")
    parser.add_argument("--instances", type=int, default=1, help="model instances (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON")


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    simulate = verbs.add_parser("simulate", help="simulate a policy on a load and latency curve")
    _add_load(simulate)
    simulate.add_argument("--rate", type=float, help="arrival rate, requests/s")
    simulate.add_argument("--max-batch", type=int, default=8)
    simulate.add_argument("--max-delay-ms", type=float, default=0.0)
    simulate.add_argument("--preferred", type=_ints, default=(), help="e.g. 4,8")
    simulate.add_argument("--max-queue-size", type=int, default=0)
    simulate.add_argument("--timeout-ms", type=float, default=0.0, help="queue timeout (reject)")
    simulate.add_argument("--high-share", type=float, default=0.0,
                          help="share of requests at priority 1 (the rest at 2), e.g. 0.2")
    simulate.add_argument("--high-delay-ms", type=float, default=None,
                          help="maximum batching delay of priority 1 (default: --max-delay-ms)")
    simulate.add_argument("--aging-ms", type=float, default=0.0,
                          help="promote a waiting request one level per this many ms")
    tune = verbs.add_parser("tune", help="find the policy with the most throughput under a P99 SLO")
    _add_load(tune)
    tune.add_argument("--p99-ms", type=float, required=True, help="P99 latency SLO")
    tune.add_argument("--rate", type=float, help="offered load the policy must sustain")
    tune.add_argument("--max-batch-sizes", type=_ints, default=(1, 2, 4, 8, 16, 32, 64, 128))
    bench = verbs.add_parser("bench", help="measure a PyTorch model and drive the real batcher")
    from aiprof.cli._batching_bench import add_bench_arguments

    add_bench_arguments(bench)


def load_curve(args: argparse.Namespace) -> Any:
    """The latency curve named on the command line."""
    from aiprof.errors import InputError
    from aiprof.inference.latency_curve import LatencyCurve, read_latency_curve

    if args.latency_curve:
        return read_latency_curve(args.latency_curve)
    try:
        fixed, per_item = (float(x) for x in args.linear_ms.split(","))
    except ValueError:
        raise InputError(
            f"--linear-ms wants FIXED,PER_ITEM in ms, not {args.linear_ms!r}"
        ) from None
    return LatencyCurve.linear(fixed * 1000, per_item * 1000, 1024)


def _arrivals(args: argparse.Namespace) -> Any:
    from aiprof.errors import InputError
    from aiprof.inference import arrivals

    if args.replay:
        try:
            with open(args.replay) as handle:
                times = [float(line) for line in handle if line.strip()]
        except OSError as error:
            raise InputError(f"cannot read {args.replay}: {error.strerror}") from error
        except ValueError as error:
            raise InputError(f"{args.replay}: {error}; want one timestamp (us) per line") from error
        return arrivals.replay_arrivals(times)
    if args.rate is None:
        raise InputError("give --rate (requests/s) or --replay FILE")
    make = arrivals.poisson_arrivals if args.arrivals == "poisson" else arrivals.bursty_arrivals
    return make(args.rate, args.requests, seed=args.seed)


def _simulate(args: argparse.Namespace) -> int:
    import numpy as np

    from aiprof.errors import InputError
    from aiprof.inference.policy import BatchPolicy, QueuePolicy
    from aiprof.inference.simulator import SimulationOptions, simulate
    from aiprof.jsontext import dumps

    if not 0 <= args.high_share <= 1:
        raise InputError(f"--high-share {args.high_share} must be between 0 and 1")
    queue = QueuePolicy(timeout_us=args.timeout_ms * 1000)
    high_delay = None if args.high_delay_ms is None else args.high_delay_ms * 1000
    high = QueuePolicy(timeout_us=queue.timeout_us, max_delay_us=high_delay)
    two_levels = args.high_share > 0
    policy = BatchPolicy(
        max_batch_size=args.max_batch,
        max_queue_delay_us=args.max_delay_ms * 1000,
        preferred_batch_sizes=args.preferred,
        max_queue_size=args.max_queue_size,
        default_queue=queue,
        priority_levels=2 if two_levels else 1,
        default_priority=2 if two_levels else 1,
        aging_us=args.aging_ms * 1000,
        queue_policies=((1, high),) if two_levels else (),
    )
    arrivals = _arrivals(args)
    levels = None
    if two_levels:
        draws = np.random.default_rng(args.seed + 1).random(arrivals.size)
        levels = np.where(draws < args.high_share, 1, 2).tolist()
    options = SimulationOptions(num_instances=args.instances)
    metrics = simulate(arrivals, load_curve(args), policy, options, priorities=levels)
    if args.json:
        print(dumps({"schema": "aiprof.batching.simulate/1", "policy": policy, "metrics": metrics}))
    else:
        render_metrics(metrics, "Simulated batching")
    return 0


def _tune(args: argparse.Namespace) -> int:
    from aiprof.inference.tune import TuneOptions, tune_policy
    from aiprof.jsontext import dumps

    options = TuneOptions(
        p99_slo_us=args.p99_ms * 1000,
        rate_rps=args.rate,
        max_batch_sizes=args.max_batch_sizes,
        num_instances=args.instances,
        seed=args.seed,
    )
    result = tune_policy(load_curve(args), options)
    if args.json:
        print(dumps({"schema": "aiprof.batching.tune/1", "result": result}))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Policies under P99 <= {args.p99_ms:g} ms (best first)")
    for column in ("max batch", "delay ms", "preferred", "max rate req/s", "P99 at rate ms", "ok"):
        table.add_column(column, justify="right")
    for c in result.candidates[:10]:
        at_rate = "-" if c.p99_at_rate_us is None else f"{c.p99_at_rate_us / 1000:.2f}"
        table.add_row(
            str(c.max_batch_size),
            f"{c.max_queue_delay_us / 1000:g}",
            ",".join(map(str, c.preferred_batch_sizes)) or "-",
            f"{c.max_rate_rps:.0f}",
            at_rate,
            "yes" if c.meets_slo else "no",
        )
    console = Console()
    console.print(table)
    console.print("no policy meets the SLO" if result.best is None else "best: the first row")
    return 0


def render_metrics(metrics: Any, title: str) -> None:
    """A terminal table of :class:`BatchingMetrics`."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    ms = 1000.0
    rows = [
        ("completed", f"{metrics.num_completed}"),
        ("failed", f"{metrics.num_failed}"),
        ("rejected", ", ".join(f"{k} {v}" for k, v in metrics.rejected.items()) or "0"),
        ("throughput (req/s)", f"{metrics.throughput_rps:.1f}"),
        (
            "latency P50 / P95 / P99 (ms)",
            f"{metrics.latency_p50_us / ms:.2f} / "
            f"{metrics.latency_p95_us / ms:.2f} / {metrics.latency_p99_us / ms:.2f}",
        ),
        (
            "mean queue / forming / compute (ms)",
            f"{metrics.queue_mean_us / ms:.2f} / "
            f"{metrics.forming_mean_us / ms:.2f} / {metrics.compute_mean_us / ms:.2f}",
        ),
        ("mean batch size", f"{metrics.mean_batch_size:.2f}"),
        ("busy %", f"{metrics.busy_pct:.1f}"),
    ]
    if len(metrics.latency_p99_by_level_us) > 1:
        rows += [
            (f"P99 of priority {level} (ms)", f"{p99 / ms:.2f}")
            for level, p99 in metrics.latency_p99_by_level_us.items()
        ]
    for name, value in rows:
        table.add_row(name, value)
    Console().print(table)


def _run(args: argparse.Namespace) -> int:
    if args.verb == "simulate":
        return _simulate(args)
    if args.verb == "tune":
        return _tune(args)
    from aiprof.cli._batching_bench import run_bench

    return run_bench(args)


COMMAND = Command(
    name="batching",
    help="simulate, tune (P99 SLO) and benchmark dynamic batching policies",
    add_arguments=_add_arguments,
    run=_run,
)
