"""Hand a large result (numpy columns) from a worker process to its parent.

Pickled through a pipe, 20 MiB of columns travel 64 KiB at a time, and each step waits
for the other process to be scheduled; on a 2-core machine whose cores are both busy
decoding, that waiting cost more than the pickling. So the worker writes the arrays'
bytes once into an unlinked-on-receipt temporary file (pickle protocol 5, out-of-band
buffers) and sends only the small pickle; the parent maps the file copy-on-write, so the
arrays are neither copied again nor read-only.

Files are named ``aiprof-parcel-<pid>-<token>-...`` after the process that will receive them
(``Session``): it removes every file of its session when it is done, whatever happened to
the workers, and any reader removes the files of processes that no longer exist (a parent
killed with SIGKILL cannot clean up after itself).
"""

from __future__ import annotations

import mmap
import os
import pickle
import re
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "aiprof-parcel-"
_NAME = re.compile(rf"^{PREFIX}(\d+)-")

ALIGN_BYTES = 64
"""Each buffer starts on a 64-byte boundary, so every numpy dtype stays aligned."""


@dataclass(frozen=True)
class Parcel:
    head: bytes  # the pickle, without the arrays' data
    offsets: tuple[int, ...]  # where each out-of-band buffer starts in the file
    sizes: tuple[int, ...]
    path: str | None  # None when the object holds no buffer


@dataclass(frozen=True)
class Session:
    """The parcels one receiving process expects; created in it, before forking workers."""

    owner: int = field(default_factory=os.getpid)
    token: str = field(default_factory=lambda: secrets.token_hex(4))

    @property
    def prefix(self) -> str:
        return f"{PREFIX}{self.owner}-{self.token}-"

    def remove_all(self) -> None:
        """Remove every file of this session still on disk (sent or not, whole or not)."""
        for path in Path(tempfile.gettempdir()).glob(f"{self.prefix}*"):
            path.unlink(missing_ok=True)


def remove_stale() -> int:
    """Remove the parcels of processes that no longer exist; how many were removed."""
    removed = 0
    try:
        names = os.listdir(tempfile.gettempdir())
    except OSError:
        return 0
    for name in names:
        match = _NAME.match(name)
        if match and not _alive(int(match.group(1))):
            try:
                os.unlink(os.path.join(tempfile.gettempdir(), name))
                removed += 1
            except OSError:
                pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


def pack(value: object, session: Session | None = None) -> Parcel:
    """Pickle ``value``, its large buffers written to a temporary file of ``session``
    (default: one owned by this process)."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    if not buffers:
        return Parcel(head, (), (), None)
    offsets, sizes = [], []
    fd, path = tempfile.mkstemp(prefix=(session or Session()).prefix)
    with os.fdopen(fd, "wb") as handle:
        position = 0
        for buffer in buffers:
            raw = buffer.raw()
            padding = -position % ALIGN_BYTES
            handle.write(b"\0" * padding)
            position += padding
            offsets.append(position)
            sizes.append(raw.nbytes)
            handle.write(raw)
            position += raw.nbytes
    return Parcel(head, tuple(offsets), tuple(sizes), path)


def unpack(parcel: Parcel, *, mapped: bool = True) -> Any:
    """The object ``pack`` was given; its arrays live in a private mapping of the file, or
    (``mapped=False``) each in memory of its own, read from the file: then each array's memory
    is freed with it, where a mapping stays whole while any of its arrays lives (the reader
    merging a helper's chunks frees them one column at a time)."""
    if parcel.path is None:
        return pickle.loads(parcel.head)
    try:
        with open(parcel.path, "rb") as handle:
            if not mapped:
                return pickle.loads(parcel.head, buffers=_read_buffers(handle.fileno(), parcel))
            size = os.fstat(handle.fileno()).st_size
            mapping = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_COPY) if size else None
    finally:
        discard(parcel)
    view = memoryview(mapping) if mapping is not None else memoryview(b"")
    buffers = [view[o : o + n] for o, n in zip(parcel.offsets, parcel.sizes, strict=True)]
    return pickle.loads(parcel.head, buffers=buffers)


def _read_buffers(fd: int, parcel: Parcel) -> list[bytearray]:
    buffers = []
    for offset, size in zip(parcel.offsets, parcel.sizes, strict=True):
        buffer = bytearray(size)
        view, done = memoryview(buffer), 0
        while done < size:
            read = os.preadv(fd, [view[done:]], offset + done)
            if read == 0:
                raise EOFError(f"{parcel.path}: ends before its buffer at {offset + done}")
            done += read
        buffers.append(buffer)
    return buffers


def discard(parcel: Parcel) -> None:
    """Remove a parcel's file without reading it (the receiver gave up)."""
    if parcel.path is not None:
        try:
            os.unlink(parcel.path)
        except FileNotFoundError:
            pass
