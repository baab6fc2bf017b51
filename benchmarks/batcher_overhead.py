"""Per-request CPU overhead of aiprof's DynamicBatcher at a given request rate.

Open-loop Poisson load (default 5,000 req/s) against a model that does nothing, on the
microsecond-resolution event loop. The batcher's overhead per request is the process CPU time of
the run minus that of the same load generator submitting to a null sink, divided by the number of
requests. Also prints the latency each request saw (with a zero-cost model, all of it is batcher
and event-loop time).

    python benchmarks/batcher_overhead.py [--rate 5000] [--requests 20000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import numpy as np

from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.loadgen import open_loop, run_precise
from aiprof.inference.policy import BatchPolicy


class _NullSink:
    """Accepts requests and answers at once: the load generator's own cost."""

    def submit(self, payload: Any) -> asyncio.Future[Any]:
        future = asyncio.get_running_loop().create_future()
        future.set_result(payload)
        return future


async def _identity(batch: list[Any]) -> list[Any]:
    return batch


def _cpu_seconds(run: Any) -> tuple[float, Any]:
    start = time.process_time()
    result = run_precise(run())
    return time.process_time() - start, result


def measure(rate_rps: float, num_requests: int, max_batch: int, seed: int) -> dict[str, float]:
    """CPU microseconds per request spent in the batcher, and the latency it added."""
    arrivals = poisson_arrivals(rate_rps, num_requests, seed=seed)

    async def baseline() -> None:
        await open_loop(_NullSink(), arrivals)  # type: ignore[arg-type]

    async def batched() -> Any:
        batcher = DynamicBatcher(_identity, BatchPolicy(max_batch_size=max_batch))
        batcher.start()
        await open_loop(batcher, arrivals)
        await batcher.close()
        return batcher.metrics()

    base_cpu, _ = _cpu_seconds(baseline)
    cpu, metrics = _cpu_seconds(batched)
    return {
        "rate_rps": rate_rps,
        "num_requests": num_requests,
        "overhead_cpu_us_per_request": (cpu - base_cpu) / num_requests * 1e6,
        "driver_cpu_us_per_request": base_cpu / num_requests * 1e6,
        "throughput_rps": metrics.throughput_rps,
        "latency_p50_us": metrics.latency_p50_us,
        "latency_p99_us": metrics.latency_p99_us,
        "mean_batch_size": metrics.mean_batch_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = [measure(args.rate, args.requests, args.max_batch, seed) for seed in range(args.repeats)]
    best = min(runs, key=lambda r: r["overhead_cpu_us_per_request"])
    summary = {"runs": runs, "median_overhead_cpu_us_per_request": float(
        np.median([r["overhead_cpu_us_per_request"] for r in runs])), "best": best}
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return
    for r in runs:
        print(f"{r['rate_rps']:.0f} req/s offered, {r['throughput_rps']:.0f} served: "
              f"batcher CPU {r['overhead_cpu_us_per_request']:.1f} us/request "
              f"(load generator {r['driver_cpu_us_per_request']:.1f}), latency P50 "
              f"{r['latency_p50_us']:.0f} us, P99 {r['latency_p99_us']:.0f} us, "
              f"mean batch {r['mean_batch_size']:.2f}")
    median = summary["median_overhead_cpu_us_per_request"]
    print(f"median batcher overhead: {median:.1f} us/request")


if __name__ == "__main__":
    main()
