"""JSON text: stable key order, plain numbers, no NaN (null); every layer that writes JSON."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import numpy as np


def _encode_extra(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        value = float(obj)
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot encode {type(obj).__name__} as JSON")


def _clean(obj: Any) -> Any:
    """Replace NaN/inf floats with None anywhere inside dicts and lists."""
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {key: _clean(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(value) for value in obj]
    return obj


def dumps(obj: Any, *, indent: int = 2) -> str:
    """Encode dicts, lists, dataclasses and numpy scalars as deterministic JSON text."""
    plain = msgspec.to_builtins(obj, enc_hook=_encode_extra, order="deterministic")
    data = msgspec.json.encode(_clean(plain), order="deterministic")
    return msgspec.json.format(data, indent=indent).decode()
