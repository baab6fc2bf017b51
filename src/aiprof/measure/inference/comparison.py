"""The whole serving comparison of ``aiprof batching bench``: the serving curve alone, capacity,
the real batcher (load from another process) against the simulator at fractions of capacity and
at 1-64 clients, the SLO tuner's recommendation checked by a real run, and a 10x overload.

The simulator is given what a batch costs this server, each part measured, nothing fitted: the
device curve alone (copy in, forward, copy back), the two instances sharing one device queue
(:mod:`aiprof.inference.simulator` says the mechanism), and, from a calibration run under load
at a fraction of capacity that none of the compared loads uses, the engine's time outside the
device per batch size (the host stage), the device curve as those batches took it back to back,
the hand-off per batch to and from the model thread and the transport per request through the
socket and the front end, and how far each batch's device time and host stage strayed from
its size's median there (the simulator draws every batch's times from that spread instead of
giving each its median). Capacity and the setting (instances, preferred sizes) come from the
curve alone, before any load runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from aiprof.errors import InputError
from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.latency_curve import LatencyCurve
from aiprof.inference.metrics import BatchingMetrics
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.serving import ClosedLoad, OpenLoad, ServedRun, serve
from aiprof.inference.simulator import SimulationOptions, simulate, simulate_closed_loop
from aiprof.inference.tune import TuneCandidate, TuneOptions, tune_policy
from aiprof.measure.inference.engine import BatchCosts, BatchSpread, ServingEngine
from aiprof.measure.inference.stack_costs import (
    MIN_BATCHES_PER_SIZE,
    StackCosts,
    loaded_device_curve,
    loaded_host_curve,
    loaded_wake_us,
    stack_costs,
)


@dataclass(frozen=True, kw_only=True)
class BenchConfig:
    """What to run; times in microseconds unless named otherwise."""

    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    """Sizes of the serving curve measured alone (the policy's max batch is added)."""
    max_batch: int = 32
    max_delay_us: float = 2000.0
    load_pcts: tuple[float, ...] = (40.0, 80.0)
    """Open-loop Poisson loads, in percent of the curve's capacity."""
    concurrencies: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    """Closed-loop client counts."""
    duration_s: float = 2.0
    """Length of each open-loop run (requests = rate x duration)."""
    closed_duration_s: float = 1.0
    """Length of each closed-loop run, at the simulator's predicted throughput."""
    min_requests: int = 200
    max_requests: int = 40_000
    overload_factor: float = 10.0
    """Offered load of the overload run, in multiples of capacity (0: no overload run)."""
    overload_queue_factor: int = 4
    """The overload run bounds the queue at this many full batches (Triton's max_queue_size)."""
    slo_us: float | None = None
    """P99 SLO of the tuner; None: 2 x the full batch alone + the delay (the issue's bound)."""
    tune: bool = True
    """Run the tuner at the highest open-loop load and check its policy there for real."""
    tune_requests: int = 2000
    tune_batch_sizes: tuple[int, ...] = ()
    """Max batch sizes the tuner tries; empty: powers of two from max batch / 8 to max batch."""
    warmup: int = 3
    iters: int = 20
    calibration_requests: int = 200
    calibration_load_pct: float = 60.0
    """The open-loop load, in percent of capacity, at which the serving stack's own costs are
    measured for the simulator (between the loads compared, none of them; 0: lone requests)."""
    calibration_duration_s: float = 1.0
    spread: bool = True
    """Simulate each batch's device time and host stage drawn from the spread the calibration
    run measured (seeded by ``seed``); False: every batch at its size's median."""
    gap: bool = True
    """Simulate the gap between batches the calibration run measured (``StackCosts.
    gap_under_load_us``); False: an instance takes its next batch the moment it is free."""
    wake: bool = True
    """Simulate the serving thread's lag past each batch's device work that the calibration
    run measured (``StackCosts.wake_under_load_us``); False: the instance is free when the
    device is done."""
    choose_preferred: bool = True
    """Let the simulator choose the preferred batch sizes with the instance count: none (Triton's
    default, the max batch) or half and all of it (the tuner's variant); False: none."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_batch < 1 or not self.batch_sizes or min(self.batch_sizes) < 1:
            raise InputError("batch sizes and the max batch must be at least 1")
        if any(not 0 < p for p in self.load_pcts) or any(c < 1 for c in self.concurrencies):
            raise InputError("loads must be > 0 % and client counts at least 1")
        if self.duration_s <= 0 or self.min_requests < 1:
            raise InputError("the duration must be > 0 s and at least one request sent")


@dataclass(frozen=True, kw_only=True)
class ServingCurve:
    """A batch's costs alone, per batch size (medians, microseconds)."""

    batch_sizes: tuple[int, ...]
    host_us: tuple[float, ...]
    device_us: tuple[float, ...]
    wall_us: tuple[float, ...]

    def device_curve(self) -> LatencyCurve:
        return LatencyCurve(batch_sizes=self.batch_sizes, latency_us=self.device_us)

    def host_curve(self) -> LatencyCurve:
        """The engine's time per batch besides the device's: assembling the batch, and the
        Python around the device work (taking the lock, queueing the copies and the replay,
        waking from the event, reading the results), which the whole call alone holds."""
        return LatencyCurve(batch_sizes=self.batch_sizes, latency_us=tuple(
            max(h, w - d, 1e-3) for h, w, d in zip(self.host_us, self.wall_us, self.device_us,
                                                   strict=True)))


@dataclass(frozen=True, kw_only=True)
class LoadPoint:
    """One load, served for real and simulated."""

    label: str
    offered_rps: float | None
    concurrency: int | None
    real: ServedRun
    simulated: BatchingMetrics
    under_load: BatchCosts
    """What the batches of this run cost the engine."""
    simulated_device_alone: BatchingMetrics | None = None
    """Open loop: the simulation with the device curve alone instead of the one measured under
    load (None: the same curve, or a record made before the difference)."""
    simulated_medians: BatchingMetrics | None = None
    """Open loop: the simulation with every batch at its size's median instead of drawn from the
    spread (None: the simulation had no spread, or a record made before it)."""
    spread: BatchSpread | None = None
    """The spread of this run's own batches (open loop; None in records made before it)."""
    simulated_no_gap: BatchingMetrics | None = None
    """Open loop: the simulation without the gap between batches (None: the simulation had no
    gap, or a record made before it)."""
    simulated_no_wake: BatchingMetrics | None = None
    """Open loop: the simulation without the thread's lag past the device (None: the simulation
    had none, or a record made before it)."""

    @property
    def p50_error_pct(self) -> float:
        return _error_pct(self.simulated.latency_p50_us, self.real.latency_p50_us)

    @property
    def p99_error_pct(self) -> float:
        return _error_pct(self.simulated.latency_p99_us, self.real.latency_p99_us)

    @property
    def throughput_error_pct(self) -> float:
        return _error_pct(self.simulated.throughput_rps, self.real.throughput_rps)


@dataclass(frozen=True, kw_only=True)
class TunerCheck:
    """The tuner's best policy for a load under the SLO, and a real run of it at that load."""

    slo_us: float
    rate_rps: float
    """The load the tuner was asked to sustain (the highest open-loop load)."""
    best: TuneCandidate | None
    point: LoadPoint | None


@dataclass(frozen=True, kw_only=True)
class ServingComparison:
    """Everything ``batching bench`` measured and predicted."""

    device: str
    execution: str
    """``cuda graphs`` or ``eager``."""
    capture_error: str
    policy: BatchPolicy
    """The policy the loads were served with: the max batch and delay asked for, the preferred
    sizes of the setting chosen (:func:`setting_p99_us`)."""
    num_instances: int
    """Instances the loads were served with: those of the setting whose simulated P99 at the
    highest load was the lowest (:func:`setting_p99_us`)."""
    instance_p99_us: dict[str, float]
    """Simulated P99 at the highest open-loop load for one instance and for every buffer set,
    with the preferred sizes chosen."""
    curve: ServingCurve
    capacity_rps: float
    """The device curve's capacity at the max batch, B / T(B)."""
    batch_alone_us: float
    """A full batch's host + device + overhead time alone: the unit of the P99 bound."""
    overhead_us: float
    """The serving stack's time per batch given to the simulator (measured under load)."""
    stack: StackCosts | None = None
    """The serving stack's own costs, lone requests and under load (None: older records)."""
    open_loop: tuple[LoadPoint, ...]
    closed_loop: tuple[LoadPoint, ...]
    tuner: TunerCheck | None
    overload: ServedRun | None
    overload_rps: float
    setting_p99_us: dict[str, float] = field(default_factory=dict)
    """Simulated P99 at the highest open-loop load of every setting compared, keyed
    ``"<instances> x <preferred sizes or ->"`` (empty in records made before the choice)."""


def _error_pct(predicted: float, measured: float) -> float:
    return 100.0 * (predicted - measured) / measured if measured else float("nan")


def measure_alone(engine: ServingEngine, sizes: tuple[int, ...], *, warmup: int, iters: int
                  ) -> ServingCurve:
    """The engine's costs per batch size with one batch at a time."""
    rows = []
    for size in sizes:
        payloads = [(i, i % engine.num_slots) for i in range(size)]
        for _ in range(warmup):
            engine(payloads)
        mark = engine.mark()
        for _ in range(iters):
            engine(payloads)
        costs = engine.costs_since(mark)
        rows.append((size, costs.host_us[0], costs.device_us[0], costs.wall_us[0]))
    return ServingCurve(batch_sizes=tuple(r[0] for r in rows), host_us=tuple(r[1] for r in rows),
                        device_us=tuple(r[2] for r in rows), wall_us=tuple(r[3] for r in rows))


def device_curve(curve: ServingCurve, engine: ServingEngine, max_batch: int) -> LatencyCurve:
    """The device time of every batch size: with CUDA graphs a batch runs at its bucket's size
    (a step function), else the measured sizes interpolated."""
    measured = curve.device_curve()
    if not engine.buckets:
        return measured
    sizes = tuple(range(1, max_batch + 1))
    return LatencyCurve(batch_sizes=sizes,
                        latency_us=tuple(measured(engine.bucket(size)) for size in sizes))


Setting = tuple[int, tuple[int, ...]]
"""A serving setting the bench chooses: (model instances, preferred batch sizes)."""


def setting_key(setting: Setting) -> str:
    """``"2 x 16,32"``: instances, then preferred sizes (``-``: none)."""
    return f"{setting[0]} x {','.join(map(str, setting[1])) or '-'}"


def setting_p99_us(device: LatencyCurve, base: SimulationOptions, policy: BatchPolicy,
                   max_instances: int, rate_rps: float, config: BenchConfig
                   ) -> dict[Setting, float]:
    """Simulated P99 at ``rate_rps`` of each setting a user would choose among: one instance or
    ``max_instances``, and (``config.choose_preferred``) no preferred size or half and all of
    the max batch, the two variants of the tuner's grid (:mod:`aiprof.inference.tune`).

    More instances hide the host work under the device's, but an instance that is free while the
    device still computes takes its batch early, with fewer requests, and a request can then wait
    behind two batches instead of one; which effect wins depends on the host's share of a batch,
    so the simulator decides (with host work near zero, one instance has the lower tail). A
    preferred half batch runs as soon as it is queued instead of waiting for a full one or the
    delay: near capacity that shortens the wait of the requests behind it, unless the device's
    fixed cost per batch makes two halves take much longer than one full batch. Which way it
    goes is read off the measured curve by the simulator, not assumed."""
    arrivals = poisson_arrivals(rate_rps, max(2000, config.tune_requests), seed=config.seed)
    top = policy.max_batch_size
    variants = [policy.preferred_batch_sizes]
    if config.choose_preferred and top > 1 and not policy.preferred_batch_sizes:
        variants.append((top // 2, top))
    return {(k, preferred): simulate(arrivals, device,
                                     replace(policy, preferred_batch_sizes=preferred),
                                     replace(base, num_instances=k)).latency_p99_us
            for k in sorted({1, max_instances}) for preferred in variants}


def calibrate_stack(engine: ServingEngine, policy: BatchPolicy, config: BenchConfig,
                    num_instances: int, rate_rps: float
                    ) -> tuple[float, float, BatchCosts, BatchSpread, BatchingMetrics]:
    """The serving stack's (handoff, transport) costs and the engine's costs per batch size: of
    lone requests when ``rate_rps`` is 0, else of an open-loop run at ``rate_rps`` (the engine's
    own time taken out of the first two, so the simulator adds only what the stack costs), and
    the spread of its batches' times, and the batcher's metrics of the run (its forming time,
    its gaps between batches)."""
    if rate_rps <= 0:
        load: OpenLoad | ClosedLoad = ClosedLoad(concurrency=1,
                                                 num_requests=config.calibration_requests)
        policy = replace(policy, max_queue_delay_us=0.0)
    else:
        count = int(min(config.max_requests, max(config.min_requests,
                                                 rate_rps * config.calibration_duration_s)))
        load = OpenLoad(arrivals_us=tuple(poisson_arrivals(
            rate_rps, count, seed=config.seed + 2).tolist()))
    mark = engine.mark()
    run = serve(engine, policy, load, num_slots=engine.num_slots, num_instances=num_instances)
    costs = engine.costs_since(mark)
    spread = engine.spread_since(mark, MIN_BATCHES_PER_SIZE)
    return (*stack_costs(run, costs.median_wall_us), costs, spread, run.server)


def run_comparison(engine: ServingEngine, config: BenchConfig,
                   progress: Callable[[str], None] = lambda _: None,
                   stop_at: float = math.inf) -> ServingComparison:
    """Measure alone, then serve and simulate every load of ``config``.

    Past ``stop_at`` (``time.monotonic()``) the closed-loop points, the tuner's check and the
    overload run that did not start yet are skipped."""
    sizes = tuple(sorted({*config.batch_sizes, config.max_batch, *engine.buckets}))
    sizes = tuple(s for s in sizes if s <= config.max_batch)
    if config.max_batch > engine.max_batch:
        raise InputError(f"max batch {config.max_batch} exceeds the engine's buffers "
                         f"({engine.max_batch})")
    curve = measure_alone(engine, sizes, warmup=config.warmup, iters=config.iters)
    progress(f"serving curve alone: {curve}")
    policy = BatchPolicy(max_batch_size=config.max_batch, max_queue_delay_us=config.max_delay_us)
    handoff, transport, _, _, _ = calibrate_stack(engine, policy, config, 1, 0.0)
    device = device_curve(curve, engine, config.max_batch)
    capacity = device.capacity_rps(config.max_batch)
    base = SimulationOptions(overhead_us=handoff, transport_us=transport,
                             host_curve=curve.host_curve(), shared_device=True)
    by_setting = setting_p99_us(device, base, policy, engine.num_buffers,
                                capacity * max(config.load_pcts, default=80.0) / 100, config)
    instances, preferred = min(by_setting, key=lambda k: by_setting[k])
    policy = replace(policy, preferred_batch_sizes=preferred)
    by_instances = {k: p99 for (k, pref), p99 in by_setting.items() if pref == preferred}
    progress(f"simulated P99 by setting: {by_setting}; serving with {instances} instance(s), "
             f"preferred sizes {preferred or '-'}")
    calibration_rps = capacity * config.calibration_load_pct / 100
    stack = StackCosts(handoff_alone_us=handoff, transport_alone_us=transport,
                       calibration_rps=0.0, handoff_under_load_us=handoff,
                       transport_under_load_us=transport)
    if calibration_rps > 0:
        loaded_handoff, loaded_transport, costs, spread, server = calibrate_stack(
            engine, policy, config, instances, calibration_rps)
        stack = replace(stack, calibration_rps=calibration_rps,
                        handoff_under_load_us=loaded_handoff,
                        transport_under_load_us=loaded_transport,
                        host_under_load=loaded_host_curve(curve, costs),
                        device_under_load=loaded_device_curve(device, engine.bucket, costs),
                        device_spread=spread.device if config.spread else None,
                        host_spread=spread.host if config.spread else None,
                        forming_under_load_us=server.forming_mean_us,
                        gap_under_load_us=server.dispatch_gap_us,
                        wake_under_load_us=loaded_wake_us(costs))
    progress(f"serving stack: {stack}")
    sim = replace(base, num_instances=instances, overhead_us=stack.handoff_under_load_us,
                  transport_us=stack.transport_under_load_us,
                  host_curve=stack.host_under_load or base.host_curve,
                  device_spread=stack.device_spread, host_spread=stack.host_spread,
                  gap_us=stack.gap_under_load_us if config.gap else (),
                  wake_us=stack.wake_under_load_us if config.wake else (), seed=config.seed)
    runner = _Runner(engine, config, stack.device_under_load or device, sim, progress,
                     device if stack.device_under_load is not None else None)
    open_points = tuple(runner.open_point(f"{pct:g}% of capacity", capacity * pct / 100, policy)
                        for pct in config.load_pcts)
    closed_points = tuple(runner.closed_point(c, policy) for c in config.concurrencies
                          if time.monotonic() < stop_at)
    alone_us = base.batch_time_us(device, config.max_batch)
    tuner = None
    if config.tune and config.load_pcts and time.monotonic() < stop_at:
        tuner = runner.tuner_check(config.slo_us or 2 * alone_us + config.max_delay_us,
                                   capacity * max(config.load_pcts) / 100)
    overload, overload_rps = None, capacity * config.overload_factor
    if config.overload_factor > 0 and time.monotonic() < stop_at:
        overload = runner.overload(policy, overload_rps)
    return ServingComparison(
        device=str(engine.device), execution=engine.execution,
        capture_error=engine.capture_error, policy=policy, num_instances=instances,
        instance_p99_us={str(k): v for k, v in by_instances.items()},
        setting_p99_us={setting_key(k): v for k, v in by_setting.items()}, curve=curve,
        capacity_rps=capacity, batch_alone_us=alone_us, overhead_us=sim.overhead_us, stack=stack,
        open_loop=open_points, closed_loop=closed_points, tuner=tuner, overload=overload,
        overload_rps=overload_rps)


@dataclass(frozen=True)
class _Runner:
    engine: ServingEngine
    config: BenchConfig
    device: LatencyCurve
    sim: SimulationOptions
    progress: Callable[[str], None]
    device_alone: LatencyCurve | None = None
    """The curve alone, when ``device`` is the one under load: simulated beside it."""

    def _count(self, rate_rps: float, duration_s: float | None = None) -> int:
        wanted = int(rate_rps * (self.config.duration_s if duration_s is None else duration_s))
        return int(min(self.config.max_requests, max(self.config.min_requests, wanted)))

    def open_point(self, label: str, rate_rps: float, policy: BatchPolicy) -> LoadPoint:
        arrivals = poisson_arrivals(rate_rps, self._count(rate_rps), seed=self.config.seed)
        simulated = simulate(arrivals, self.device, policy, self.sim)
        beside = (simulate(arrivals, self.device_alone, policy, self.sim)
                  if self.device_alone is not None else None)
        spread = self.sim.device_spread is not None or self.sim.host_spread is not None
        medians = (simulate(arrivals, self.device, policy,
                            replace(self.sim, device_spread=None, host_spread=None))
                   if spread else None)
        no_gap = (simulate(arrivals, self.device, policy, replace(self.sim, gap_us=()))
                  if self.sim.gap_us else None)
        no_wake = (simulate(arrivals, self.device, policy, replace(self.sim, wake_us=()))
                   if self.sim.wake_us else None)
        mark = self.engine.mark()
        real = serve(self.engine, policy, OpenLoad(arrivals_us=tuple(arrivals.tolist())),
                     num_slots=self.engine.num_slots, num_instances=self.sim.num_instances)
        self.progress(f"open loop {label}: real P99 {real.latency_p99_us:.0f} us, "
                      f"simulated {simulated.latency_p99_us:.0f} us")
        return LoadPoint(label=label, offered_rps=rate_rps, concurrency=None, real=real,
                         simulated=simulated, under_load=self.engine.costs_since(mark),
                         simulated_device_alone=beside, simulated_medians=medians,
                         simulated_no_gap=no_gap, simulated_no_wake=no_wake,
                         spread=self.engine.spread_since(mark, MIN_BATCHES_PER_SIZE))

    def closed_point(self, concurrency: int, policy: BatchPolicy) -> LoadPoint:
        probe = simulate_closed_loop(concurrency, max(200, 10 * concurrency), self.device,
                                     policy, self.sim)
        count = self._count(probe.throughput_rps, self.config.closed_duration_s)
        simulated = simulate_closed_loop(concurrency, count, self.device, policy, self.sim)
        mark = self.engine.mark()
        real = serve(self.engine, policy, ClosedLoad(concurrency=concurrency,
                                                     num_requests=count),
                     num_slots=self.engine.num_slots, num_instances=self.sim.num_instances)
        self.progress(f"closed loop {concurrency}: real {real.throughput_rps:.0f} req/s, "
                      f"simulated {simulated.throughput_rps:.0f}")
        clients = "1 client" if concurrency == 1 else f"{concurrency} clients"
        return LoadPoint(label=clients, offered_rps=None,
                         concurrency=concurrency, real=real, simulated=simulated,
                         under_load=self.engine.costs_since(mark))

    def tuner_check(self, slo_us: float, rate_rps: float) -> TunerCheck:
        """The tuner's best policy for ``rate_rps`` under ``slo_us``, served at that rate."""
        top = self.config.max_batch
        grid = self.config.tune_batch_sizes or tuple(
            b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if top // 8 <= b <= top)
        options = TuneOptions(p99_slo_us=slo_us, rate_rps=rate_rps, max_batch_sizes=grid,
                              num_requests=self.config.tune_requests, seed=self.config.seed)
        best = tune_policy(self.device, options, self.sim).best
        point = None
        if best is not None:
            policy = BatchPolicy(max_batch_size=best.max_batch_size,
                                 max_queue_delay_us=best.max_queue_delay_us,
                                 preferred_batch_sizes=best.preferred_batch_sizes)
            point = self.open_point("tuner's policy", rate_rps, policy)
        return TunerCheck(slo_us=slo_us, rate_rps=rate_rps, best=best, point=point)

    def overload(self, policy: BatchPolicy, rate_rps: float) -> ServedRun:
        bounded = replace(policy, max_queue_size=self.config.overload_queue_factor
                          * policy.max_batch_size)
        arrivals = poisson_arrivals(rate_rps, self._count(rate_rps), seed=self.config.seed + 1)
        run = serve(self.engine, bounded, OpenLoad(arrivals_us=tuple(arrivals.tolist())),
                    num_slots=self.engine.num_slots, num_instances=self.sim.num_instances)
        self.progress(f"overload {rate_rps:.0f} req/s: {run.num_ok} served, {run.rejected} "
                      f"rejected, {run.num_lost} lost, {run.num_duplicated} answered twice")
        return run
