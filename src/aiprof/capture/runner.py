"""Run the user's script in this process, as ``python script.py`` would, under a session.

The script sees its own ``sys.argv`` and ``__name__ == "__main__"``. However it ends
(normally, ``sys.exit``, an exception, Ctrl-C, SIGTERM) the session is stopped, so the run
record is written, and the script's exit status is returned.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from aiprof.capture.session import CaptureSession, Outcome
from aiprof.errors import InputError

EXIT_INTERRUPTED = 128 + signal.SIGINT  # shell convention: 128 + signal number
EXIT_TERMINATED = 128 + signal.SIGTERM


@dataclass(frozen=True)
class Target:
    """What to run: a script path or a module name, with the arguments it gets."""

    kind: str
    """"path" or "module"."""
    name: str
    argv: tuple[str, ...]
    """The script's ``sys.argv``: script path (or module name) first."""

    @property
    def stem(self) -> str:
        """A run name: the script's file name without ``.py``, or the module's last part."""
        return Path(self.name).stem if self.kind == "path" else self.name.rsplit(".", 1)[-1]


def _is_python(word: str) -> bool:
    return Path(word).name.startswith("python")


LAUNCHER_SCRIPTS = frozenset({"torchrun"})
LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})
"""Launchers start the ranks in other processes: profiling the launcher would record none."""


def _launcher_refusal(launcher: str) -> str:
    return (f"aiprof run profiles a Python script, not the launcher {launcher!r} (its ranks "
            "are other processes): use 'aiprof run --nproc N -- python train.py ...', or put "
            "aiprof inside your launcher: 'torchrun --nproc-per-node N -m aiprof.cli.main run "
            "-- train.py ...'")


def parse_target(command: Sequence[str]) -> Target:
    """Read ``[python] script.py args`` or ``[python] -m module args``; check the script exists."""
    words = list(command)
    if words and words[0] == "--":
        words = words[1:]
    if words and _is_python(words[0]):
        words = words[1:]
    if not words:
        raise InputError("nothing to run: give a script, e.g. 'aiprof run -- python train.py'")
    if words[0] == "-m":
        if len(words) < 2:
            raise InputError("'-m' needs a module name, e.g. 'aiprof run -- python -m pkg.train'")
        if words[1] in LAUNCHER_MODULES:
            raise InputError(_launcher_refusal(f"python -m {words[1]}"))
        return Target("module", words[1], (words[1], *words[2:]))
    if Path(words[0]).name in LAUNCHER_SCRIPTS:
        raise InputError(_launcher_refusal(words[0]))
    if words[0].startswith("-"):
        raise InputError(f"unsupported interpreter option {words[0]!r}; only '-m module' is "
                         "supported")
    path = Path(words[0])
    if not path.is_file():
        raise InputError(f"script {words[0]} not found")
    return Target("path", words[0], tuple(words))


class StopScript(BaseException):
    """Raised by a step hook to end the script early (``aiprof try`` after its steps).

    A ``BaseException``, so the script's own ``except Exception`` does not swallow it.
    """


class Terminated(BaseException):
    """Raised in the main thread when SIGTERM arrives, so the record is still written."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


@contextmanager
def _signal_handlers(session: CaptureSession) -> Iterator[None]:
    """SIGTERM -> ``Terminated``; in duration mode, SIGALRM starts and stops recording."""
    saved = {signal.SIGTERM: signal.signal(signal.SIGTERM, _raise_terminated)}
    options = session.options
    if options.duration_s is not None and hasattr(signal, "setitimer"):
        stop_at = options.delay_s + options.duration_s

        def on_alarm(signum: int, frame: FrameType | None) -> None:
            if session.recording:
                session.end_recording()
            else:
                session.begin_recording()
                signal.setitimer(signal.ITIMER_REAL, options.duration_s or 0.0)

        saved[signal.SIGALRM] = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, options.delay_s if options.delay_s > 0 else stop_at)
    try:
        yield
    finally:
        if signal.SIGALRM in saved:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


def execute(target: Target) -> Outcome:
    """Run ``target`` as ``python`` would; how it ended (its traceback printed on failure)."""
    try:
        if target.kind == "module":
            runpy.run_module(target.name, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target.name, run_name="__main__")
    except SystemExit as done:
        return Outcome(ended="exit", exit_code=_exit_status(done.code))
    except StopScript:
        return Outcome(ended="stopped")
    except KeyboardInterrupt:
        return Outcome(ended="interrupted", exit_code=EXIT_INTERRUPTED, error="KeyboardInterrupt")
    except Terminated:
        return Outcome(ended="terminated", exit_code=EXIT_TERMINATED, error="SIGTERM")
    except BaseException as error:  # the script's own failure: show it as python would
        _print_user_traceback(error)
        return Outcome(ended="exception", exit_code=1,
                       error=f"{type(error).__name__}: {error}")
    return Outcome()


def _print_user_traceback(error: BaseException) -> None:
    """The traceback from the script's own frames on (this module and runpy left out)."""
    tb = error.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename == __file__
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")):
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)


@contextmanager
def script_context(target: Target) -> Iterator[None]:
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = list(target.argv)
    if target.kind == "path":
        sys.path.insert(0, os.path.dirname(os.path.abspath(target.name)))
    else:
        sys.path.insert(0, os.getcwd())
    try:
        yield
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def run_target(target: Target, session: CaptureSession) -> Outcome:
    """Run ``target`` under ``session``; always stops the session; returns how it ended."""
    outcome = Outcome(ended="unknown", exit_code=1)
    session.start()
    try:
        with _signal_handlers(session), script_context(target):
            outcome = execute(target)
    finally:
        with _ignore_interrupts():
            session.stop(outcome)
    return outcome


@contextmanager
def _ignore_interrupts() -> Iterator[None]:
    """A second Ctrl-C while the trace is written must not lose the record."""
    try:
        saved = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, saved)
