"""Search the batching policy that serves the most requests under a P99 latency SLO.

The pattern is model_analyzer's (../shared/reference/serving-and-distributed.md section A3):
maximize throughput subject to ``perf_latency_p99 <= SLO`` over the configuration grid (max batch
size in powers of two, queue delay, preferred sizes), but every point is scored by the simulator
instead of a measurement. For each policy the highest sustainable Poisson rate is found by bisection
with common random numbers (the same unit-rate arrivals scaled), so the P99 is smooth in the rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.errors import InputError
from aiprof.inference.latency_curve import LatencyCurve
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.simulator import SimulationOptions, simulate


@dataclass(frozen=True, kw_only=True)
class TuneOptions:
    """The SLO and the grid searched."""

    p99_slo_us: float
    """Latency the 99th percentile must not exceed."""
    rate_rps: float | None = None
    """Offered load the policy must sustain; None: rank policies by their highest rate only."""
    max_batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
    delays_us: tuple[float, ...] = (0.0, 500.0, 1000.0, 2000.0, 5000.0, 10_000.0)
    num_requests: int = 2000
    """Simulated requests per evaluation."""
    bisection_steps: int = 8
    num_instances: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.p99_slo_us > 0:
            raise InputError(f"the P99 SLO ({self.p99_slo_us} us) must be positive")
        if self.rate_rps is not None and not self.rate_rps > 0:
            raise InputError(f"the rate ({self.rate_rps} req/s) must be positive")
        if self.num_requests < 100:
            raise InputError("simulate at least 100 requests per evaluation")


@dataclass(frozen=True, kw_only=True)
class TuneCandidate:
    """One policy of the grid and how it does."""

    max_batch_size: int
    max_queue_delay_us: float
    preferred_batch_sizes: tuple[int, ...]
    max_rate_rps: float
    """Highest Poisson rate at which the simulated P99 stays within the SLO (0 if none)."""
    p99_at_rate_us: float | None
    """P99 at the requested rate (None when no rate was given)."""
    meets_slo: bool


@dataclass(frozen=True, kw_only=True)
class TuneResult:
    """The best policy, if any meets the SLO, and every candidate, best first."""

    p99_slo_us: float
    rate_rps: float | None
    best: TuneCandidate | None
    candidates: tuple[TuneCandidate, ...]


def _policies(curve: LatencyCurve, options: TuneOptions,
              sim: SimulationOptions) -> list[BatchPolicy]:
    policies = []
    for batch in options.max_batch_sizes:
        if sim.batch_time_us(curve, batch) - sim.overhead_us > options.p99_slo_us:
            continue  # a full batch alone breaks the SLO
        variants: list[tuple[int, ...]] = [()] if batch == 1 else [(), (batch // 2, batch)]
        for delay in options.delays_us:
            if delay >= options.p99_slo_us:
                continue
            for preferred in variants if delay > 0 else [()]:
                policies.append(
                    BatchPolicy(
                        max_batch_size=batch,
                        max_queue_delay_us=delay,
                        preferred_batch_sizes=preferred,
                    )
                )
    return policies


def _p99(
    unit_arrivals: np.ndarray,
    rate: float,
    curve: LatencyCurve,
    policy: BatchPolicy,
    sim: SimulationOptions,
) -> float:
    return simulate(unit_arrivals * (1e6 / rate), curve, policy, sim).latency_p99_us


def _max_rate(
    unit: np.ndarray,
    curve: LatencyCurve,
    policy: BatchPolicy,
    options: TuneOptions,
    sim: SimulationOptions,
) -> float:
    streams = 1 if sim.shared_device else sim.num_instances  # instances sharing a device add none
    high = curve.capacity_rps(policy.max_batch_size) * streams
    low = 0.0
    for _ in range(options.bisection_steps):
        mid = (low + high) / 2
        if _p99(unit, mid, curve, policy, sim) <= options.p99_slo_us:
            low = mid
        else:
            high = mid
    return low


def tune_policy(curve: LatencyCurve, options: TuneOptions,
                simulation: SimulationOptions | None = None) -> TuneResult:
    """Score every policy of the grid with the simulator; the best sustains the most load.

    ``simulation`` describes the server (host curve, shared device, overhead); by default
    ``options.num_instances`` instances with nothing but ``curve``."""
    rng = np.random.default_rng(options.seed)
    unit = np.cumsum(rng.exponential(1.0, options.num_requests))
    unit -= unit[0]
    sim = simulation or SimulationOptions(num_instances=options.num_instances)
    candidates = []
    for policy in _policies(curve, options, sim):
        max_rate = _max_rate(unit, curve, policy, options, sim)
        at_rate = None
        meets = max_rate > 0
        if options.rate_rps is not None:
            at_rate = _p99(unit, options.rate_rps, curve, policy, sim)
            meets = at_rate <= options.p99_slo_us
        candidates.append(
            TuneCandidate(
                max_batch_size=policy.max_batch_size,
                max_queue_delay_us=policy.max_queue_delay_us,
                preferred_batch_sizes=policy.preferred_batch_sizes,
                max_rate_rps=max_rate,
                p99_at_rate_us=at_rate,
                meets_slo=meets,
            )
        )
    ranked = sorted(
        candidates, key=lambda c: (not c.meets_slo, -c.max_rate_rps, c.p99_at_rate_us or 0.0)
    )
    best = ranked[0] if ranked and ranked[0].meets_slo else None
    return TuneResult(
        p99_slo_us=options.p99_slo_us,
        rate_rps=options.rate_rps,
        best=best,
        candidates=tuple(ranked),
    )
