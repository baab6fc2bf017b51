"""Python API: ``with aiprof.profile(out="runs/x") as p: ...; p.step()``, and ``aiprof.step()``."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from aiprof.capture.options import CaptureOptions
from aiprof.capture.session import CaptureSession, Outcome, import_torch
from aiprof.record.rundir import ensure_writable, update_latest


class StepReceiver(Protocol):
    """What ``aiprof.step()`` reports to: a capture session, or an ``aiprof try`` variant."""

    def step(self, source: str = "user", optimizer: object | None = None) -> None: ...


_active: list[StepReceiver] = []


def step() -> None:
    """Mark the end of a training or inference step.

    Counts in the innermost active ``aiprof.profile`` or ``aiprof run`` capture; does nothing
    when none is active, so scripts keep this call when they run without aiprof.
    """
    if _active:
        _active[-1].step("user")


def activate(session: StepReceiver) -> None:
    """Make ``session`` the one ``aiprof.step()`` reports to (``aiprof run``, ``aiprof try``)."""
    _active.append(session)


def deactivate(session: StepReceiver) -> None:
    """Undo ``activate``."""
    if session in _active:
        _active.remove(session)


class profile:  # noqa: N801  (reads like torch.profiler.profile, which it wraps)
    """Capture the enclosed code into a run record directory.

    ``out`` is the record's directory (created; nothing else is written beside it). Without
    ``out`` the record goes to ``runs/<script>-<timestamp>`` and ``runs/latest`` points to it.
    Keyword arguments are ``CaptureOptions`` fields (``skip_steps``, ``warmup_steps``,
    ``active_steps``, ``record_shapes``, ``with_stack``, ``sample_rate_hz``...). Steps come
    from ``p.step()``, ``aiprof.step()`` or, when neither is called, the optimizer hook.
    """

    def __init__(self, out: str | os.PathLike[str] | None = None, *, name: str | None = None,
                 nvml_module: Any | None = None, **options: Any) -> None:
        self.options = CaptureOptions(**options)
        stem = name or Path(sys.argv[0] or "python").stem or "python"
        self._link_latest = out is None
        self.run_dir = (Path(out) if out is not None else Path("runs") / (
            f"{stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")).absolute()
        self._name = stem
        self._nvml_module = nvml_module
        self.session: CaptureSession | None = None

    def __enter__(self) -> profile:
        import_torch()
        ensure_writable(self.run_dir)
        self.session = CaptureSession(self.run_dir, self.options, name=self._name,
                                      command=tuple(sys.argv), nvml_module=self._nvml_module)
        self.session.start()
        if self._link_latest:
            update_latest(self.run_dir)
        activate(self.session)
        return self

    def step(self) -> None:
        """Mark the end of a step."""
        if self.session is not None:
            self.session.step("user")

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self.session is not None
        deactivate(self.session)
        if error is None:
            outcome = Outcome()
        elif isinstance(error, KeyboardInterrupt):
            outcome = Outcome(ended="interrupted", exit_code=130, error="KeyboardInterrupt")
        else:
            outcome = Outcome(ended="exception", exit_code=1,
                              error=f"{type(error).__name__}: {error}")
        self.session.stop(outcome)
