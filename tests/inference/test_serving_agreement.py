"""The simulator against the real serving path on this machine (slow: wall-clock runs).

GIVEN the serving engine around a model whose forward sleeps 10 ms + 2.5 ms per row (max batch 16,
5 ms delay), load from a separate process WHEN the simulator is given the serving curve measured
alone, the host/device mechanism and the overhead of lone requests THEN its throughput, P50 and
P99 are within 10% of the real ones at 100 and 250 req/s (benchmarks/serving_agreement.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from serving_agreement import CAPACITY_RPS, Timed  # noqa: E402


@pytest.mark.slow
def test_simulator_within_10_pct_of_the_serving_path():
    import torch

    from aiprof.measure.inference.comparison import BenchConfig, run_comparison
    from aiprof.measure.inference.engine import ServingEngine, registered_inputs

    torch.manual_seed(0)
    engine = ServingEngine(Timed(), registered_inputs(lambda b: torch.randn(b, 16), 64),
                           max_batch=16)
    config = BenchConfig(batch_sizes=(1, 2, 4, 8, 16), max_batch=16, max_delay_us=5000.0,
                         load_pcts=(100 * 100 / CAPACITY_RPS, 100 * 250 / CAPACITY_RPS),
                         concurrencies=(), duration_s=4.0, tune=False, overload_factor=0.0,
                         iters=5, calibration_requests=60)
    result = run_comparison(engine, config)
    for point in result.open_loop:
        assert point.real.num_ok == point.real.num_requests
        assert abs(point.throughput_error_pct) <= 10
        assert abs(point.p50_error_pct) <= 10, point.label
        assert abs(point.p99_error_pct) <= 10, point.label
