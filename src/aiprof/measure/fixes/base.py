"""What every fix is: hooks called by the variant process around the user's script."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any


class Fix:
    """A change applied from outside the script, in the variant's own fresh process.

    The variant process calls ``environment`` before torch is imported, ``before_script``
    after, ``at_step`` at every step boundary and ``finish`` when the script is stopped.
    ``not_applicable`` says why the fix had nothing to act on (the variant's times are then
    not compared); ``facts`` says what it did (counts, names), for the record and the tests.
    """

    name = "base"

    def __init__(self) -> None:
        self.not_applicable = ""
        self.notes: list[str] = []
        self.facts: dict[str, Any] = {}

    def environment(self, environ: MutableMapping[str, str]) -> None:
        """Change the process environment before torch is imported."""

    def before_script(self, torch: Any) -> None:
        """Apply the fix before the script's first line runs."""

    def at_step(self, torch: Any, step: int, optimizer: object | None) -> None:
        """A step boundary (``step`` counts from 1); ``optimizer`` is the one that stepped."""

    def finish(self, torch: Any) -> None:
        """The script was stopped: set ``not_applicable`` if the fix never acted."""


class NoFix(Fix):
    """The unfixed run (the base), or a hand-edited copy of the script."""

    name = "none"


def cuda_available(torch: Any) -> bool:
    """True when the variant runs on a CUDA device."""
    return bool(torch.cuda.is_available())
