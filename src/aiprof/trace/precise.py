"""Timestamps at full precision: what parsing epoch-µs decimals as float64 loses, kept aside.

Kineto's ns-resolution traces write ``"ts": 1712195495519689.047`` (µs since the epoch, ns
digits). A float64 near 1.7e15 has a spacing of 0.25 µs, so parsing rounds the ns away (193
of the 3,597 sub-µs kernel gaps of the public ns_resolution_trace vanish). For a batch whose
first ``SNIFF_BYTES`` hold such a timestamp, each event's residual (exact decimal minus the
parsed float, at most 0.125 µs) is computed from the text and stored on the event; the
builder carries it as a ``ts_residual_us`` column, added back once timestamps are offsets
from the trace's first event (small numbers, where float64 resolves far below 1 ns).
Batches without such a timestamp in their first bytes are not searched further.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from aiprof.trace import fields

PRECISE_FROM_DIGITS = 13
"""Integer digits from which float64 loses ns: 1e13 µs > 2**43, where the spacing is 2 ns."""
SNIFF_BYTES = 1 << 16
_FRACTIONAL_BIG_TS = re.compile(rb'"ts"\s*:\s*\d{%d,}\.\d' % PRECISE_FROM_DIGITS)
_TS = re.compile(rb'"ts"\s*:\s*(-?\d+)(?:\.(\d+))?(?=[\s,}])')
RESIDUAL = "ts_residual_us"


class Batch(list):  # type: ignore[type-arg]
    """A decoded batch whose events carry residuals (plain lists carry none)."""


def attach(data: Any, events: list[Any]) -> list[Any]:
    """The events, each holding the part of its ``ts`` that float parsing lost (see the
    module doc): a ``Batch`` when any residual was stored, else ``events`` itself."""
    if not events or not _FRACTIONAL_BIG_TS.search(data, 0, SNIFF_BYTES):
        return events
    found = _TS.findall(data)
    ts = fields.floats(events, "ts")
    timed = np.flatnonzero(np.isfinite(ts))
    if len(found) != len(timed):
        return events  # a "ts" key elsewhere (inside args): the texts cannot be matched to events
    whole = np.array([w for w, _ in found], dtype=np.bytes_).astype(np.float64)
    parsed = ts[timed]
    floor = np.floor(parsed)
    carry = whole - floor  # -1 where parsing rounded up to the next integer
    if (np.abs(carry) > 1).any() or (parsed < 0).any():
        return events  # not the same numbers in the same order: leave the floats as they are
    fraction = np.array([b"0." + (f or b"0") for _, f in found], dtype=np.bytes_).astype(np.float64)
    residual = carry + fraction - (parsed - floor)
    if not residual.any():
        return events
    for index, value in zip(timed.tolist(), residual.tolist(), strict=True):
        events[index].ts_residual = value
    return Batch(events)


def residuals(chunks: list[dict[str, np.ndarray]]) -> np.ndarray | None:
    """One table's residual column across its chunks, or None when no chunk has one."""
    if not any(RESIDUAL in chunk for chunk in chunks):
        return None
    return np.concatenate([chunk.get(RESIDUAL, np.zeros(len(chunk["ts_us"]))) for chunk in chunks])
