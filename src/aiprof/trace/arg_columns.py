"""The ``args`` objects of one kind of trace events, decoded together and read column by column."""

from __future__ import annotations

from functools import cache
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from aiprof.trace import fields
from aiprof.trace import schema as s

_NO_DIMS = [s.MISSING] * 3


@cache
def _decoder(args_type: type) -> msgspec.json.Decoder[Any]:
    """One typed decoder of a list of ``args_type`` per schema class, built on first use."""
    return msgspec.json.Decoder(list[args_type])  # type: ignore[valid-type]


class ArgColumns:
    """The ``args`` of one kind of events, decoded together, read out column by column."""

    def __init__(self, args_type: type, raw: bytes) -> None:
        self.objects: list[Any] = _decoder(args_type).decode(raw)

    def __len__(self) -> int:
        return len(self.objects)

    def ints(self, field: str) -> np.ndarray:
        return fields.ints(self.objects, field)

    def floats(self, field: str) -> np.ndarray:
        return fields.floats(self.objects, field)

    def strings_present(self, field: str) -> bool:
        """Whether any object has a non-empty string in ``field``."""
        return any(map(attrgetter(field), self.objects))

    def external_ids(self) -> np.ndarray:
        """``External id`` (PyTorch 1.10+), else the older ``external id``."""
        new = self.ints("external_id")
        return np.where(new == s.MISSING, self.ints("external_id_legacy"), new)

    def dims(self, field: str) -> np.ndarray:
        """``grid`` or ``block`` as an (n, 3) array; -1 rows where absent or not a 3-list."""
        values = list(map(attrgetter(field), self.objects))
        if values.count(None) == len(values):  # no event has it (memcpys, some launchers)
            return np.full((len(values), 3), s.MISSING, dtype=np.int64)
        try:
            dims = np.array(values, dtype=np.int64)
            if dims.shape == (len(values), 3):
                return dims
        except (TypeError, ValueError):
            pass
        fixed = [v if v.__class__ is list and len(v) == 3 else _NO_DIMS for v in values]
        return np.array(fixed, dtype=np.int64).reshape(-1, 3)

    def streams(self) -> np.ndarray:
        try:
            return self.ints("stream")
        except (TypeError, ValueError):  # ROCm writes "0x0"
            return np.array([_stream(a.stream) for a in self.objects], dtype=np.int64)


def _stream(value: int | str) -> int:
    if value.__class__ is int:
        return value
    text = str(value).strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text.rsplit(" ", 1)[-1])
    except ValueError:
        return s.MISSING
