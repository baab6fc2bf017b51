"""JSON documents of the views (``aiprof queue/ops/kernels/diff ... --json``)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np

from aiprof.analysis.queue import QueueResult

QUEUE_SCHEMA = "aiprof.queue/1"


def plain(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """A dataclass's fields as a dict, arrays and nested dataclasses left to ``dumps``."""
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name not in skip}


def queue_document(results: list[QueueResult], *, series: bool = False) -> dict[str, Any]:
    skip = () if series else ("ts_us", "length")
    return {
        "schema": QUEUE_SCHEMA,
        "ranks": [
            {
                "rank": r.rank,
                "path": r.path,
                "window_us": r.window_us,
                "streams": [plain(s, skip) for s in r.streams],
            }
            for r in results
        ],
    }


def as_list(values: np.ndarray) -> list[Any]:
    return values.tolist()
