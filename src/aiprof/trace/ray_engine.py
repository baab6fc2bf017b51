"""Ranks read and analysed as Ray tasks: the engine of ``TraceStream`` past one machine.

Each rank is one task (``stream.read_and_work``): it opens the file where it runs, so the
files must be at the same path on every node (a shared or object-store mount next to the
trace storage), and only the task's result travels back. ``ray`` is an optional dependency
(``pip install 'aiprof[ray]'``), imported only here and only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aiprof.errors import AiprofError, InputError, MissingDependencyError

if TYPE_CHECKING:
    from aiprof.trace.model import Trace
    from aiprof.trace.stream import RankClock

R = TypeVar("R")

INSTALL_RAY = "pip install 'aiprof[ray]' (or pip install ray) on this machine and the cluster's"
TASK_MEMORY_BYTES_PER_JSON_BYTE = 2.0
"""The memory a task asks Ray for, per byte of its rank's JSON (``stream.PEAK_PER_JSON_BYTE``),
so that Ray places no more tasks on a node than its memory holds."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(f"--ray needs Ray: {INSTALL_RAY}") from None
    return ray


def connect(address: str) -> Any:
    """``ray`` connected to ``address``: "" is ``ray.init()``'s default ($RAY_ADDRESS, else a
    cluster already running here, else a new one here); anything else is given to
    ``ray.init(address=...)`` ("auto", "local", ``host:port``, ``ray://host:10001``). An
    existing connection (``ray.init`` called by the caller) is used as it is."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    where = {"address": address} if address else {}
    try:
        ray.init(include_dashboard=False, log_to_driver=False, **where)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise InputError(f"cannot connect to the Ray cluster at {address!r}: {error}") from None
    return ray


def map_on_ray(
    address: str, files: list[Path], work: Callable[[Trace], R], step_annotation: str | None
) -> list[tuple[RankClock, R]]:
    """``stream.read_and_work`` of every file as a Ray task; results in file order."""
    from aiprof.trace import split
    from aiprof.trace.stream import WORKER_BASE_BYTES, read_and_work

    ray = connect(address)
    task = ray.remote(read_and_work)
    pending = [
        task.options(
            memory=int(WORKER_BASE_BYTES + TASK_MEMORY_BYTES_PER_JSON_BYTE * split.json_bytes(f)),
            max_retries=0,
        ).remote(str(f), work, step_annotation, 1)
        for f in files
    ]
    try:
        return list(ray.get(pending))
    except ray.exceptions.RayTaskError as error:
        cause = getattr(error, "cause", None)
        if isinstance(cause, AiprofError):  # a bad trace: the same one line as without Ray
            raise cause from None
        raise
    except ray.exceptions.OutOfMemoryError as error:
        raise InputError(f"a Ray task ran out of memory reading a rank: {error}") from None
