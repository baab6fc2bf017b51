"""A progress line on stderr for loads and analyses that take more than about a second.

Shown only when stderr is a terminal and ``--quiet`` was not given, so pipes, ``--json`` output
captured by scripts and CI logs never see it. It appears after ``DELAY_S`` (a quick command
prints nothing extra) and is erased when the work ends.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

DELAY_S = 1.0
"""Seconds of work before the progress line appears."""


def wanted(quiet: bool = False) -> bool:
    """Whether to show progress: stderr is a terminal and the user did not ask for quiet."""
    return not quiet and sys.stderr.isatty()


@contextmanager
def busy(label: str, *, enabled: bool, console: Console | None = None,
         delay_s: float = DELAY_S) -> Iterator[None]:
    """Show a spinner with ``label`` on stderr while the block runs (once ``delay_s`` passed)."""
    if not enabled:
        yield
        return
    status = (console or Console(stderr=True)).status(label, spinner="dots")
    lock = threading.Lock()
    state = {"started": False, "done": False}

    def start() -> None:
        with lock:
            if not state["done"]:
                status.start()
                state["started"] = True

    timer = threading.Timer(delay_s, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            state["done"] = True
            if state["started"]:
                status.stop()
