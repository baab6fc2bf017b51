"""The batcher's model instances: which are free since when, what computes, and each batch's one
outcome (results, the model's error, a compute timeout or a shutdown), whatever the model does.

A batch runs as a task on the event loop (coroutine models; plain ones with ``run_in_thread=False``)
or on a :class:`~aiprof.inference.worker.ModelThread` of its own. Whichever comes first, the model's
return or the compute timeout, answers the batch; the other is ignored. An instance that timed out
or raised a ``BaseException`` that is no ``Exception`` is replaced: its task is cancelled or its
thread abandoned (left to finish on its own), and the next batch gets a fresh one.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from aiprof.inference.clock import Cancellable, Clock
from aiprof.inference.failures import BatchFailedError, check_results, interrupted
from aiprof.inference.metrics import MetricsRecorder
from aiprof.inference.queue import INF, Request
from aiprof.inference.worker import ModelThread

_EWMA_WEIGHT = 1 / 8
"""Weight of a new batch time in the running estimate: TCP's smoothed RTT (RFC 6298, alpha)."""


class _Batch:
    __slots__ = ("dispatch_us", "finished", "free_us", "requests", "task", "timer", "worker")

    def __init__(self, requests: list[Request], free_us: float, dispatch_us: float) -> None:
        self.requests = requests
        self.free_us = free_us
        self.dispatch_us = dispatch_us
        self.finished = False
        self.timer: Cancellable | None = None
        self.task: asyncio.Task[None] | None = None
        self.worker: ModelThread | None = None


class Instances:
    """``num_instances`` slots running ``model`` one batch each; ``on_free`` is called when one
    frees up. ``free_since`` holds, sorted, when each free slot became free."""

    def __init__(
        self, model: Callable[[list[Any]], Any], *, is_async: bool, in_thread: bool,
        clock: Clock, recorder: MetricsRecorder, compute_timeout_us: float,
        on_free: Callable[[], None],
    ) -> None:
        self._model = model
        self._is_async = is_async
        self._in_thread = in_thread
        self._clock = clock
        self._recorder = recorder
        self._compute_timeout_us = compute_timeout_us
        self._on_free = on_free
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle_threads: list[ModelThread] = []
        self.free_since: list[float] = []
        self.in_flight: set[_Batch] = set()
        self.batch_estimate_us = 0.0
        """Smoothed compute time of the batches that returned results (0 before the first)."""

    def start(self, loop: asyncio.AbstractEventLoop, now_us: float, count: int) -> None:
        """Make ``count`` instances free from ``now_us``; batches run on ``loop``."""
        self._loop = loop
        self.free_since = [now_us] * count

    def dispatch(self, requests: list[Request], now_us: float) -> None:
        """Run a batch on the instance free the longest."""
        assert self._loop is not None
        batch = _Batch(requests, self.free_since.pop(0), now_us)
        self.in_flight.add(batch)
        if self._compute_timeout_us < INF and (self._is_async or self._in_thread):
            batch.timer = self._clock.call_at(
                now_us + self._compute_timeout_us, functools.partial(self._timed_out, batch))
        payloads = [request.payload for request in requests]
        if self._in_thread:
            batch.worker = self._idle_threads.pop() if self._idle_threads else ModelThread(
                self._model)
            batch.worker.run(payloads, functools.partial(self._reply_from_thread, batch))
        else:
            batch.task = self._loop.create_task(self._run_on_loop(batch, payloads))

    def give_up_all(self, error: BatchFailedError) -> None:
        """Answer every batch still computing with ``error`` (shutdown)."""
        for batch in list(self.in_flight):
            self._give_up(batch, error)

    def stop_idle(self) -> None:
        """Let the idle model threads end."""
        for thread in self._idle_threads:
            thread.stop()
        self._idle_threads.clear()

    def _reply_from_thread(self, batch: _Batch, result: Any, error: BaseException | None) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(self._finish, batch, result, error)
        except RuntimeError:  # the event loop is closed: nobody waits for this batch any more
            pass

    async def _run_on_loop(self, batch: _Batch, payloads: list[Any]) -> None:
        try:
            result = self._model(payloads)
            if self._is_async:
                result = await result
        except BaseException as error:  # noqa: BLE001 - CancelledError, SystemExit... included
            task = asyncio.current_task()
            if isinstance(error, asyncio.CancelledError) and task and task.cancelling():
                # this task was cancelled (the loop shuts down), not a CancelledError of the model's
                self._give_up(batch, BatchFailedError(
                    "shutdown", "the event loop cancelled this batch while it computed"))
                raise
            self._finish(batch, None, error)
        else:
            self._finish(batch, result, None)

    def _finish(self, batch: _Batch, result: Any, error: BaseException | None) -> None:
        """A batch came back from the model (ignored if it was given up on already)."""
        if batch.finished:
            return
        done = self._close(batch)
        outcome = check_results(result, len(batch.requests)) if error is None else error
        if isinstance(outcome, BaseException):
            self._fail(batch, outcome)
        else:
            compute, estimate = done - batch.dispatch_us, self.batch_estimate_us
            self.batch_estimate_us = (estimate + _EWMA_WEIGHT * (compute - estimate)
                                      if estimate else compute)
            for request, value in zip(batch.requests, outcome, strict=True):
                self._recorder.request(request.enqueue_us, batch.free_us, batch.dispatch_us, done,
                                       request.level)
                if not request.handle.done():
                    request.handle.set_result(value)
        if error is not None and not isinstance(error, Exception):
            self._recorder.num_replaced += 1  # its thread ended; a new one serves the next batch
        elif batch.worker is not None:
            self._idle_threads.append(batch.worker)
        self._release(done)

    def _timed_out(self, batch: _Batch) -> None:
        self._give_up(batch, BatchFailedError(
            "compute_timeout",
            f"the model took over {self._compute_timeout_us / 1e6:g} s for this batch; its "
            "instance was replaced"))

    def _give_up(self, batch: _Batch, error: BatchFailedError) -> None:
        """Answer a batch still computing with ``error``; replace its instance."""
        if batch.finished:
            return
        done = self._close(batch)
        self._fail(batch, error)
        if batch.worker is not None:
            batch.worker.stop()
        if batch.task is not None:
            batch.task.cancel()
        self._recorder.num_replaced += 1
        self._release(done)

    def _close(self, batch: _Batch) -> float:
        batch.finished = True
        if batch.timer is not None:
            batch.timer.cancel()
        self.in_flight.discard(batch)
        done = self._clock.now_us()
        self._recorder.batch(len(batch.requests), done - batch.dispatch_us)
        return done

    def _fail(self, batch: _Batch, error: BaseException) -> None:
        answer = error if isinstance(error, Exception) else interrupted(error)
        self._recorder.fail(getattr(answer, "reason", "model_error"), len(batch.requests))
        for request in batch.requests:
            if not request.handle.done():
                request.handle.set_exception(answer)

    def _release(self, done_us: float) -> None:
        self.free_since.append(done_us)
        self.free_since.sort()
        self._on_free()
