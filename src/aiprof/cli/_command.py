"""The shape of one CLI command. Each module in ``aiprof.cli`` exposes ``COMMAND``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Command:
    """A subcommand of ``aiprof``.

    Modules import heavy dependencies inside ``run`` so that ``aiprof --help`` stays fast.
    """

    name: str
    """The word typed after ``aiprof``."""
    help: str
    """One line shown in ``aiprof --help``."""
    add_arguments: Callable[[argparse.ArgumentParser], None]
    """Adds the command's options to its parser."""
    run: Callable[[argparse.Namespace], int]
    """Runs the command; returns the exit code. Raises ``AiprofError`` for bad input."""
    order: int = 100
    """Position in ``aiprof --help`` (lower first)."""
