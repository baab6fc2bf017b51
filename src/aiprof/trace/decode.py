"""Decode a trace's JSON into metadata plus batches of typed events, streaming.

``Splitter`` cuts the ``traceEvents`` array between two events (``}`` ``,`` ``{``) into
payloads of a few megabytes; each payload is decoded on its own (possibly in another
process), so peak memory stays near one batch rather than the whole document. A cut that
falls inside a string makes its payload invalid JSON, which is detected (``CutFailed``);
then the whole document is decoded at once (slower, correct). Files that are not strict
JSON (raw control characters, bare ``N/A``, invalid UTF-8: pytorch/pytorch#130622) are
repaired on that path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from aiprof.errors import TraceFormatError
from aiprof.trace import precise
from aiprof.trace.schema import Event, KnownEvent
from aiprof.trace.source import iter_blocks

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*(?=\{)")
_TAIL_SEARCH_BYTES = 1 << 16
_HEAD_SEARCH_LIMIT = 64 << 20
MAX_EVENT_BYTES = 1 << 30
"""One event (the JSON between two cuts) may hold up to 1 GiB, a 100 MB kernel name ten times."""

_known_decoder = msgspec.json.Decoder(list[KnownEvent])
_events_decoder = msgspec.json.Decoder(list[Event])
_document_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_any_decoder = msgspec.json.Decoder()


class _Document(msgspec.Struct):
    traceEvents: msgspec.Raw = msgspec.Raw(b"[]")  # noqa: N815 (the JSON key)


_tail_decoder = msgspec.json.Decoder(_Document)


def decode_events(data: bytes | bytearray | msgspec.Raw) -> list[Event]:
    """A JSON list of events; known phases and categories first (see ``KnownEvent``)."""
    try:
        events: list[Event] = _known_decoder.decode(data)  # type: ignore[assignment]
    except msgspec.ValidationError:
        events = _events_decoder.decode(data)
    return precise.attach(data, events)


class CutFailed(Exception):
    """A streamed payload did not decode; decode the whole document instead."""


class Splitter:
    """Cuts a trace file into ``traceEvents`` payloads of raw JSON (``[ev, ev, ...]``).

    Iterate ``payloads()``; afterwards ``tail_events()`` and ``metadata()`` give the events
    after the last cut and the top-level keys. Raises ``CutFailed`` when the file cannot be
    streamed (no ``traceEvents`` key up front, a bare event list, a cut inside a string).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._head = b""
        self._tail = b""

    def payloads(self) -> Iterator[bytearray]:
        blocks = iter_blocks(self.path)
        buffer = bytearray()
        match = None
        for block in blocks:
            buffer += block
            match = _EVENTS_KEY.search(buffer, max(0, len(buffer) - len(block) - 64))
            first = bytes(buffer.lstrip()[:1])
            if match or first not in (b"{", b"") or len(buffer) > _HEAD_SEARCH_LIMIT:
                break
        if match is None:
            raise CutFailed
        self._head = bytes(buffer[: match.end() - 1]) + b"[]}"
        pending = bytearray(memoryview(buffer)[match.end() :])
        del buffer
        for block in blocks:
            cut = _last_cut(block)
            if cut is None:
                pending += block  # a bytearray grows in place: no quadratic copying
                if len(pending) > MAX_EVENT_BYTES:
                    raise TraceFormatError(
                        f"{self.path}: more than {MAX_EVENT_BYTES >> 20} MiB without a boundary "
                        "between two events: not a trace aiprof can read"
                    )
                continue
            end, start = cut
            payload = bytearray(b"[")
            payload += pending
            payload += memoryview(block)[:end]
            payload += b"]"
            yield payload
            pending = bytearray(memoryview(block)[start:])
        self._tail = b'{"traceEvents":[' + pending

    def tail_events(self) -> list[Event]:
        try:
            return decode_events(_tail_decoder.decode(self._tail).traceEvents)
        except msgspec.DecodeError:
            raise CutFailed from None

    def metadata(self) -> dict[str, Any]:
        try:
            return _metadata(self._head) | _metadata(self._tail)
        except msgspec.DecodeError:
            raise CutFailed from None


def decode_batch(data: bytes | bytearray) -> list[Event]:
    """Events of one payload cut by ``Splitter``; ``CutFailed`` if it is not valid JSON."""
    try:
        return decode_events(data)
    except msgspec.DecodeError:
        raise CutFailed from None


def _last_cut(buffer: bytes) -> tuple[int, int] | None:
    """Positions (end of one event, start of the next) of the last boundary in ``buffer``."""
    matches = list(_BETWEEN_EVENTS.finditer(buffer, max(0, len(buffer) - _TAIL_SEARCH_BYTES)))
    return (matches[-1].start() + 1, matches[-1].end()) if matches else None


def _metadata(document: bytes) -> dict[str, Any]:
    raw = _document_decoder.decode(document)
    return {key: _any_decoder.decode(value) for key, value in raw.items() if key != "traceEvents"}


def decode_whole(path: Path, on_batch: Any) -> dict[str, Any]:
    """Decode all of ``path`` at once, repairing near-JSON; call ``on_batch(events)`` once."""
    data = b"".join(iter_blocks(path))
    if not data.strip():
        raise TraceFormatError(f"{path}: the file is empty")
    try:
        return _decode_document(path, data, on_batch)
    except msgspec.ValidationError as error:
        raise TraceFormatError(f"{path}: {describe_error(error)}") from None
    except msgspec.DecodeError:
        pass
    try:
        return _decode_document(path, _repair(data), on_batch)
    except msgspec.DecodeError as error:
        raise TraceFormatError(f"{path}: not valid JSON ({describe_error(error)})") from None


def _decode_document(path: Path, data: bytes, on_batch: Any) -> dict[str, Any]:
    if data.lstrip()[:1] == b"[":  # Chrome's JSON Array Format: a bare list of events
        on_batch(decode_events(data))
        return {}
    raw = _document_decoder.decode(data)
    if "traceEvents" not in raw:
        raise TraceFormatError(f"{path}: no 'traceEvents' key: this JSON is not a profiler trace")
    on_batch(decode_events(raw["traceEvents"]))
    return {key: _any_decoder.decode(value) for key, value in raw.items() if key != "traceEvents"}


_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_BARE_NA = re.compile(rb"(:\s*)N/A(\s*[,}\]])")


def _repair(data: bytes) -> bytes:
    """Make a nearly-JSON trace strict: drop raw control bytes, quote bare N/A, fix UTF-8."""
    text = data.decode("utf-8", errors="replace").encode("utf-8")
    text = _CONTROL.sub(b" ", text)
    return _BARE_NA.sub(rb'\1"N/A"\2', text)


_AT_EVENT = re.compile(r" - at .\$\[\d+\]\.?([^`']*).$")


def describe_error(error: Exception) -> str:
    """msgspec's message, with batch-local positions ('$[3].args.stream') made readable."""
    text = str(error)
    field = _AT_EVENT.search(text)
    if field:
        where = f"event field '{field.group(1)}'" if field.group(1) else "an event"
        text = f"{where} has an unexpected value ({text[: field.start()]})"
    return text.replace("`", "'") or "unexpected content"
