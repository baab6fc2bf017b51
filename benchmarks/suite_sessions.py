"""Two recordings of the counterfactual suite, each scored on its own session's truths, and
how far the two sessions' truths and estimates agree.

    python benchmarks/suite_sessions.py [FIRST] [SECOND] [--first-labels PATTERN] [--markdown]

FIRST defaults to the committed suite (``tests/data/diagnose/counterfactual``) read through
``labels-part*.json``: the session that recorded its traces, alone. SECOND defaults to its
second recording (``tests/data/diagnose/counterfactual_1202``): the same workloads and fixes,
traces and truths of one later session. It prints each session's score against its own
truths; the truths' agreement (each session's measured gains taken as the estimates of the
other's gain checks: the ceiling a perfect model of one session reaches on the other); and the
diagnosis' estimates on the two recordings of each workload side by side, for every category
either session measured above 5%.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagnose_score import claims_of, totals

from aiprof.errors import AiprofError
from aiprof.evaluation import Claim, LabelledWorkload, load_suite, score_suite, score_workload
from aiprof.evaluation.labels import LABELS
from aiprof.evaluation.reproducibility import TruthAgreement, truth_agreement
from aiprof.evaluation.score import GAIN_CHECK_MIN_PCT, within

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "diagnose"


def diagnosed(suite: list[LabelledWorkload]) -> dict[str, list[Claim]]:
    """Each workload's findings as claims, in rank order."""
    return {w.name: claims_of(w, plain=False)[0] for w in suite}


def estimates(claims: dict[str, list[Claim]]) -> dict[str, dict[str, float]]:
    """Each workload's largest estimate per category, as the gain check reads them."""
    out: dict[str, dict[str, float]] = {}
    for name, found in claims.items():
        best = out.setdefault(name, {})
        for claim in found:
            best[claim.category] = max(best.get(claim.category, claim.estimated_gain_pct),
                                       claim.estimated_gain_pct)
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def side_by_side(agreement: TruthAgreement, first: dict[str, dict[str, float]],
                 second: dict[str, dict[str, float]]) -> tuple[list[list[str]], int, int]:
    """Rows (workload, category, truths, estimates) of the pairs either session checks, and
    how many of them have estimates within ±30% of each other (the second's as reference)."""
    rows, steady, cases = [], 0, 0
    for p in agreement.pairs:
        if max(p.first_pct, p.second_pct) <= GAIN_CHECK_MIN_PCT:
            continue
        one, two = first.get(p.workload, {}).get(p.category), second.get(p.workload, {}).get(
            p.category)
        if one is not None or two is not None:
            cases += 1
            steady += two is not None and within(one, two)
        rows.append([p.workload, p.category, f"{p.first_pct:.1f} / {p.second_pct:.1f}",
                     "ok" if p.first_predicts_second else "apart",
                     f"{_pct(one)} / {_pct(two)}"])
    return rows, steady, cases


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", nargs="?", type=Path, default=DATA / "counterfactual")
    parser.add_argument("second", nargs="?", type=Path, default=DATA / "counterfactual_1202")
    parser.add_argument("--first-labels", default="labels-part*.json", metavar="PATTERN")
    parser.add_argument("--second-labels", default=LABELS, metavar="PATTERN")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    for folder in (args.first, args.second):
        if not folder.is_dir():
            print(f"suite_sessions: {folder} is not a folder; give two suite folders",
                  file=sys.stderr)
            return 2
    try:
        first = load_suite(args.first, args.first_labels)
        second = load_suite(args.second, args.second_labels)
    except AiprofError as error:
        print(f"suite_sessions: {error}", file=sys.stderr)
        return 2
    first_claims, second_claims = diagnosed(first), diagnosed(second)
    for title, suite, claims in (("first", first, first_claims),
                                 ("second", second, second_claims)):
        scores = [score_workload(w.name, w.fixes, claims[w.name]) for w in suite]
        print(f"{title} session ({len(suite)} workloads), its own truths: "
              f"{totals(score_suite(scores))}")
    agreement = truth_agreement(first, second)
    print(f"truths: the first session's measured gains pass {agreement.second_hits} of the "
          f"second's {agreement.second_checks} gain checks; the second's pass "
          f"{agreement.first_hits} of the first's {agreement.first_checks}")
    rows, steady, cases = side_by_side(agreement, estimates(first_claims),
                                       estimates(second_claims))
    print(f"estimates: {steady} of {cases} categories measured above "
          f"{GAIN_CHECK_MIN_PCT:.0f}% in either session and estimated in either recording "
          "have the two recordings' estimates within ±30% of each other")
    header = ["workload", "category", "measured (first / second)", "truths agree",
              "estimated (first / second)"]
    if args.markdown:
        print("| " + " | ".join(header) + " |\n|" + " --- |" * len(header))
        print("\n".join("| " + " | ".join(r) + " |" for r in rows))
    else:
        print("\n".join("  ".join(r) for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
