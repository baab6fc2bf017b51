"""Bytes of a trace file, plain or gzip, delivered in bounded blocks.

Decompression is streamed so a multi-gigabyte trace never sits in memory whole.
ISA-L (``isal``) inflates about twice as fast as zlib; multi-member gzip files
(concatenated streams) are read member after member.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

from isal import isal_zlib

from aiprof.errors import TraceFormatError

GZIP_MAGIC = b"\x1f\x8b"
READ_BYTES = 1 << 20
"""Compressed bytes read per step."""
BLOCK_BYTES = 2 << 20
"""Upper bound of decompressed bytes handed out per step."""


def is_gzip(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def iter_blocks(path: Path) -> Iterator[bytes]:
    """Yield the decompressed content of ``path`` in blocks of at most ``BLOCK_BYTES``."""
    try:
        gz = is_gzip(path)
        with path.open("rb") as handle:
            if gz:
                yield from _inflate(handle, path)
            else:
                while block := handle.read(BLOCK_BYTES):
                    yield block
    except OSError as error:
        raise TraceFormatError(f"{path}: cannot read: {error.strerror or error}") from None


def _inflate(handle, path: Path) -> Iterator[bytes]:  # type: ignore[no-untyped-def]
    inflater = isal_zlib.decompressobj(wbits=31)
    pending = b""
    while True:
        data = pending or handle.read(READ_BYTES)
        pending = b""
        if not data:
            break
        try:
            out = inflater.decompress(data, BLOCK_BYTES)
            while out:
                yield out
                out = inflater.decompress(inflater.unconsumed_tail, BLOCK_BYTES)
        except (zlib.error, isal_zlib.error) as error:  # type: ignore[misc]
            raise TraceFormatError(f"{path}: corrupt gzip data ({error})") from None
        if inflater.eof:
            pending = inflater.unused_data
            inflater = isal_zlib.decompressobj(wbits=31)
            if not pending:
                more = handle.read(READ_BYTES)
                if not more:
                    return
                pending = more
    if not inflater.eof:
        raise TraceFormatError(f"{path}: truncated gzip file (the stream ends early)")
