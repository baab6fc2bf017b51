"""Real batcher against the simulator on the wall clock, and the batcher's own overhead."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from aiprof.inference.agreement import compare
from aiprof.inference.latency_curve import LatencyCurve
from aiprof.inference.policy import BatchPolicy

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "batcher_overhead.py"


@pytest.mark.slow
def test_simulator_predicts_real_batcher_within_10_pct():
    # a model that sleeps T(b) = 10 ms + 2.5 ms·b; capacity 16 / 50 ms = 320 req/s
    curve = LatencyCurve.linear(10_000.0, 2_500.0, 16)
    policy = BatchPolicy(max_batch_size=16, max_queue_delay_us=5_000)
    for row in compare(curve, policy, [100.0, 250.0], 600):
        assert abs(row.throughput_error_pct) < 10
        assert abs(row.p99_error_pct) < 10


@pytest.mark.slow
def test_batcher_overhead_below_50_us_per_request_at_5000_rps():
    spec = importlib.util.spec_from_file_location("batcher_overhead", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    runs = [module.measure(5000.0, 10_000, 32, seed) for seed in range(3)]
    assert min(r["overhead_cpu_us_per_request"] for r in runs) < 50
