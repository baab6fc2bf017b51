"""Run a function over several large objects in forked processes, one per core.

Forked children inherit the parent's memory, so the objects (a ``TraceSet``'s ranks) are
not pickled on the way in; only the small results come back. Without ``fork`` (Windows)
or with one core, the function runs here, in order.

The parent owns its children on every exit path: a child error, an exception, Ctrl-C or
SIGTERM in the parent kill and reap them before the exception goes on. Children ignore
SIGINT (the parent decides), take the default SIGTERM, and die with the parent: on Linux
the kernel kills them when it dies (``PR_SET_PDEATHSIG``), elsewhere a thread notices
that the parent changed and exits.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing import get_all_start_methods, get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_S = 0.5
"""Where the kernel cannot kill children with their parent, how often they look."""
REAP_S = 1.0
"""How long the parent waits for a killed child to be reaped."""


class WorkerDied(RuntimeError):
    """A child process ended without answering (killed from outside, out of memory)."""


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def can_fork() -> bool:
    return "fork" in get_all_start_methods()


def start_child(target: Callable[..., None], args: tuple[Any, ...]) -> BaseProcess:
    """Fork a child running ``target(*args)`` that ignores Ctrl-C and dies with this process."""
    process = get_context("fork").Process(
        target=_child_entry, args=(os.getpid(), target, args), daemon=True
    )
    process.start()
    return process


def stop_children(processes: Sequence[BaseProcess]) -> None:
    """Kill and reap children (SIGKILL: they hold nothing that needs a clean exit)."""
    for process in processes:
        if process.is_alive():
            try:
                process.kill()
            except (OSError, ValueError):
                pass
    deadline = time.monotonic() + REAP_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))


def _child_entry(parent: int, target: Callable[..., None], args: tuple[Any, ...]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(parent)
    target(*args)


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent:  # it died before the call
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    watcher = threading.Thread(target=_watch_parent, args=(parent,), daemon=True)
    watcher.start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def map_forked(
    function: Callable[[T], R],
    items: Sequence[T],
    *,
    workers: int | None = None,
    discard: Callable[[R], None] | None = None,
) -> list[R]:
    """``[function(item) for item in items]``, items spread over forked processes.

    Each child takes the next item when it is done with one. The first exception of a
    child is raised here (the other children killed); results already received are given
    to ``discard`` when the call does not return them (an error, Ctrl-C, SIGTERM).
    """
    count = min(workers or usable_cores(), len(items))
    if count < 2 or not can_fork():
        return [function(item) for item in items]
    context = get_context("fork")
    links: list[Connection] = []
    processes: list[BaseProcess] = []
    results: dict[int, R] = {}
    try:
        for _ in range(count):
            here, there = context.Pipe(duplex=True)
            processes.append(start_child(_serve, (there, function, items)))
            there.close()
            links.append(here)
        todo = deque(range(len(items)))
        busy: set[Connection] = set()
        for link in links:
            link.send(todo.popleft() if todo else None)
            busy.add(link)
        while busy:
            for ready in wait(list(busy)):
                link = next(b for b in busy if b is ready)
                try:
                    index, kind, value = link.recv()
                except EOFError:
                    raise WorkerDied("a worker process died (killed or out of memory)") from None
                if kind == "error":
                    raise value
                results[index] = value
                if todo:
                    link.send(todo.popleft())
                else:
                    link.send(None)
                    busy.discard(link)
        return [results.pop(i) for i in range(len(items))]
    finally:
        for link in links:
            link.close()
        stop_children(processes)
        if discard is not None:
            for value in results.values():
                discard(value)


def _serve(link: Connection, function: Callable[[Any], Any], items: Sequence[Any]) -> None:
    while True:
        try:
            index = link.recv()
        except (EOFError, OSError):
            return
        if index is None:
            return
        try:
            reply: tuple[int, str, Any] = (index, "ok", function(items[index]))
        except Exception as error:  # noqa: BLE001 (sent to the parent, which raises it)
            reply = (index, "error", error)
        try:
            link.send(reply)
        except Exception:  # noqa: BLE001 (an error that does not pickle)
            link.send((index, "error", RuntimeError(f"{reply[2]!r}")))
