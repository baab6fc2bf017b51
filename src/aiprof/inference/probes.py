"""Probes of the serving process, to tell what stalled it: garbage-collector pauses, the event
loop's longest iteration, and the CPU time of each thread.

- :class:`GcPauses` times every collection through ``gc.callbacks`` (the interpreter calls them
  with ``"start"`` and ``"stop"`` around each collection, Python docs, ``gc.callbacks``).
- :func:`frozen_heap` moves every object alive at the start of a run into the collector's
  permanent generation (``gc.freeze``, Python 3.7+): a gen-2 collection during the run then walks
  only the objects the run created, not the hundreds of thousands torch and its libraries hold
  (a full collection's cost grows with the tracked objects, Python's ``gc`` module docs).
- :class:`TimedSelector` is the ``select()`` selector of
  :func:`~aiprof.inference.loadgen.precise_loop`
  that also times the work between two waits: one event-loop iteration, every callback it ran.
- :func:`thread_cpu_ns` reads a live thread's CPU clock (``pthread_getcpuclockid``) from any
  thread, nanosecond resolution, without stopping it.
"""

from __future__ import annotations

import gc
import selectors
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class GcSummary:
    """The collections of a run."""

    num_collections: tuple[int, int, int]
    """Collections of generation 0, 1 and 2."""
    max_pause_us: float
    total_pause_us: float
    max_pause_generation: int
    """The generation of the longest collection (-1: none)."""
    max_pause_at_ns: int
    """When the longest began (CLOCK_MONOTONIC, the load generator's clock; -1: none)."""
    frozen_objects: int
    """Objects in the permanent generation during the run (``gc.get_freeze_count``)."""


class GcPauses:
    """Times every collection between :meth:`start` and :meth:`stop` (any thread's)."""

    def __init__(self) -> None:
        self._begin_ns = 0
        self._pauses: list[tuple[int, int, int]] = []  # (generation, start ns, duration ns)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        now = time.monotonic_ns()
        if phase == "start":
            self._begin_ns = now
        else:
            self._pauses.append((int(info["generation"]), self._begin_ns, now - self._begin_ns))

    def start(self) -> None:
        """Begin timing collections."""
        self._pauses.clear()
        gc.callbacks.append(self._callback)

    def stop(self) -> GcSummary:
        """Stop timing; what the collections since :meth:`start` cost."""
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
        counts = [0, 0, 0]
        for generation, _, _ in self._pauses:
            counts[min(generation, 2)] += 1
        longest = max(self._pauses, key=lambda p: p[2], default=(-1, -1, 0))
        return GcSummary(
            num_collections=(counts[0], counts[1], counts[2]),
            max_pause_us=longest[2] / 1e3,
            total_pause_us=sum(p[2] for p in self._pauses) / 1e3,
            max_pause_generation=longest[0], max_pause_at_ns=longest[1],
            frozen_objects=gc.get_freeze_count())


@contextmanager
def frozen_heap(enabled: bool = True) -> Iterator[int]:
    """Collect once, then freeze every live object until the block ends; yields how many.

    Run the serving loop inside it: the collector then never walks the server's long-lived
    objects (the model, torch's modules) during the measured window."""
    if not enabled:
        yield 0
        return
    gc.collect()
    gc.freeze()
    try:
        yield gc.get_freeze_count()
    finally:
        gc.unfreeze()


@dataclass(frozen=True, kw_only=True)
class LoopSummary:
    """The event loop's iterations: the work done between two waits in ``select()``."""

    num_iterations: int
    busy_us: float
    """Time spent outside ``select()``: every callback of every iteration."""
    max_iteration_us: float
    max_iteration_at_ns: int
    """When the longest iteration began (CLOCK_MONOTONIC; -1: none)."""


class TimedSelector(selectors.SelectSelector):
    """``SelectSelector`` that times what the loop does between two ``select()`` calls.

    With a ``lock``, the loop's thread holds it whenever it runs (from its first wait on),
    releasing it only while it waits: another thread that holds it may then touch what the
    loop's callbacks touch (:meth:`DynamicBatcher.run_here
    <aiprof.inference.batcher.DynamicBatcher.run_here>`)."""

    def __init__(self, lock: threading.Lock | None = None) -> None:
        super().__init__()
        self.lock = lock
        self._held = False
        self._ready_ns = -1  # when the previous select() returned
        self.num_iterations = 0
        self.busy_ns = 0
        self.max_iteration_ns = 0
        self.max_iteration_at_ns = -1

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        now = time.monotonic_ns()
        if self._ready_ns >= 0:
            busy = now - self._ready_ns
            self.num_iterations += 1
            self.busy_ns += busy
            if busy > self.max_iteration_ns:
                self.max_iteration_ns, self.max_iteration_at_ns = busy, self._ready_ns
        if self.lock is None:
            ready = super().select(timeout)
        else:
            if self._held:
                self._held = False
                self.lock.release()
            try:
                ready = super().select(timeout)
            finally:
                self.lock.acquire()  # (the wait for it counts as waiting, not as busy)
                self._held = True
        self._ready_ns = time.monotonic_ns()
        return ready

    def close(self) -> None:
        if self._held:  # the loop is done: nobody runs on it any more
            self._held = False
            assert self.lock is not None
            self.lock.release()
        super().close()

    def reset(self) -> None:
        """Forget the iterations so far (call at the start of the measured window)."""
        self.num_iterations = self.busy_ns = self.max_iteration_ns = 0
        self.max_iteration_at_ns = -1

    def summary(self) -> LoopSummary:
        return LoopSummary(num_iterations=self.num_iterations, busy_us=self.busy_ns / 1e3,
                           max_iteration_us=self.max_iteration_ns / 1e3,
                           max_iteration_at_ns=self.max_iteration_at_ns)


def thread_cpu_ns(thread: threading.Thread) -> int:
    """CPU time ``thread`` has used so far, ns (0 for a thread not started or already ended)."""
    if thread.ident is None or not thread.is_alive():
        return 0
    try:
        return time.clock_gettime_ns(time.pthread_getcpuclockid(thread.ident))
    except (OSError, ProcessLookupError):  # it ended between the check and the read
        return 0


def threads_cpu_ns() -> dict[str, int]:
    """CPU time of every live Python thread so far, by thread name."""
    out: dict[str, int] = {}
    for thread in threading.enumerate():
        out[thread.name] = out.get(thread.name, 0) + thread_cpu_ns(thread)
    return out
