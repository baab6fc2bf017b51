"""Run a function over several large objects in forked processes, one per core.

Forked children inherit the parent's memory, so the objects (a ``TraceSet``'s ranks) are
not pickled on the way in; only the small results come back. Without ``fork`` (Windows)
or with one core, the function runs here, in order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_all_start_methods, get_context
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_INHERITED: tuple[Callable[[Any], Any], Sequence[Any]] | None = None
"""The function and items of the ``map_forked`` in progress, for its children to read."""


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def can_fork() -> bool:
    return "fork" in get_all_start_methods()


def map_forked(function: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[function(item) for item in items]``, items spread over forked processes."""
    workers = min(usable_cores(), len(items))
    if workers < 2 or not can_fork():
        return [function(item) for item in items]
    global _INHERITED
    _INHERITED = (function, items)
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
            return list(pool.map(_call, range(len(items))))
    finally:
        _INHERITED = None


def _call(index: int) -> Any:
    assert _INHERITED is not None, "map_forked's state is set before its children fork"
    function, items = _INHERITED
    return function(items[index])
