"""Shared terminal helpers: a rich Console and number formatting."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape


def console(*, file: object = None) -> Console:
    """A console writing to stdout (or ``file``), plain when not a terminal."""
    stream = file or sys.stdout
    width = None if getattr(stream, "isatty", lambda: False)() else 120
    return Console(file=stream, highlight=False, soft_wrap=False, width=width)  # type: ignore[arg-type]


def text(value: str) -> str:
    """Escape trace-provided text so rich does not read ``[...]`` in it as markup."""
    return escape(value)


def duration(us: float) -> str:
    """Microseconds in the unit a person reads best."""
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f} s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def shorten(name: str, width: int = 70) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
