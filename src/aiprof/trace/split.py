"""Decode one large trace in several processes, each taking every n-th batch.

Every process streams the whole file (inflating and cutting it costs about a tenth of
decoding it) and decodes only its share of the batches; helpers send back their column
chunks (``TableBuilder.export``), which the reading process merges in file order. The
cuts are deterministic, so all processes see the same batches. A helper that finds a cut
inside a string says so, and the reader falls back to decoding the whole document.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from aiprof.errors import TraceFormatError
from aiprof.forked import can_fork, start_child, stop_children
from aiprof.trace import parcel
from aiprof.trace.build import BuiltPart, TableBuilder
from aiprof.trace.decode import CutFailed, Splitter, decode_batch
from aiprof.trace.source import is_gzip

SPLIT_FROM_BYTES = 128 << 20
"""Files with less JSON are read by one process. A helper costs about 17 MiB of memory
(measured: the 54 MB df_index_resolver peaks at 68 MiB PSS read alone, 85 MiB split in two)
for about 0.07 s saved there; on a 256 MiB trace it saves 0.2-0.5 s (1.55 s against 1.78-2.08 s)
and the two processes together hold less (215-219 MiB against 225 MiB). 2-core VM, 2026-11-30."""
PART_BYTES = 64 << 20
"""At least this much JSON per process."""
MAX_PARTS = 4
"""Every process inflates and cuts the whole file, so more parts stop paying off."""


@dataclass(frozen=True)
class Helper:
    process: BaseProcess
    replies: Connection
    session: parcel.Session


def json_bytes(file: Path) -> int:
    """Size of the file's JSON: its own size, or a gzip's recorded size (ISIZE, mod 2**32)."""
    size = file.stat().st_size
    if size < 18 or not is_gzip(file):
        return size
    with file.open("rb") as handle:
        handle.seek(-4, os.SEEK_END)
        (recorded,) = struct.unpack("<I", handle.read(4))
    return int(max(size, recorded))


def start(file: Path, parts: int) -> list[Helper]:
    """Fork ``parts - 1`` helpers; helper k builds batches k, k + parts, ...; none without fork."""
    if parts <= 1 or not can_fork():
        return []
    parcel.remove_stale()
    context = get_context("fork")
    session = parcel.Session()
    helpers: list[Helper] = []
    try:
        for part in range(1, parts):
            receive, send = context.Pipe(duplex=False)
            process = start_child(_build_part, (file, part, parts, send, session))
            send.close()
            helpers.append(Helper(process, receive, session))
    except BaseException:
        stop(helpers)
        raise
    return helpers


def collect(helpers: list[Helper]) -> list[BuiltPart]:
    """Each helper's part; ``CutFailed`` if one could not decode a batch as cut."""
    parts = []
    for helper in helpers:
        try:
            kind, value = helper.replies.recv()
        except EOFError:  # the helper died: read the file whole, in this process
            raise CutFailed from None
        if kind == "error":
            raise value
        if kind == "cut":
            raise CutFailed
        try:  # in memory of its own: the reader frees the chunks as it concatenates them
            parts.append(parcel.unpack(value, mapped=False))
        except EOFError:  # the helper's file was cut short: read the file in this process
            raise CutFailed from None
    return parts


def stop(helpers: list[Helper]) -> None:
    """End the helpers (killed if still running), dropping any result not collected and
    every parcel file of theirs, whole or half-written."""
    for helper in helpers:
        helper.replies.close()
    stop_children([h.process for h in helpers])
    for session in {h.session for h in helpers}:
        session.remove_all()
    helpers.clear()


def _build_part(
    file: Path, part: int, parts: int, replies: Connection, session: parcel.Session
) -> None:
    builder = TableBuilder()
    try:
        for index, payload in enumerate(Splitter(file).payloads()):
            if index % parts == part:
                builder.add(decode_batch(payload), index)
        reply: tuple[str, object] = ("part", parcel.pack(builder.export(), session))
    except CutFailed:
        reply = ("cut", None)
    except Exception as error:  # noqa: BLE001 (sent to the reader, which raises it)
        reply = ("error", error)
    try:
        replies.send(reply)
    except Exception:  # noqa: BLE001 (an error that does not pickle)
        replies.send(("error", TraceFormatError(f"{file}: {reply[1]}")))
