"""A diagnosis rule: one category of the vocabulary, the function that finds it, its docs.

Each module of ``aiprof.diagnose.rules`` defines one ``RULE``; the vocabulary is the list of
those objects (``rules.RULES``), so a new category is one new module (docs/diagnose.md, "Adding a
category").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiprof.diagnose.context import Context
    from aiprof.diagnose.finding import Finding
    from aiprof.diagnose.replay import Change
    from aiprof.distributed.analysis import DistributedReport


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One category: what it means, how it is found and what its fix changes in the replay."""

    category: str
    """The finding's ``category`` (a word of the vocabulary, snake_case)."""
    meaning: str
    """One line: what the category means (DESIGN.md's vocabulary table, docs/diagnose.md)."""
    find: Callable[[Context], Finding | None] | None = None
    """The finding on one trace (rank), or None when the cause is absent."""
    find_ranks: Callable[[DistributedReport], list[Finding]] | None = None
    """For causes across ranks (``straggler``): the findings of the cross-rank analysis of a
    trace set of several ranks (its collectives, waits and steps)."""
    change: Callable[[Context], Change | None] | None = None
    """The fix as a replay ``Change`` (None: the cause is absent, or not a replay change)."""
    host_side: bool = False
    """The cause lives on the host (input pipeline, launches, syncs, copies)."""
    without_gpu: bool = False
    """Also runs on traces without GPU ops (CPU-only runs: their collectives)."""
    blocks_capture: bool = False
    """A CUDA graph cannot capture it: ``cpu_bound`` counts what graphs add once it is fixed."""
    order: int = 100
    """Position in the vocabulary (lower first); equal gains rank by category name."""


def ms(us: float) -> float:
    """µs as ms, rounded for evidence."""
    return round(us / 1000.0, 3)


def per_step_ms(ctx: Context, us: float) -> float:
    """``us`` over the whole trace as ms per step of ``ctx``'s trace, rounded for evidence."""
    return ms(us / max(len(ctx.trace.steps), 1))
