"""Bytes of a trace file, plain or gzip, delivered in bounded blocks.

Decompression is streamed so a multi-gigabyte trace never sits in memory whole.
ISA-L (``isal``) inflates about twice as fast as zlib; multi-member gzip files
(concatenated streams) are read member after member.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from isal import isal_zlib

from aiprof.errors import TraceFormatError

GZIP_MAGIC = b"\x1f\x8b"
READ_BYTES = 1 << 20
"""Compressed bytes read per step."""
BLOCK_BYTES = 2 << 20
"""Upper bound of decompressed bytes handed out per step."""


MAX_RATIO_ENV = "AIPROF_GZIP_MAX_RATIO"
MAX_BYTES_ENV = "AIPROF_GZIP_MAX_BYTES"
DEFAULT_MAX_RATIO = 200.0
"""Inflated / compressed bytes. Real traces inflate 14-20x (the public traces, the bundled
H200 trace, measured 2026-12-01); a 5 MB -> 5 GiB gzip bomb, about 1000x."""
DEFAULT_MAX_BYTES = 32 << 30
"""Inflated bytes of one file, whatever its ratio: 32 GiB."""
RATIO_FROM_BYTES = 64 << 20
"""The ratio is checked once this much has been inflated, so small files are never refused."""


@dataclass(frozen=True)
class InflateLimits:
    """When to stop inflating a gzip file (``AIPROF_GZIP_MAX_RATIO``, ``AIPROF_GZIP_MAX_BYTES``
    or ``aiprof --gzip-max-ratio/--gzip-max-bytes``; 0 means no limit)."""

    max_ratio: float = DEFAULT_MAX_RATIO
    max_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def from_environment(cls) -> InflateLimits:
        return cls(
            _env_number(MAX_RATIO_ENV, DEFAULT_MAX_RATIO),
            int(_env_number(MAX_BYTES_ENV, DEFAULT_MAX_BYTES)),
        )


def _env_number(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(f"{name}={text!r}: not a number (use e.g. {default:g})") from None
    if not value >= 0:
        raise TraceFormatError(f"{name}={text!r}: must be 0 (no limit) or more")
    return value


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
    limits = InflateLimits.from_environment()
    inflater = isal_zlib.decompressobj(wbits=31)
    pending = b""
    inflated = 0
    while True:
        data = pending or handle.read(READ_BYTES)
        pending = b""
        if not data:
            break
        try:
            out = inflater.decompress(data, BLOCK_BYTES)
            while out:
                inflated += len(out)
                unread = len(inflater.unconsumed_tail) + len(inflater.unused_data)
                _check_inflated(path, inflated, handle.tell() - unread, limits)
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


def _check_inflated(path: Path, inflated: int, compressed: int, limits: InflateLimits) -> None:
    if limits.max_bytes and inflated > limits.max_bytes:
        raise TraceFormatError(
            f"{path}: inflates to more than {limits.max_bytes:,} bytes; if it is a real trace, "
            f"raise the limit ({MAX_BYTES_ENV}=BYTES or aiprof --gzip-max-bytes BYTES, 0: none)"
        )
    if (
        limits.max_ratio
        and inflated > RATIO_FROM_BYTES
        and inflated > limits.max_ratio * compressed
    ):
        raise TraceFormatError(
            f"{path}: inflates more than {limits.max_ratio:g}x (a gzip bomb?); if it is a real "
            f"trace, raise the limit ({MAX_RATIO_ENV}=N or aiprof --gzip-max-ratio N, 0: none)"
        )
