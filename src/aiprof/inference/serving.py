"""Serve a load from a separate load-generator process through the real batcher, end to end.

This process runs the batcher's event loop and the socket front end
(:mod:`aiprof.inference.frontend`); the model function runs in the batcher's model threads; the
load comes from ``python -m aiprof.inference.loadclient`` in a process of its own, so generating
load costs the server nothing (perf_analyzer's arrangement, reference A2). Latency is measured by
the client, from when a request was due to when its answer arrived, so a client that falls behind
its schedule shows up as latency, as it would for a user (and ``max_send_lag_us`` says so).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aiprof.errors import InputError
from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.leader import LeaderServer
from aiprof.inference.metrics import BatchingMetrics
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.probes import (
    GcPauses,
    GcSummary,
    LoopSummary,
    TimedSelector,
    frozen_heap,
    thread_cpu_ns,
)
from aiprof.inference.stalls import LatencySeries, latency_series
from aiprof.inference.wire import FAILED, OK, REASONS, REJECTED
from aiprof.inference.worker import MODEL_THREAD_PREFIX, retired_cpu_ns


@dataclass(frozen=True, kw_only=True)
class OpenLoad:
    """Requests due at ``arrivals_us`` (sorted, from 0), whatever the answers."""

    arrivals_us: tuple[float, ...]
    priorities: tuple[int, ...] = ()
    """Each request's priority level (empty: the batcher's default for all)."""
    deadlines_us: tuple[float, ...] = ()
    """Each request's deadline from its arrival (empty or 0: none)."""

    def __post_init__(self) -> None:
        for name, values in (("priorities", self.priorities),
                             ("deadlines", self.deadlines_us)):
            if values and len(values) != len(self.arrivals_us):
                raise InputError(f"{len(values)} {name} for {len(self.arrivals_us)} arrivals")


@dataclass(frozen=True, kw_only=True)
class ClosedLoad:
    """``concurrency`` requests outstanding until ``num_requests`` were answered."""

    concurrency: int
    num_requests: int


@dataclass(frozen=True, kw_only=True)
class ServerProbes:
    """What the serving process did during the load: where its CPU went and what stopped it.

    Times ``*_at_ms`` are from the load generator's start (the same CLOCK_MONOTONIC)."""

    gc: GcSummary
    gc_max_pause_at_ms: float
    loop: LoopSummary
    loop_max_iteration_at_ms: float
    cpu_us_per_request: dict[str, float]
    """CPU per request sent, by part: ``loop`` (the event loop's thread: socket front end and
    batcher), ``model threads`` (the hand-offs and the model function), ``other`` (threads that
    are not Python's: torch's, the CUDA driver's), ``process`` (all of them)."""
    series: LatencySeries


@dataclass(frozen=True, kw_only=True)
class ServedRun:
    """What the client saw of one load, and the batcher's own summary of it."""

    mode: str
    """``open`` or ``closed``."""
    num_requests: int
    num_ok: int
    rejected: dict[str, int]
    """Requests answered without compute, by reason."""
    failed: dict[str, int]
    """Requests whose batch failed, by reason."""
    num_lost: int
    """Requests that got no answer at all (must be 0)."""
    num_duplicated: int
    """Requests answered more than once (must be 0)."""
    throughput_rps: float
    """Served requests per second, from the first request due to the last answer."""
    latency_p50_us: float
    latency_p95_us: float
    latency_p99_us: float
    latency_mean_us: float
    max_send_lag_us: float
    """Longest a request left the client after it was due (the client's own lateness)."""
    server_cpu_us_per_request: float
    """CPU time of the serving process (every thread) per request sent."""
    wall_s: float
    server: BatchingMetrics
    probes: ServerProbes | None = None
    """The serving process's own evidence (None in records made before it existed)."""


@dataclass
class _Window:
    """The serving process's counters over the load (from the client's start to its end)."""

    process_cpu_ns: int = 0
    loop_cpu_ns: int = 0
    model_cpu_ns: int = 0
    gc: GcSummary | None = None
    loop: LoopSummary | None = None


FrontEnd = Callable[[DynamicBatcher, int, "asyncio.Future[None]"], asyncio.Protocol]
"""Makes the protocol that serves the client's connection: (batcher, input slots, a future to
set when the connection is lost)."""


def serve(model_fn: Callable[[list[Any]], Any], policy: BatchPolicy, load: OpenLoad | ClosedLoad,
          *, num_slots: int, num_instances: int = 2, deadline_s: float = 120.0,
          freeze_gc: bool = True, front_end: FrontEnd = LeaderServer,
          fresh_dispatch: bool = True) -> ServedRun:
    """Serve ``load`` with a :class:`DynamicBatcher` around ``model_fn``; the client's view.

    The model function gets ``(request id, slot)`` payloads, one per request of the batch.
    ``freeze_gc``: the objects alive before the load are frozen out of the garbage collector
    while it runs (:func:`~aiprof.inference.probes.frozen_heap`). ``front_end``: another
    protocol for the connection (``benchmarks/serving_overhead.py`` measures the earlier
    request paths against the default, :class:`~aiprof.inference.leader.LeaderServer`: a
    leader thread reads and runs short batches itself; the loop reads otherwise).
    ``fresh_dispatch``: the batcher's option of that name (False: every request is queued
    before its batch is taken, the path before it, kept as the benchmark's baseline).
    """
    if isinstance(load, OpenLoad) and not load.arrivals_us:
        raise InputError("no arrivals to serve")
    with tempfile.TemporaryDirectory(prefix="aiprof-serve-") as tmp:
        folder = Path(tmp)
        command = _client_command(load, folder, num_slots, deadline_s)
        # the loop's thread holds the lock while it runs: a leader thread submits holding it
        selector, window = TimedSelector(threading.Lock()), _Window()
        begin = time.perf_counter()
        with frozen_heap(freeze_gc), asyncio.Runner(
                loop_factory=lambda: asyncio.SelectorEventLoop(selector)) as runner:
            metrics, code, stderr = runner.run(_serve_async(
                model_fn, policy, num_instances, num_slots, folder / "s", command, deadline_s,
                window, selector, front_end, fresh_dispatch))
        wall = time.perf_counter() - begin
        if code != 0 or not (folder / "times.npz").is_file():
            raise InputError(f"the load generator failed (exit {code}): {stderr.strip()[-300:]}")
        with np.load(folder / "times.npz") as times:
            data = {key: times[key] for key in times.files}
    return _summarize(data, load, metrics, window, wall)


def _client_command(load: OpenLoad | ClosedLoad, folder: Path, num_slots: int,
                    deadline_s: float) -> list[str]:
    command = [sys.executable, "-m", "aiprof.inference.loadclient", "--socket",
               str(folder / "s"), "--out", str(folder / "times.npz"), "--num-slots",
               str(num_slots), "--deadline-s", str(deadline_s)]
    if isinstance(load, OpenLoad):
        np.save(folder / "arrivals.npy", np.asarray(load.arrivals_us, dtype=np.float64))
        command += ["--arrivals", str(folder / "arrivals.npy")]
        if load.priorities:
            np.save(folder / "priorities.npy", np.asarray(load.priorities, dtype=np.uint16))
            command += ["--priorities", str(folder / "priorities.npy")]
        if load.deadlines_us:
            np.save(folder / "deadlines.npy", np.asarray(load.deadlines_us, dtype=np.float32))
            command += ["--deadlines", str(folder / "deadlines.npy")]
        return command
    return [*command, "--concurrency", str(load.concurrency), "--requests",
            str(load.num_requests)]


async def _serve_async(model_fn: Callable[[list[Any]], Any], policy: BatchPolicy,
                       num_instances: int, num_slots: int, path: Path, command: list[str],
                       deadline_s: float, window: _Window, selector: TimedSelector,
                       front_end: FrontEnd,
                       fresh_dispatch: bool) -> tuple[BatchingMetrics, int, str]:
    loop = asyncio.get_running_loop()
    batcher = DynamicBatcher(model_fn, policy, num_instances=num_instances,
                             fresh_dispatch=fresh_dispatch)
    batcher.loop_lock = selector.lock
    batcher.start()
    closed: asyncio.Future[None] = loop.create_future()
    connected: asyncio.Future[None] = loop.create_future()

    def accept() -> asyncio.Protocol:
        if not connected.done():
            connected.set_result(None)
        return front_end(batcher, num_slots, closed)

    server = await loop.create_unix_server(accept, str(path))
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])  # the folder above aiprof/
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    stop = time.monotonic() + deadline_s + 30
    await _until(connected, process, stop)  # the client imports numpy meanwhile: not counted
    loop_thread, pauses = threading.current_thread(), GcPauses()
    model_cpu_ns, num_retired = _model_threads_cpu_ns(), len(retired_cpu_ns)
    begin_cpu, begin_loop_cpu = time.process_time_ns(), thread_cpu_ns(loop_thread)
    selector.reset()
    pauses.start()
    await _until(closed, process, stop)
    window.gc, window.loop = pauses.stop(), selector.summary()
    window.model_cpu_ns = _model_cpu_since_ns(model_cpu_ns, num_retired)
    window.loop_cpu_ns = thread_cpu_ns(loop_thread) - begin_loop_cpu
    window.process_cpu_ns = time.process_time_ns() - begin_cpu
    metrics = batcher.metrics()
    await batcher.close()
    server.close()
    await server.wait_closed()
    try:
        _, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    return metrics, process.returncode, stderr or ""


def _model_threads_cpu_ns() -> dict[int, int]:
    """CPU so far of every live model thread, by thread id."""
    return {t.ident or 0: thread_cpu_ns(t) for t in threading.enumerate()
            if t.name.startswith(MODEL_THREAD_PREFIX)}


def _model_cpu_since_ns(begin: dict[int, int], num_retired: int) -> int:
    """CPU of the model threads since ``begin`` (:func:`_model_threads_cpu_ns` then, with
    ``num_retired`` threads ended by then): the live ones', and that of those that ended since,
    as they left."""
    live = _model_threads_cpu_ns()
    ended = retired_cpu_ns[num_retired:]
    return (sum(cpu - begin.get(ident, 0) for ident, cpu in live.items())
            + sum(cpu - begin.get(ident, 0) for ident, cpu in ended if ident not in live))


async def _until(event: asyncio.Future[None], process: subprocess.Popen[str],
                 stop: float) -> None:
    """Wait for ``event`` while the client runs, until ``stop`` (``time.monotonic()``)."""
    while not event.done() and process.poll() is None and time.monotonic() < stop:
        await asyncio.wait([event], timeout=0.02)


def _summarize(data: dict[str, np.ndarray], load: OpenLoad | ClosedLoad,
               metrics: BatchingMetrics, window: _Window, wall_s: float) -> ServedRun:
    answers, status, reason = data["answers"], data["status"], data["reason"]
    answered = answers > 0
    ok = answered & (status == OK)
    latency_us = (data["recv_ns"][ok] - data["sched_ns"][ok]) / 1e3
    p50, p95, p99 = (np.percentile(latency_us, [50, 95, 99]) if latency_us.size
                     else (np.nan,) * 3)
    sent = data["handoff_ns"] >= 0
    span_s = ((data["recv_ns"][answered].max() - data["sched_ns"][sent].min()) / 1e9
              if answered.any() else 0.0)
    lag = data["handoff_ns"][sent] - data["sched_ns"][sent]
    return ServedRun(
        mode="open" if isinstance(load, OpenLoad) else "closed",
        num_requests=int(answers.size), num_ok=int(ok.sum()),
        rejected=_by_reason(reason[answered & (status == REJECTED)]),
        failed=_by_reason(reason[answered & (status == FAILED)]),
        num_lost=int((~answered).sum()), num_duplicated=int((answers > 1).sum()),
        throughput_rps=float(ok.sum() / span_s) if span_s > 0 else 0.0,
        latency_p50_us=float(p50), latency_p95_us=float(p95), latency_p99_us=float(p99),
        latency_mean_us=float(latency_us.mean()) if latency_us.size else float("nan"),
        max_send_lag_us=float(lag.max() / 1e3) if lag.size else 0.0,
        server_cpu_us_per_request=window.process_cpu_ns / max(1, answers.size) / 1e3,
        wall_s=wall_s, server=metrics, probes=_probes(data, window))


def _probes(data: dict[str, np.ndarray], window: _Window) -> ServerProbes:
    assert window.gc is not None and window.loop is not None
    start_ns, count = int(data["start_ns"]), max(1, int(data["answers"].size))
    other = window.process_cpu_ns - window.loop_cpu_ns - window.model_cpu_ns
    return ServerProbes(
        gc=window.gc, gc_max_pause_at_ms=_since(window.gc.max_pause_at_ns, start_ns),
        loop=window.loop, loop_max_iteration_at_ms=_since(window.loop.max_iteration_at_ns,
                                                          start_ns),
        cpu_us_per_request={part: ns / count / 1e3 for part, ns in (
            ("loop", window.loop_cpu_ns), ("model threads", window.model_cpu_ns),
            ("other", max(0, other)), ("process", window.process_cpu_ns))},
        series=latency_series(data["sched_ns"], data["handoff_ns"], data["recv_ns"]))


def _since(at_ns: int, start_ns: int) -> float:
    return (at_ns - start_ns) / 1e6 if at_ns >= 0 else float("nan")


def _by_reason(codes: np.ndarray) -> dict[str, int]:
    values, counts = np.unique(codes, return_counts=True)
    return {REASONS[int(v)]: int(c) for v, c in zip(values, counts, strict=True)}
