"""A model instance's thread: runs a synchronous ``model_fn`` off the event loop, batch by batch.

A thread of its own per instance, not the loop's default executor, so that an instance whose model
hangs can be abandoned and replaced: Python cannot stop a thread, but it can stop waiting for one.
The threads are daemons, so an abandoned one never keeps the process from exiting, and each catches
every ``BaseException`` its model raises (``GeneratorExit``, ``KeyboardInterrupt``,
``SystemExit`` included) and hands it back as the batch's outcome.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

Reply = Callable[[Any, BaseException | None], None]
"""Called in the worker thread with (result, None) or (None, error) when a batch ends."""

_names = itertools.count(1)
MODEL_THREAD_PREFIX = "aiprof-batcher-model-"
"""Every model thread's name starts so (probes sum their CPU time by it)."""


retired_cpu_ns: list[tuple[int, int]] = []
"""(thread id, CPU time as it left) of every model thread that ended, in order: a probe that
reads the live threads' clocks misses an ended thread's otherwise."""


def run_job(worker: ModelThread | InlineWorker, payloads: list[Any], reply: Reply) -> None:
    """Run one batch of ``worker``'s model and give ``reply`` its outcome, the call's duration
    in ``worker.last_call_us`` first; :class:`_EndThread` after a ``BaseException`` that is no
    ``Exception`` (the calling thread must then end)."""
    begin = time.perf_counter()
    try:
        result = worker.model(payloads)
    except BaseException as error:  # noqa: BLE001 - every outcome goes back to the loop
        worker.last_call_us = (time.perf_counter() - begin) * 1e6
        reply(None, error)
        if not isinstance(error, Exception):
            raise _EndThread from error
    else:
        worker.last_call_us = (time.perf_counter() - begin) * 1e6
        reply(result, None)


class _EndThread(Exception):
    """The model raised ``GeneratorExit``, ``KeyboardInterrupt``, ``SystemExit``...: its thread
    ends (its outcome was given already)."""


def retire() -> None:
    """Record the calling model thread's CPU time as it ends."""
    retired_cpu_ns.append((threading.get_ident(), time.thread_time_ns()))


class ModelThread:
    """A daemon thread that runs ``model_fn(payloads)`` for each job it is given."""

    def __init__(self, model_fn: Callable[[list[Any]], Any]) -> None:
        self.model = model_fn
        self.last_call_us = 0.0
        """How long the model's last call took (set before its reply is called)."""
        self._jobs: queue.SimpleQueue[tuple[list[Any], Reply] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._serve, name=f"{MODEL_THREAD_PREFIX}{next(_names)}", daemon=True
        )
        self._thread.start()

    def run(self, payloads: list[Any], reply: Reply) -> None:
        """Start one batch; ``reply`` gets its outcome (from this thread)."""
        self._jobs.put((payloads, reply))

    def stop(self) -> None:
        """Let the thread end once its current batch, if any, returns (abandon or shut down)."""
        self._jobs.put(None)

    def is_alive(self) -> bool:
        """Whether the thread still runs (an abandoned one runs until its model returns)."""
        return self._thread.is_alive()

    def _serve(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                run_job(self, *job)
        except _EndThread:
            pass  # GeneratorExit, KeyboardInterrupt, SystemExit: this thread ends
        finally:
            retire()


class InlineWorker:
    """A model instance run by a thread that is not the batcher's (a front end's reader): a
    batch given to it waits in :attr:`pending` until that thread runs it (:meth:`run_pending`).
    """

    def __init__(self, model_fn: Callable[[list[Any]], Any],
                 on_abandon: Callable[[], None]) -> None:
        self.model = model_fn
        self.last_call_us = 0.0
        self.pending: tuple[list[Any], Reply] | None = None
        self.abandoned = False
        """The batcher gave up on its batch (a compute timeout, a shutdown)."""
        self.busy_since_s = 0.0
        """When the batch it runs now began (``time.monotonic()``; 0: none runs)."""
        self._on_abandon = on_abandon

    def run_pending(self) -> bool:
        """Run the batch given to it, if any; False when the thread must end (see
        :func:`run_job`)."""
        job, self.pending = self.pending, None
        if job is None:
            return True
        self.busy_since_s = time.monotonic()
        try:
            run_job(self, *job)
        except _EndThread:
            return False
        finally:
            self.busy_since_s = 0.0
        return True

    def stop(self) -> None:
        """The batcher abandons this instance (on the loop): its thread is told, via
        ``on_abandon``, once."""
        if not self.abandoned:
            self.abandoned = True
            self._on_abandon()
