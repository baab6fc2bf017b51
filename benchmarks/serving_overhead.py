"""CPU cost per request of the serving process, with the load generator in its own process.

Open-loop Poisson load (default 5,000 req/s) from ``aiprof.inference.loadclient`` through the Unix
socket into the batcher, against a model function that returns at once in the batcher's model
threads (as the serving engine runs). Printed: the serving process's CPU time per request (every
thread: the socket front end, the batcher, the model threads' hand-offs) and its parts (the event
loop's thread, the model threads, the rest), counted from the load generator's connection to its
end, the loop's iterations per request, the client-side latency,
and, measured in the same run as the baseline, the batcher alone in one process with the
in-process load generator (``benchmarks/batcher_overhead.py``'s method).

    python benchmarks/serving_overhead.py [--rate 5000] [--requests 20000] [--delay-ms 0] [--json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.serving import OpenLoad, serve


def _zero_cost(batch: list[Any]) -> list[int]:
    return [rid for rid, _slot in batch]


def measure(rate_rps: float, num_requests: int, policy: BatchPolicy, seed: int
            ) -> dict[str, float]:
    """One run through the socket: the server's CPU per request and what the client saw."""
    arrivals = poisson_arrivals(rate_rps, num_requests, seed=seed)
    run = serve(_zero_cost, policy, OpenLoad(arrivals_us=tuple(arrivals.tolist())), num_slots=1)
    assert run.probes is not None
    parts = run.probes.cpu_us_per_request
    return {"server_cpu_us_per_request": run.server_cpu_us_per_request,
            "loop_cpu_us_per_request": parts["loop"],
            "model_threads_cpu_us_per_request": parts["model threads"],
            "other_cpu_us_per_request": parts["other"],
            "loop_iterations_per_request": run.probes.loop.num_iterations / num_requests,
            "throughput_rps": run.throughput_rps, "latency_p50_us": run.latency_p50_us,
            "latency_p99_us": run.latency_p99_us, "mean_batch_size": run.server.mean_batch_size,
            "lost": run.num_lost}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from batcher_overhead import measure as batcher_alone  # the same folder

    policy = BatchPolicy(max_batch_size=args.max_batch, max_queue_delay_us=args.delay_ms * 1e3)
    runs, baseline = [], []
    for seed in range(args.repeats):
        runs.append(measure(args.rate, args.requests, policy, seed))
        baseline.append(batcher_alone(args.rate, args.requests, args.max_batch, seed))
    median = float(np.median([r["server_cpu_us_per_request"] for r in runs]))
    alone = float(np.median([b["overhead_cpu_us_per_request"] for b in baseline]))
    summary = {"runs": runs, "median_server_cpu_us_per_request": median,
               "median_batcher_alone_cpu_us_per_request": alone, "ratio": median / alone}
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return
    for r, b in zip(runs, baseline, strict=True):
        print(f"{args.rate:.0f} req/s offered, {r['throughput_rps']:.0f} served: serving process "
              f"CPU {r['server_cpu_us_per_request']:.1f} us/request (loop "
              f"{r['loop_cpu_us_per_request']:.1f}, model threads "
              f"{r['model_threads_cpu_us_per_request']:.1f}, other "
              f"{r['other_cpu_us_per_request']:.1f}; {r['loop_iterations_per_request']:.2f} loop "
              f"iterations per request; batcher alone "
              f"{b['overhead_cpu_us_per_request']:.1f}), client latency P50 "
              f"{r['latency_p50_us']:.0f} us, P99 {r['latency_p99_us']:.0f} us, mean batch "
              f"{r['mean_batch_size']:.2f}, lost {r['lost']:.0f}")
    print(f"median serving process CPU {median:.1f} us/request; batcher alone {alone:.1f} "
          f"({median / alone:.2f}x)")


if __name__ == "__main__":
    main()
