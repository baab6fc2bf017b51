"""Clocks for the asyncio batcher: the event loop's monotonic clock, and a fake one for tests.

Both speak microseconds and schedule callbacks, so the batcher never reads time by itself.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    """A scheduled callback that can be called off."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """What the batcher needs from time."""

    def now_us(self) -> float:
        """Current time in microseconds."""
        ...

    def call_at(self, when_us: float, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback`` on the event loop at ``when_us``."""
        ...

    async def sleep(self, duration_us: float) -> None:
        """Wait ``duration_us`` microseconds of this clock's time."""
        ...


class LoopClock:
    """The running event loop's monotonic clock; after :meth:`bind`, that loop's.

    Bound, a reading costs no ``asyncio.get_running_loop()``, which checks the process id with
    a ``getpid`` system call each time (CPython 3.11 ``_asyncio`` ``get_running_loop``): a
    batcher reads its clock a few times per request."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read ``loop``'s clock from now on (the loop the batcher runs on)."""
        self._loop = loop

    def now_us(self) -> float:
        return (self._loop or asyncio.get_running_loop()).time() * 1e6

    def call_at(self, when_us: float, callback: Callable[[], None]) -> Cancellable:
        return (self._loop or asyncio.get_running_loop()).call_at(when_us / 1e6, callback)

    async def sleep(self, duration_us: float) -> None:
        await asyncio.sleep(max(0.0, duration_us) / 1e6)


def _nothing() -> None:
    pass


class _Timer:
    __slots__ = ("callback", "cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self.callback = _nothing  # let go of what the callback holds, as asyncio's handles do


class FakeClock:
    """Time that moves only when a test calls :meth:`advance`; timers fire in time order."""

    def __init__(self, start_us: float = 0.0) -> None:
        self._now_us = start_us
        self._timers: list[tuple[float, int, _Timer]] = []
        self._order = itertools.count()

    def now_us(self) -> float:
        return self._now_us

    def call_at(self, when_us: float, callback: Callable[[], None]) -> Cancellable:
        timer = _Timer(callback)
        heapq.heappush(self._timers, (when_us, next(self._order), timer))
        if len(self._timers) > 1024 and len(self._timers) % 1024 == 0:
            self._timers = [entry for entry in self._timers if not entry[2].cancelled]
            heapq.heapify(self._timers)
        return timer

    async def sleep(self, duration_us: float) -> None:
        future = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        self.call_at(self._now_us + max(0.0, duration_us), wake)
        await future

    async def settle(self, rounds: int = 20) -> None:
        """Let every task that is ready run (a few trips around the event loop)."""
        for _ in range(rounds):
            await asyncio.sleep(0)

    async def advance(self, duration_us: float) -> None:
        """Move time forward, firing each due timer at its own time and letting tasks react."""
        end = self._now_us + duration_us
        await self.settle()
        while self._timers and self._timers[0][0] <= end:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now_us = max(self._now_us, when)
            timer.callback()
            await self.settle()
        self._now_us = end
        await self.settle()
