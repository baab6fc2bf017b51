"""The records a load-generator process and the serving process exchange over a Unix socket.

A request names its input by a slot of a shared-memory region that the server filled once, as
perf_analyzer's ``--shared-memory=system`` mode does (the client registers regions and each
request points into them; Triton's system shared-memory extension): only 16 bytes per request
cross the socket, whatever the input's size. ``benchmarks/serving_transport.py`` measured the
socket against a shared-memory ring for these records; the socket was cheaper per request.

Records are fixed-size little-endian structs decoded in bulk with numpy, so reading a burst of
requests is one call, not one per request.
"""

from __future__ import annotations

import socket

import numpy as np

from aiprof.errors import InputError

REQUEST = np.dtype([("id", "<u4"), ("slot", "<u4"), ("priority", "<u2"), ("pad", "<u2"),
                    ("deadline_us", "<f4")])
"""One request: its id, the input slot, priority (0: the batcher's default), deadline (0: none)."""
RESPONSE = np.dtype([("id", "<u4"), ("status", "u1"), ("reason", "u1"), ("pad", "<u2"),
                     ("value", "<i4")])
"""One answer: the request id, its status, the reason code of a failure, the model's value."""

OK, REJECTED, FAILED = 0, 1, 2
"""Answer statuses: served, rejected before compute, its batch failed in the model."""
REASONS = ("", "queue_full", "timeout", "deadline", "cancelled", "overload", "shutdown",
           "model_error", "interrupted", "compute_timeout", "bad_output", "other")
"""Reason codes of rejections and failures, in the words of the batcher's errors."""


def reason_code(reason: str) -> int:
    """The code of a rejection or failure reason (``other`` for one not listed)."""
    try:
        return REASONS.index(reason)
    except ValueError:
        return REASONS.index("other")


def encode_requests(ids: np.ndarray, slots: np.ndarray, priority: np.ndarray | None = None,
                    deadline_us: np.ndarray | None = None) -> np.ndarray:
    """Request records for arrays of ids and slots (and optional priorities and deadlines)."""
    records = np.zeros(len(ids), dtype=REQUEST)
    records["id"] = ids
    records["slot"] = slots
    if priority is not None:
        records["priority"] = priority
    if deadline_us is not None:
        records["deadline_us"] = deadline_us
    return records


class ReceiveBuffer:
    """Reads a socket into one buffer allocated once, and returns the bytes read as their own
    ``bytes``.

    ``socket.recv(n)`` allocates ``n`` bytes for every call and then shrinks them to what came.
    Above glibc's mmap threshold (128 KiB by default, mallopt(3) ``M_MMAP_THRESHOLD``; raised
    for good once the process frees a larger mapped block) that allocation is an ``mmap`` and
    a ``munmap`` per read besides the ``recvfrom``. On the 2-core VM (2026-12-02, CPython 3.11)
    a send and a read of 12 bytes cost the load client (its imports, warmed up) 21.8-24.1 us
    with ``recv(1 MiB)`` against 3.2 us with ``recv(4096)``; in the serving process, whose
    imports (torch) had raised the threshold, ``recv(256 KiB)`` cost 2.5-2.7 us, as
    ``recv(4096)``. A buffer kept costs the same in either process."""

    def __init__(self, max_bytes: int) -> None:
        self._buffer = bytearray(max_bytes)
        self._view = memoryview(self._buffer)

    def recv(self, sock: socket.socket) -> bytes:
        """What ``sock.recv(max_bytes)`` returns (b"" once closed), without its allocation."""
        return self._view[:sock.recv_into(self._buffer)].tobytes()


class RecordReader:
    """Splits a byte stream into whole records of ``dtype``; keeps a partial one for later."""

    def __init__(self, dtype: np.dtype) -> None:
        self._dtype = dtype
        self._pending = b""

    def feed(self, data: bytes) -> np.ndarray:
        """The whole records in what arrived so far."""
        if self._pending:
            data = self._pending + data
        count = len(data) // self._dtype.itemsize
        self._pending = data[count * self._dtype.itemsize:]
        return np.frombuffer(data, dtype=self._dtype, count=count)  # no copy of the bytes

    @property
    def partial_bytes(self) -> int:
        """Bytes of a record not yet complete."""
        return len(self._pending)


def check_slots(slots: np.ndarray, num_slots: int) -> None:
    """An ``InputError`` when a request names a slot outside the region."""
    if slots.size and int(slots.max()) >= num_slots:
        raise InputError(f"a request names input slot {int(slots.max())}; there are {num_slots}")
