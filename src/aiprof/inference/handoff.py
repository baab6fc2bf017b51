"""The way back from the model threads to the event loop: batches that ended wait in an inbox,
and the loop is woken for them only when it must be.

A wake-up is a write to the loop's self-pipe (``call_soon_threadsafe``), then a ``select``, a
loop iteration and two reads on the loop's side: as much as the arrival of a request costs the
loop, for every batch. The loop needs it at once only when something waits on it: requests
queued for an instance (the loop *asks*), a future to set, ``close()`` draining. Otherwise a
batch whose answers its thread already sent waits here, and the loop takes it (its
bookkeeping: metrics, the instance free again) the next time it runs. One lock orders the
loop's ask against the threads' puts, so no wake-up is lost: either the loop finds the batch,
or the thread sees the ask.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any


class Inbox:
    """Batch outcomes from model threads, for the loop; ``on_wake`` runs on the loop when woken."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_wake: Callable[[], None]) -> None:
        self.lock = threading.Lock()
        """Also orders a thread's claim of a batch against the loop giving up on it."""
        self._loop = loop
        self._on_wake = on_wake
        self._items: list[Any] = []
        self._asked = False
        self._wake_pending = False
        self.always_wake = False
        """Wake the loop for every batch (set once the batcher closes)."""

    def put(self, item: Any, *, must_wake: bool, quiet: bool = False) -> None:
        """From a model thread: one batch's outcome; wake the loop if it must or asked (not
        when ``quiet``: the thread takes the next batch itself, then :meth:`nudge`s if not)."""
        with self.lock:
            self._items.append(item)
            if quiet or not (must_wake or self._asked or self.always_wake) or (
                    self._wake_pending):
                return
            self._asked, self._wake_pending = False, True
        self._call_loop()

    def nudge(self) -> None:
        """From a model thread after a ``quiet`` put it could not act on: wake the loop if it
        asked (or always wakes)."""
        with self.lock:
            if not (self._asked or self.always_wake) or self._wake_pending:
                return
            self._asked, self._wake_pending = False, True
        self._call_loop()

    def _call_loop(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._woken)
        except RuntimeError:  # the event loop is closed: nobody waits for this batch any more
            pass

    def take(self) -> list[Any]:
        """On the loop: the outcomes waiting, oldest first."""
        if not self._items:  # a hint without the lock; the locked read below decides
            return []
        with self.lock:
            items, self._items = self._items, []
        return items

    def take_or_ask(self) -> list[Any]:
        """On the loop, which needs a free instance: the outcomes waiting, or, when none is,
        the promise of a wake-up with the next one."""
        with self.lock:
            items, self._items = self._items, []
            if not items:
                self._asked = True
        return items

    def _woken(self) -> None:
        with self.lock:
            self._wake_pending = False
        self._on_wake()
