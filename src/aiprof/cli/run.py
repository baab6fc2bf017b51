"""``aiprof run [options] -- python script.py args``: capture a workload into a run record."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from aiprof.cli._command import Command

LAUNCHED_ENV = "AIPROF_LAUNCHED"
"""Set by ``aiprof run --nproc`` in its ranks' environment."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_argument_group("where the record goes")
    where.add_argument("--out", default="runs", help="directory of run records (default: runs)")
    where.add_argument("--name", help="run name (default: the script's name)")
    where.add_argument("--run-dir", help="write into exactly this directory")
    steps = parser.add_argument_group("what to record")
    steps.add_argument("--skip", type=int, default=None, metavar="N",
                       help="steps not profiled at the start (default: 5)")
    steps.add_argument("--warmup", type=int, default=None, metavar="W",
                       help="profiled steps discarded before recording (default: 1)")
    steps.add_argument("--active", type=int, default=None, metavar="A",
                       help="steps recorded (default: 3)")
    steps.add_argument("--steps-from", metavar="NAME",
                       help="a step ends when the function or record_function NAME ends")
    steps.add_argument("--duration", type=float, metavar="S",
                       help="record S seconds instead of steps (scripts without an optimizer)")
    steps.add_argument("--delay", type=float, default=0.0, metavar="S",
                       help="with --duration: start recording S seconds after the start")
    steps.add_argument("--with-stack", action="store_true", help="record Python stacks")
    steps.add_argument("--no-shapes", action="store_true", help="do not record input shapes")
    steps.add_argument("--no-memory", action="store_true", help="do not record allocations")
    steps.add_argument("--no-gpu-samples", action="store_true", help="do not sample NVML")
    steps.add_argument("--sample-rate", type=float, default=20.0, metavar="HZ",
                       help="NVML samples per second, 1-50 (default: 20)")
    parser.add_argument("--nproc", type=int, metavar="N",
                        help="start torchrun with N local ranks, each captured")
    parser.add_argument("--json", action="store_true", help="print the record's meta as JSON")
    parser.add_argument("script", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                        help="python script.py args (or python -m module args)")


def capture_options(args: argparse.Namespace) -> object:
    """``CaptureOptions`` from the parsed flags."""
    from aiprof.capture.options import CaptureOptions

    given = {"skip_steps": args.skip, "warmup_steps": args.warmup, "active_steps": args.active}
    return CaptureOptions(
        **{key: value for key, value in given.items() if value is not None},
        duration_s=args.duration, delay_s=args.delay, steps_from=args.steps_from,
        record_shapes=not args.no_shapes, profile_memory=not args.no_memory,
        with_stack=args.with_stack, sample_gpus=not args.no_gpu_samples,
        sample_rate_hz=args.sample_rate)


def forwarded_flags(args: argparse.Namespace) -> list[str]:
    """The capture flags each torchrun rank gets again."""
    flags: list[str] = []
    for option, value in (("--skip", args.skip), ("--warmup", args.warmup),
                          ("--active", args.active), ("--steps-from", args.steps_from),
                          ("--duration", args.duration), ("--name", args.name)):
        if value is not None:
            flags += [option, str(value)]
    if args.delay:
        flags += ["--delay", str(args.delay)]
    flags += ["--sample-rate", str(args.sample_rate)]
    for option in ("with_stack", "no_shapes", "no_memory", "no_gpu_samples"):
        if getattr(args, option):
            flags.append("--" + option.replace("_", "-"))
    return flags


def run(args: argparse.Namespace) -> int:
    from aiprof.capture.api import activate, deactivate
    from aiprof.capture.runner import parse_target, run_target
    from aiprof.capture.session import CaptureSession, RankInfo, import_torch
    from aiprof.errors import InputError
    from aiprof.optional import require_torch
    from aiprof.record import rundir

    words = args.script[1:] if args.script[:1] == ["--"] else args.script
    target = parse_target(words)
    if args.nproc is None:
        import_torch()
    else:  # the ranks import torch; this process only starts torchrun
        require_torch("capture")
    options = capture_options(args)
    name = args.name or target.stem
    command = ("python", *(("-m",) if target.kind == "module" else ()), *target.argv)
    out = Path(args.out).absolute()  # the script may chdir: every path is fixed now
    run_dir_given = Path(args.run_dir).absolute() if args.run_dir else None
    if args.nproc is not None:
        if args.nproc < 1:
            raise InputError(f"--nproc must be >= 1, got {args.nproc}")
        from aiprof.capture.launch import launch

        run_dir = run_dir_given or rundir.new_run_dir(out, name, time.time())
        rundir.update_latest(run_dir)
        status = launch(args.nproc, run_dir, forwarded_flags(args), words, name=name)
        _report(run_dir, args.json)
        return status
    environ = dict(os.environ)
    if run_dir_given is not None:
        environ[rundir.RUN_DIR_ENV] = str(run_dir_given)
    run_dir = rundir.shared_run_dir(out, name, environ, time.time())
    rank = RankInfo.from_env(environ).rank
    if rank == 0:
        rundir.update_latest(run_dir)  # at the start: a killed run is still the latest
    session = CaptureSession(run_dir, options, name=name, command=command,  # type: ignore[arg-type]
                             environ=environ)
    activate(session)
    try:
        outcome = run_target(target, session)
    finally:
        deactivate(session)
    if environ.get(LAUNCHED_ENV):
        rundir.write_rank_exit(run_dir, rank, outcome.exit_code)
    if rank == 0:
        rundir.release_claims(out, environ)
        if not environ.get(LAUNCHED_ENV):  # under --nproc the parent reports
            _report(run_dir, args.json)
    return outcome.exit_code


def _report(run_dir: Path, as_json: bool) -> None:
    from aiprof.record.runrecord import read_meta

    meta = read_meta(run_dir)
    if as_json:
        from aiprof.jsontext import dumps

        print(dumps({"run_dir": str(run_dir), "meta": meta}))
        return
    from aiprof.report.run_summary import render_run_summary

    render_run_summary(run_dir, meta, sys.stderr)


COMMAND = Command(
    name="run",
    help="capture a PyTorch script (trace, GPU samples, environment) into a run record",
    add_arguments=add_arguments,
    run=run,
    order=10,
)
