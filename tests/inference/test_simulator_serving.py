"""The simulator's two-stage server (host work per instance, one shared device queue) against
closed-form answers.

A batch of B takes H on its instance's host, then D on the one device, then o of overhead. With k
instances and a saturating closed loop the device is the bottleneck while H + o <= (k - 1) D, so
the throughput is B / D; otherwise every instance cycles through H + D + o without waiting and the
throughput is k B / (H + D + o). A lone request takes H(1) + D(1) + o.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.latency_curve import LatencyCurve
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.simulator import SimulationOptions, simulate, simulate_closed_loop

B = 8


def _flat(us: float) -> LatencyCurve:
    return LatencyCurve(batch_sizes=(1, B), latency_us=(us, us))


def _throughput(host_us, device_us, overhead_us, instances):
    sim = SimulationOptions(num_instances=instances, overhead_us=overhead_us,
                            host_curve=_flat(host_us), shared_device=True)
    return simulate_closed_loop(4 * B * instances, 4000, _flat(device_us),
                                BatchPolicy(max_batch_size=B), sim).throughput_rps


@pytest.mark.parametrize(("host_us", "device_us", "overhead_us", "instances", "expected_rps"), [
    (300.0, 1000.0, 100.0, 2, B / 1000e-6),  # device-bound: the host hides under the device
    (1500.0, 1000.0, 100.0, 2, 2 * B / 2600e-6),  # host-bound: two instances, each H + D + o
    (1500.0, 1000.0, 100.0, 3, B / 1000e-6),  # a third instance hides the host again
    (300.0, 1000.0, 100.0, 1, B / 1400e-6),  # one instance: nothing overlaps
])
def test_saturated_throughput_is_the_slower_stage(host_us, device_us, overhead_us, instances,
                                                  expected_rps):
    assert _throughput(host_us, device_us, overhead_us, instances) == pytest.approx(
        expected_rps, rel=0.01)


def test_lone_request_takes_host_device_and_overhead():
    host = LatencyCurve(batch_sizes=(1, B), latency_us=(50.0, 400.0))
    device = LatencyCurve(batch_sizes=(1, B), latency_us=(900.0, 3000.0))
    sim = SimulationOptions(num_instances=2, overhead_us=120.0, host_curve=host,
                            shared_device=True)
    lone = simulate_closed_loop(1, 50, device, BatchPolicy(max_batch_size=B), sim)
    assert lone.latency_p50_us == pytest.approx(50 + 900 + 120)
    assert lone.latency_p99_us == pytest.approx(50 + 900 + 120)
    assert sim.batch_time_us(device, B) == pytest.approx(400 + 3000 + 120)


def test_second_batch_waits_for_the_device_not_for_its_host():
    # two full batches arrive together: the second is assembled while the first computes and
    # starts on the device the moment the first leaves it
    arrivals = [0.0] * (2 * B)
    sim = SimulationOptions(num_instances=2, host_curve=_flat(200.0), shared_device=True)
    metrics = simulate(arrivals, _flat(1000.0), BatchPolicy(max_batch_size=B), sim)
    # first batch H + D = 1,200 us; second H, then waits for the device until 1,200, then D
    assert metrics.latency_mean_us == pytest.approx((1200.0 + 2200.0) / 2)
    assert metrics.latency_p99_us == pytest.approx(2200.0)
    assert metrics.mean_batch_size == B


def test_without_a_shared_device_the_instances_compute_in_parallel():
    arrivals = [0.0] * (2 * B)
    sim = SimulationOptions(num_instances=2, host_curve=_flat(200.0))
    metrics = simulate(arrivals, _flat(1000.0), BatchPolicy(max_batch_size=B), sim)
    assert metrics.latency_p99_us == pytest.approx(1200.0)


def test_transport_time_adds_to_every_latency_and_occupies_no_instance():
    curve = LatencyCurve(batch_sizes=(1, 8), latency_us=(1000.0, 3000.0))
    policy = BatchPolicy(max_batch_size=8, max_queue_delay_us=500.0)
    arrivals = poisson_arrivals(1500.0, 3000, seed=3)
    base = SimulationOptions(num_instances=2, overhead_us=100.0)
    plain = simulate(arrivals, curve, policy, base)
    moved = simulate(arrivals, curve, policy, replace(base, transport_us=700.0))
    for name in ("latency_p50_us", "latency_p99_us", "latency_mean_us"):
        assert getattr(moved, name) == pytest.approx(getattr(plain, name) + 700.0)
    assert moved.batch_size_histogram == plain.batch_size_histogram  # the same batches
    assert moved.throughput_rps == pytest.approx(plain.throughput_rps)


def test_the_host_stage_under_load_keeps_the_sizes_run_often_and_scales_the_others():
    from aiprof.measure.inference.comparison import ServingCurve
    from aiprof.measure.inference.engine import BatchCosts
    from aiprof.measure.inference.stack_costs import loaded_host_curve

    alone = ServingCurve(batch_sizes=(1, 2, 4, 8, 16, 32), host_us=(10.0,) * 6,
                         device_us=(1000.0, 1100, 1300, 1800, 3000, 5400),
                         wall_us=(1100.0, 1200, 1400, 1900, 3200, 5800))
    loaded = BatchCosts(batch_sizes=(3, 4, 5, 9), num_batches=(10, 30, 2, 20),
                        host_us=(0.0,) * 4, device_us=(0.0,) * 4, wall_us=(0.0,) * 4,
                        outside_device_us=(330.0, 350.0, 9999.0, 600.0))
    curve = loaded_host_curve(alone, loaded)
    assert curve(3) == 330 and curve(4) == 350 and curve(9) == 600  # measured under load
    assert curve(5) == pytest.approx(350 + (600 - 350) / 5)  # seen twice only: interpolated
    assert curve(1) == pytest.approx(100 * 330 / 100)  # alone 100 us, scaled as size 3 was
    assert curve(32) == pytest.approx(400 * 600 / alone.host_curve()(9))  # scaled as size 9
    assert loaded_host_curve(alone, replace(loaded, num_batches=(1, 1, 1, 1))) == (
        alone.host_curve())  # nothing run often enough: the costs alone


def test_the_device_curve_under_load_scales_each_bucket_by_its_batches_back_to_back():
    from aiprof.measure.inference.engine import BatchCosts, buckets
    from aiprof.measure.inference.stack_costs import loaded_device_curve

    steps = buckets(32)
    bucket = functools.partial(_bucket, steps)
    device = LatencyCurve(batch_sizes=tuple(range(1, 33)), latency_us=tuple(
        1000.0 * bucket(size) ** 0.5 for size in range(1, 33)))
    # sizes 5 and 7 run at bucket 8 (0.98x and 1.02x alone), 16 at 1.01x, 3 seen twice only
    loaded = BatchCosts(batch_sizes=(3, 5, 7, 16), num_batches=(2, 10, 10, 40),
                        host_us=(0.0,) * 4, wall_us=(0.0,) * 4,
                        device_us=(9999.0, 0.98 * device(8), 1.02 * device(8), 1.01 * device(16)))
    curve = loaded_device_curve(device, bucket, loaded)
    assert curve(6) == pytest.approx(device(6))  # bucket 8: the median of 0.98 and 1.02
    assert curve(12) == pytest.approx(1.01 * device(12))  # bucket 16, measured there
    assert curve(32) == pytest.approx(1.01 * device(32))  # not run: the nearest bucket's
    assert curve(1) == pytest.approx(device(1))  # nearest run bucket: 8 (1.00x), not 3's
    assert loaded_device_curve(device, bucket, replace(loaded, num_batches=(1, 1, 1, 1))) == (
        device)  # nothing run often enough: alone


def _bucket(steps, size):
    return min(b for b in steps if b >= size)


def test_the_lag_past_the_device_holds_the_instance_and_not_the_device():
    # two full batches together: each instance is busy 150 us past its batch's device work,
    # but the second batch starts on the device the moment the first leaves it
    arrivals = [0.0] * (2 * B)
    wake = ((B, 150.0),)
    sim = SimulationOptions(num_instances=2, host_curve=_flat(200.0), shared_device=True,
                            wake_us=wake)
    metrics = simulate(arrivals, _flat(1000.0), BatchPolicy(max_batch_size=B), sim)
    assert metrics.latency_p99_us == pytest.approx(2200.0 + 150.0)
    assert metrics.latency_mean_us == pytest.approx((1350.0 + 2350.0) / 2)
    # one instance: the lag is the batch's, so saturated throughput falls to B / (H + D + w)
    one = SimulationOptions(host_curve=_flat(300.0), shared_device=True, wake_us=wake)
    closed = simulate_closed_loop(4 * B, 4000, _flat(1000.0), BatchPolicy(max_batch_size=B), one)
    assert closed.throughput_rps == pytest.approx(B / 1450e-6, rel=0.01)
    assert one.batch_time_us(_flat(1000.0), B) == pytest.approx(1450.0)


def test_the_lag_of_a_size_is_its_buckets_and_a_negative_one_comes_off_the_host_stage():
    sim = SimulationOptions(wake_us=((2, -40.0), (8, 120.0)))
    assert [sim.wake_at_us(b) for b in (1, 2, 3, 8, 16)] == [-40.0, -40.0, 120.0, 120.0, 120.0]
    assert SimulationOptions().wake_at_us(4) == 0.0
    for lag, expected in ((-4.0, 6.0 + 30.0), (-100.0, 30.0)):  # never before the device's end
        lone = simulate_closed_loop(1, 20, _flat(30.0), BatchPolicy(max_batch_size=B),
                                    SimulationOptions(host_curve=_flat(10.0), shared_device=True,
                                                      wake_us=((B, lag),)))
        assert lone.latency_p50_us == pytest.approx(expected)
