"""The three checks of issue 15 on one workload's findings against its measured fixes.

- top-1: where the best measured fix gains >= 15%, the top finding is that fix's category;
- gain: every category whose measured fix gains > 5% has a finding within ±30% (relative) of it;
- false positives: no finding claims > 10% in a category whose measured fix gains <= 5%.

A category's measured gain is the best of its measured fixes (TF32 or bf16 autocast for
``tensor_cores_unused``, torch.compile or SDPA for ``unfused_elementwise``): a finding proposes
the change of its category, and the better measured one is what that change can deliver. A fix
that has nothing to change in a workload (no DataLoader for "DataLoader workers") measured 0%
by construction; a fix that could not be measured (not capturable, skipped for time, failed)
is unknown, and a category with only unknown fixes is in none of the checks. A category with
an unknown fix beside measured ones is in no false-positive check: its best fix is unknown
(``torch.compile`` not measured where SDPA had nothing to change does not make fusion worth
0%).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiprof.evaluation.labels import MeasuredFix

TOP1_MIN_GAIN_PCT = 15.0
"""The top-1 check applies where the best fix gains at least this (issue 15)."""
GAIN_CHECK_MIN_PCT = 5.0
"""Fixes gaining more than this need a finding of their category (issue 15)."""
GAIN_TOLERANCE = 0.30
"""A finding's estimate is right within ±30% of the measured gain, relative (issue 15)."""
FALSE_POSITIVE_CLAIM_PCT = 10.0
"""A finding claiming more than this ..."""
FALSE_POSITIVE_TRUTH_PCT = 5.0
"""... in a category whose measured fix gains this or less is a false positive (issue 15)."""

ACCEPT_TOP1_PCT = 90.0
ACCEPT_GAIN_PCT = 80.0
ACCEPT_FALSE_POSITIVES = 0
"""Issue 15's acceptance: top-1 >= 90%, gain within ±30% for >= 80%, no false positive."""


@dataclass(frozen=True)
class Claim:
    """One finding, as the score sees it: its category and estimated gain, in rank order."""

    category: str
    estimated_gain_pct: float


@dataclass(frozen=True)
class GainCheck:
    category: str
    measured_gain_pct: float
    estimated_gain_pct: float | None
    """The finding's estimate, None when no finding has this category."""
    ok: bool


@dataclass(frozen=True)
class WorkloadScore:
    workload: str
    measured_pct: dict[str, float]
    """Category -> best measured gain of its fixes (known categories only)."""
    claims: tuple[Claim, ...]
    best_category: str | None
    """The category whose measured fix gains most, when that is >= 15%."""
    top1_ok: bool | None
    """None where the top-1 check does not apply."""
    gain_checks: tuple[GainCheck, ...]
    false_positives: tuple[Claim, ...]
    unmeasured_claims: tuple[Claim, ...]
    """Findings > 10% whose category has a fix not measured here (in no false-positive
    check)."""


@dataclass(frozen=True)
class SuiteScore:
    workloads: tuple[WorkloadScore, ...]

    @property
    def top1_cases(self) -> int:
        return sum(w.top1_ok is not None for w in self.workloads)

    @property
    def top1_hits(self) -> int:
        return sum(w.top1_ok is True for w in self.workloads)

    @property
    def gain_cases(self) -> int:
        return sum(len(w.gain_checks) for w in self.workloads)

    @property
    def gain_hits(self) -> int:
        return sum(c.ok for w in self.workloads for c in w.gain_checks)

    @property
    def false_positives(self) -> int:
        return sum(len(w.false_positives) for w in self.workloads)

    @property
    def top1_pct(self) -> float:
        return 100.0 * self.top1_hits / self.top1_cases if self.top1_cases else 0.0

    @property
    def gain_pct(self) -> float:
        return 100.0 * self.gain_hits / self.gain_cases if self.gain_cases else 0.0

    @property
    def accepted(self) -> bool:
        return (self.top1_pct >= ACCEPT_TOP1_PCT and self.gain_pct >= ACCEPT_GAIN_PCT
                and self.false_positives <= ACCEPT_FALSE_POSITIVES)


def measured_by_category(fixes: Sequence[MeasuredFix]) -> dict[str, float]:
    """Each category's best measured gain; categories whose fixes are all unknown are left out."""
    best: dict[str, float] = {}
    for fix in fixes:
        if fix.gain_pct is not None:
            best[fix.category] = max(best.get(fix.category, fix.gain_pct), fix.gain_pct)
    return best


def _estimate(claims: Sequence[Claim], category: str) -> float | None:
    gains = [c.estimated_gain_pct for c in claims if c.category == category]
    return max(gains) if gains else None


def within(estimated: float | None, measured: float) -> bool:
    """The gain check's tolerance: ±30% of the measured gain, relative."""
    return estimated is not None and abs(estimated - measured) <= GAIN_TOLERANCE * abs(measured)


def score_workload(name: str, fixes: Sequence[MeasuredFix],
                   claims: Sequence[Claim]) -> WorkloadScore:
    """The three checks on one workload; ``claims`` in the diagnosis' rank order."""
    measured = measured_by_category(fixes)
    best = max(measured, key=lambda c: measured[c], default=None)
    if best is not None and measured[best] < TOP1_MIN_GAIN_PCT:
        best = None
    top1 = None if best is None else bool(claims) and claims[0].category == best
    checks = tuple(
        GainCheck(category, gain, _estimate(claims, category), within(_estimate(claims, category),
                                                                       gain))
        for category, gain in sorted(measured.items()) if gain > GAIN_CHECK_MIN_PCT)
    loud = [c for c in claims if c.estimated_gain_pct > FALSE_POSITIVE_CLAIM_PCT]
    known = {c for c in measured
             if all(f.gain_pct is not None for f in fixes if f.category == c)}
    false_pos = tuple(c for c in loud if c.category in known
                      and measured[c.category] <= FALSE_POSITIVE_TRUTH_PCT)
    unmeasured = tuple(c for c in loud if c.category not in known)
    return WorkloadScore(name, measured, tuple(claims), best, top1, checks, false_pos, unmeasured)


def score_suite(scores: Sequence[WorkloadScore]) -> SuiteScore:
    return SuiteScore(tuple(scores))
