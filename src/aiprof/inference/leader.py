"""Leader/follower reading for the serving front end: the thread that reads a request runs its
batch itself, so a lightly loaded server pays no hand-off to a model thread per batch.

The front end of :mod:`aiprof.inference.frontend` reads on the event loop and hands each batch to
a model thread: a ``SimpleQueue`` put, the thread's wake-up, its wait for the GIL the loop still
holds. On the H200 host at 5,000 req/s with a model that costs nothing (2026-12-02 01:03 UTC)
that path cost 55.4 us of CPU per request, an echo answered on the loop 25.1-26.1 us, and the
batcher's own Python 6.9-9.5 us: each request (mean batch 1.45) paid about one trip to a thread.

Here a *leader* thread reads the connection (a socket of its own, waiting with the GIL free) and
submits what it read to the batcher as the loop would, holding the loop's lock
(:attr:`DynamicBatcher.loop_lock <aiprof.inference.batcher.DynamicBatcher.loop_lock>`, which
the loop's thread releases only while it waits): the same policies, the same queue, decided by
the same code. The first batch dispatched meanwhile is given to the leader's own instance
(:meth:`~aiprof.inference.batcher.DynamicBatcher.run_here`), and the leader runs it, sends its
answers and reads again: one thread, no hand-off. Schmidt et al.'s Leader/Followers pattern
(POSA2, 2000): the thread that detects an event processes it, and promotes another to wait only
when it must block.

It hands the reading on only when it must block on real work: when even the model's shortest
recent call (:attr:`~aiprof.inference.batcher.DynamicBatcher.short_call_us`: a stall of the
machine in one call does not count) lasted :data:`LEAD_CALLS_BELOW_US` or longer, it gives
the connection back to the event loop before running its batch, and the loop reads and hands
batches to the model threads as before, so a GPU model's next batch is assembled while one
computes (the stream overlap). The loop makes a new leader once the calls are short again
(below half the bound: no flapping at it). A leader
whose batch runs longer than :data:`WATCH_S` (a first call that blocks, a hang) loses the
reading to the loop, which checks it that often, so a hung model stops only its own batch, and
a batch the batcher gives up on (a compute timeout) takes the reading back at once.
"""

from __future__ import annotations

import asyncio
import functools
import os
import select
import socket
import threading
import time
from collections.abc import Callable

from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.frontend import RequestServer
from aiprof.inference.worker import MODEL_THREAD_PREFIX, InlineWorker, retire

LEAD_CALLS_BELOW_US = 50.0
"""A leader runs batches whose model calls take less than this without handing the reading on:
requests arriving meanwhile then wait about as long as a hand-off to a model thread would
delay them (the client's P50 latency through a thread was 145-158 us against 124-131 us for an
echo on the loop, 20-30 us more, on the H200 host, 2026-12-02 01:03 UTC)."""
IDLE_CHECK_S = 0.05
"""How often a leader waiting for requests checks that it still leads (its wait's timeout)."""
WATCH_S = 0.01
"""How often the loop checks the leader; one whose batch has run this long loses the reading to
the loop (a model that blocks unannounced: the first call of a GPU model, a hang), so requests
wait at most about this long unread. Go's runtime retakes a processor from a thread blocked in
a system call in the same way (``sysmon``, which polls every 20 us to 10 ms, ``runtime/proc.go``);
at 100 checks a second the loop costs about 0.3 us per request at 5,000 req/s."""


class LeaderServer(RequestServer):
    """:class:`RequestServer` whose connection is read by a leader thread while the model's
    calls are short, by the event loop otherwise (and when the loop holds no lock).

    Who reads is decided under the loop's lock, and every read is made and submitted under it,
    whoever makes it: two readers never take parts of the stream out of order."""

    def __init__(self, batcher: DynamicBatcher, num_slots: int,
                 closed: asyncio.Future[None]) -> None:
        super().__init__(batcher, num_slots, closed)
        self._leader: InlineWorker | None = None
        """The worker whose thread reads the connection (None: the loop reads, or nobody);
        changed only under the loop's lock."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_reads = True
        self.num_leaders = 0
        """Leader threads started on this connection."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # the loop reads, until a leader takes over
        self._loop = asyncio.get_running_loop()
        if self._may_lead():
            self._lead()

    def _may_lead(self) -> bool:
        """A leader needs the loop's lock and a model run in threads."""
        return self._batcher.loop_lock is not None and self._batcher.runs_in_threads

    def _readable(self) -> None:
        super()._readable()
        if (self._loop_reads and self._sock is not None and self._may_lead()
                and self._batcher.short_call_us < LEAD_CALLS_BELOW_US / 2):
            self._lead()

    def _lead(self) -> None:
        """On the loop: a new leader thread reads from now on."""
        assert self._sock is not None and self._loop is not None
        worker = self._batcher.inline_worker(lambda: self._to_loop(worker))
        self._leader = worker
        self._loop.remove_reader(self._sock.fileno())
        self._loop_reads = False
        self.num_leaders += 1
        self._loop.call_later(WATCH_S, self._watch, worker)
        sock = socket.socket(fileno=os.dup(self._sock.fileno()))  # its own: the loop closes
        sock.setblocking(False)                                   # the other at the end
        threading.Thread(target=self._read_and_run, args=(worker, sock), daemon=True,
                         name=f"{MODEL_THREAD_PREFIX}leader-{self.num_leaders}").start()

    def _read_and_run(self, worker: InlineWorker, sock: socket.socket) -> None:
        """The leader's thread: wait for requests (no lock held, the GIL free), then read and
        submit them holding the loop's lock, then run the batch it was given."""
        lock, batcher = self._batcher.loop_lock, self._batcher
        assert lock is not None
        waiting = select.poll()
        waiting.register(sock.fileno(), select.POLLIN)
        try:
            while self._leader is worker:
                if not waiting.poll(IDLE_CHECK_S * 1e3):
                    continue
                with lock:
                    if self._leader is not worker:  # the loop reads now (checked, then read)
                        return
                    try:
                        data = self._received.recv(sock)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:  # reset by the client: as closed
                        data = b""
                    if not data:
                        self._hand_over(self._closed_by_peer)
                        return
                    error: Exception | None = None
                    try:
                        batcher.run_here(worker, functools.partial(self.data_received, data))
                    except Exception as raised:  # a bug: the loop reads on, it is reported
                        error = raised
                    if worker.pending is None and error is None:
                        continue
                    blocks = error is not None or batcher.short_call_us >= LEAD_CALLS_BELOW_US
                    if blocks:  # real work: the loop reads while this thread runs it
                        self._hand_over(self._loop_read)
                if error is not None:
                    worker.run_pending()  # a batch given to it before the error still runs
                    raise error
                ended = not worker.run_pending()  # (KeyboardInterrupt...: this thread ends)
                if blocks:
                    return
                if ended:
                    with lock:
                        if self._leader is worker:
                            self._hand_over(self._loop_read)
                    return
                # (a batch that ran past WATCH_S lost the reading to the loop: this ends)
        finally:
            sock.close()
            retire()

    def _hand_over(self, then: Callable[[], None]) -> None:
        """From the leader's thread, holding the loop's lock: nobody leads; ``then`` on the
        loop (it reads from now on, or closes at the end)."""
        self._leader = None
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(then)
        except RuntimeError:  # the loop is closed: nobody is served any more
            pass

    def _to_loop(self, worker: InlineWorker) -> None:
        """On the loop, when the leader's batch runs too long or the batcher gave up on it:
        the loop reads again."""
        if self._leader is not worker:
            return
        self._leader = None
        self._loop_read()

    def _watch(self, worker: InlineWorker) -> None:
        """On the loop, every :data:`WATCH_S` while ``worker`` leads: take the reading back from
        a batch that runs too long."""
        if self._leader is not worker:
            return
        busy = worker.busy_since_s
        if busy and time.monotonic() - busy >= WATCH_S:
            self._to_loop(worker)
            return
        assert self._loop is not None
        self._loop.call_later(WATCH_S, self._watch, worker)

    def _loop_read(self) -> None:
        if self._sock is not None and not self._loop_reads:
            assert self._loop is not None
            self._loop_reads = True
            self._loop.add_reader(self._sock.fileno(), self._readable)

    def _closed_by_peer(self) -> None:
        self._stop_reading()
        if self._transport is not None:
            self._transport.close()  # connection_lost follows, on the loop

    def _stop_reading(self) -> None:
        self._leader = None  # its thread ends within IDLE_CHECK_S, closing its socket
        super()._stop_reading()
