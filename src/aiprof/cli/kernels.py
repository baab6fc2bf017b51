"""``aiprof kernels --ncu -- CMD``: per-kernel counters from Nsight Compute, with models."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from aiprof.cli._command import Command
from aiprof.errors import InputError, MissingDependencyError

if TYPE_CHECKING:
    from rich.table import Table

    from aiprof.gpu.ncu_summary import KernelCounters
    from aiprof.gpu.nvprof_values import NvprofValue


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


def _num(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def _card(r: KernelCounters) -> Table:
    from rich.markup import escape
    from rich.table import Table

    card = Table(title=escape(f"[{r.launch_id}] {r.kernel_name}"), show_header=False,
                 title_justify="left")
    stall = r.top_stalls[0] if r.top_stalls else None
    rows = [
        ("duration", f"{_num(r.duration_us, '.2f')} µs"),
        ("SM / memory throughput", f"{_num(r.sm_throughput_pct)}% / "
         f"{_num(r.mem_throughput_pct)}% of peak -> {r.bottleneck}"),
        ("occupancy achieved / theoretical",
         f"{_num(r.achieved_occupancy_pct)}% / {_num(r.theoretical_occupancy_pct)}% "
         f"(limiter: {r.limiter or '-'})"),
        ("model: theoretical occupancy",
         f"{_num(r.model_occupancy_pct)}% (limiter: {r.model_limiter or '-'})"),
        ("global loads: sectors/request, efficiency",
         f"{_num(r.sectors_per_request, '.2f')}, {_num(r.gld_efficiency_pct)}%"),
        ("shared memory: bank conflicts / wavefronts",
         f"{_num(r.bank_conflicts, '.0f')} / {_num(r.shared_wavefronts, '.0f')}"),
        ("active threads per warp instruction", f"{_num(r.threads_per_instruction, '.2f')} of 32"),
        ("top stall", "-" if stall is None else
         f"{stall.reason} ({stall.cycles_per_issue:.1f} cycles/issue): {stall.meaning}"),
        ("fix", "-" if stall is None else stall.fix),
    ]
    for key, value in rows:
        card.add_row(key, escape(value))
    return card


def _render(rows: list[KernelCounters], nvprof: list[NvprofValue]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    for r in rows:
        console.print(_card(r))
    if nvprof:
        extra = Table(title="nvprof metrics via their Nsight Compute equivalents")
        for header in ("id", "nvprof", "value", "ncu", "note"):
            extra.add_column(header)
        for v in nvprof:
            extra.add_row(str(v.launch_id), v.nvprof, _num(v.value, ".2f"), escape(v.ncu),
                          v.note)
        console.print(extra)


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
        _render(rows, nvprof)
    return 0


COMMAND = Command(name="kernels", help="per-kernel hardware counters from Nsight Compute "
                  "(--ncu -- CMD) with aiprof's models beside them", add_arguments=add_arguments,
                  run=run, order=34)
