"""Discrete-event simulation of the dynamic batcher: same queue, virtual time, no model.

Events are arrivals, batch completions and policy wake-ups (a delay running out, a request
expiring). At each event the shared :class:`~aiprof.inference.queue.BatchQueue` decides, exactly as
in the asyncio batcher; a batch of b requests occupies one instance for ``latency(b)``.

A serving path with its host work beside the device's (:mod:`aiprof.measure.inference.engine`) is
modelled as what it is, two stages: an instance first spends ``host_curve(b)`` on the host
(assembling the batch into its buffer), then the batch waits for the one device queue (a CUDA
stream, shared by every instance: ``shared_device``) to finish the batches before it, and takes
``latency(b)`` there; the instance is free again ``overhead_us`` later. With two instances one
batch is assembled while the other computes, so the device idles only when the host cannot keep
up: the stream overlap, as a mechanism rather than a fitted factor.

Given a :class:`~aiprof.inference.latency_curve.TimeSpread` for the device time (and one for
the host stage), each batch's time is its size's median times a factor drawn, seeded, from that
size's measured spread, instead of always the median: near saturation a batch that runs long
lets the queue pile up into larger batches, which a simulation of medians never forms. Without
one (a curve of medians only) every batch costs its median, as before.

Given measured gaps between batches (``gap_us``), an instance whose batch ended takes its next
one a drawn gap later, though its requests are answered at the end: the real server's host work
between a batch's end and the next dispatch (the way back to the loop, the answers, the wake-up),
which delays the requests queued meanwhile and no batch's own latency. The batcher's
``forming`` time (instance free, batch not yet dispatched) then holds the gap, as the real one's
does.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aiprof.errors import InputError
from aiprof.inference.latency_curve import LatencyCurve, TimeSpread
from aiprof.inference.metrics import BatchingMetrics, MetricsRecorder, due_rule
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.queue import INF, BatchQueue, Request


@dataclass(frozen=True, kw_only=True)
class SimulationOptions:
    """What the simulated server looks like besides its policy."""

    num_instances: int = 1
    """Model instances serving batches in parallel (each one GPU stream)."""
    overhead_us: float = 0.0
    """Fixed time added to every batch (the serving stack's own cost per batch)."""
    host_curve: LatencyCurve | None = None
    """Host time of a batch of each size before its device work (None: none)."""
    shared_device: bool = False
    """The instances share one device queue: a batch's device work starts once its host work is
    done and the device has finished every batch dispatched before it (one CUDA stream)."""
    transport_us: float = 0.0
    """Time each request spends outside the batcher (from the client to the queue and from its
    batch's end back to the client): added to its latency, it occupies no instance."""
    device_spread: TimeSpread | None = None
    """Each batch's device time is ``curve(b)`` times a factor drawn from this (None: the
    median, every batch)."""
    host_spread: TimeSpread | None = None
    """Each batch's host stage is ``host_curve(b)`` times a factor drawn from this."""
    seed: int = 0
    """Seed of the draws from the spreads (the same seed, the same simulation)."""
    gap_us: tuple[float, ...] = ()
    """The host's gap between batches: after a batch ends (its answers out at once), its
    instance takes the next batch only this long later, each batch drawing one of these
    measured gaps (seeded apart from the spreads' draws). Empty: none (the next batch is
    taken the moment the instance is free)."""
    wake_us: tuple[tuple[int, float], ...] = ()
    """The serving thread's lag past a batch's device work, as (batch size, microseconds) by
    increasing size: its wait for the batch's results minus the device time, as the batches
    that found the stream clear paid it (waking from the blocking sync and taking the GIL back,
    less the queueing of its work that ran beside the device, so it may be negative). The
    instance is busy that long after the device is done, the device free (a negative lag
    comes off the batch's host stage instead); a size takes the
    value of the smallest listed size at or above it, past the largest the largest's. Empty:
    none (the instance is free when the device is done)."""

    def wake_at_us(self, batch_size: int) -> float:
        """The lag past the device of a batch of ``batch_size`` (0 without ``wake_us``)."""
        for size, lag in self.wake_us:
            if size >= batch_size:
                return lag
        return self.wake_us[-1][1] if self.wake_us else 0.0

    def batch_time_us(self, curve: LatencyCurve, batch_size: int) -> float:
        """What a batch costs when nothing else is queued: host, device and overhead."""
        host = self.host_curve(batch_size) if self.host_curve is not None else 0.0
        host, wake = _with_lag(host, self.wake_at_us(batch_size))
        return host + curve(batch_size) + wake + self.overhead_us


def _with_lag(host_us: float, wake_us: float) -> tuple[float, float]:
    """(host stage, lag past the device) of a batch: a negative lag is queueing that ran beside
    the device and was counted in the host stage, so it comes off the host stage (to 0 at
    most); no batch is answered before its device work is done."""
    if wake_us >= 0:
        return host_us, wake_us
    return max(0.0, host_us + wake_us), 0.0


def simulate(
    arrivals_us: np.ndarray,
    curve: LatencyCurve,
    policy: BatchPolicy,
    options: SimulationOptions | None = None,
    *,
    priorities: Sequence[int] | None = None,
    deadlines_in_us: Sequence[float] | None = None,
) -> BatchingMetrics:
    """Serve ``arrivals_us`` (sorted, microseconds) with ``policy``; return the batcher's metrics.

    ``priorities`` and ``deadlines_in_us`` give each request's level and time budget (optional).
    """
    opts = options or SimulationOptions()
    if opts.num_instances < 1:
        raise InputError(f"number of instances {opts.num_instances} must be at least 1")
    times = np.asarray(arrivals_us, dtype=np.float64)
    if times.size == 0:
        raise InputError("no arrivals to simulate")
    if np.any(np.diff(times) < 0):
        raise InputError("arrival times must be sorted")
    state = _State(policy, opts, curve)
    n = times.size
    levels = [policy.default_priority] * n if priorities is None else list(priorities)
    budgets = [INF] * n if deadlines_in_us is None else list(deadlines_in_us)
    i = 0
    now = float(times[0])
    while True:
        next_arrival = float(times[i]) if i < n else INF
        next_done = state.done_heap[0][0] if state.done_heap else INF
        wake = state.queue.next_wake_us() if state.free and len(state.queue) else INF
        if wake <= now:
            wake = math.nextafter(now, INF)
        now = min(next_arrival, next_done, wake)
        if now == INF:
            break
        state.complete_until(now)
        state.dispatch(now)  # ties: completions and timers act before arrivals at the same time
        while i < n and times[i] <= now:
            arrival = float(times[i])
            request = Request(i, levels[i], arrival, deadline_us=arrival + budgets[i])
            if state.queue.push(request) is not None:
                state.recorder.reject("queue_full")
            i += 1
        state.dispatch(now)
    end = max(state.last_done_us, float(times[-1]))
    return state.recorder.summary(end - float(times[0]), opts.num_instances,
                                  due=due_rule(policy))


class _State:
    def __init__(
        self, policy: BatchPolicy, options: SimulationOptions, curve: LatencyCurve
    ) -> None:
        self.queue = BatchQueue(policy)
        self.recorder = MetricsRecorder()
        self.free: list[float] = [-INF] * options.num_instances
        self.done_heap: list[tuple[float, int, float, float, list[Request]]] = []
        self.curve = curve
        self.overhead_us = options.overhead_us
        self.transport_us = options.transport_us
        self.host_curve = options.host_curve
        self.wake_at_us = options.wake_at_us
        self.shared_device = options.shared_device
        self.device_free_us = -INF
        self.last_done_us = -INF
        self._batches = 0
        self.device_spread = options.device_spread
        self.host_spread = options.host_spread
        self.rng = np.random.default_rng(options.seed)
        self.gaps_us = np.asarray(options.gap_us, dtype=np.float64)
        if self.gaps_us.size and (not np.all(np.isfinite(self.gaps_us))
                                  or float(self.gaps_us.min()) < 0):
            raise InputError("gaps between batches must be finite and >= 0 us")
        self.gap_rng = np.random.default_rng((options.seed, 1))  # the spreads' draws unchanged

    def complete_until(self, now: float) -> int:
        """Finish every batch done by ``now``; the number of requests answered. An entry with
        no requests is an instance back from its gap after a batch (free since ``free_us``)."""
        answered = 0
        while self.done_heap and self.done_heap[0][0] <= now:
            done, _, dispatch, free_us, batch = heapq.heappop(self.done_heap)
            if not batch:  # the gap after a batch is over: the instance takes the next one
                self.free.append(free_us)
                continue
            for request in batch:
                self.recorder.request(request.enqueue_us, free_us, dispatch, done, request.level,
                                      outside_us=self.transport_us)
            self.last_done_us = max(self.last_done_us, done)
            answered += len(batch)
            if self.gaps_us.size:
                gap = float(self.gaps_us[self.gap_rng.integers(self.gaps_us.size)])
                self._batches += 1
                heapq.heappush(self.done_heap, (done + gap, self._batches, done, done, []))
            else:
                self.free.append(done)
        return answered

    def dispatch(self, now: float) -> int:
        """Expire and start batches; the number of requests answered by rejection."""
        expired = self.queue.expire(now)
        for _request, reason in expired:
            self.recorder.reject(reason)
        while self.free and len(self.queue):
            batch = self.queue.take_batch(now)
            if batch is None:
                return len(expired)
            self.free.sort()
            free_us = self.free.pop(0)
            service = self._service_us(len(batch), now)
            self.recorder.batch(len(batch), service)
            self._batches += 1
            heapq.heappush(self.done_heap, (now + service, self._batches, now, free_us, batch))
        return len(expired)

    def _service_us(self, size: int, now: float) -> float:
        """From dispatch to the instance being free again."""
        host = self.host_curve(size) if self.host_curve is not None else 0.0
        if self.host_spread is not None:
            host *= self.host_spread.draw(size, self.rng)
        device = self.curve(size)
        if self.device_spread is not None:
            device *= self.device_spread.draw(size, self.rng)
        host, wake = _with_lag(host, self.wake_at_us(size))
        if not self.shared_device:
            return host + device + wake + self.overhead_us
        start = max(now + host, self.device_free_us)
        self.device_free_us = start + device
        return self.device_free_us + wake + self.overhead_us - now


def simulate_closed_loop(
    concurrency: int,
    num_requests: int,
    curve: LatencyCurve,
    policy: BatchPolicy,
    options: SimulationOptions | None = None,
) -> BatchingMetrics:
    """Closed-loop load (perf_analyzer's concurrency mode, reference A2): ``concurrency`` clients
    each send a new request the moment their previous one is answered, until ``num_requests``."""
    if concurrency < 1 or num_requests < 1:
        raise InputError("concurrency and number of requests must be at least 1")
    opts = options or SimulationOptions()
    state = _State(policy, opts, curve)
    sent = 0
    now = 0.0

    def send(count: int) -> None:
        nonlocal sent
        for _ in range(min(count, num_requests - sent)):
            if state.queue.push(Request(sent, policy.default_priority, now)) is not None:
                state.recorder.reject("queue_full")  # answered at once: the client goes on
                pending.append(now)
            sent += 1

    pending: list[float] = []
    send(concurrency)
    while True:
        while pending and sent < num_requests:
            pending.pop()
            send(1)
        next_done = state.done_heap[0][0] if state.done_heap else INF
        wake = state.queue.next_wake_us() if state.free and len(state.queue) else INF
        if wake <= now:
            wake = math.nextafter(now, INF)
        now = min(next_done, wake)
        if now == INF:
            break
        answered = state.complete_until(now) + state.dispatch(now)
        send(answered)
        state.dispatch(now)
    return state.recorder.summary(max(state.last_done_us, 0.0), opts.num_instances,
                                  due=due_rule(policy))

