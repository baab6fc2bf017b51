"""``aiprof kernels --ncu -- CMD``: per-kernel counters from Nsight Compute, with models."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

from aiprof.cli._command import Command
from aiprof.errors import InputError, MissingDependencyError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ncu", action="store_true",
                        help="run CMD under Nsight Compute (ncu --clock-control none)")
    parser.add_argument("--kernel-regex", default=None, help="profile kernels matching this regex")
    parser.add_argument("--launch-count", type=int, default=20,
                        help="profile at most N launches (default 20)")
    parser.add_argument("--launch-skip", type=int, default=0, help="skip the first N launches")
    parser.add_argument("--nvprof-metrics", default="",
                        help="also report these nvprof metrics (e.g. gld_efficiency,"
                             "achieved_occupancy,warp_execution_efficiency)")
    parser.add_argument("--csv-input", type=Path, default=None,
                        help="read an existing 'ncu --csv' output instead of running ncu")
    parser.add_argument("--save-csv", type=Path, default=None, help="keep ncu's CSV here")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the program to profile")


def ncu_command(ncu: str, metrics: list[str], args: argparse.Namespace, log: Path) -> list[str]:
    """The ncu command line aiprof runs."""
    command = [ncu, "--clock-control", "none", "--csv", "--page", "details",
               "--target-processes", "all", "--log-file", str(log),
               "--metrics", ",".join(metrics), "--launch-count", str(args.launch_count)]
    if args.launch_skip:
        command += ["--launch-skip", str(args.launch_skip)]
    if args.kernel_regex:
        command += ["--kernel-name", f"regex:{args.kernel_regex}"]
    return command + _program(args.cmd)


def _program(cmd: list[str]) -> list[str]:
    program = cmd[1:] if cmd and cmd[0] == "--" else cmd
    if not program:
        raise InputError("give the program to profile after --, e.g. aiprof kernels --ncu -- "
                         "python train.py")
    return program


def _run_ncu(metrics: list[str], args: argparse.Namespace) -> str:
    import shutil
    import subprocess
    import sys
    import tempfile

    ncu = shutil.which("ncu")
    if ncu is None:
        raise MissingDependencyError("Nsight Compute (ncu) is not on PATH: install the CUDA "
                                     "toolkit's Nsight Compute, or pass --csv-input FILE")
    if args.launch_count < 1:
        raise InputError("--launch-count must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.csv"
        done = subprocess.run(ncu_command(ncu, metrics, args, log), check=False,
                              capture_output=True, text=True)
        text = log.read_text(errors="replace") if log.exists() else ""
    if '"ID"' not in text:  # some ncu versions print the CSV to stdout despite --log-file
        text = done.stdout
    sys.stderr.write(done.stderr)
    if done.returncode != 0 and '"ID"' not in text:
        raise InputError(f"ncu exited with code {done.returncode} and wrote no report: "
                         f"{done.stderr.strip()[-300:] or 'no message'}")
    return text


def run(args: argparse.Namespace) -> int:
    from aiprof.gpu import ncu_metrics
    from aiprof.gpu.ncu_csv import parse_ncu_csv
    from aiprof.gpu.ncu_summary import summarize
    from aiprof.gpu.nvprof_values import nvprof_value
    from aiprof.jsontext import dumps

    wanted = ncu_metrics.translate([n.strip() for n in args.nvprof_metrics.split(",")
                                    if n.strip()])
    if args.csv_input is not None:
        try:
            text = args.csv_input.read_text(errors="replace")
        except OSError as error:
            raise InputError(f"cannot read {args.csv_input}: {error.strerror}") from error
    elif args.ncu:
        metrics = list(dict.fromkeys([*ncu_metrics.default_metrics(),
                                      *(n for w in wanted for n in w.ncu)]))
        text = _run_ncu(metrics, args)
        if args.save_csv:
            args.save_csv.write_text(text)
    else:
        raise InputError("use --ncu -- CMD to profile a program, or --csv-input FILE")
    launches = parse_ncu_csv(text)
    rows = [summarize(launch) for launch in launches]
    nvprof = [nvprof_value(launch, w) for launch in launches for w in wanted]
    if args.json:
        print(dumps({"kernels": [asdict(r) for r in rows],
                     "nvprof": [asdict(v) for v in nvprof]}))
    else:
        from rich.console import Console

        from aiprof.report.ncu_terminal import render_kernel_counters

        render_kernel_counters(Console(), rows, nvprof)
    return 0


COMMAND = Command(name="kernels", help="per-kernel hardware counters from Nsight Compute "
                  "(--ncu -- CMD) with aiprof's models beside them", add_arguments=add_arguments,
                  run=run, order=34)
