"""The simulator with each batch's time drawn from a measured spread instead of its median:
queueing theory, determinism, and the spread's own construction."""

from __future__ import annotations

import numpy as np
import pytest

from aiprof.errors import InputError
from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.latency_curve import SPREAD_POINTS, LatencyCurve, TimeSpread
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.simulator import SimulationOptions, simulate


def test_mg1_queue_with_a_spread_matches_pollaczek_khinchine():
    # batch size 1, service D·f with f drawn from the spread, Poisson arrivals: M/G/1, mean
    # queue wait W = lambda·E[S^2] / (2(1 - rho)) (Pollaczek-Khinchine); the spread raises it
    # over the M/D/1 wait of the medians by E[f^2]/E[f]
    service_us, rate = 1000.0, 600.0
    spread = TimeSpread.from_p50_p90((1,), (1.0,), (1.5,))
    factors = np.asarray(spread.factors[0])
    mean_s, mean_s2 = service_us * factors.mean(), service_us ** 2 * (factors ** 2).mean()
    rho = rate * mean_s / 1e6
    arrivals = poisson_arrivals(rate, 50_000, seed=3)
    curve, policy = LatencyCurve.linear(service_us, 0.0, 1), BatchPolicy(max_batch_size=1)
    m = simulate(arrivals, curve, policy, SimulationOptions(device_spread=spread, seed=1))
    expected_wait = rate / 1e6 * mean_s2 / (2 * (1 - rho))
    assert m.latency_mean_us - mean_s == pytest.approx(expected_wait, rel=0.06)
    medians = simulate(arrivals, curve, policy)
    assert m.latency_mean_us - mean_s > 1.2 * (medians.latency_mean_us - service_us)


def _loaded(seed: int, spread: TimeSpread | None, host: TimeSpread | None = None):
    arrivals = poisson_arrivals(1800, 4000, seed=5)
    options = SimulationOptions(num_instances=2, shared_device=True, seed=seed,
                                host_curve=LatencyCurve.linear(100.0, 5.0, 32),
                                device_spread=spread, host_spread=host)
    return simulate(arrivals, LatencyCurve.linear(2000.0, 250.0, 32),
                    BatchPolicy(max_batch_size=32, max_queue_delay_us=2000), options)


def test_the_draws_are_seeded_and_no_spread_is_the_medians():
    spread = TimeSpread.from_p50_p90((1, 16, 32), (1.0,) * 3, (1.1, 1.2, 1.3))
    assert _loaded(0, spread) == _loaded(0, spread)
    assert _loaded(0, spread).latency_p99_us != _loaded(1, spread).latency_p99_us
    none = TimeSpread.from_p50_p90((1,), (2.0,), (2.0,))  # P90 at the median: no spread
    assert none.factors == ((1.0,) * SPREAD_POINTS,)
    assert _loaded(3, none, none) == _loaded(0, None)
    assert _loaded(0, spread, spread).latency_p99_us > _loaded(0, None).latency_p99_us


def test_a_spread_from_p50_and_p90_has_that_median_and_90th_percentile():
    spread = TimeSpread.from_p50_p90((4, 16), (10.0, 10.0), (12.0, 9.0))
    wide, flat = (np.asarray(f) for f in spread.factors)
    assert len(wide) == SPREAD_POINTS and np.median(wide) == pytest.approx(1.0, abs=1e-3)
    assert np.quantile(wide, 0.9) == pytest.approx(1.2, rel=0.01)
    assert set(flat) == {1.0}  # a P90 under the median: none
    rng = np.random.default_rng(0)
    assert spread.draw(16, rng) == spread.draw(9, rng) == spread.draw(64, rng) == 1.0
    assert {spread.draw(3, rng) for _ in range(50)} <= set(wide)  # 3 runs in the bucket of 4


def test_measured_factors_are_kept_as_quantiles_and_bad_ones_refused():
    many = TimeSpread.from_factors({8: list(np.linspace(0.5, 1.5, 1001))})
    assert many is not None and len(many.factors[0]) == SPREAD_POINTS
    assert many.factors[0][0] == pytest.approx(0.5 + 1 / (2 * SPREAD_POINTS), abs=1e-3)
    few = TimeSpread.from_factors({8: [1.2, 0.9, 1.0]})
    assert few is not None and few.factors == ((0.9, 1.0, 1.2),)
    assert TimeSpread.from_factors({8: []}) is None
    with pytest.raises(InputError, match="positive"):
        TimeSpread(batch_sizes=(1,), factors=((0.0,),))
    with pytest.raises(InputError, match="one sample"):
        TimeSpread(batch_sizes=(1, 2), factors=((1.0,),))
