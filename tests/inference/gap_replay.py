"""Replays of committed H200 serving records with the gap between batches
(``SimulationOptions.gap_us``): each point's simulation as the bench ran it, and the same with a
gap that no test point gave (the calibration run's)."""

from __future__ import annotations

from typing import Any

from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.latency_curve import LatencyCurve, TimeSpread
from aiprof.inference.metrics import BatchingMetrics
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.simulator import SimulationOptions, simulate

CALIBRATION_SEED_OFFSET = 2
"""The bench's calibration arrivals are seeded ``seed + 2`` (``comparison.calibrate_stack``)."""
CALIBRATION_REQUESTS_MIN = 500
"""``BenchConfig.min_requests``: the calibration run's least number of requests."""


def _curve(record: dict[str, Any]) -> LatencyCurve:
    return LatencyCurve(batch_sizes=tuple(record["batch_sizes"]),
                        latency_us=tuple(record["latency_us"]))


def _spread(record: dict[str, Any] | None) -> TimeSpread | None:
    if not record:
        return None
    return TimeSpread(batch_sizes=tuple(record["batch_sizes"]),
                      factors=tuple(tuple(f) for f in record["factors"]))


def device_alone(result: dict[str, Any]) -> LatencyCurve:
    """The device curve alone, as the bench simulated with it (its step over the buckets)."""
    from aiprof.measure.inference.engine import buckets

    curve = result["curve"]
    steps = buckets(result["policy"]["max_batch_size"])
    by_size = dict(zip(curve["batch_sizes"], curve["device_us"], strict=True))
    sizes = list(range(1, result["policy"]["max_batch_size"] + 1))
    return LatencyCurve(batch_sizes=tuple(sizes), latency_us=tuple(
        by_size[min(b for b in steps if b >= s)] for s in sizes))


def options(result: dict[str, Any], *, spread: bool = True, gap_us: tuple[float, ...] = (),
            wake_us: tuple[tuple[int, float], ...] = ()) -> SimulationOptions:
    """The simulator's options as the bench gave them for ``result`` (with ``gap_us`` and
    ``wake_us``)."""
    stack = result["stack"]
    return SimulationOptions(
        num_instances=result["num_instances"], shared_device=True,
        overhead_us=stack["handoff_under_load_us"],
        transport_us=stack["transport_under_load_us"],
        host_curve=_curve(stack["host_under_load"]),
        device_spread=_spread(stack.get("device_spread")) if spread else None,
        host_spread=_spread(stack.get("host_spread")) if spread else None, gap_us=gap_us,
        wake_us=wake_us)


def policy_of(result: dict[str, Any]) -> BatchPolicy:
    policy = result["policy"]
    return BatchPolicy(max_batch_size=policy["max_batch_size"],
                       max_queue_delay_us=policy["max_queue_delay_us"],
                       preferred_batch_sizes=tuple(policy["preferred_batch_sizes"]))


def device_of(result: dict[str, Any]) -> LatencyCurve:
    stack = result["stack"]
    return _curve(stack["device_under_load"]) if stack.get("device_under_load") else (
        device_alone(result))


def replay(result: dict[str, Any], point: dict[str, Any], *, spread: bool = True,
           gap_us: tuple[float, ...] = (),
           wake_us: tuple[tuple[int, float], ...] = ()) -> BatchingMetrics:
    """``point``'s simulation again (its arrivals, the bench's seed 0), with ``gap_us`` and
    ``wake_us``."""
    arrivals = poisson_arrivals(point["offered_rps"], point["real"]["num_requests"], seed=0)
    return simulate(arrivals, device_of(result), policy_of(result),
                    options(result, spread=spread, gap_us=gap_us, wake_us=wake_us))


def calibration_forming_us(result: dict[str, Any], gap_us: float, *,
                           spread: bool = True) -> float:
    """The simulated calibration run's mean forming time (60% of capacity, its own arrivals)
    with a gap of ``gap_us`` after every batch."""
    stack = result["stack"]
    rate = stack["calibration_rps"]
    arrivals = poisson_arrivals(rate, int(max(CALIBRATION_REQUESTS_MIN, rate)),
                                seed=CALIBRATION_SEED_OFFSET)
    opts = options(result, spread=spread, gap_us=(gap_us,) if gap_us > 0 else ())
    return simulate(arrivals, device_of(result), policy_of(result), opts).forming_mean_us


def calibration_gap_us(result: dict[str, Any], *, spread: bool = True) -> float:
    """The one gap between batches that makes the simulated calibration run form batches as
    long as the real one did (``forming_under_load_us``): out of sample for every open-loop
    point. NaN when the record has no calibration forming."""
    target = result["stack"].get("forming_under_load_us")
    if target is None or target != target:
        return float("nan")
    low, high = 0.0, 1000.0
    if calibration_forming_us(result, low, spread=spread) >= target:
        return 0.0
    if calibration_forming_us(result, high, spread=spread) < target:
        return high
    for _ in range(12):  # to 0.25 us
        middle = (low + high) / 2
        if calibration_forming_us(result, middle, spread=spread) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def errors_pct(simulated, point):
    """(P50, P99) error of a simulation against a recorded point's real latencies, in %."""
    real = point["real"]
    return tuple(100 * (getattr(simulated, q) - real[q]) / real[q]
                 for q in ("latency_p50_us", "latency_p99_us"))
