"""Start one variant process (or one torchrun job), wait for it, read its result.

A variant is forked from the fork server (``trial.forkserver``) when one is running and
serves its fix, else it is a new interpreter.

Each variant runs in its own session (``start_new_session``): the terminal's Ctrl-C reaches
only ``aiprof try``, which then ends the variant's whole process group itself (SIGINT, then
SIGKILL after ``KILL_GRACE_S``) and re-raises, so no child is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiprof.trial.forkserver import KILL_GRACE_S, VARIANT_MODULE, ForkServer
from aiprof.trial.plan import Protocol, VariantSpec
from aiprof.trial.runs import FAILED, TIMEOUT, VariantRun, from_rank_documents

TAIL_LINES = 15


def variant_args(spec: VariantSpec, protocol: Protocol, result_dir: Path) -> list[str]:
    """The variant module's arguments (after ``python -m aiprof.measure.fixes.variant``)."""
    args = ["--fix", spec.fix, "--warmup", str(protocol.warmup_steps),
            "--warmup-s", f"{protocol.warmup_s:g}", "--min-timed-s", f"{protocol.min_timed_s:g}",
            "--steps", str(protocol.steps),
            "--result", str(result_dir), "--watch", protocol.watch]
    if protocol.steps_from:
        args += ["--steps-from", protocol.steps_from]
    return [*args, "--", *spec.command]


def variant_argv(spec: VariantSpec, protocol: Protocol, result_dir: Path) -> list[str]:
    """The command line of one variant: python (or torchrun) running the variant module."""
    module = ["-m", VARIANT_MODULE, *variant_args(spec, protocol, result_dir)]
    if protocol.nproc > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc-per-node={protocol.nproc}", *module]
    return [sys.executable, *module]


def tail_lines(path: Path, count: int = TAIL_LINES) -> tuple[str, ...]:
    """The last ``count`` lines of a log file."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ()
    return tuple(lines[-count:])


def end_group(process: subprocess.Popen[bytes], first: int = signal.SIGINT) -> None:
    """Signal the variant's process group, then SIGKILL it if it is still there."""
    for signum, wait_s in ((first, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            # the leader is gone; its group may still hold workers
            os.killpg(process.pid, signal.SIGKILL)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _read_results(result_dir: Path) -> list[dict[str, Any]]:
    docs = []
    for path in sorted(result_dir.glob("rank*.json")):
        try:
            docs.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return docs


def _timed_out(spec: VariantSpec, round_index: int, protocol: Protocol, log_path: Path,
               start: float) -> VariantRun:
    return VariantRun(label=spec.label, round=round_index, status=TIMEOUT,
                      reason=f"no result after {protocol.timeout_s:g} s (--timeout)",
                      tail=tail_lines(log_path), wall_s=time.monotonic() - start)


def _result(spec: VariantSpec, round_index: int, result_dir: Path, log_path: Path,
            returncode: int, start: float) -> VariantRun:
    wall = time.monotonic() - start
    docs = _read_results(result_dir)
    if not docs:
        return VariantRun(label=spec.label, round=round_index, status=FAILED,
                          reason=f"exit status {returncode}, no result written",
                          tail=tail_lines(log_path), wall_s=wall)
    return from_rank_documents(spec.label, round_index, docs, tail=tail_lines(log_path),
                               wall_s=wall)


def launch(spec: VariantSpec, round_index: int, protocol: Protocol, work_dir: Path,
           environ: Mapping[str, str] | None = None,
           server: ForkServer | None = None) -> VariantRun:
    """Run one variant to its end (or its timeout) and return what it measured: forked from
    ``server`` when it is given and serves the fix, else a new interpreter."""
    stem = f"r{round_index}-{spec.label}"
    result_dir, log_path = work_dir / stem, work_dir / f"{stem}.log"
    result_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    if server is not None and protocol.nproc == 1 and server.serves(spec.fix):
        code = server.run(variant_args(spec, protocol, result_dir), log_path,
                          protocol.timeout_s)
        if code is None:
            return _timed_out(spec, round_index, protocol, log_path, start)
        return _result(spec, round_index, result_dir, log_path, code, start)
    env = dict(os.environ if environ is None else environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(variant_argv(spec, protocol, result_dir), stdout=log,
                                   stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            process.wait(timeout=protocol.timeout_s)
        except subprocess.TimeoutExpired:
            end_group(process, signal.SIGTERM)
            return _timed_out(spec, round_index, protocol, log_path, start)
        except BaseException:  # Ctrl-C (KeyboardInterrupt) or SIGTERM: end the group first
            end_group(process)
            raise
        end_group(process, signal.SIGKILL)  # workers the variant left in its group
    return _result(spec, round_index, result_dir, log_path, process.returncode, start)
