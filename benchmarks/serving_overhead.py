"""CPU cost per request of the serving process, with the load generator in its own process.

Open-loop Poisson load (default 5,000 req/s) from ``aiprof.inference.loadclient`` through the Unix
socket into the batcher, against a model function that returns at once in the batcher's model
threads (as the serving engine runs). Printed: the serving process's CPU time per request (every
thread: the socket front end, the batcher, the model threads' hand-offs) and its parts (the event
loop's thread, the model threads, the rest), counted from the load generator's connection to its
end, the loop's iterations per request and the client-side latency, for two request paths run
in turn on the same arrivals:

- *leader* (the serving path, :mod:`aiprof.inference.leader`): a leader thread reads the
  connection and submits what it read holding the loop's lock; the batch dispatched meanwhile
  is run by that thread itself, which then reads again (no hand-off to a model thread while
  the model's calls are short; the loop reads and hands batches to model threads otherwise);
- *group* (the serving path before it, the baseline the leader is measured against): the
  event loop reads, the requests of one read handed to the batcher together
  (``DynamicBatcher.submit_many``); those that form a batch at once in an empty queue go to
  a free instance without being queued (``fresh_dispatch``), a read of one request is decoded
  without numpy by the loop's own reader callback, and a batch is answered by one send from
  its model thread;
- *group, queued* (the serving path before fresh dispatch): every request queued before its
  batch is taken, every read passed on by the transport and decoded with numpy;
- *per request* (the path before it, kept here as the baseline): one ``submit`` and one future
  per request, whose done-callback packs its answer, the answers of a loop iteration in one
  ``write``, and the loop woken for every batch that ends;

and two floors of any server built this way, on the same arrivals: *echo* answers each read
on the loop at once (no batcher: a wake-up, a read and a send per read), *echo via a thread*
hands each read to a thread that sends the answers (the trip to a model thread, no batcher);
and, as a last baseline, the batcher alone in one process with the in-process load generator
(``benchmarks/batcher_overhead.py``'s method).

The CPU per request of a run falls as its batches grow, and on a busy machine a path that
answers sooner forms smaller batches: two paths compared at 5,000 req/s need not see the same
batches. So the batcher's own part is also measured with every batch of one request, in one
process, for the group path with and without ``fresh_dispatch`` in turn: lone requests
(``submit_many`` of one, 300 us apart, each its own batch), the CPU of the loop's thread minus
that of the same loop sleeping as long without them, and the model threads' CPU. Beside them, the
same lone requests back to back with each batch run at once in the submitting thread instead of
being handed to a model thread (``ModelThread.run`` replaced for that measurement only): the
batcher's own Python per request, both sides, without the wake-up of a thread (what trimming
Python could at most remove; the rest of the serving path's cost is wake-ups and system calls).

    python benchmarks/serving_overhead.py [--rate 5000] [--requests 20000] [--delay-ms 0] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import queue
import socket
import struct
import threading
import time
from typing import Any

import numpy as np

from aiprof.errors import AiprofError
from aiprof.inference.arrivals import poisson_arrivals
from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.failures import RequestRejectedError
from aiprof.inference.frontend import AnswerWriter, RequestServer
from aiprof.inference.loadgen import run_precise
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.probes import thread_cpu_ns
from aiprof.inference.serving import FrontEnd, OpenLoad, serve
from aiprof.inference.wire import FAILED, OK, REJECTED, REQUEST, RecordReader, reason_code
from aiprof.inference.worker import MODEL_THREAD_PREFIX, ModelThread

_ANSWER = struct.Struct("<IBBHi")


class PerRequestServer(asyncio.Protocol):
    """The front end before request groups: one ``submit``, future and done-callback per request
    (answers of one loop iteration leave in one ``write``)."""

    def __init__(self, batcher: DynamicBatcher, num_slots: int,
                 closed: asyncio.Future[None]) -> None:
        self._batcher, self._num_slots, self._closed = batcher, num_slots, closed
        self._reader = RecordReader(REQUEST)
        self._out: list[bytes] = []
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        for rid, slot, priority, _, deadline in self._reader.feed(data).tolist():
            if slot >= self._num_slots:
                self._send(rid, REJECTED, "other", 0)
                continue
            try:
                future = self._batcher.submit((rid, slot), priority=priority or None,
                                              deadline_in_us=deadline or None)
            except AiprofError:
                self._send(rid, REJECTED, "other", 0)
                continue
            future.add_done_callback(functools.partial(self._answer, rid))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed.done():
            self._closed.set_result(None)

    def _answer(self, rid: int, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            self._send(rid, REJECTED, "cancelled", 0)
            return
        error = future.exception()
        if error is None:
            value = future.result()
            self._send(rid, OK, "", value if isinstance(value, int) else 0)
            return
        status = REJECTED if isinstance(error, RequestRejectedError) else FAILED
        self._send(rid, status, str(getattr(error, "reason", "model_error")), 0)

    def _send(self, rid: int, status: int, reason: str, value: int) -> None:
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(_ANSWER.pack(rid, status, reason_code(reason), 0, value))

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(b"".join(out))


class QueuedGroupServer(RequestServer):
    """The serving front end before fresh dispatch: every read decoded with numpy (served
    with ``fresh_dispatch=False``, so every request is queued before its batch is taken),
    the connection read by its transport."""

    reads_itself = False

    def data_received(self, data: bytes) -> None:
        self._submit_read(self._reader.feed(data))


_SERVED = struct.Struct("<I4xi")


class EchoServer(asyncio.Protocol):
    """The floor: each read answered on the loop at once, no batcher (``via_thread``: by a
    thread the read is handed to, which sends the answers itself)."""

    via_thread = False

    def __init__(self, batcher: DynamicBatcher, num_slots: int,
                 closed: asyncio.Future[None]) -> None:
        self._closed = closed
        self._reader = RecordReader(REQUEST)
        self._writer: AnswerWriter | None = None
        self._reads: queue.SimpleQueue[list[int] | None] = queue.SimpleQueue()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        raw = transport.get_extra_info("socket")
        self._writer = AnswerWriter(asyncio.get_running_loop(),
                                    socket.socket(fileno=os.dup(raw.fileno())))
        if self.via_thread:  # named as a model thread, so its CPU is counted as theirs
            threading.Thread(target=self._answer_reads, daemon=True,
                             name=f"{MODEL_THREAD_PREFIX}echo").start()

    def data_received(self, data: bytes) -> None:
        ids = self._reader.feed(data)["id"].tolist()
        if self.via_thread:
            self._reads.put(ids)
        else:
            self._answer(ids)

    def connection_lost(self, exc: Exception | None) -> None:
        self._reads.put(None)
        if self._writer is not None:
            self._writer.close()
        if not self._closed.done():
            self._closed.set_result(None)

    def _answer(self, ids: list[int]) -> None:
        assert self._writer is not None
        self._writer.send(b"".join(map(_SERVED.pack, ids, ids)))

    def _answer_reads(self) -> None:
        while (ids := self._reads.get()) is not None:
            self._answer(ids)


class ThreadEchoServer(EchoServer):
    via_thread = True


def _zero_cost(batch: list[Any]) -> list[int]:
    return [rid for rid, _slot in batch]


PATHS: dict[str, dict[str, Any]] = {
    "leader": {}, "group": {"front_end": RequestServer},
    "group, queued": {"front_end": QueuedGroupServer, "fresh_dispatch": False},
    "per request": {"front_end": PerRequestServer}}
"""Request paths, by name: the keywords of ``serve()`` that select them."""
FLOORS: dict[str, dict[str, Any]] = {"echo": {"front_end": EchoServer},
                                     "echo via a thread": {"front_end": ThreadEchoServer}}
_: FrontEnd = QueuedGroupServer  # each front end above is one (checked by mypy)


def measure(rate_rps: float, num_requests: int, policy: BatchPolicy, seed: int,
            path: str = "leader") -> dict[str, float]:
    """One run through the socket: the server's CPU per request and what the client saw."""
    arrivals = poisson_arrivals(rate_rps, num_requests, seed=seed)
    load = OpenLoad(arrivals_us=tuple(arrivals.tolist()))
    run = serve(_zero_cost, policy, load, num_slots=1, **{**PATHS, **FLOORS}[path])
    assert run.probes is not None
    parts = run.probes.cpu_us_per_request
    return {"server_cpu_us_per_request": run.server_cpu_us_per_request,
            "loop_cpu_us_per_request": parts["loop"],
            "model_threads_cpu_us_per_request": parts["model threads"],
            "other_cpu_us_per_request": parts["other"],
            "loop_iterations_per_request": run.probes.loop.num_iterations / num_requests,
            "throughput_rps": run.throughput_rps, "latency_p50_us": run.latency_p50_us,
            "latency_p99_us": run.latency_p99_us, "mean_batch_size": run.server.mean_batch_size,
            "lost": run.num_lost, "duplicated": run.num_duplicated}


class _Discard:
    """Replies that drop the answers (any thread)."""

    thread_safe = True

    def results(self, payloads: list[Any], values: list[Any]) -> None:
        pass

    def errors(self, payloads: list[Any], error: BaseException) -> None:
        pass


LONE_GAP_S = 300e-6
"""Between two lone requests: longer than a batch of the zero-cost model takes, so each is
its own batch (as a batch of about 1.5 at 5,000 req/s on the idle H200 host)."""


def lone_requests(count: int, *, fresh: bool) -> dict[str, float]:
    """The batcher's CPU per lone request (loop thread and model threads), in one process."""

    async def run(submit: bool) -> tuple[float, float, float]:
        batcher = DynamicBatcher(_zero_cost, BatchPolicy(max_batch_size=32), num_instances=2,
                                 fresh_dispatch=fresh)
        batcher.start()
        sink, begin = _Discard(), time.thread_time_ns()
        for ident in range(count):
            if submit:
                batcher.submit_many([(ident, 0)], sink)
            await asyncio.sleep(LONE_GAP_S)
        loop_ns = time.thread_time_ns() - begin
        model_ns = sum(thread_cpu_ns(t) for t in threading.enumerate()
                       if t.name.startswith(MODEL_THREAD_PREFIX))
        batch = batcher.metrics().mean_batch_size
        await batcher.close()
        return loop_ns / count / 1e3, model_ns / count / 1e3, batch

    idle_us, _, _ = run_precise(run(False))
    loop_us, model_us, batch = run_precise(run(True))
    return {"loop_cpu_us_per_request": loop_us - idle_us, "model_threads_cpu_us_per_request":
            model_us, "mean_batch_size": batch}


def python_only(count: int) -> float:
    """The batcher's Python per lone request (us), submit to answer, with no thread wake-up:
    each batch runs in the caller's thread as soon as it is handed over."""

    def at_once(self: ModelThread, payloads: list[Any], reply: Any) -> None:
        reply(self.model(payloads), None)

    async def run() -> float:
        batcher = DynamicBatcher(_zero_cost, BatchPolicy(max_batch_size=32), num_instances=2)
        batcher.start()
        sink = _Discard()
        for ident in range(count // 10):  # warm
            batcher.submit_many([(ident, 0)], sink)
        begin = time.thread_time_ns()
        for ident in range(count):
            batcher.submit_many([(ident, 0)], sink)
        spent = time.thread_time_ns() - begin
        await batcher.close()
        return spent / count / 1e3

    original = ModelThread.run
    ModelThread.run = at_once  # type: ignore[method-assign]
    try:
        return float(run_precise(run()))
    finally:
        ModelThread.run = original  # type: ignore[method-assign]


def _line(path: str, rate: float, r: dict[str, float]) -> str:
    return (f"{path:>11}: {rate:.0f} req/s offered, {r['throughput_rps']:.0f} served: serving "
            f"process CPU {r['server_cpu_us_per_request']:.1f} us/request (loop "
            f"{r['loop_cpu_us_per_request']:.1f}, model threads "
            f"{r['model_threads_cpu_us_per_request']:.1f}, other "
            f"{r['other_cpu_us_per_request']:.1f}; {r['loop_iterations_per_request']:.2f} loop "
            f"iterations per request), client latency P50 {r['latency_p50_us']:.0f} us, P99 "
            f"{r['latency_p99_us']:.0f} us, mean batch {r['mean_batch_size']:.2f}, lost "
            f"{r['lost']:.0f}, answered twice {r['duplicated']:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lone", type=int, default=3000,
                        help="lone requests per in-process run (0: none)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from batcher_overhead import measure as batcher_alone  # the same folder

    policy = BatchPolicy(max_batch_size=args.max_batch, max_queue_delay_us=args.delay_ms * 1e3)
    runs: dict[str, list[dict[str, float]]] = {path: [] for path in (*PATHS, *FLOORS)}
    baseline = []
    for seed in range(args.repeats):  # the paths in turn, so all see the same machine
        for path in runs:
            runs[path].append(measure(args.rate, args.requests, policy, seed, path))
            if not args.json:
                print(_line(path, args.rate, runs[path][-1]), flush=True)
        baseline.append(batcher_alone(args.rate, args.requests, args.max_batch, seed))
    lone: dict[str, list[dict[str, float]]] = {"fresh": [], "queued": []}
    python_us: list[float] = []
    for _ in range(args.repeats if args.lone else 0):
        for kind in lone:
            lone[kind].append(lone_requests(args.lone, fresh=kind == "fresh"))
            if not args.json:
                r = lone[kind][-1]
                print(f"lone requests, {kind:>6}: the batcher's loop thread "
                      f"{r['loop_cpu_us_per_request']:.1f} us/request, model threads "
                      f"{r['model_threads_cpu_us_per_request']:.1f}, mean batch "
                      f"{r['mean_batch_size']:.2f}", flush=True)
        python_us.append(python_only(10 * args.lone))
        if not args.json:
            print(f"lone requests without a wake-up: the batcher's Python "
                  f"{python_us[-1]:.1f} us/request", flush=True)
    median = {path: float(np.median([r["server_cpu_us_per_request"] for r in rs]))
              for path, rs in runs.items()}
    alone = float(np.median([b["overhead_cpu_us_per_request"] for b in baseline]))
    ratios = {baseline: _ratios(runs, baseline) for baseline in PATHS if baseline != "leader"}
    summary = {"runs": runs["leader"], "group_runs": runs["group"],
               "per_request_runs": runs["per request"],
               "queued_group_runs": runs["group, queued"],
               "median_server_cpu_us_per_request": median["leader"],
               "median_group_cpu_us_per_request": median["group"],
               "median_per_request_path_cpu_us_per_request": median["per request"],
               "median_queued_group_cpu_us_per_request": median["group, queued"],
               "group_over_leader": ratios["group"],
               "per_request_over_leader": ratios["per request"],
               "queued_group_over_leader": ratios["group, queued"],
               "median_batcher_alone_cpu_us_per_request": alone,
               "floors": {path: runs[path] for path in FLOORS},
               "median_floor_cpu_us_per_request": {path: float(np.median(
                   [r["server_cpu_us_per_request"] for r in runs[path]])) for path in FLOORS},
               "ratio": median["leader"] / alone, "lone_requests": lone,
               "python_only_us_per_request": python_us}
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return
    floors = summary["median_floor_cpu_us_per_request"]
    if lone["fresh"]:
        parts = {kind: {part: float(np.median([r[f"{part}_cpu_us_per_request"] for r in rs]))
                        for part in ("loop", "model_threads")} for kind, rs in lone.items()}
        print(f"lone requests (median): the batcher's loop thread {parts['fresh']['loop']:.1f} "
              f"us/request with fresh dispatch, {parts['queued']['loop']:.1f} without "
              f"({parts['queued']['loop'] / parts['fresh']['loop']:.2f}x); model threads "
              f"{parts['fresh']['model_threads']:.1f} and {parts['queued']['model_threads']:.1f}")
    print(f"median serving process CPU {median['leader']:.1f} us/request with a leader "
          f"thread (the loop reading: {median['group']:.1f}, group / leader run by run: "
          f"{', '.join(f'{r:.2f}x' for r in ratios['group'])}; queued group path "
          f"{median['group, queued']:.1f}; per-request path {median['per request']:.1f}, per "
          f"request / leader: {', '.join(f'{r:.2f}x' for r in ratios['per request'])}); "
          f"floors: echo {floors['echo']:.1f}, echo via a thread "
          f"{floors['echo via a thread']:.1f}; batcher alone {alone:.1f}")


def _ratios(runs: dict[str, list[dict[str, float]]], baseline: str) -> list[float]:
    """The baseline's CPU per request over the serving path's, run by run (same arrivals)."""
    return [old["server_cpu_us_per_request"] / new["server_cpu_us_per_request"]
            for new, old in zip(runs["leader"], runs[baseline], strict=True)]


if __name__ == "__main__":
    main()
