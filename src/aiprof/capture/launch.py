"""``aiprof run --nproc N``: start torchrun, whose N ranks each run ``aiprof run`` in-process.

All ranks write into one run directory, made here and passed down in ``AIPROF_RUN_DIR``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from aiprof.record.rundir import RANK_EXIT_PREFIX, RUN_DIR_ENV, read_rank_exits
from aiprof.record.runrecord import META_FILE, RunMeta, write_meta


def torchrun_argv(nproc: int, run_dir: Path, capture_flags: Sequence[str],
                  command: Sequence[str]) -> list[str]:
    """The torchrun command line: single node, ``nproc`` ranks, each under ``aiprof run``."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", "-m", "aiprof.cli.main", "run",
            "--run-dir", str(run_dir), *capture_flags, "--", *command]


EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_TERMINATED = 128 + signal.SIGTERM
EXIT_KILLED = 128 + signal.SIGKILL


def launch(nproc: int, run_dir: Path, capture_flags: Sequence[str], command: Sequence[str],
           *, name: str) -> int:
    """Run torchrun to completion; return the job's exit status (see ``job_status``).

    SIGTERM is passed on to torchrun; Ctrl-C reaches the ranks from the terminal, and the
    ranks' records are waited for either way.
    """
    env = {**os.environ, RUN_DIR_ENV: str(run_dir), "AIPROF_LAUNCHED": "1"}
    start_ns = time.time_ns()
    process = subprocess.Popen(torchrun_argv(nproc, run_dir, capture_flags, command), env=env)
    received: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        process.send_signal(signum)

    saved = signal.signal(signal.SIGTERM, forward)
    try:
        while True:
            try:
                status = process.wait()
                break
            except KeyboardInterrupt:  # the ranks got Ctrl-C too; wait for their records
                received.append(signal.SIGINT)
                continue
    finally:
        signal.signal(signal.SIGTERM, saved)
    codes = read_rank_exits(run_dir, nproc)
    for rank in codes:
        (run_dir / f"{RANK_EXIT_PREFIX}{rank}").unlink(missing_ok=True)
    result = job_status(status, codes, received)
    if not (run_dir / META_FILE).exists():  # rank 0 died before writing it
        write_meta(run_dir, RunMeta(
            name=name, command=tuple(command), start_unix_ns=start_ns,
            end_unix_ns=time.time_ns(), ended="unknown", exit_code=result, world_size=nproc,
            notes=("rank 0 wrote no meta.json; this one was written by the torchrun parent",)))
    return result


def job_status(torchrun_status: int, codes: dict[int, int | None], received: list[int]) -> int:
    """The exit status of a ``--nproc`` job, rather than torchrun's blanket 1.

    ``codes`` are in the order the ranks ended. 0 when torchrun succeeded; else 143 or 130
    when this process got SIGTERM or Ctrl-C; else the first failing rank's own status (one
    that is not 130/143, which torchrun's stopping of the other ranks gives); else 137 for
    a rank that left no status (killed with SIGKILL); else a rank's 130/143; else
    torchrun's status.
    """
    if torchrun_status == 0:
        return 0
    if signal.SIGTERM in received:
        return EXIT_TERMINATED
    if signal.SIGINT in received:
        return EXIT_INTERRUPTED
    stopped = (EXIT_INTERRUPTED, EXIT_TERMINATED)
    own = [c for c in codes.values() if c not in (None, 0, *stopped)]
    if own:
        return int(own[0])
    if any(c is None for c in codes.values()):
        return EXIT_KILLED
    signalled = [c for c in codes.values() if c in stopped]
    if signalled:
        return int(signalled[0])
    return torchrun_status if torchrun_status > 0 else 128 - torchrun_status
