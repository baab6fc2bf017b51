"""Simulator against the real asyncio batcher on this machine, at several loads.

The real batcher serves a model that sleeps T(b) = 10 ms + 2.5 ms·b (max batch 16, 5 ms max
delay: capacity 16 / 50 ms = 320 req/s) under open-loop Poisson load; the simulator gets the same
arrival times, the same curve, and the per-batch overhead calibrated once with lone requests.

    python benchmarks/batcher_agreement.py [--requests 800] [--json]
"""

from __future__ import annotations

import argparse
import json

from aiprof.inference.agreement import compare
from aiprof.inference.latency_curve import LatencyCurve
from aiprof.inference.policy import BatchPolicy

RATES = (40.0, 100.0, 200.0, 280.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    curve = LatencyCurve.linear(10_000.0, 2_500.0, 16)
    policy = BatchPolicy(max_batch_size=16, max_queue_delay_us=5_000)
    rows = compare(curve, policy, list(RATES), args.requests)
    table = [{
        "rate_rps": r.rate_rps, "overhead_us": r.overhead_us,
        "real_throughput_rps": r.real.throughput_rps,
        "sim_throughput_rps": r.simulated.throughput_rps,
        "real_p99_ms": r.real.latency_p99_us / 1e3, "sim_p99_ms": r.simulated.latency_p99_us / 1e3,
        "throughput_error_pct": r.throughput_error_pct, "p99_error_pct": r.p99_error_pct,
        "real_mean_batch": r.real.mean_batch_size, "sim_mean_batch": r.simulated.mean_batch_size,
    } for r in rows]
    if args.json:
        print(json.dumps(table, indent=2))
        return
    print("| load req/s | real req/s | sim req/s | error | real P99 ms | sim P99 ms | error "
          "| real / sim mean batch |")
    print("|---|---|---|---|---|---|---|---|")
    for t in table:
        print(f"| {t['rate_rps']:.0f} | {t['real_throughput_rps']:.1f} | "
              f"{t['sim_throughput_rps']:.1f} | {t['throughput_error_pct']:+.1f}% | "
              f"{t['real_p99_ms']:.1f} | {t['sim_p99_ms']:.1f} | {t['p99_error_pct']:+.1f}% | "
              f"{t['real_mean_batch']:.2f} / {t['sim_mean_batch']:.2f} |")
    print(f"calibrated overhead per batch: {rows[0].overhead_us:.0f} us")


if __name__ == "__main__":
    main()
