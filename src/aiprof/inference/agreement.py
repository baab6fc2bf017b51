"""Run the real batcher and the simulator on the same load and latency curve, and compare.

The real side serves a model function (a real model, or one that sleeps ``latency(b)`` in a worker
thread) on a microsecond-resolution event loop; the simulated side replays the same arrival times
through :func:`aiprof.inference.simulator.simulate`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.latency_curve import LatencyCurve
from aiprof.inference.loadgen import closed_loop, open_loop, run_precise
from aiprof.inference.metrics import BatchingMetrics
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.simulator import SimulationOptions, simulate


@dataclass(frozen=True, kw_only=True)
class AgreementRow:
    """Real and simulated results at one offered load."""

    rate_rps: float
    real: BatchingMetrics
    simulated: BatchingMetrics
    overhead_us: float
    """Per-batch serving overhead given to the simulator (from :func:`calibrate_overhead_us`)."""

    @property
    def throughput_error_pct(self) -> float:
        """Simulated minus real throughput, in percent of real."""
        return _error_pct(self.simulated.throughput_rps, self.real.throughput_rps)

    @property
    def p99_error_pct(self) -> float:
        """Simulated minus real P99 latency, in percent of real."""
        return _error_pct(self.simulated.latency_p99_us, self.real.latency_p99_us)


def _error_pct(predicted: float, measured: float) -> float:
    return 100.0 * (predicted - measured) / measured if measured else float("nan")


def sleeping_model(curve: LatencyCurve) -> Callable[[list[Any]], list[Any]]:
    """A model function that takes ``curve(len(batch))`` of wall time (run it in a thread)."""

    def model(batch: list[Any]) -> list[Any]:
        end = time.perf_counter() + curve(len(batch)) / 1e6
        remaining = end - time.perf_counter()
        if remaining > 2e-4:
            time.sleep(remaining - 1e-4)
        while time.perf_counter() < end:  # spin the last 100 us: sleep overshoots
            pass
        return batch

    return model


def measure_real(
    model: Callable[[list[Any]], Any],
    policy: BatchPolicy,
    arrivals_us: np.ndarray,
    payload: Callable[[int], Any] = lambda index: index,
) -> BatchingMetrics:
    """Serve ``arrivals_us`` with the real batcher around ``model``; its metrics."""

    async def scenario() -> BatchingMetrics:
        batcher = DynamicBatcher(model, policy, run_in_thread=True)
        batcher.start()
        await open_loop(batcher, arrivals_us, payload)
        metrics = batcher.metrics()
        await batcher.close()
        return metrics

    metrics: BatchingMetrics = run_precise(scenario())
    return metrics


def calibrate_overhead_us(
    model: Callable[[list[Any]], Any], curve: LatencyCurve, num_requests: int = 200,
    payload: Callable[[int], Any] = lambda index: index,
) -> float:
    """The serving stack's own time per batch: mean latency of lone requests minus ``curve(1)``.

    Measured with one request outstanding at a time (closed loop, concurrency 1), so no request
    ever queues and the whole excess over the model's latency is the batcher's overhead.
    """

    async def scenario() -> BatchingMetrics:
        batcher = DynamicBatcher(model, BatchPolicy(max_batch_size=1), run_in_thread=True)
        batcher.start()
        await closed_loop(batcher, 1, num_requests, payload)
        await batcher.close()
        return batcher.metrics()

    lone = run_precise(scenario())
    return float(max(0.0, lone.latency_mean_us - curve(1)))


def compare(
    curve: LatencyCurve,
    policy: BatchPolicy,
    rates_rps: list[float],
    num_requests: int,
    *,
    seed: int = 0,
    model: Callable[[list[Any]], Any] | None = None,
) -> list[AgreementRow]:
    """Real batcher and simulator side by side at each Poisson rate."""
    from aiprof.inference.arrivals import poisson_arrivals

    serve = model or sleeping_model(curve)
    overhead = calibrate_overhead_us(serve, curve)
    options = SimulationOptions(overhead_us=overhead)
    rows = []
    for rate in rates_rps:
        arrivals = poisson_arrivals(rate, num_requests, seed=seed)
        real = measure_real(serve, policy, arrivals)
        simulated = simulate(arrivals, curve, policy, options)
        rows.append(
            AgreementRow(rate_rps=rate, real=real, simulated=simulated, overhead_us=overhead)
        )
    return rows
