"""An asyncio dynamic batcher with priorities, queue policies, deadlines and cancellation.

Usage::

    policy = BatchPolicy(max_batch_size=8, max_queue_delay_us=2000)
    async with DynamicBatcher(model_fn, policy) as b:
        result = await b.infer(x, priority=1, deadline_in_us=50_000)

``model_fn`` takes a list of payloads and returns a list of results of the same length (the
convention of Ray Serve's ``@serve.batch``); it may be a coroutine function, or a plain function
run in a thread of its own per instance so that requests keep arriving while it computes. Batch
decisions come from :class:`aiprof.inference.queue.BatchQueue`, the same code the simulator runs.

Every submitted request gets exactly one answer, whatever the model does: its result, the
exception its model raised, or a :class:`RequestRejectedError` / :class:`BatchFailedError` with a
reason. A batch that outlives ``compute_timeout_us`` is failed and its instance replaced; deadlines
and queue timeouts fire on a timer; ``close()`` returns within its drain timeout.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

from aiprof.errors import InputError
from aiprof.inference.clock import Clock, LoopClock
from aiprof.inference.failures import (
    BatchFailedError,
    QueueFullError,
    RequestRejectedError,
    check_budget_us,
    check_deadlines_us,
    check_priorities,
    check_priority,
)
from aiprof.inference.fresh import dispatch_fresh
from aiprof.inference.instances import Instances
from aiprof.inference.metrics import BatchingMetrics, MetricsRecorder, due_rule
from aiprof.inference.policy import BatchPolicy, check_count, check_time_us
from aiprof.inference.queue import INF, BatchQueue, Request, fresh_batch_sizes
from aiprof.inference.replies import Replies, deliver_error, rejection
from aiprof.inference.worker import InlineWorker

__all__ = ["BatchFailedError", "DynamicBatcher", "QueueFullError", "RequestRejectedError"]

ModelFn = Callable[[list[Any]], Any]

DEFAULT_COMPUTE_TIMEOUT_US = 120e6
"""A batch still computing after 120 s is failed: TorchServe's default ``responseTimeout``
(pytorch/serve ``docs/configuration.md``)."""
DEFAULT_DRAIN_TIMEOUT_US = 30e6
"""``close()`` serves what is queued for at most 30 s: Kubernetes' default
``terminationGracePeriodSeconds``, after which a pod is killed anyway."""


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
        compute_timeout_us: float = DEFAULT_COMPUTE_TIMEOUT_US,
        drain_timeout_us: float = DEFAULT_DRAIN_TIMEOUT_US,
        reject_hopeless: bool = False,
        fresh_dispatch: bool = True,
    ) -> None:
        if not callable(model_fn):
            raise InputError(f"the model function {model_fn!r} is not callable")
        if not isinstance(policy, BatchPolicy):
            raise InputError(f"the policy must be a BatchPolicy, not {type(policy).__name__}")
        check_count("number of model instances", num_instances)
        check_count("max samples", max_samples)
        if num_instances < 1 or max_samples < 1:
            raise InputError("number of model instances and max samples must be at least 1")
        for name, value in (("compute timeout", compute_timeout_us),
                            ("drain timeout", drain_timeout_us)):
            check_time_us(name, value)
            if value <= 0:
                raise InputError(f"{name} {value} us must be > 0 (math.inf: none)")
        self.policy = policy
        self._model = model_fn
        is_async = inspect.iscoroutinefunction(model_fn) or inspect.iscoroutinefunction(
            getattr(model_fn, "__call__", None)  # noqa: B004 - an object with an async __call__
        )
        self._clock: Clock = clock or LoopClock()
        self.recorder = MetricsRecorder(max_samples)
        self._instances = Instances(
            model_fn, is_async=is_async, in_thread=run_in_thread and not is_async,
            clock=self._clock, recorder=self.recorder, compute_timeout_us=float(compute_timeout_us),
            on_free=self._on_instance_free)
        self._queue = BatchQueue(policy)
        self._fresh_sizes = fresh_batch_sizes(policy) if fresh_dispatch else ()
        level_limit = policy.queue_policy(policy.default_priority).max_queue_size
        self._fresh_limit = min(policy.max_queue_size or INF, level_limit or INF)
        self._level_timeout_us = [0.0] + [policy.queue_policy(level).timeout_us
                                          for level in range(1, policy.priority_levels + 1)]
        self._num_instances = num_instances
        self._drain_timeout_us = float(drain_timeout_us)
        self._reject_hopeless = reject_hopeless
        self._seq = itertools.count()
        self._wakeup: asyncio.Future[None] | None = None
        self._wait_until_us = INF
        self._drained: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._closed = False
        self._start_us = 0.0
        self._loop_thread = 0
        self.loop_lock: threading.Lock | None = None
        """A lock the loop's thread holds whenever it runs, released only while it waits
        (:class:`~aiprof.inference.probes.TimedSelector` with a lock), set by whoever runs the
        loop so that another thread holding it may submit (:meth:`run_here`, for a model run in
        threads). None: the loop's thread alone calls the batcher."""

    async def __aenter__(self) -> DynamicBatcher:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start(self) -> None:
        """Start the batching loop on the running event loop."""
        if self._loop is not None:
            raise InputError("the batcher was already started; start() it once")
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        if isinstance(self._clock, LoopClock):  # read from the model threads too
            self._clock.bind(self._loop)
        self._start_us = self._clock.now_us()
        self._instances.start(self._loop, self._start_us, self._num_instances)
        if self.loop_lock is not None:
            self._instances.take_next = self._take_next_here
        self._loop_task = self._loop.create_task(self._batch_loop())

    async def close(self, *, drain: bool = True, timeout_us: float | None = None) -> None:
        """Stop accepting requests; serve (``drain``) or reject what is queued; wait for batches.

        Returns within ``timeout_us`` (default: the batcher's drain timeout): what is then still
        queued is rejected (``shutdown``), what still computes fails (``shutdown``).
        """
        limit = self._drain_timeout_us if timeout_us is None else timeout_us
        check_time_us("drain timeout", limit)
        self._closed = True
        if self._loop is None:
            return
        self._instances.wake_always()
        self._instances.collect(notify=False)
        if not drain:
            self._reject_queued()
        self._wake()
        stop = self._clock.now_us() + max(0.0, limit)
        timer = self._clock.call_at(stop, self._notify_drained) if stop < INF else None
        while not self._is_drained() and self._clock.now_us() < stop:
            if self._drained is None or self._drained.done():  # shared by concurrent close()s
                self._drained = self._loop.create_future()
            await asyncio.shield(self._drained)
        if timer is not None:
            timer.cancel()
        if not self._is_drained():
            self._reject_queued()
            self._instances.give_up_all(BatchFailedError(
                "shutdown", "the batcher closed while this batch was computing"))
            self._wake()
        self._instances.stop_idle()

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
        if self._loop is None:
            raise InputError("submit() before start(): start the batcher first "
                             "(or use 'async with DynamicBatcher(...)')")
        level = check_priority(
            self.policy.default_priority if priority is None else priority,
            self.policy.priority_levels)
        deadline = INF if deadline_in_us is None else check_budget_us("deadline", deadline_in_us)
        timeout = INF if timeout_us is None else check_budget_us("timeout", timeout_us)
        future: asyncio.Future[Any] = self._loop.create_future()
        if self._closed:
            self.recorder.reject("shutdown")
            future.set_exception(RequestRejectedError("shutdown", "the batcher is closed"))
            return future
        now = self._clock.now_us()
        request = Request(next(self._seq), level, now, payload=payload, handle=future)
        request.deadline_us = now + deadline
        level_timeout = self._level_timeout_us[level]
        if timeout < INF and (level_timeout == 0 or timeout < level_timeout):
            request.timeout_at_us = now + timeout
        # requests that timed out by now leave first, even while every instance is busy: a
        # stale request must not hold the slot a new one needs (the simulator does the same)
        self._expire(now)
        if self._hopeless(request, now):
            self.recorder.reject("overload")
            future.set_exception(RequestRejectedError(
                "overload", "the queue ahead would outlast this request's timeout or deadline"))
            return future
        if self._queue.push(request) is not None:
            self.recorder.reject("queue_full")
            future.set_exception(QueueFullError("queue_full", "the queue is full; retry later"))
            return future
        future.add_done_callback(functools.partial(self._on_done, request=request))
        if not self._instances.free_since:
            self._instances.collect_or_ask()  # a batch may have ended in its thread
        if self._instances.free_since or min(request.deadline_us, request.timeout_at_us) < (
                self._wait_until_us):
            self._wake()  # all busy: the loop only needs to know of an earlier expiry
        return future

    def submit_many(
        self,
        payloads: Sequence[Any],
        replies: Replies,
        *,
        priorities: Sequence[int] | None = None,
        deadlines_in_us: Sequence[float] | None = None,
    ) -> None:
        """Queue requests that arrived together; their answers go to ``replies``, each batch's in
        one call, each request's once (rejections at once, from inside this call).

        ``priorities[i]``: the level of ``payloads[i]`` (None: the policy's default for all);
        ``deadlines_in_us[i]``: its deadline from now (``math.inf``: none). The same policy as
        :meth:`submit` applies to each request in order, at one ``now``; nothing is queued when
        an argument is invalid (``InputError``). No future per request: a front end that answers
        a batch with one write pays no per-request callback on the loop.
        """
        if self._loop is None:
            raise InputError("submit_many() before start(): start the batcher first")
        count = len(payloads)
        levels = check_priorities(priorities, count, self.policy.default_priority,
                                  self.policy.priority_levels)
        deadlines = check_deadlines_us(deadlines_in_us, count)
        if not count:
            return
        if self._closed:
            self.recorder.reject("shutdown", count)
            replies.errors(list(payloads), RequestRejectedError("shutdown",
                                                                "the batcher is closed"))
            return
        now = self._clock.now_us()
        if (self._fresh_sizes and priorities is None and deadlines_in_us is None
                and not len(self._queue) and count <= self._fresh_limit):
            taken = self._dispatch_fresh(payloads, replies, now)
            if taken == count:
                return
            payloads, count = payloads[taken:], count - taken
        self._expire(now)
        queue, seq = self._queue, self._seq
        hopeless_check = self._reject_hopeless and bool(self._instances.batch_estimate_us)
        full: list[Any] = []
        hopeless: list[Any] = []
        earliest = INF
        for payload, level, deadline in zip(payloads, levels, deadlines, strict=False):
            request = Request(next(seq), level, now, payload=payload, handle=replies)
            request.deadline_us = now + deadline
            if hopeless_check and self._hopeless(request, now):
                hopeless.append(payload)
            elif queue.push(request) is not None:
                full.append(payload)
            else:
                earliest = min(earliest, request.deadline_us, request.timeout_at_us)
        if hopeless:
            self.recorder.reject("overload", len(hopeless))
            replies.errors(hopeless, RequestRejectedError(
                "overload", "the queue ahead would outlast this request's timeout or deadline"))
        if full:
            self.recorder.reject("queue_full", len(full))
            replies.errors(full, QueueFullError("queue_full", "the queue is full; retry later"))
        if len(full) + len(hopeless) == count:
            return
        if not self._instances.free_since:
            self._instances.collect_or_ask()  # a batch may have ended in its thread
        if self._instances.free_since:
            self._dispatch_now(now)
        elif earliest < self._wait_until_us:
            self._wake()  # all busy: the loop only needs to know of an earlier expiry

    def _dispatch_fresh(self, payloads: Sequence[Any], replies: Replies, now_us: float) -> int:
        """:func:`~aiprof.inference.fresh.dispatch_fresh` on this batcher's instances."""
        task = self._loop_task
        if task is None or task.done() or task.cancelling():  # (the loop shuts down)
            return 0
        return dispatch_fresh(self._instances, self._fresh_sizes, self.policy.default_priority,
                              self._seq, payloads, replies, now_us)

    def run_here(self, worker: InlineWorker, submit: Callable[[], None]) -> None:
        """From a thread that holds :attr:`loop_lock` (not the loop's): call ``submit``, which
        submits with :meth:`submit_many` (answers to thread-safe :class:`Replies` only), and
        give the first batch it dispatches to ``worker`` (its ``pending`` job, for this thread
        to run once the lock is released) instead of a model thread. Every policy applies as
        on the loop; what needs the loop (a timer, a wake-up) is handed to it."""
        assert self.loop_lock is not None and self.loop_lock.locked() and self.runs_in_threads
        self._instances.here = worker
        try:
            submit()
        finally:
            self._instances.here = None

    def _take_next_here(self, ended: Callable[[], None]) -> bool:
        """From a model thread whose batch ended (answers to thread-safe :class:`Replies`):
        holding :attr:`loop_lock`, call ``ended`` (the batch into the inbox), then decide the
        next batches, as the loop would once woken (:meth:`_on_instance_free`); False, and
        nothing done, when the batcher closes (the loop decides)."""
        lock = self.loop_lock
        if lock is None or self._closed:
            return False
        with lock:
            if self._closed:
                return False
            ended()
            now = self._clock.now_us()
            self._expire(now)
            self._dispatch_now(now)
        return True

    def inline_worker(self, on_abandon: Callable[[], None]) -> InlineWorker:
        """A worker of this batcher's model for :meth:`run_here`; ``on_abandon`` is called (on
        the loop) if the batcher gives up on a batch it runs."""
        return InlineWorker(self._model, on_abandon)

    @property
    def runs_in_threads(self) -> bool:
        """Whether the model runs in threads (a plain function), not as tasks on the loop."""
        return self._instances.in_thread

    @property
    def short_call_us(self) -> float:
        """The shortest of the model's last calls in its threads (0 before the first): what
        the model costs when nothing else delays it, a stall of the machine left out."""
        return min(self._instances.recent_calls_us, default=0.0)

    async def infer(self, payload: Any, **options: Any) -> Any:
        """Submit one request and wait for its result."""
        return await self.submit(payload, **options)

    def metrics(self) -> BatchingMetrics:
        """Summary of everything served since :meth:`start`."""
        self._instances.collect()  # the batches that ended in their threads since
        duration = self._clock.now_us() - self._start_us
        return self.recorder.summary(duration, self._num_instances, due=due_rule(self.policy))

    def _hopeless(self, request: Request, now_us: float) -> bool:
        """With ``reject_hopeless``: would the batches queued ahead outlast its time budget?"""
        estimate_us = self._instances.batch_estimate_us
        if not self._reject_hopeless or not estimate_us:
            return False
        level_timeout = self._level_timeout_us[request.level]
        budget = min(request.deadline_us, request.timeout_at_us,
                     now_us + level_timeout if level_timeout else INF) - now_us
        if budget == INF:
            return False
        ahead = self._queue.ahead_of(request.level) + 1
        batches = math.ceil(ahead / self.policy.max_batch_size) / self._num_instances
        return batches * estimate_us > budget

    def _on_done(self, future: asyncio.Future[Any], *, request: Request) -> None:
        if future.cancelled() and self._queue.remove(request):
            self.recorder.reject("cancelled")

    def _reject(self, requests: list[Request], reason: str) -> None:
        self.recorder.reject(reason, len(requests))
        deliver_error(requests, rejection(reason))

    def _reject_queued(self) -> None:
        queued = self._queue.queued()
        for request in queued:
            self._queue.remove(request)
        if queued:
            self._reject(queued, "shutdown")

    def _expire(self, now_us: float) -> None:
        dropped = self._queue.expire(now_us)
        if not dropped:
            return
        by_reason: dict[str, list[Request]] = {}
        for request, reason in dropped:
            by_reason.setdefault(reason, []).append(request)
        for reason, requests in by_reason.items():
            self._reject(requests, reason)

    def _wake(self) -> None:
        if self._loop_thread and threading.get_ident() != self._loop_thread:  # (run_here's)
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._wake)
            return
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _notify_drained(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _is_drained(self) -> bool:
        return (self._loop_task is not None and self._loop_task.done()
                and not self._instances.in_flight)

    async def _wait(self, until_us: float) -> None:
        assert self._loop is not None
        self._wakeup = self._loop.create_future()
        self._wait_until_us = until_us
        timer = self._clock.call_at(until_us, self._wake) if until_us < INF else None
        await self._wakeup
        if timer is not None:
            timer.cancel()

    async def _batch_loop(self) -> None:
        queue = self._queue
        try:
            while not (self._closed and len(queue) == 0):
                now = self._clock.now_us()
                self._expire(now)
                if not self._instances.free_since or not len(queue):
                    if len(queue) and self._instances.collect_or_ask():
                        continue  # a batch had ended in its thread: an instance is free
                    # busy: still reject what passes its deadline or timeout, on time
                    await self._wait(queue.next_expiry_us() if len(queue) else INF)
                    continue
                batch = queue.take_batch(now, flush=self._closed)
                if batch is None:
                    await self._wait(queue.next_wake_us())
                    continue
                self._instances.dispatch(batch, now)
        except BaseException:  # cancelled (loop shutdown) or a bug: answer what is queued first
            self._closed = True
            self._reject_queued()
            raise
        finally:
            self._notify_drained()

    def _dispatch_now(self, now_us: float) -> None:
        """Run on the free instances what the policy says to run at ``now_us``, here rather than
        after a trip through the loop task, which still does every wait (a delay, an expiry,
        the drain of ``close``) and is woken only when its next wake-up moved earlier."""
        task = self._loop_task
        if task is None or task.done() or task.cancelling():  # (the loop shuts down)
            return
        queue, instances = self._queue, self._instances
        instances.collect(notify=False)
        while True:
            while instances.free_since and len(queue):
                batch = queue.take_batch(now_us, flush=self._closed)
                if batch is None:
                    break
                instances.dispatch(batch, now_us)
            if instances.free_since or not len(queue) or not instances.collect_or_ask():
                break  # (an instance is free, nothing waits, or the next batch to end wakes us)
        if self._closed:
            self._wake()  # the loop task ends once the queue is empty
        elif len(queue) and (queue.next_wake_us() if instances.free_since
                             else queue.next_expiry_us()) < self._wait_until_us:
            self._wake()

    def _on_instance_free(self) -> None:
        now = self._clock.now_us()
        self._expire(now)
        self._dispatch_now(now)
        if self._closed:
            self._notify_drained()
