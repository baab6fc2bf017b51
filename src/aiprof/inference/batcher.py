"""An asyncio dynamic batcher with priorities, queue policies, deadlines and cancellation.

Usage::

    policy = BatchPolicy(max_batch_size=8, max_queue_delay_us=2000)
    async with DynamicBatcher(model_fn, policy) as b:
        result = await b.infer(x, priority=1, deadline_in_us=50_000)

``model_fn`` takes a list of payloads and returns a list of results of the same length (the
convention of Ray Serve's ``@serve.batch``); it may be a coroutine function, or a plain function
run in a worker thread so that requests keep arriving while it computes. Batch decisions come from
:class:`aiprof.inference.queue.BatchQueue`, the same code the simulator runs.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
from collections.abc import Callable
from typing import Any

from aiprof.errors import AiprofError, InputError
from aiprof.inference.clock import Clock, LoopClock
from aiprof.inference.metrics import BatchingMetrics, MetricsRecorder
from aiprof.inference.policy import BatchPolicy
from aiprof.inference.queue import INF, BatchQueue, Request

ModelFn = Callable[[list[Any]], Any]


class RequestRejectedError(AiprofError):
    """A request was answered without being computed; ``reason`` says why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class QueueFullError(RequestRejectedError):
    """The queue was at its ``max_queue_size`` when the request arrived."""


class DynamicBatcher:
    """Groups concurrent requests into batches for ``model_fn`` as a :class:`BatchPolicy` says."""

    def __init__(
        self,
        model_fn: ModelFn,
        policy: BatchPolicy,
        *,
        clock: Clock | None = None,
        num_instances: int = 1,
        run_in_thread: bool = True,
        max_samples: int = 1_000_000,
    ) -> None:
        if num_instances < 1:
            raise InputError(f"number of model instances {num_instances} must be at least 1")
        self.policy = policy
        self._model = model_fn
        self._is_async = inspect.iscoroutinefunction(model_fn) or inspect.iscoroutinefunction(
            getattr(model_fn, "__call__", None)  # noqa: B004 - an object with an async __call__
        )
        self._in_thread = run_in_thread and not self._is_async
        self._clock: Clock = clock or LoopClock()
        self._queue = BatchQueue(policy)
        self._num_instances = num_instances
        self._free_since: list[float] = []
        self._seq = itertools.count()
        self._wakeup: asyncio.Future[None] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._closed = False
        self._start_us = 0.0
        self.recorder = MetricsRecorder(max_samples)

    async def __aenter__(self) -> DynamicBatcher:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start(self) -> None:
        """Start the batching loop on the running event loop."""
        self._start_us = self._clock.now_us()
        self._free_since = [self._start_us] * self._num_instances
        self._loop_task = asyncio.get_running_loop().create_task(self._batch_loop())

    async def close(self, *, drain: bool = True) -> None:
        """Stop accepting requests; serve (``drain``) or reject what is queued; wait for batches."""
        self._closed = True
        if not drain:
            for request in list(self._queue.queued()):
                self._queue.remove(request)
                self._reject(request, "shutdown")
        self._wake()
        if self._loop_task is not None:
            await self._loop_task
        if self._running:
            await asyncio.gather(*self._running)

    def __len__(self) -> int:
        return len(self._queue)

    def submit(
        self,
        payload: Any,
        *,
        priority: int | None = None,
        deadline_in_us: float | None = None,
        timeout_us: float | None = None,
    ) -> asyncio.Future[Any]:
        """Queue one request; the future gets its result, or a :class:`RequestRejectedError`.

        ``deadline_in_us``: the request is useless after this long (rejected if still queued).
        ``timeout_us``: overrides the level's queue timeout, only to shorten it (as Triton).
        Cancelling the future takes the request out of the queue.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if self._closed:
            future.set_exception(RequestRejectedError("shutdown", "the batcher is closed"))
            return future
        level = self.policy.default_priority if priority is None else priority
        if not 1 <= level <= self.policy.priority_levels:
            raise InputError(f"priority {level} is outside 1..{self.policy.priority_levels}")
        now = self._clock.now_us()
        request = Request(next(self._seq), level, now, payload=payload, handle=future)
        if deadline_in_us is not None:
            request.deadline_us = now + deadline_in_us
        level_timeout = self.policy.queue_policy(level).timeout_us
        if timeout_us is not None and (level_timeout == 0 or timeout_us < level_timeout):
            request.timeout_at_us = now + timeout_us
        # requests that timed out by now leave first, even while every instance is busy: a
        # stale request must not hold the slot a new one needs (the simulator does the same)
        for stale, reason in self._queue.expire(now):
            self._reject(stale, reason)
        if self._queue.push(request) is not None:
            self.recorder.reject("queue_full")
            future.set_exception(QueueFullError("queue_full", "the queue is full; retry later"))
            return future
        future.add_done_callback(functools.partial(self._on_done, request=request))
        self._wake()
        return future

    async def infer(self, payload: Any, **options: Any) -> Any:
        """Submit one request and wait for its result."""
        return await self.submit(payload, **options)

    def metrics(self) -> BatchingMetrics:
        """Summary of everything served since :meth:`start`."""
        duration = self._clock.now_us() - self._start_us
        return self.recorder.summary(duration, self._num_instances)

    def _on_done(self, future: asyncio.Future[Any], *, request: Request) -> None:
        if future.cancelled() and self._queue.remove(request):
            self.recorder.reject("cancelled")

    def _reject(self, request: Request, reason: str) -> None:
        self.recorder.reject(reason)
        future = request.handle
        if not future.done():
            future.set_exception(RequestRejectedError(reason, f"request rejected: {reason}"))

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    async def _wait(self, until_us: float) -> None:
        self._wakeup = asyncio.get_running_loop().create_future()
        timer = self._clock.call_at(until_us, self._wake) if until_us < INF else None
        await self._wakeup
        if timer is not None:
            timer.cancel()

    async def _batch_loop(self) -> None:
        queue = self._queue
        while not (self._closed and len(queue) == 0):
            if not self._free_since:
                await self._wait(INF)
                continue
            now = self._clock.now_us()
            for request, reason in queue.expire(now):
                self._reject(request, reason)
            batch = queue.take_batch(now) if len(queue) else None
            if batch is None:
                await self._wait(queue.next_wake_us() if len(queue) and not self._closed else INF)
                continue
            free_us = self._free_since.pop(0)
            task = asyncio.get_running_loop().create_task(self._execute(batch, free_us, now))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _execute(self, batch: list[Request], free_us: float, dispatch_us: float) -> None:
        payloads = [request.payload for request in batch]
        try:
            results = await self._call_model(payloads)
            if len(results) != len(batch):
                raise InputError(
                    f"the model returned {len(results)} results for {len(batch)} inputs"
                )
        except Exception as error:  # a failing model fails its own batch only
            done = self._clock.now_us()
            self.recorder.batch(len(batch), done - dispatch_us)
            self.recorder.num_failed += len(batch)
            for request in batch:
                if not request.handle.done():
                    request.handle.set_exception(error)
        else:
            done = self._clock.now_us()
            self.recorder.batch(len(batch), done - dispatch_us)
            for request, result in zip(batch, results, strict=True):
                self.recorder.request(request.enqueue_us, free_us, dispatch_us, done,
                                      request.level)
                if not request.handle.done():
                    request.handle.set_result(result)
        self._free_since.append(done)
        self._free_since.sort()
        self._wake()

    async def _call_model(self, payloads: list[Any]) -> Any:
        if self._is_async:
            return await self._model(payloads)
        if self._in_thread:
            return await asyncio.get_running_loop().run_in_executor(None, self._model, payloads)
        return self._model(payloads)
