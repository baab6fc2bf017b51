"""``aiprof try [--fix NAME,... | --auto] -- python train.py args``: measure fixes on the
unmodified script, each variant in a fresh process, interleaved with the unfixed run."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from aiprof.cli._command import Command
from aiprof.errors import InputError

EXIT_INTERRUPTED = 130


def add_trial_arguments(parser: argparse.ArgumentParser) -> None:
    """The measurement flags (shared with ``aiprof diagnose --try``)."""
    group = parser.add_argument_group("measurement")
    group.add_argument("--steps", type=int, default=20, metavar="N",
                       help="timed steps per process (default 20)")
    group.add_argument("--warmup", type=int, default=5, metavar="W",
                       help="steps before timing starts, >= 3 (default 5)")
    group.add_argument("--warmup-s", type=float, default=0.5, metavar="S",
                       help="on CUDA the warm-up also lasts at least S seconds, so the GPU's "
                            "clocks have risen from idle (default 0.5)")
    group.add_argument("--statistic", choices=("median", "floor"), default="median",
                       help="a process's step time: the median of its timed steps (default), "
                            "or the floor: the fastest mean over 50 ms blocks, for a host whose "
                            "speed varies from outside (see docs/try.md)")
    group.add_argument("--min-timed-s", type=float, default=0.0, metavar="T",
                       help="the timed steps also last at least T seconds, so a short step "
                            "is timed over a longer window (one rank; default 0: --steps only)")
    group.add_argument("--spawn", choices=("fork", "exec"), default="fork",
                       help="fork: variants forked from a process that imported torch and "
                            "the script's libraries once (default); exec: each variant a new "
                            "interpreter (--nproc > 1 always execs)")
    group.add_argument("--rounds", type=int, default=5, metavar="R",
                       help="interleaved rounds: base, fixes, base, fixes ... (default 5)")
    group.add_argument("--aa", action="store_true",
                       help="also run the unfixed script again in every round (an A/A test): "
                            "its 'gain' is the noise between fresh processes that a fix must "
                            "exceed")
    group.add_argument("--nproc", type=int, default=1, metavar="N",
                       help="run each variant through torchrun with N local ranks")
    group.add_argument("--steps-from", metavar="NAME",
                       help="a step ends when the function or record_function NAME ends")
    group.add_argument("--watch", default="loss", metavar="NAME",
                       help="the script's scalar compared by the numerics guard (default: "
                            "the optimizer closure's value, else a variable called loss)")
    group.add_argument("--loss-tolerance", type=float, default=None, metavar="REL",
                       help="relative change of the watched loss that is flagged (default 0.01)")
    group.add_argument("--timeout", type=float, default=600.0, metavar="S",
                       help="seconds one variant process may run (default 600)")
    group.add_argument("--budget", type=float, default=None, metavar="S",
                       help="start no round that would end after S seconds")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_argument_group("which fixes")
    which.add_argument("--fix", metavar="NAME[,NAME...]",
                       help="tf32, bf16, cudnn_benchmark, channels_last, dataloader, "
                            "fused_optimizer, no_empty_cache, expandable_segments, compile")
    which.add_argument("--auto", action="store_true", help="try every fix")
    which.add_argument("--edited", action="append", default=[], metavar="LABEL=SCRIPT",
                       help="also time a hand-edited copy of the script (same arguments)")
    add_trial_arguments(parser)
    parser.add_argument("--run-dir", type=Path, metavar="RUN",
                        help="write the try record into this run record (its diagnosis gives "
                             "the estimates; 'aiprof report RUN' shows it)")
    parser.add_argument("--out", type=Path, default=Path("runs"),
                        help="without --run-dir: where a new try record goes (default runs)")
    parser.add_argument("--json", action="store_true", help="print the aiprof.try/1 JSON")
    parser.add_argument("script", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                        help="python script.py args (or python -m module args)")


def protocol_from(args: argparse.Namespace) -> Any:
    from aiprof.trial.plan import Protocol

    return Protocol(rounds=args.rounds, steps=args.steps, warmup_steps=args.warmup,
                    warmup_s=args.warmup_s, min_timed_s=args.min_timed_s,
                    statistic=args.statistic, spawn=args.spawn,
                    nproc=args.nproc,
                    timeout_s=args.timeout, steps_from=args.steps_from, watch=args.watch)


def command_of(words: list[str]) -> tuple[tuple[str, ...], str]:
    """The variant command (``script.py args`` or ``-m module args``) and a run name."""
    from aiprof.capture.runner import parse_target

    words = words[1:] if words[:1] == ["--"] else words
    if not words:
        raise InputError("nothing to run: give a script, e.g. 'aiprof try --auto -- python "
                         "train.py'")
    target = parse_target(words)
    prefix = ("-m",) if target.kind == "module" else ()
    return (*prefix, *target.argv), target.stem


def chosen_fixes(args: argparse.Namespace) -> tuple[str, ...]:
    from aiprof.trial.catalog import FIXES, parse_fix_list

    if args.fix and args.auto:
        raise InputError("give --fix NAME[,NAME...] or --auto, not both")
    if args.auto:
        return tuple(fix.name for fix in FIXES)
    if args.fix is not None:
        return parse_fix_list(args.fix)
    if not args.edited and not args.aa:
        raise InputError("choose what to try: --fix NAME[,NAME...] or --auto "
                         "(names: 'aiprof try --help')")
    return ()


def estimates_from(run_dir: Path) -> tuple[dict[str, float], list[str], str]:
    """The diagnosis of a run record: estimates per fix, code-change categories, a note."""
    from aiprof.errors import AiprofError
    from aiprof.trial.catalog import estimated_gains

    if not any(run_dir.glob("rank*.trace.json*")):
        return {}, [], f"no estimates: {run_dir} has no traces to diagnose"
    from aiprof.diagnose import diagnose

    try:
        diagnosis = diagnose(str(run_dir))
    except AiprofError as error:
        return {}, [], f"no estimates: the diagnosis failed ({error})"
    pairs = [(f.category, f.estimated_gain_pct) for f in diagnosis.findings]
    return estimated_gains(pairs), [c for c, _ in pairs], ""


def record_dir_for(args: argparse.Namespace, stem: str) -> Path:
    from aiprof.record.rundir import new_run_dir

    if args.run_dir is not None:
        if not args.run_dir.is_dir():
            raise InputError(f"--run-dir {args.run_dir} is not a directory")
        return Path(args.run_dir)
    return new_run_dir(args.out, f"{stem}-try", time.time())


def show(document: dict[str, Any], as_json: bool) -> None:
    """Print the try document as JSON or as the table."""
    if as_json:
        from aiprof.jsontext import dumps

        print(dumps(document))
        return
    from aiprof.report.terminal import console
    from aiprof.report.try_terminal import render_try

    render_try(console(), document)


def exit_code(document: dict[str, Any]) -> int:
    if document["interrupted"]:
        return EXIT_INTERRUPTED
    return 1 if document["base"]["median_step_us"] is None else 0


def run(args: argparse.Namespace) -> int:
    from aiprof.trial.numerics import DEFAULT_RTOL
    from aiprof.trial.plan import parse_edited
    from aiprof.trial.session import TryRequest, run_try

    fixes = chosen_fixes(args)
    edited = tuple(parse_edited(args.edited))
    protocol = protocol_from(args)
    command, stem = command_of(args.script)
    record_dir = record_dir_for(args, stem)
    estimates, categories, note = (estimates_from(record_dir) if args.run_dir
                                   else ({}, [], ""))
    if note:
        print(f"aiprof try: {note}", file=sys.stderr)
    request = TryRequest(command=command, fixes=fixes, protocol=protocol,
                         record_dir=record_dir, edited=edited, estimates=estimates,
                         code_categories=tuple(categories), budget_s=args.budget,
                         rtol=args.loss_tolerance or DEFAULT_RTOL, aa=args.aa)
    document = run_try(request).document()
    show(document, args.json)
    print(f"try record {record_dir}", file=sys.stderr)
    return exit_code(document)


COMMAND = Command(
    name="try",
    help="measure fixes (tf32, bf16, compile, dataloader...) on the unmodified script",
    add_arguments=add_arguments,
    run=run,
    order=11,
)
