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
import bisect
import collections
import functools
import threading
from collections.abc import Callable
from typing import Any

from aiprof.inference.clock import Cancellable, Clock
from aiprof.inference.failures import BatchFailedError, check_results, interrupted
from aiprof.inference.handoff import Inbox
from aiprof.inference.metrics import MetricsRecorder
from aiprof.inference.queue import INF, Request
from aiprof.inference.replies import Replies, deliver_error, deliver_results, thread_safe_group
from aiprof.inference.worker import InlineWorker, ModelThread

_EWMA_WEIGHT = 1 / 8
"""Weight of a new batch time in the running estimate: TCP's smoothed RTT (RFC 6298, alpha)."""
RECENT_CALLS = 8
"""Model calls kept to tell a model that blocks from one that was descheduled once: the
shortest of the last eight (a window as long as the smoothing's memory above)."""


class _Batch:
    __slots__ = ("claimed", "dispatch_us", "finished", "free_us", "requests", "sink", "task",
                 "worker")

    def __init__(self, requests: list[Request], free_us: float, dispatch_us: float) -> None:
        self.requests = requests
        self.free_us = free_us
        self.dispatch_us = dispatch_us
        self.finished = False
        self.claimed = False
        """Its thread sent its results (under the inbox's lock): it can no longer be failed."""
        self.sink: Replies | None = None
        self.task: asyncio.Task[None] | None = None
        self.worker: ModelThread | InlineWorker | None = None


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
        self.in_thread = in_thread
        """Batches run in model threads (else as tasks on the loop)."""
        self._clock = clock
        self._recorder = recorder
        self._compute_timeout_us = compute_timeout_us
        self._on_free = on_free
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: Inbox | None = None
        self._idle_threads: list[ModelThread] = []
        self._watchdog: Cancellable | None = None
        self._watch_at_us = INF
        self.free_since: list[float] = []
        self.in_flight: set[_Batch] = set()
        self.batch_estimate_us = 0.0
        """Smoothed compute time of the batches that returned results (0 before the first)."""
        self.recent_calls_us: collections.deque[float] = collections.deque(
            maxlen=RECENT_CALLS)
        """How long the model's last calls took, in their threads (appended from any)."""
        self.here: InlineWorker | None = None
        """Set by a thread that holds the loop's lock around its ``submit_many``: the first
        batch dispatched meanwhile goes to this worker (run by that thread) instead of a model
        thread (:mod:`aiprof.inference.leader`)."""
        self._loop_thread = 0
        self.take_next: Callable[[Callable[[], None]], bool] | None = None
        """Set by the batcher when another thread may decide batches (it holds the loop's
        lock): called by a model thread whose batch it answers, with what leaves the batch in
        the inbox, to do that and take the next batch before the answers leave; False when it
        did neither (the loop must)."""

    def start(self, loop: asyncio.AbstractEventLoop, now_us: float, count: int) -> None:
        """Make ``count`` instances free from ``now_us``; batches run on ``loop``."""
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._inbox = Inbox(loop, self._woken)
        self.free_since = [now_us] * count

    def collect(self, *, notify: bool = True) -> bool:
        """Take in the batches that ended in their threads (on the loop); whether there were
        any. ``notify``: then call ``on_free`` once (the caller does not decide a batch next)."""
        items = self._inbox.take() if self._inbox is not None else []
        for batch, result, error, done_us, answered in items:
            if answered:
                self._finish_answered(batch, done_us)
            else:
                self._finish(batch, result, error, done_us=done_us, notify=False)
        if items and notify:
            self._on_free()
        return bool(items)

    def collect_or_ask(self) -> bool:
        """As :meth:`collect` (without ``on_free``), for a loop that needs a free instance:
        when no batch ended yet, the next one to end wakes the loop."""
        if self._inbox is None:
            return False
        items = self._inbox.take_or_ask()
        for batch, result, error, done_us, answered in items:
            if answered:
                self._finish_answered(batch, done_us)
            else:
                self._finish(batch, result, error, done_us=done_us, notify=False)
        return bool(items)

    def wake_always(self) -> None:
        """From now on every batch that ends wakes the loop (the batcher is closing)."""
        if self._inbox is not None:
            self._inbox.always_wake = True

    def _woken(self) -> None:
        self.collect(notify=False)
        self._on_free()  # also when a caller on the loop took the batches in meanwhile

    def dispatch(self, requests: list[Request], now_us: float) -> None:
        """Run a batch on the instance free the longest."""
        self.dispatch_group(requests, [request.payload for request in requests],
                            thread_safe_group(requests), now_us)

    def dispatch_group(self, requests: list[Request], payloads: list[Any],
                       sink: Replies | None, now_us: float) -> None:
        """As :meth:`dispatch`, for a caller that has the batch's payloads (a list of its
        own, given to the model) and knows its :func:`thread_safe_group`."""
        assert self._loop is not None
        # (an instance whose thread read its batch's end after the caller read ``now_us``
        # counts as free from ``now_us``: no batch is recorded dispatched before it was free)
        batch = _Batch(requests, min(self.free_since.pop(0), now_us), now_us)
        self.in_flight.add(batch)
        if self._compute_timeout_us < INF and (self._is_async or self._in_thread):
            self._watch(now_us + self._compute_timeout_us)
        if self._in_thread:
            batch.sink = sink
            reply = functools.partial(self._reply_from_thread, batch)
            here = self.here
            if here is not None and here.pending is None:  # its thread runs it, no hand-off
                batch.worker, here.pending = here, (payloads, reply)
                return
            batch.worker = self._idle_threads.pop() if self._idle_threads else ModelThread(
                self._model)
            batch.worker.run(payloads, reply)
        else:
            batch.task = self._loop.create_task(self._run_on_loop(batch, payloads))

    def give_up_all(self, error: BatchFailedError) -> None:
        """Answer every batch still computing with ``error`` (shutdown)."""
        self.collect(notify=False)
        for batch in list(self.in_flight):
            self._give_up(batch, error)

    def stop_idle(self) -> None:
        """Let the idle model threads end (and the compute-timeout watch, if nothing computes)."""
        for thread in self._idle_threads:
            thread.stop()
        self._idle_threads.clear()
        if not self.in_flight and self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog, self._watch_at_us = None, INF

    def _watch(self, when_us: float) -> None:
        """Have :meth:`_check_timeouts` run at ``when_us`` or before. One timer for every batch
        in flight, not one per batch: batches start in time order with one timeout, so the
        oldest one's expiry comes first, and a batch that ended leaves nothing to cancel."""
        if self._watchdog is not None:
            if self._watch_at_us <= when_us:
                return
            self._watchdog.cancel()
        if threading.get_ident() != self._loop_thread:  # (a reader thread, holding the lock)
            assert self._loop is not None
            self._watchdog, self._watch_at_us = None, INF
            self._loop.call_soon_threadsafe(self._watch, when_us)  # timers are the loop's
            return
        self._watch_at_us = when_us
        self._watchdog = self._clock.call_at(when_us, self._check_timeouts)

    def _check_timeouts(self) -> None:
        """Fail every batch computing for the compute timeout or longer; watch the next one."""
        self._watchdog, self._watch_at_us = None, INF
        self.collect()
        limit = self._compute_timeout_us
        now = self._clock.now_us()
        for batch in sorted(self.in_flight, key=lambda b: b.dispatch_us):
            if batch.dispatch_us + limit <= now:
                self._timed_out(batch)
        if self.in_flight:
            self._watch(min(b.dispatch_us for b in self.in_flight) + limit)

    def _reply_from_thread(self, batch: _Batch, result: Any, error: BaseException | None) -> None:
        """In the model thread: send the results from here when the batch's requests allow it,
        then leave the outcome for the loop (waking it only if it must or asked)."""
        assert self._inbox is not None
        done_us = self._clock.now_us()
        answered = False
        if batch.worker is not None:
            self.recent_calls_us.append(batch.worker.last_call_us)  # (thread-safe)
        if error is None and batch.sink is not None:
            values = check_results(result, len(batch.requests))
            if not isinstance(values, BaseException) and self._claim(batch):
                if self.take_next is not None and isinstance(batch.worker, ModelThread):
                    self._next_then_answer(batch, values, done_us)
                    return
                result = values
                try:
                    batch.sink.results([r.payload for r in batch.requests], values)
                    answered = True
                except Exception:  # noqa: BLE001 - the loop answers them instead
                    pass
        self._inbox.put((batch, result, error, done_us, answered), must_wake=not answered)

    def _next_then_answer(self, batch: _Batch, values: list[Any], done_us: float) -> None:
        """In the model thread of a claimed batch: the instance free in the inbox, the next
        batch taken at once (:attr:`take_next`, which gives it to this thread, the idle one
        freed last), then the answers sent, while no request waits on them for its batch.
        Before, the answers left first and the loop was woken to take the next batch: on the
        H200 at 80% load an instance waited 115-160 us between a batch's end and the next
        dispatch (2026-12-02 03:34 UTC)."""
        assert self._inbox is not None and self.take_next is not None and batch.sink is not None
        inbox, item = self._inbox, (batch, values, None, done_us, True)
        # put under the loop's lock: a loop that read its clock before this batch ended
        # cannot take it in before that reading (a dispatch before its instance was free)
        if not self.take_next(functools.partial(inbox.put, item, must_wake=False, quiet=True)):
            inbox.put(item, must_wake=False)  # the loop takes it in (closing, no lock to take)
        try:
            batch.sink.results([r.payload for r in batch.requests], values)
        except Exception:  # noqa: BLE001 - the loop answers them instead, as on any path
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(deliver_results, batch.requests, values)
            except RuntimeError:  # the loop is closed: nobody waits for these any more
                pass

    def _claim(self, batch: _Batch) -> bool:
        """In the model thread: take the right to answer ``batch`` (False: it was given up)."""
        assert self._inbox is not None
        with self._inbox.lock:
            if batch.finished:
                return False
            batch.claimed = True
            return True

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

    def _finish(self, batch: _Batch, result: Any, error: BaseException | None, *,
                done_us: float | None = None, notify: bool = True) -> None:
        """A batch came back from the model at ``done_us`` (default now), to be answered from
        here (:meth:`_finish_answered`: its thread answered it); ignored if it was given up on
        already."""
        if batch.finished:
            return
        batch.finished = True
        done = self._close(batch, self._clock.now_us() if done_us is None else done_us)
        try:
            outcome = check_results(result, len(batch.requests)) if error is None else error
            if isinstance(outcome, BaseException):
                self._fail(batch, outcome)
            else:
                compute, estimate = done - batch.dispatch_us, self.batch_estimate_us
                self.batch_estimate_us = (estimate + _EWMA_WEIGHT * (compute - estimate)
                                          if estimate else compute)
                requests = batch.requests
                self._recorder.requests([r.enqueue_us for r in requests],
                                        [r.level for r in requests], batch.free_us,
                                        batch.dispatch_us, done)
                deliver_results(requests, outcome)
        finally:  # the instance is free again whatever a receiver of the answers did
            if error is not None and not isinstance(error, Exception):
                self._recorder.num_replaced += 1  # its thread ended; a new one serves the next
            elif isinstance(batch.worker, ModelThread):
                self._idle_threads.append(batch.worker)
            self._release(done, notify)

    def _finish_answered(self, batch: _Batch, done_us: float) -> None:
        """:meth:`_finish` of a batch whose thread sent its checked results (the common end of
        a batch): its bookkeeping only, in one call."""
        if batch.finished:
            return
        batch.finished = True
        self.in_flight.discard(batch)
        requests, recorder = batch.requests, self._recorder
        compute, estimate = done_us - batch.dispatch_us, self.batch_estimate_us
        recorder.batch(len(requests), compute)
        self.batch_estimate_us = (estimate + _EWMA_WEIGHT * (compute - estimate) if estimate
                                  else compute)
        if len(requests) == 1:
            first = requests[0]
            recorder.request(first.enqueue_us, batch.free_us, batch.dispatch_us, done_us,
                             first.level)
        else:
            recorder.requests([r.enqueue_us for r in requests], [r.level for r in requests],
                              batch.free_us, batch.dispatch_us, done_us)
        if isinstance(batch.worker, ModelThread):
            self._idle_threads.append(batch.worker)
        bisect.insort(self.free_since, done_us)

    def _timed_out(self, batch: _Batch) -> None:
        self._give_up(batch, BatchFailedError(
            "compute_timeout",
            f"the model took over {self._compute_timeout_us / 1e6:g} s for this batch; its "
            "instance was replaced"))

    def _give_up(self, batch: _Batch, error: BatchFailedError) -> None:
        """Answer a batch still computing with ``error``; replace its instance."""
        if self._inbox is not None:
            with self._inbox.lock:  # against its thread claiming it at this moment
                if batch.finished or batch.claimed:
                    return  # a claimed batch was answered by its thread; its outcome is coming
                batch.finished = True
        elif batch.finished:
            return
        batch.finished = True
        done = self._close(batch, self._clock.now_us())
        self._fail(batch, error)
        if batch.worker is not None:
            batch.worker.stop()
        if batch.task is not None:
            batch.task.cancel()
        self._recorder.num_replaced += 1
        self._release(done)

    def _close(self, batch: _Batch, done_us: float) -> float:
        self.in_flight.discard(batch)
        self._recorder.batch(len(batch.requests), done_us - batch.dispatch_us)
        return done_us

    def _fail(self, batch: _Batch, error: BaseException) -> None:
        answer = error if isinstance(error, Exception) else interrupted(error)
        self._recorder.fail(getattr(answer, "reason", "model_error"), len(batch.requests))
        deliver_error(batch.requests, lambda: answer)

    def _release(self, done_us: float, notify: bool = True) -> None:
        self.free_since.append(done_us)
        self.free_since.sort()
        if notify:
            self._on_free()
