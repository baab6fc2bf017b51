"""Interned strings: each distinct name is stored once; columns hold integer ids."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from aiprof.trace import fields


class StringTable:
    """An append-only table of distinct strings; id = insertion order."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._values: list[str] | None = None

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
        if self._values is None:
            self._values = list(self._ids)
        return self._values

    def __getitem__(self, string_id: int) -> str:
        return self.values[int(string_id)] if string_id >= 0 else ""

    def __len__(self) -> int:
        return len(self._ids)

    def matching(self, pattern: str | re.Pattern[str]) -> np.ndarray:
        """Ids of the strings matching a regular expression (``re.search``)."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        return np.array([i for i, v in enumerate(self.values) if regex.search(v)], dtype=np.int64)

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
