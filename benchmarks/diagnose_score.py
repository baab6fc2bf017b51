"""Score the diagnosis against a counterfactual suite: every measured fix of every workload.

    python benchmarks/diagnose_score.py [FOLDER] [--labels PATTERN] [--plain] [--markdown] [--json]
                                        [--host-matched]

FOLDER holds ``labels*.json`` and the traces (or the ``traces-*.tar`` and ``plain-*.tar`` the suite
script wrote, unpacked here into a temporary folder); it defaults to the committed suite under
``tests/data/diagnose/counterfactual``. Each workload's ``aiprof.profile`` record (``--plain``:
its plain torch.profiler trace) goes through ``aiprof.diagnose.diagnose``; the findings'
categories and estimated gains are checked with ``aiprof.evaluation.score``: top-1, gain within
±30%, false positives, then the totals against issue 15's acceptance.

``--host-matched`` is a diagnostic, not the score: each trace's findings replayed on the host
speed at which its unchanged step lasts the median of the truths' base blocks
(``aiprof.diagnose.host_matched``), to tell the misses the host's speed explains from the
models'.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

from aiprof.diagnose import diagnose
from aiprof.diagnose.context import DiagnoseOptions
from aiprof.diagnose.engine import diagnose_rank, diagnose_trace
from aiprof.diagnose.host_matched import at_host, host_factor
from aiprof.errors import AiprofError
from aiprof.evaluation import (
    Claim,
    LabelledWorkload,
    SuiteScore,
    WorkloadScore,
    load_suite,
    score_suite,
    score_workload,
)
from aiprof.evaluation.labels import LABELS, base_rounds_ms, merged
from aiprof.evaluation.score import (
    ACCEPT_FALSE_POSITIVES,
    ACCEPT_GAIN_PCT,
    ACCEPT_TOP1_PCT,
    FALSE_POSITIVE_CLAIM_PCT,
)
from aiprof.record.targets import load_traces

DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "data" / "diagnose" / "counterfactual"


def claims_of(workload: LabelledWorkload, plain: bool) -> tuple[list[Claim], str]:
    """The diagnosis' findings as claims, in rank order, and an error line if it failed."""
    target = workload.plain_trace if plain and workload.plain_trace else workload.trace
    try:
        result = diagnose(target)
    except AiprofError as error:
        return [], f"{type(error).__name__}: {error}"
    return [Claim(f.category, f.estimated_gain_pct) for f in result.findings], ""


def host_matched_claims(workload: LabelledWorkload, plain: bool,
                        bases_ms: list[float]) -> tuple[list[Claim], str]:
    """The findings replayed at the truths' host speed (``host_matched``), in rank order; the
    trace's own claims where the host's speed does not move its step."""
    target = workload.plain_trace if plain and workload.plain_trace else workload.trace
    try:
        trace = next(iter(load_traces(target)))
        options = DiagnoseOptions()
        found, ctx = diagnose_trace(trace, options)
        kept = diagnose_rank(trace, options, (found, ctx)).findings
    except AiprofError as error:
        return [], f"{type(error).__name__}: {error}"
    factor = host_factor(ctx, 1000.0 * statistics.median(bases_ms)) if bases_ms else None
    ranked = at_host(ctx, kept, factor if factor is not None else 1.0)
    return [Claim(f.category, f.estimated_gain_pct) for f in ranked], ""


def score(folder: Path, plain: bool, pattern: str = LABELS,
          host_matched: bool = False) -> tuple[SuiteScore, dict[str, str]]:
    errors: dict[str, str] = {}
    scores = []
    bases = base_rounds_ms(folder, pattern) if host_matched else {}
    for workload in load_suite(folder, pattern):
        claims, error = (host_matched_claims(workload, plain, bases.get(workload.name, []))
                         if host_matched else claims_of(workload, plain))
        if error:
            errors[workload.name] = error
        scores.append(score_workload(workload.name, workload.fixes, claims))
    return score_suite(scores), errors


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def row(w: WorkloadScore) -> list[str]:
    measured = ", ".join(f"{c} {g:.1f}" for c, g in sorted(w.measured_pct.items(),
                                                            key=lambda kv: -kv[1]) if g != 0.0)
    found = ", ".join(f"{c.category} {c.estimated_gain_pct:.1f}" for c in w.claims) or "none"
    top = "n/a" if w.top1_ok is None else ("ok" if w.top1_ok else f"miss ({w.best_category})")
    gains = "; ".join(f"{c.category} {_pct(c.estimated_gain_pct)}/{c.measured_gain_pct:.1f} "
                      f"{'ok' if c.ok else 'miss'}" for c in w.gain_checks) or "n/a"
    fps = ", ".join(f"{c.category} {c.estimated_gain_pct:.1f}" for c in w.false_positives)
    return [w.workload, measured or "none measured", found, top, gains, fps or "0"]


HEADER = ["workload", "measured fixes (category %)", "findings (category %)", "top-1",
          "gain (estimated/measured)", "false positives"]


def totals(s: SuiteScore) -> str:
    return (f"top-1 {s.top1_hits}/{s.top1_cases} ({s.top1_pct:.0f}%, needs >= "
            f"{ACCEPT_TOP1_PCT:.0f}%); gain within ±30% {s.gain_hits}/{s.gain_cases} "
            f"({s.gain_pct:.0f}%, needs >= {ACCEPT_GAIN_PCT:.0f}%); false positives "
            f"{s.false_positives} (needs {ACCEPT_FALSE_POSITIVES}); "
            f"{'accepted' if s.accepted else 'not accepted'}")


def render(s: SuiteScore, errors: dict[str, str], markdown: bool) -> str:
    rows = [row(w) for w in s.workloads]
    lines = []
    if markdown:
        lines.append("| " + " | ".join(HEADER) + " |")
        lines.append("|" + " --- |" * len(HEADER))
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        for r in rows:
            lines.append(r[0])
            lines += [f"    {h}: {v}" for h, v in zip(HEADER[1:], r[1:], strict=True)]
    for name, error in errors.items():
        lines.append(f"{name}: diagnose failed: {error}")
    unmeasured = [(w.workload, c) for w in s.workloads for c in w.unmeasured_claims]
    if unmeasured:
        lines.append(f"findings > {FALSE_POSITIVE_CLAIM_PCT:.0f}% with no measured fix "
                     "(in no check): " + ", ".join(f"{n}: {c.category} "
                                                    f"{c.estimated_gain_pct:.1f}"
                                                    for n, c in unmeasured))
    lines.append(totals(s))
    return "\n".join(lines)


def as_json(s: SuiteScore, errors: dict[str, str]) -> str:
    return json.dumps({
        "top1": [s.top1_hits, s.top1_cases], "gain": [s.gain_hits, s.gain_cases],
        "false_positives": s.false_positives, "accepted": s.accepted, "errors": errors,
        "workloads": [{"workload": w.workload, "measured_pct": w.measured_pct,
                       "findings": [[c.category, c.estimated_gain_pct] for c in w.claims],
                       "best_category": w.best_category, "top1_ok": w.top1_ok,
                       "gain": [[c.category, c.estimated_gain_pct, c.measured_gain_pct, c.ok]
                                for c in w.gain_checks],
                       "false_positives": [[c.category, c.estimated_gain_pct]
                                           for c in w.false_positives]}
                      for w in s.workloads]}, indent=1)


def unpacked(folder: Path, into: Path) -> Path:
    """The folder itself, or a copy with its ``traces-*.tar`` and ``plain-*.tar`` unpacked
    beside its labels."""
    tars = sorted(folder.glob("traces-*.tar*")) + sorted(folder.glob("plain-*.tar*"))
    if not tars:
        return folder
    for path in sorted(folder.glob("labels*.json")):
        (into / path.name).write_bytes(path.read_bytes())
    for path in tars:
        with tarfile.open(path) as tar:
            tar.extractall(into, filter="data")
    return into


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--plain", action="store_true",
                        help="diagnose the plain torch.profiler traces, not the aiprof records")
    parser.add_argument("--labels", default=LABELS, metavar="PATTERN",
                        help="the labels files to read (default: every one, pooled); "
                             "labels-part*.json: the first session alone")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--host-matched", action="store_true",
                        help="a diagnostic: each trace's findings replayed at the host speed "
                             "of the truths' base blocks")
    parser.add_argument("--merge-into", type=Path, metavar="FILE",
                        help="also write the parts' labels as one labels file")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"diagnose_score: {args.folder} is not a folder; give the suite's output folder",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        try:
            result, errors = score(unpacked(args.folder, Path(tmp)), args.plain, args.labels,
                                   args.host_matched)
            if args.merge_into:
                args.merge_into.write_text(json.dumps(merged(args.folder), indent=1) + "\n")
        except AiprofError as error:
            print(f"diagnose_score: {error}", file=sys.stderr)
            return 2
    print(as_json(result, errors) if args.json else render(result, errors, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
