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

from aiprof.record.rundir import RUN_DIR_ENV
from aiprof.record.runrecord import META_FILE, RunMeta, write_meta


def torchrun_argv(nproc: int, run_dir: Path, capture_flags: Sequence[str],
                  command: Sequence[str]) -> list[str]:
    """The torchrun command line: single node, ``nproc`` ranks, each under ``aiprof run``."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", "-m", "aiprof.cli.main", "run",
            "--run-dir", str(run_dir), *capture_flags, "--", *command]


def launch(nproc: int, run_dir: Path, capture_flags: Sequence[str], command: Sequence[str],
           *, name: str) -> int:
    """Run torchrun to completion; return its exit status (SIGINT/SIGTERM are passed on)."""
    env = {**os.environ, RUN_DIR_ENV: str(run_dir), "AIPROF_LAUNCHED": "1"}
    start_ns = time.time_ns()
    process = subprocess.Popen(torchrun_argv(nproc, run_dir, capture_flags, command), env=env)

    def forward(signum: int, frame: FrameType | None) -> None:
        process.send_signal(signum)

    saved = signal.signal(signal.SIGTERM, forward)
    try:
        while True:
            try:
                status = process.wait()
                break
            except KeyboardInterrupt:  # the ranks got Ctrl-C too; wait for their records
                continue
    finally:
        signal.signal(signal.SIGTERM, saved)
    if not (run_dir / META_FILE).exists():  # rank 0 died before writing it
        write_meta(run_dir, RunMeta(
            name=name, command=tuple(command), start_unix_ns=start_ns,
            end_unix_ns=time.time_ns(), ended="unknown", exit_code=status, world_size=nproc,
            notes=("rank 0 wrote no meta.json; this one was written by the torchrun parent",)))
    return status
