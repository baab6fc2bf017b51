"""The serving process's socket front end: request records in, answer records out, a batch at a
time.

An asyncio protocol on the batcher's event loop reads the requests (from a reader callback of
its own, the transport paused). A read of one request is unpacked by one ``struct`` call, a
larger one decoded and checked in a few numpy calls; a read's requests are handed over as one
group (``DynamicBatcher.submit_many``);
the front end is their :class:`~aiprof.inference.replies.Replies`, so a batch's answers come in
one call and leave in one ``send``, packed by a prebuilt ``struct`` per kind of answer: no
future, done-callback or loop handle per request. The answers are thread-safe
(:class:`AnswerWriter`), so a batch's results leave from the model thread that computed them,
and the loop is not woken for them (:mod:`aiprof.inference.handoff`). The model's host work runs
in the batcher's model threads, not here.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.failures import RequestRejectedError
from aiprof.inference.wire import (
    FAILED,
    OK,
    REJECTED,
    REQUEST,
    RESPONSE,
    ReceiveBuffer,
    RecordReader,
    reason_code,
)

_ANSWER = struct.Struct("<IBBHi")
"""One answer record: id, status, reason, pad, value (:data:`~aiprof.inference.wire.RESPONSE`)."""
_SERVED = struct.Struct("<I4xi")
"""A served answer: status OK and reason 0 are zero bytes, so only the id and value vary."""
assert _ANSWER.size == _SERVED.size == RESPONSE.itemsize and OK == reason_code("") == 0
_REQUEST = struct.Struct("<IIHHf")
"""One request record (:data:`~aiprof.inference.wire.REQUEST`), for a read of exactly one."""
assert _REQUEST.size == REQUEST.itemsize
_I32 = (-(1 << 31), 1 << 31)
_rid = itemgetter(0)


class AnswerWriter:
    """Sends answer records on a connection from any thread, whole records in order.

    It owns a duplicate of the connection's socket (``socket.dup``): asyncio lets no one else
    watch a transport's own descriptor, and the transport here only reads. A send that the
    kernel takes whole costs one system call and no trip through the loop; what it does not
    take is kept and flushed by the loop when the socket is writable again (under one lock,
    so no two senders interleave parts of records)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self._loop = loop
        self._sock = sock
        self._sock.setblocking(False)
        self._lock = threading.Lock()
        self._pending = bytearray()
        self._watching = False
        self._closed = False

    def send(self, data: bytes) -> None:
        """Send ``data`` now, or as soon as the socket takes it (dropped once closed)."""
        with self._lock:
            if self._closed:
                return
            if not self._pending:
                try:
                    sent = self._sock.send(data)
                except BlockingIOError:
                    sent = 0
                except OSError:  # the client went away; its answers have nowhere to go
                    self._closed = True
                    return
                if sent == len(data):
                    return
                data = data[sent:]
            self._pending += data
            if self._watching:
                return
            self._watching = True
        try:
            self._loop.call_soon_threadsafe(self._watch)
        except RuntimeError:  # the loop is closed
            pass

    def _watch(self) -> None:
        with self._lock:
            if not self._closed:
                self._loop.add_writer(self._sock.fileno(), self._flush)

    def _flush(self) -> None:
        with self._lock:
            try:
                sent = self._sock.send(self._pending)
            except BlockingIOError:
                return
            except OSError:
                self._closed = True
                sent = len(self._pending)
            del self._pending[:sent]
            if not self._pending or self._closed:
                self._loop.remove_writer(self._sock.fileno())
                self._watching = False

    def close(self) -> None:
        """Stop sending; close the duplicate socket."""
        with self._lock:
            if self._watching:
                self._loop.remove_writer(self._sock.fileno())
                self._watching = False
            self._closed = True
            self._sock.close()


READ_BYTES = 256 * 1024
"""Most bytes taken by one read: asyncio's own for a socket transport (``max_size``,
``selector_events._SelectorSocketTransport``)."""


class RequestServer(asyncio.Protocol):
    """Serves one load-generator connection; ``closed`` is set when it goes away."""

    thread_safe = True
    """:meth:`results` and :meth:`errors` may be called from any thread (they only send)."""
    reads_itself = True
    """Read the connection from the loop's own reader callback on a duplicate of its socket
    (the transport paused), not through the transport: a read then costs the loop one
    callback and one ``recv``, not the transport's three frames and checks (False: the
    transport reads and calls :meth:`data_received`)."""

    def __init__(self, batcher: DynamicBatcher, num_slots: int,
                 closed: asyncio.Future[None]) -> None:
        self._batcher = batcher
        self._num_slots = num_slots
        self._levels = batcher.policy.priority_levels
        self._default_level = batcher.policy.default_priority
        self._closed = closed
        self._reader = RecordReader(REQUEST)
        self._writer: AnswerWriter | None = None
        self._transport: asyncio.Transport | None = None
        self._sock: socket.socket | None = None
        self._received = ReceiveBuffer(READ_BYTES)
        self.num_received = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        raw = transport.get_extra_info("socket")
        loop = asyncio.get_running_loop()
        self._writer = AnswerWriter(loop, socket.socket(fileno=os.dup(raw.fileno())))
        if self.reads_itself:
            transport.pause_reading()
            self._sock = socket.socket(fileno=os.dup(raw.fileno()))
            self._sock.setblocking(False)
            loop.add_reader(self._sock.fileno(), self._readable)

    def _readable(self) -> None:
        """On the loop, when the connection has bytes (or is closed)."""
        assert self._sock is not None
        try:
            data = self._received.recv(self._sock)  # into a buffer kept: no allocation
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # reset by the client: as closed
            data = b""
        if data:
            self.data_received(data)
        elif self._transport is not None:
            self._stop_reading()
            self._transport.close()  # connection_lost follows, on the loop

    def _stop_reading(self) -> None:
        if self._sock is not None:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None

    def data_received(self, data: bytes) -> None:
        if len(data) == _REQUEST.size and not self._reader.partial_bytes:
            # one request, the common read of a lightly loaded server: no numpy call
            rid, slot, priority, _, deadline = _REQUEST.unpack(data)
            if slot < self._num_slots and not priority and not deadline:  # (NaN is true)
                self.num_received += 1
                self._batcher.submit_many([(rid, slot)], self)
                return
        self._submit_read(self._reader.feed(data))

    def _submit_read(self, records: np.ndarray) -> None:
        """The requests of one read."""
        if not records.size:
            return
        self.num_received += int(records.size)
        rows = records.tolist()  # (id, slot, priority, pad, deadline) tuples, one C call
        if max(row[1] for row in rows) < self._num_slots and not any(
                row[2] or row[4] for row in rows):
            # the common read: a request or a few, valid, no priority or deadline of their own
            # (a few Python steps per request cost less than the numpy calls below per read)
            self._batcher.submit_many([(row[0], row[1]) for row in rows], self)
            return
        self._submit_checked(records)

    def _submit_checked(self, records: np.ndarray) -> None:
        """Requests with priorities or deadlines, or some invalid: checked in numpy."""
        priority = records["priority"]
        valid = ((records["slot"] < self._num_slots) & (priority <= self._levels)
                 & (records["deadline_us"] >= 0))  # NaN fails too
        if not valid.all():  # a slot outside the region, a level outside the policy's...
            self._write_errors(records["id"][~valid].tolist(), REJECTED, "other")
            records = records[valid]
            priority = records["priority"]
        if not records.size:
            return
        payloads = records[["id", "slot"]].tolist()  # (id, slot) tuples, one C call
        levels = (np.where(priority == 0, self._default_level, priority).tolist()
                  if priority.any() else None)
        deadline = records["deadline_us"]
        deadlines = (np.where(deadline > 0, deadline, np.inf).tolist() if deadline.any()
                     else None)
        self._batcher.submit_many(payloads, self, priorities=levels, deadlines_in_us=deadlines)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_reading()
        if self._writer is not None:
            self._writer.close()
        if not self._closed.done():
            self._closed.set_result(None)

    def results(self, payloads: list[Any], values: list[Any]) -> None:
        """A batch's answers, one write (a value that is no 32-bit int is sent as 0)."""
        try:
            data = b"".join(map(_SERVED.pack, map(_rid, payloads), values))
        except struct.error:  # not all ints, or out of range: the rare slow path
            data = b"".join(map(_SERVED.pack, map(_rid, payloads), map(_as_i32, values)))
        self._write(data)

    def errors(self, payloads: list[Any], error: BaseException) -> None:
        """Requests answered without a result, one write."""
        status = REJECTED if isinstance(error, RequestRejectedError) else FAILED
        self._write_errors(list(map(_rid, payloads)), status,
                           str(getattr(error, "reason", "model_error")))

    def _write_errors(self, ids: list[int], status: int, reason: str) -> None:
        code = reason_code(reason)
        self._write(b"".join(map(_ANSWER.pack, ids, repeat(status), repeat(code), repeat(0),
                                 repeat(0))))

    def _write(self, data: bytes) -> None:
        if self._writer is not None:
            self._writer.send(data)


def _as_i32(value: Any) -> int:
    return value if isinstance(value, int) and _I32[0] <= value < _I32[1] else 0
