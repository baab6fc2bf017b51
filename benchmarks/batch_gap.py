"""The gap between batches in the real server: how long an instance stands free with a batch due
(``BatchingMetrics.dispatch_gap_us``), the model thread taking the next batch before it sends
its batch's answers against the path before (the answers first, then the loop woken to take it).

A real ``serve`` run (the load client in its own process, the leader front end) with a model
that sleeps T(b) = 2 ms + 0.1 ms·b (the GIL free, as a thread waiting on a CUDA event), max
batch 32, 2 ms delay, preferred sizes 16 and 32, Poisson load at a share of capacity; the two
paths in turn on the same arrivals. ``python benchmarks/batch_gap.py [--instances 1]
[--load-pct 80] [--repeats 2]``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.serving import OpenLoad, serve

FIXED_US, PER_ITEM_US, MAX_BATCH = 2000.0, 100.0, 32


def model(payloads: list[Any]) -> list[int]:
    time.sleep((FIXED_US + PER_ITEM_US * len(payloads)) / 1e6)
    return [0] * len(payloads)


class _Before:
    """The path before, for the baseline: a model thread never takes the next batch itself."""

    def __enter__(self) -> None:
        self.start = DynamicBatcher.start

        def start(batcher: DynamicBatcher) -> None:
            self.start(batcher)
            batcher._instances.take_next = None  # noqa: SLF001 - the baseline's one switch

        DynamicBatcher.start = start  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        DynamicBatcher.start = self.start  # type: ignore[method-assign]


def measure(instances: int, load_pct: float, seed: int, before: bool) -> dict[str, float]:
    capacity = instances * MAX_BATCH / ((FIXED_US + MAX_BATCH * PER_ITEM_US) / 1e6)
    rate = capacity * load_pct / 100
    arrivals = poisson_arrivals(rate, int(rate * 2), seed=seed)
    policy = BatchPolicy(max_batch_size=MAX_BATCH, max_queue_delay_us=2000,
                         preferred_batch_sizes=(16, 32))
    load = OpenLoad(arrivals_us=tuple(arrivals.tolist()))
    if before:
        with _Before():
            run = serve(model, policy, load, num_slots=64, num_instances=instances)
    else:
        run = serve(model, policy, load, num_slots=64, num_instances=instances)
    gaps = np.asarray(run.server.dispatch_gap_us)
    return {"rate_rps": rate, "gap_p50_us": float(np.median(gaps)),
            "gap_mean_us": float(gaps.mean()), "p50_ms": run.latency_p50_us / 1e3,
            "p99_ms": run.latency_p99_us / 1e3, "mean_batch": run.server.mean_batch_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--load-pct", type=float, default=80.0)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    for seed in range(args.repeats):
        rows = {name: measure(args.instances, args.load_pct, seed, name == "before")
                for name in ("before", "now")}
        for name, row in rows.items():
            print(f"{name:>6}: {row['rate_rps']:.0f} req/s, gap median {row['gap_p50_us']:.0f}"
                  f" us (mean {row['gap_mean_us']:.0f}), P50 {row['p50_ms']:.2f} ms, P99 "
                  f"{row['p99_ms']:.2f} ms, mean batch {row['mean_batch']:.1f}")
        print(f"  gap median before / now: "
              f"{rows['before']['gap_p50_us'] / max(rows['now']['gap_p50_us'], 1e-3):.1f}x")


if __name__ == "__main__":
    main()
