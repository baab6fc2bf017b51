"""The discrete-event simulator: queueing theory, the reference's worked example, and exact
agreement with the asyncio batcher on a fake clock."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiprof.errors import InputError
from aiprof.inference.arrivals import bursty_arrivals, poisson_arrivals, replay_arrivals
from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.clock import FakeClock
from aiprof.inference.latency_curve import LatencyCurve
from aiprof.inference.policy import BatchPolicy, QueuePolicy
from aiprof.inference.simulator import SimulationOptions, simulate


def test_md1_queue_matches_pollaczek_khinchine():
    # batch size 1, deterministic service D, Poisson arrivals: M/D/1 with mean queue wait
    # W = rho·D / (2(1 − rho)) (Pollaczek–Khinchine mean-value formula)
    service_us, rate = 1000.0, 600.0
    rho = rate * service_us / 1e6
    arrivals = poisson_arrivals(rate, 50_000, seed=3)
    m = simulate(arrivals, LatencyCurve.linear(service_us, 0.0, 1), BatchPolicy(max_batch_size=1))
    expected_wait = rho * service_us / (2 * (1 - rho))
    assert m.latency_mean_us - service_us == pytest.approx(expected_wait, rel=0.05)
    assert m.busy_pct == pytest.approx(100 * rho, abs=1.0)


@pytest.mark.parametrize(("delay_us", "mean_batch"), [(0, 4.8), (2000, 5.1), (5000, 8.5)])
def test_reference_worked_example(delay_us, mean_batch):
    # ../shared/reference/serving-and-distributed.md A1: T(b) = 2 ms + 0.25 ms·b, B = 32, 1500 req/s
    curve = LatencyCurve.linear(2000.0, 250.0, 32)
    arrivals = poisson_arrivals(1500, 25_000, seed=11)
    m = simulate(arrivals, curve, BatchPolicy(max_batch_size=32, max_queue_delay_us=delay_us))
    assert m.mean_batch_size == pytest.approx(mean_batch, abs=0.15)
    assert m.throughput_rps == pytest.approx(1500, rel=0.03)


def test_capacity_rule_queue_grows_past_capacity():
    curve = LatencyCurve.linear(2000.0, 250.0, 32)
    assert curve.capacity_rps(32) == pytest.approx(3200)
    policy = BatchPolicy(max_batch_size=32)
    below = simulate(poisson_arrivals(2800, 20_000, seed=1), curve, policy)
    above = simulate(poisson_arrivals(3500, 20_000, seed=1), curve, policy)
    assert above.latency_p99_us > 10 * below.latency_p99_us
    assert above.throughput_rps == pytest.approx(3200, rel=0.02)


async def _batcher_on_fake_clock(arrivals, curve, policy, levels=None, budgets=None):
    clock = FakeClock()

    async def model(inputs):
        await clock.sleep(curve(len(inputs)))
        return inputs

    batcher = DynamicBatcher(model, policy, clock=clock)
    batcher.start()
    for index, when in enumerate(arrivals):
        await clock.advance(when - clock.now_us())
        batcher.submit(
            index,
            priority=None if levels is None else levels[index],
            deadline_in_us=None if budgets is None else budgets[index],
        )
    await clock.advance(1e9)
    await batcher.close()
    return batcher.metrics()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    max_batch=st.integers(1, 8),
    delay_us=st.sampled_from([0.0, 300.0, 2000.0]),
    preferred=st.sampled_from([(), (2,), (1, 4)]),
    levels=st.integers(1, 2),
    timeout_us=st.sampled_from([0.0, 3000.0]),
)
def test_simulator_reproduces_the_batcher_exactly(seed, max_batch, delay_us, preferred, levels,
                                                  timeout_us):
    preferred = tuple(p for p in preferred if p <= max_batch)
    policy = BatchPolicy(
        max_batch_size=max_batch, max_queue_delay_us=delay_us, preferred_batch_sizes=preferred,
        priority_levels=levels, default_queue=QueuePolicy(timeout_us=timeout_us),
        max_queue_size=20,
    )
    rng = np.random.default_rng(seed)
    # whole, distinct microseconds: the driver submits one request per clock step
    arrivals = np.cumsum(np.floor(rng.exponential(400.0, 80)) + 1)
    prio = rng.integers(1, levels + 1, arrivals.size).tolist()
    curve = LatencyCurve(batch_sizes=(1, 8), latency_us=(800.0, 2200.0))
    real = asyncio.run(_batcher_on_fake_clock(arrivals, curve, policy, levels=prio))
    sim = simulate(arrivals, curve, policy, priorities=prio)
    assert sim.batch_size_histogram == real.batch_size_histogram
    assert sim.rejected == real.rejected
    assert sim.num_completed == real.num_completed
    if real.num_completed:
        assert sim.latency_p99_us == pytest.approx(real.latency_p99_us)
        assert sim.latency_mean_us == pytest.approx(real.latency_mean_us)


@settings(max_examples=40, deadline=None)
@given(
    rate=st.floats(100, 20_000),
    max_batch=st.integers(1, 16),
    queue_limit=st.integers(0, 30),
    seed=st.integers(0, 100),
)
def test_every_request_is_accounted_for(rate, max_batch, queue_limit, seed):
    curve = LatencyCurve.linear(500.0, 100.0, 16)
    arrivals = poisson_arrivals(rate, 500, seed=seed)
    policy = BatchPolicy(max_batch_size=max_batch, max_queue_size=queue_limit)
    m = simulate(arrivals, curve, policy, SimulationOptions(num_instances=2))
    assert m.num_completed + sum(m.rejected.values()) == arrivals.size
    assert m.latency_p50_us >= curve(1) - 1e-9
    assert 0 <= m.busy_pct <= 100 + 1e-9


def test_arrival_processes_have_the_asked_rate():
    for times in (poisson_arrivals(1000, 50_000, seed=2), bursty_arrivals(1000, 50_000, seed=2)):
        assert np.all(np.diff(times) >= 0) and times[0] == 0
        assert times.size / (times[-1] / 1e6) == pytest.approx(1000, rel=0.06)
    gaps = np.diff(bursty_arrivals(1000, 50_000, seed=2))
    assert gaps.std() / gaps.mean() > 1.1  # burstier than Poisson (coefficient of variation 1)
    assert replay_arrivals([30.0, 10.0, 20.0]).tolist() == [0.0, 10.0, 20.0]


@pytest.mark.parametrize("bad", [{"rate_rps": 0}, {"rate_rps": -1}, {"num_requests": 0}])
def test_bad_arrival_parameters(bad):
    with pytest.raises(InputError):
        poisson_arrivals(**{"rate_rps": 10.0, "num_requests": 5, **bad})


@pytest.mark.parametrize(("clients", "max_batch"), [(1, 32), (4, 32), (64, 32), (10, 4)])
def test_closed_loop_obeys_littles_law_and_full_batches(clients, max_batch):
    from aiprof.inference.simulator import simulate_closed_loop

    curve = LatencyCurve.linear(2000.0, 250.0, 64)
    m = simulate_closed_loop(clients, 4000, curve, BatchPolicy(max_batch_size=max_batch))
    # Little's law: clients = throughput × latency (every client always has one request out)
    assert m.throughput_rps * m.latency_mean_us / 1e6 == pytest.approx(clients, rel=0.01)
    if clients % max_batch == 0 or clients < max_batch:
        batch = min(clients, max_batch)  # every batch full: rate = batch / T(batch) per instance
        assert m.throughput_rps == pytest.approx(batch / curve(batch) * 1e6, rel=0.01)
    assert m.num_completed == 4000
