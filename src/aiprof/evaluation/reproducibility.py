"""How well one session's measured fixes predict another's: the truths' own reproducibility.

The gain check asks an estimate to fall within ±30% of a measured gain. Two sessions that time
the same fixes of the same workloads, each in the suite's protocol, give that check a ceiling:
take the first session's measured gain as the "estimate" of the second's. Where the first
session misses the second by more than the tolerance, no model of the trace can be right
against both, and the check there measures the host as much as the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiprof.evaluation.labels import LabelledWorkload, MeasuredFix
from aiprof.evaluation.score import GAIN_CHECK_MIN_PCT, measured_by_category, within


@dataclass(frozen=True)
class TruthPair:
    """One category's best measured gain in a workload, in each of two sessions."""

    workload: str
    category: str
    first_pct: float
    second_pct: float

    @property
    def first_predicts_second(self) -> bool:
        return within(self.first_pct, self.second_pct)

    @property
    def second_predicts_first(self) -> bool:
        return within(self.second_pct, self.first_pct)


@dataclass(frozen=True)
class TruthAgreement:
    pairs: tuple[TruthPair, ...]

    def checked(self, *, in_second: bool) -> tuple[TruthPair, ...]:
        """The pairs in one session's gain checks (its measured gain > 5%)."""
        return tuple(p for p in self.pairs
                     if (p.second_pct if in_second else p.first_pct) > GAIN_CHECK_MIN_PCT)

    @property
    def second_checks(self) -> int:
        return len(self.checked(in_second=True))

    @property
    def second_hits(self) -> int:
        """The second session's gain checks that the first session's measured gains pass."""
        return sum(p.first_predicts_second for p in self.checked(in_second=True))

    @property
    def first_checks(self) -> int:
        return len(self.checked(in_second=False))

    @property
    def first_hits(self) -> int:
        """The first session's gain checks that the second session's measured gains pass."""
        return sum(p.second_predicts_first for p in self.checked(in_second=False))


def _known(fixes: Sequence[MeasuredFix]) -> set[str]:
    return {f.name for f in fixes if f.gain_pct is not None}


def truth_agreement(first: Sequence[LabelledWorkload],
                    second: Sequence[LabelledWorkload]) -> TruthAgreement:
    """Every (workload, category) measured in both sessions, with each session's best gain
    of that category (the gain check's truth), in the first session's order. Only the fixes
    both sessions measured count: where one session timed ``torch.compile`` and the other
    only SDPA, their fusion truths are of different fixes, not a disagreement."""
    theirs = {w.name: w.fixes for w in second}
    pairs = []
    for workload in first:
        other = theirs.get(workload.name, ())
        both = _known(workload.fixes) & _known(other)
        mine = measured_by_category([f for f in workload.fixes if f.name in both])
        yours = measured_by_category([f for f in other if f.name in both])
        pairs += [TruthPair(workload.name, category, gain, yours[category])
                  for category, gain in sorted(mine.items()) if category in yours]
    return TruthAgreement(tuple(pairs))
