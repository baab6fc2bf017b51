"""The numerics guard: does a fix move the first steps' loss more than the base itself does?

Per watched step, the reference is the median of the base rounds' values. The tolerance is
``max(rtol, 3 * the base rounds' own largest relative deviation)``: an unseeded script whose
loss differs run to run is not flagged for that. A fix is flagged when any of its rounds'
values is further than the tolerance from the reference (relative).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

DEFAULT_RTOL = 0.01
"""1% relative: bf16 autocast moved a first-step cross-entropy by ~1e-5 relative on the CPU
test scripts; a change beyond 1% deserves a look before the fix is kept."""
BASE_SPREAD_FACTOR = 3.0


@dataclass(frozen=True)
class NumericsCheck:
    """The watched loss of base and fix, and whether the fix moved it."""

    base_loss: tuple[float, ...]
    """Reference per step: median over the base rounds."""
    fix_loss: tuple[float, ...]
    """The fix's first round."""
    max_rel_diff: float
    tolerance: float
    flagged: bool


def _rel(value: float, reference: float) -> float:
    return abs(value - reference) / max(abs(reference), 1e-12)


def check_numerics(base: list[tuple[float, ...]], fix: list[tuple[float, ...]],
                   rtol: float = DEFAULT_RTOL) -> NumericsCheck | None:
    """Compare watched values; None when either side has none."""
    base = [values for values in base if values]
    fix = [values for values in fix if values]
    if not base or not fix:
        return None
    steps = min(min(len(v) for v in base), min(len(v) for v in fix))
    if steps == 0:
        return None
    reference = tuple(statistics.median(v[i] for v in base) for i in range(steps))
    base_spread = max(_rel(v[i], reference[i]) for v in base for i in range(steps))
    tolerance = max(rtol, BASE_SPREAD_FACTOR * base_spread)
    diff = max(_rel(v[i], reference[i]) for v in fix for i in range(steps))
    return NumericsCheck(base_loss=reference, fix_loss=tuple(fix[0][:steps]),
                         max_rel_diff=diff, tolerance=tolerance, flagged=diff > tolerance)
