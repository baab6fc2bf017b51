"""The serving process's socket front end: request records in, batcher futures, answer records out.

An asyncio protocol on the batcher's event loop. A burst of request records is decoded in one
numpy call; each request is one ``DynamicBatcher.submit`` and one done-callback, the only
per-request Python on the loop. Answers of one loop iteration leave in one ``write``. The model's
host work runs in the batcher's model threads, not here.
"""

from __future__ import annotations

import asyncio
import functools
import struct
from typing import Any

from aiprof.errors import AiprofError
from aiprof.inference.batcher import DynamicBatcher
from aiprof.inference.failures import RequestRejectedError
from aiprof.inference.wire import (
    FAILED,
    OK,
    REJECTED,
    REQUEST,
    RESPONSE,
    RecordReader,
    reason_code,
)

_ANSWER = struct.Struct("<IBBHi")
assert _ANSWER.size == RESPONSE.itemsize


class RequestServer(asyncio.Protocol):
    """Serves one load-generator connection; ``closed`` is set when it goes away."""

    def __init__(self, batcher: DynamicBatcher, num_slots: int,
                 closed: asyncio.Future[None]) -> None:
        self._batcher = batcher
        self._num_slots = num_slots
        self._closed = closed
        self._reader = RecordReader(REQUEST)
        self._out: list[bytes] = []
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self.num_received = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        records = self._reader.feed(data)
        self.num_received += len(records)
        submit, answer, slots = self._batcher.submit, self._answer, self._num_slots
        for rid, slot, priority, _, deadline in records.tolist():  # tuples, one C call
            if slot >= slots:
                self._send(rid, REJECTED, "other", 0)
                continue
            try:
                future = submit((rid, slot), priority=priority or None,
                                deadline_in_us=deadline or None)
            except AiprofError:  # a priority outside the policy's levels
                self._send(rid, REJECTED, "other", 0)
                continue
            future.add_done_callback(functools.partial(answer, rid))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed.done():
            self._closed.set_result(None)

    def _answer(self, rid: int, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            self._send(rid, REJECTED, "cancelled", 0)
            return
        error = future.exception()
        if error is None:
            value = future.result()
            self._send(rid, OK, "", value if isinstance(value, int) else 0)
            return
        status = REJECTED if isinstance(error, RequestRejectedError) else FAILED
        self._send(rid, status, str(getattr(error, "reason", "model_error")), 0)

    def _send(self, rid: int, status: int, reason: str, value: int) -> None:
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(_ANSWER.pack(rid, status, reason_code(reason), 0, value))

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(b"".join(out))
