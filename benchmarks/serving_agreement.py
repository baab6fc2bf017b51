"""Simulator against the real serving path on this machine: load from another process, the serving
engine (host assembly, one device queue, two instances) and a model of controlled latency.

The model's forward sleeps T(b) = 10 ms + 2.5 ms·b (max batch 16, 5 ms max delay: capacity
16 / 50 ms = 320 req/s), the loads of ``benchmarks/batcher_agreement.py`` (40, 100, 200 and
280 req/s) and closed loops of 1, 4 and 16 clients; the simulator gets the serving curve measured
alone, the two-stage mechanism and the overhead from lone requests (``batching bench``'s recipe).

    python benchmarks/serving_agreement.py [--duration-s 3] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

import torch

from aiprof.measure.inference.comparison import BenchConfig, run_comparison
from aiprof.measure.inference.engine import ServingEngine, registered_inputs

RATES = (40.0, 100.0, 200.0, 280.0)
CAPACITY_RPS = 16 / 50e-3


class Timed(torch.nn.Module):
    """A linear layer whose forward takes 10 ms + 2.5 ms per row (a sleep: the GIL is free)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 4)

    def forward(self, x: Any) -> Any:
        time.sleep(10e-3 + 2.5e-3 * x.shape[0])
        return self.linear(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=3.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    engine = ServingEngine(Timed(), registered_inputs(lambda b: torch.randn(b, 16), 64),
                           max_batch=16)
    config = BenchConfig(batch_sizes=(1, 2, 4, 8, 16), max_batch=16, max_delay_us=5000.0,
                         load_pcts=tuple(100 * r / CAPACITY_RPS for r in RATES),
                         concurrencies=(1, 4, 16), duration_s=args.duration_s,
                         closed_duration_s=args.duration_s, tune=False, overload_factor=0.0,
                         iters=10, calibration_requests=100)
    result = run_comparison(engine, config)
    rows = [{"load": p.label if p.concurrency else f"{p.offered_rps:.0f} req/s",
             "real_rps": p.real.throughput_rps, "sim_rps": p.simulated.throughput_rps,
             "real_p50_ms": p.real.latency_p50_us / 1e3,
             "sim_p50_ms": p.simulated.latency_p50_us / 1e3,
             "real_p99_ms": p.real.latency_p99_us / 1e3,
             "sim_p99_ms": p.simulated.latency_p99_us / 1e3,
             "p50_error_pct": p.p50_error_pct, "p99_error_pct": p.p99_error_pct,
             "throughput_error_pct": p.throughput_error_pct,
             "real_batch": p.real.server.mean_batch_size, "sim_batch": p.simulated.mean_batch_size}
            for p in (*result.open_loop, *result.closed_loop)]
    if args.json:
        print(json.dumps({"overhead_us": result.overhead_us, "stack": dataclasses.asdict(
            result.stack) if result.stack else None, "rows": rows}, indent=2))
        return
    print("| load | real req/s | sim req/s | real P50 / P99 ms | sim P50 / P99 ms | P50 error "
          "| P99 error | real / sim mean batch |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['load']} | {r['real_rps']:.1f} | {r['sim_rps']:.1f} | "
              f"{r['real_p50_ms']:.1f} / {r['real_p99_ms']:.1f} | "
              f"{r['sim_p50_ms']:.1f} / {r['sim_p99_ms']:.1f} | {r['p50_error_pct']:+.1f}% | "
              f"{r['p99_error_pct']:+.1f}% | {r['real_batch']:.2f} / {r['sim_batch']:.2f} |")
    stack = result.stack
    if stack is not None:
        print(f"serving stack given to the simulator, measured at {stack.calibration_rps:.0f} "
              f"req/s: {stack.handoff_under_load_us:.0f} us per batch (hand-offs), "
              f"{stack.transport_under_load_us:.0f} us per request (socket and front end); "
              f"lone requests: {stack.handoff_alone_us:.0f} and {stack.transport_alone_us:.0f} us")


if __name__ == "__main__":
    main()
