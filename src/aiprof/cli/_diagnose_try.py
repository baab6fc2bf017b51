"""``aiprof diagnose [RUN] --try -- python train.py``: diagnose, then measure the fixes the
findings propose that can be applied from outside (``aiprof try``)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aiprof.errors import InputError


def add_try_arguments(parser: argparse.ArgumentParser) -> None:
    """``--try``, the measurement flags and the command (after ``--``)."""
    from aiprof.cli.try_ import add_trial_arguments

    parser.add_argument("--try", dest="try_fixes", action="store_true",
                        help="then measure the proposed fixes on the script given after --; "
                             "without TRACE_OR_RUN, capture it first with 'aiprof run'")
    parser.add_argument("--out", type=Path, default=Path("runs"),
                        help="with --try and no TRACE_OR_RUN: where the capture goes")
    add_trial_arguments(parser)
    parser.add_argument("try_command", nargs="*", metavar="-- COMMAND",
                        help="with --try: python train.py args")


def _split(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """argparse puts the first word after ``--`` into TRACE_OR_RUN when none was given."""
    target, words = args.target, list(args.try_command)
    if target is not None and (Path(target).name.startswith("python") or target == "-m"
                               or target.endswith(".py")):
        return None, [target, *words]
    return target, words


def _capture(words: list[str], out: Path) -> str:
    print(f"aiprof diagnose --try: capturing {' '.join(words)} with aiprof run", file=sys.stderr)
    done = subprocess.run([sys.executable, "-m", "aiprof.cli.main", "run", "--out", str(out),
                           "--", *words], check=False)
    if done.returncode != 0:
        raise InputError(f"the capture ('aiprof run -- {' '.join(words)}') ended with exit "
                         f"status {done.returncode}; fix the script first")
    return str(out / "latest")


def run_with_try(args: argparse.Namespace, options: Any) -> int:
    """Diagnose (capturing first when no record is given), then try the proposed fixes."""
    from aiprof.cli.try_ import command_of, exit_code, protocol_from, show
    from aiprof.diagnose import diagnose
    from aiprof.jsontext import dumps
    from aiprof.record.rundir import new_run_dir
    from aiprof.report.diagnose_terminal import render_diagnosis
    from aiprof.report.terminal import console
    from aiprof.trial.catalog import CODE_CHANGES, estimated_gains, fixes_for_categories
    from aiprof.trial.numerics import DEFAULT_RTOL
    from aiprof.trial.session import TryRequest, run_try

    target, words = _split(args)
    if not words:
        raise InputError("--try needs the script after --, e.g. 'aiprof diagnose --try -- "
                         "python train.py'")
    command, stem = command_of(words)
    protocol = protocol_from(args)
    if target is None:
        target = _capture(words, args.out)
    result = diagnose(target, options)
    pairs = [(f.category, f.estimated_gain_pct) for f in result.findings]
    fixes = fixes_for_categories([c for c, _ in pairs])
    if not args.json:
        render_diagnosis(console(), result)
    run_dir = Path(target).resolve()
    if not (run_dir.is_dir() and (run_dir / "meta.json").is_file()):
        run_dir = new_run_dir(args.out, f"{stem}-try", time.time())
    if not fixes:
        codes = [c for c, _ in pairs if c in CODE_CHANGES]
        print("aiprof diagnose --try: no finding has a fix that applies without a code change"
              + (f" ({', '.join(dict.fromkeys(codes))}: see the findings)" if codes else ""),
              file=sys.stderr)
        if args.json:
            print(dumps({"diagnosis": result.document(), "try": None}))
        return 0
    request = TryRequest(command=command, fixes=fixes, protocol=protocol, record_dir=run_dir,
                         estimates=estimated_gains(pairs), code_categories=tuple(
                             c for c, _ in pairs), budget_s=args.budget,
                         rtol=args.loss_tolerance or DEFAULT_RTOL, aa=args.aa)
    document = run_try(request).document()
    if args.json:
        print(dumps({"diagnosis": result.document(), "try": document}))
    else:
        show(document, False)
    print(f"try record {run_dir}", file=sys.stderr)
    return exit_code(document)
