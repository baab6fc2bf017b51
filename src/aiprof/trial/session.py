"""One ``aiprof try``: variants from the chosen fixes, the rounds, the result, the record."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from aiprof.errors import InputError
from aiprof.trial.forkserver import ForkServer, ForkServerError, preload_names
from aiprof.trial.launcher import launch
from aiprof.trial.numerics import DEFAULT_RTOL
from aiprof.trial.orchestrate import run_trial
from aiprof.trial.plan import AA, BASE, Protocol, VariantSpec
from aiprof.trial.record import TRY_DIR, write_try_record
from aiprof.trial.result import TrialResult, summarize
from aiprof.trial.runs import VariantRun


@dataclass(frozen=True, kw_only=True)
class TryRequest:
    """What to try on which command, and where the record goes."""

    command: tuple[str, ...]
    """``script.py args`` or ``-m module args`` (no interpreter)."""
    fixes: tuple[str, ...]
    protocol: Protocol
    record_dir: Path
    edited: tuple[tuple[str, str], ...] = ()
    """(label, script path) of hand-edited copies run with the same arguments."""
    estimates: dict[str, float] = field(default_factory=dict)
    code_categories: tuple[str, ...] = ()
    budget_s: float | None = None
    rtol: float = DEFAULT_RTOL
    aa: bool = False
    """Also run the unfixed script again in every round (an A/A test of the noise)."""


def variants(request: TryRequest) -> list[VariantSpec]:
    """The base, one variant per fix, one per edited copy (labels must differ)."""
    specs = [VariantSpec(BASE, "none", request.command)]
    specs += [VariantSpec(name, name, request.command) for name in request.fixes]
    if request.aa:
        specs.append(VariantSpec(AA, "none", request.command))
    args = request.command[2:] if request.command[:1] == ("-m",) else request.command[1:]
    for label, path in request.edited:
        if not Path(path).is_file():
            raise InputError(f"--edited {label}={path}: script {path} not found")
        specs.append(VariantSpec(f"{label}", "none", (path, *args), edited=True))
    labels = [spec.label for spec in specs]
    duplicate = next((label for label in labels if labels.count(label) > 1), None)
    if duplicate is not None:
        raise InputError(f"two variants are called {duplicate!r}: give --edited another label")
    return specs


def _progress(run: VariantRun) -> None:
    step = run.median_step_us
    what = f"{step / 1000:.3f} ms/step" if step is not None else run.status
    extra = f" ({run.reason})" if run.reason else ""
    print(f"aiprof try: round {run.round + 1} {run.label}: {what}{extra} [{run.wall_s:.1f} s]",
          file=sys.stderr, flush=True)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt()

    saved = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, saved)


@contextmanager
def _fork_server(request: TryRequest, specs: list[VariantSpec], work: Path,
                 quiet: bool) -> Iterator[tuple[ForkServer | None, dict[str, object]]]:
    """The fork server for this trial (``spawn`` "fork", one rank), or None: then every
    variant is a new interpreter. What it preloaded goes into the record."""
    protocol = request.protocol
    if protocol.spawn != "fork" or protocol.nproc != 1 or not hasattr(os, "fork"):
        yield None, {"mode": "exec"}
        return
    try:
        server = ForkServer(preload_names(spec.command for spec in specs), os.environ,
                            work / "forkserver.log")
    except (ForkServerError, OSError) as error:
        if not quiet:
            print(f"aiprof try: {error}; each variant runs as a new interpreter",
                  file=sys.stderr)
        yield None, {"mode": "exec", "fork_server_error": str(error)}
        return
    ready = server.ready
    spawn: dict[str, object] = {"mode": "fork", "preloaded": list(ready.preloaded),
                                "preload_failed": list(ready.failed),
                                "preload_s": ready.preload_s,
                                "exec_fixes": list(ready.exec_fixes)}
    if not quiet:
        print(f"aiprof try: fork server imported {', '.join(ready.preloaded)} in "
              f"{ready.preload_s:.1f} s; each variant is forked from it", file=sys.stderr)
    try:
        yield server, spawn
    finally:
        server.close()


def run_try(request: TryRequest, *, quiet: bool = False) -> TrialResult:
    """Run every round (fresh processes), write the try record and return the result."""
    specs = variants(request)
    work = request.record_dir / TRY_DIR
    work.mkdir(parents=True, exist_ok=True)
    with _sigterm_as_interrupt(), _fork_server(request, specs, work, quiet) as (server, spawn):

        def launch_one(spec: VariantSpec, round_index: int) -> VariantRun:
            return launch(spec, round_index, request.protocol, work, server=server)

        trial = run_trial(specs, request.protocol.rounds, launch_one, budget_s=request.budget_s,
                          progress=None if quiet else _progress)
    result = summarize(request.command, specs, trial, request.protocol,
                       estimates=request.estimates, code_categories=list(request.code_categories),
                       rtol=request.rtol, spawn=spawn)
    write_try_record(request.record_dir, result.document())
    return result
