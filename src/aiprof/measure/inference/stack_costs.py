"""What the serving stack adds to the engine, as the simulator is given it: the hand-off per
batch and the transport per request of a served run, and the host stage and device curve as a
calibration run under load took them (``comparison`` measures them; see its docstring)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiprof.inference.latency_curve import LatencyCurve, TimeSpread
from aiprof.inference.serving import ServedRun
from aiprof.measure.inference.engine import BatchCosts

if TYPE_CHECKING:
    from aiprof.measure.inference.comparison import ServingCurve


@dataclass(frozen=True, kw_only=True)
class StackCosts:
    """What the serving stack adds to the engine, from a served run (microseconds; medians over
    the requests).

    ``handoff``: the batcher's time per batch (dispatch to the batch's end: its answers sent from
    the model thread, or back on the loop for futures) minus the engine's own call: the trip to
    the model thread and the Python around the call. ``transport``: a request's latency at the
    client minus its latency in the batcher: the socket both ways, the front end, the loop being
    busy when it arrives."""

    handoff_alone_us: float
    transport_alone_us: float
    calibration_rps: float
    """The load of the run measured under load (0: none was run)."""
    handoff_under_load_us: float
    transport_under_load_us: float
    host_under_load: LatencyCurve | None = None
    """The engine's time outside the device per batch size, measured under the calibration
    load (None: lone requests only); the simulator's host stage."""
    device_under_load: LatencyCurve | None = None
    """The device curve as the batches of the calibration run took it, back to back (None:
    alone only, or a record made before it); the simulator's device curve."""
    device_spread: TimeSpread | None = None
    """Each calibration batch's device time over its size's median, per bucket: what the
    simulator draws a batch's device time from (None: medians only, or a record before it)."""
    host_spread: TimeSpread | None = None
    """The same for the host stage (the call minus its wait for the device)."""
    forming_under_load_us: float = float("nan")
    """The calibration run's mean forming time per request (the batcher's ``forming_mean_us``:
    an instance free, the batch not yet dispatched); recorded, not simulated: on the H200 at
    80% load the real batcher's was 124-251 us, the simulator's 2-10 (2026-12-02), a gap between
    batches (NaN: none run, or a record before it). Contaminated by the policy's own waits and
    the delay timer's lateness; ``gap_under_load_us`` is the gap itself."""
    gap_under_load_us: tuple[float, ...] = ()
    """The calibration run's gaps between batches (the batcher's ``dispatch_gap_us``: for each
    batch due the moment its instance was free, how much later it was dispatched; at most 64
    quantiles): what the simulator draws each batch's gap from (empty: none measured, or a
    record before it)."""
    wake_under_load_us: tuple[tuple[int, float], ...] = ()
    """The calibration run's lag of the serving thread past a batch's device work, (batch
    size, us) for the sizes it ran often enough with the stream clear (``loaded_wake_us``):
    the simulator's ``wake_us`` (empty: none measured, or a record before it)."""


MIN_BATCHES_PER_SIZE = 3
"""Batch sizes seen fewer times in the calibration run keep their cost alone, scaled (a median
of one or two batches is one machine hiccup away from anything)."""


def loaded_host_curve(alone: ServingCurve, loaded: BatchCosts) -> LatencyCurve:
    """The host stage as the serving threads pay it: the calibration run's time outside the
    device for the sizes it ran often enough; the other sizes measured alone, scaled by the ratio
    of loaded to alone at the nearest size it ran (2.1-3.8x for ResNet-50 on the H200,
    2026-12-01: an OpenMP team that went to sleep between batches, or two teams at once)."""
    seen = {b: t for b, n, t in zip(loaded.batch_sizes, loaded.num_batches,
                                    loaded.outside_device_us, strict=True)
            if n >= MIN_BATCHES_PER_SIZE and t > 0}
    base = alone.host_curve()
    if not seen:
        return base
    low, high = min(seen), max(seen)
    points = dict(seen)
    for size in alone.batch_sizes:
        if size < low or size > high:
            near = low if size < low else high
            points[size] = base(size) * seen[near] / base(near)
    sizes = sorted(points)
    return LatencyCurve(batch_sizes=tuple(sizes), latency_us=tuple(points[b] for b in sizes))


def loaded_device_curve(device: LatencyCurve, bucket: Callable[[int], int],
                        loaded: BatchCosts) -> LatencyCurve:
    """``device`` (measured alone, per batch size) scaled, bucket by bucket (``bucket``: the
    size a batch runs at, ``ServingEngine.bucket``), by what the
    calibration run's batches took on the device against it (the median ratio over the sizes
    run there often enough; a bucket it did not run takes the nearest one's ratio). Back to
    back, a batch runs at another speed than alone: on the H200 (2026-12-02 01:03 and 01:47
    UTC) at 80% load 0.97-0.99x alone for ResNet-50 and BERT-base BF16, 1.00-1.01x for
    BERT-base FP32; at 40% load up to 1.14x for batches of 1 and 2."""
    ratios: dict[int, list[float]] = {}
    for size, count, took in zip(loaded.batch_sizes, loaded.num_batches, loaded.device_us,
                                 strict=True):
        runs_at = bucket(size)
        alone = device(runs_at)
        if count >= MIN_BATCHES_PER_SIZE and took > 0 and alone > 0:
            ratios.setdefault(runs_at, []).append(took / alone)
    if not ratios:
        return device
    scale = {b: float(statistics.median(r)) for b, r in ratios.items()}

    def ratio(size: int) -> float:
        runs_at = bucket(size)
        return scale.get(runs_at) or scale[min(scale,
                                               key=lambda b: abs(math.log2(b / runs_at)))]

    return LatencyCurve(batch_sizes=device.batch_sizes, latency_us=tuple(
        t * ratio(b) for b, t in zip(device.batch_sizes, device.latency_us, strict=True)))


def loaded_wake_us(loaded: BatchCosts) -> tuple[tuple[int, float], ...]:
    """(batch size, the thread's lag past the device) of the calibration run's sizes with at
    least ``MIN_BATCHES_PER_SIZE`` batches that found the stream clear (``BatchCosts.wake_us``):
    on the H200 (2026-12-02, the 40% and 80% points of 03:34, 04:19 and 06:26 UTC, one
    instance, sizes of 3 or more run 3 times or more) 49-196 us per batch for BERT-base FP32,
    -81 to +45 us for ResNet-50 FP32, whose queueing of its larger copy in runs about as long
    beside the device as the wake."""
    return tuple((b, lag) for b, n, lag in zip(loaded.batch_sizes, loaded.num_clear_batches,
                                               loaded.wake_us, strict=True)
                 if n >= MIN_BATCHES_PER_SIZE and math.isfinite(lag))


def stack_costs(run: ServedRun, engine_median_wall_us: float) -> tuple[float, float]:
    """(handoff per batch, transport per request) of one served run, from medians over the
    requests: one stall of a shared machine in a short run moves a mean by milliseconds (a 1 s
    calibration at 190 req/s on the 2-core VM, 2026-12-01: a mean transport of 19.8 ms)."""
    handoff = run.server.compute_p50_us - engine_median_wall_us
    transport = run.latency_p50_us - run.server.latency_p50_us
    return max(0.0, handoff), max(0.0, transport)
