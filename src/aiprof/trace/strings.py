"""Interned strings: each distinct name is stored once; columns hold integer ids."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from aiprof.trace import fields

DISPLAY_CHARS = 4096
"""Names longer than this are shortened where they are read (``table[id]``, ``matching``):
no kernel or op name in the public traces comes near (the longest, a Triton kernel's, is
under 300 characters), and one 100 MB name made ``report`` take minutes. ``full(id)`` and
``values`` keep the whole text."""


def shorten(text: str) -> str:
    """``text``, or its first ``DISPLAY_CHARS`` characters and how many more there were."""
    if len(text) <= DISPLAY_CHARS:
        return text
    return f"{text[:DISPLAY_CHARS]}… (+{len(text) - DISPLAY_CHARS:,} characters)"


class StringTable:
    """An append-only table of distinct strings; id = insertion order."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._values: list[str] | None = None
        self._display: list[str] | None = None

    def ids(self, values: Iterable[str]) -> np.ndarray:
        """The id of each value, adding new values to the table."""
        items = values if isinstance(values, list) else list(values)
        before = len(self._ids)
        out = fields.intern_values(items, self._ids)
        if len(self._ids) != before:
            self._values = None
        return out

    def ids_of(self, objects: list[Any], field: str) -> np.ndarray:
        """The id of each object's string attribute ``field``, adding new values."""
        before = len(self._ids)
        out = fields.string_ids(objects, field, self._ids)
        if len(self._ids) != before:
            self._values = None
        return out

    def id(self, value: str) -> int:
        if value not in self._ids:
            self._ids[value] = len(self._ids)
            self._values = None
        return self._ids[value]

    def find(self, value: str) -> int:
        """The id of ``value``, or -1 when the table does not hold it."""
        return self._ids.get(value, -1)

    @property
    def values(self) -> list[str]:
        """Every string in full, by id."""
        if self._values is None:
            self._values = list(self._ids)
            self._display = None
        return self._values

    @property
    def display(self) -> list[str]:
        """Every string by id, the long ones shortened (see ``DISPLAY_CHARS``)."""
        values = self.values
        if self._display is None:
            long = any(len(v) > DISPLAY_CHARS for v in values)
            self._display = [shorten(v) for v in values] if long else values
        return self._display

    def __getitem__(self, string_id: int) -> str:
        """The string of an id, shortened if very long; "" for -1 (absent)."""
        return self.display[int(string_id)] if string_id >= 0 else ""

    def full(self, string_id: int) -> str:
        """The string of an id as the trace holds it, however long."""
        return self.values[int(string_id)] if string_id >= 0 else ""

    def __len__(self) -> int:
        return len(self._ids)

    def matching(self, pattern: str | re.Pattern[str]) -> np.ndarray:
        """Ids of the strings matching a regular expression (``re.search``).

        Remembered per pattern until strings are added: analyses ask the same questions
        (which kernels are communication, which ops are ProfilerStep) several times, and
        a trace may hold 500k distinct names."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        key = (regex.pattern, regex.flags)
        cache = self.__dict__.setdefault("_matching", {})
        found = cache.get(key)
        if found is not None and found[0] == len(self._ids):
            return found[1]  # type: ignore[no-any-return]
        ids = np.array([i for i, v in enumerate(self.display) if regex.search(v)], dtype=np.int64)
        ids.flags.writeable = False
        cache[key] = (len(self._ids), ids)
        return ids

    def mask(self, ids: np.ndarray, pattern: str | re.Pattern[str]) -> np.ndarray:
        """Boolean mask over an id column: which rows' strings match ``pattern``."""
        return np.isin(ids, self.matching(pattern))

    def __getstate__(self) -> dict[str, object]:
        return {"values": self.values}

    def __setstate__(self, state: dict[str, object]) -> None:
        values = state["values"]
        assert isinstance(values, list)
        self._ids = {v: i for i, v in enumerate(values)}
        self._values = values
        self._display = None
