"""The client of ``aiprof.measure.fixes.forkserver``: start it, run variants through it, end it.

What the script imports is read from its source (top-level ``import`` statements) and
preloaded only when the module is installed (found outside the script's folder and the
working directory): importing the user's own modules could run their code.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

READY_TIMEOUT_S = 300.0
"""The preload (torch, transformers...) must finish within this; a cold disk can take a
minute."""
VARIANT_MODULE = "aiprof.measure.fixes.variant"
"""The module each variant runs (``python -m`` by exec, imported by the fork server)."""
ALWAYS = ("torch", "torch._dynamo", VARIANT_MODULE)
"""torch._dynamo too: the first ``optimizer.step()`` of a process imports it (and sympy), 822
modules and 1.8 s on the 2-core CPU VM (2026-12-01), which each forked child would repeat."""
KILL_GRACE_S = 5.0
"""Seconds a variant gets to end after SIGINT/SIGTERM before SIGKILL."""


def script_imports(script: Path) -> list[str]:
    """Top-level module names the script imports at its top level, in order, no repeats."""
    try:
        tree = ast.parse(script.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            found = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found = [node.module.split(".")[0]]
        else:
            continue
        names += [name for name in found if name not in names and name != "__future__"]
    return names


def _installed(name: str, local_dirs: Iterable[Path]) -> bool:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return spec is not None
    origin = Path(spec.origin).resolve()
    return not any(origin.is_relative_to(folder.resolve()) for folder in local_dirs)


def preload_names(commands: Iterable[tuple[str, ...]]) -> list[str]:
    """torch, the variant module, and the installed modules the scripts import."""
    names = list(ALWAYS)
    for command in commands:
        if not command or command[0] == "-m":
            continue
        script = Path(command[0])
        for name in script_imports(script):
            if name not in names and _installed(name, (script.parent, Path.cwd())):
                names.append(name)
    return names


@dataclass(frozen=True)
class Ready:
    """What the server said when it was ready."""

    preloaded: tuple[str, ...]
    failed: tuple[str, ...]
    preload_s: float
    exec_fixes: tuple[str, ...]


class ForkServerError(RuntimeError):
    """The server did not start or stopped answering; the caller runs variants by exec."""


class ForkServer:
    """One server process; ``run`` one variant at a time."""

    def __init__(self, preload: list[str], environ: Mapping[str, str], log_path: Path) -> None:
        env = dict(environ)
        env["PYTHONUNBUFFERED"] = "1"
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in close())
        self._pending = b""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "aiprof.measure.fixes.forkserver",
             "--preload", ",".join(preload)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env,
            start_new_session=True)
        message = self._read(READY_TIMEOUT_S)
        if message is None or not message.get("ready"):
            self.close()
            raise ForkServerError(f"fork server not ready: {message}")
        self.ready = Ready(tuple(message["preloaded"]), tuple(message["failed"]),
                           float(message["preload_s"]), tuple(message["exec_fixes"]))

    def _read(self, timeout_s: float) -> dict[str, Any] | None:
        """The server's next message, or None after ``timeout_s`` or when it has exited.
        Reads the pipe's file descriptor itself: a buffered reader could hold a second
        message that ``select`` would then not see."""
        out: IO[bytes] | None = self.process.stdout
        if out is None:
            return None
        deadline = time.monotonic() + max(0.0, timeout_s)
        while b"\n" not in self._pending:
            readable, _, _ = select.select([out.fileno()], [], [],
                                           max(0.0, deadline - time.monotonic()))
            if not readable:
                return None
            chunk = os.read(out.fileno(), 65536)
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def serves(self, fix: str) -> bool:
        return fix not in self.ready.exec_fixes

    def run(self, argv: list[str], log_path: Path, timeout_s: float) -> int | None:
        """Run one variant; its exit code, or None when it ran past ``timeout_s`` (then its
        whole session was ended). Ctrl-C ends the child's session and re-raises."""
        request = {"argv": argv, "log": str(log_path), "cwd": os.getcwd()}
        stdin = self.process.stdin
        if stdin is None or self.process.poll() is not None:
            raise ForkServerError("the fork server has exited")
        stdin.write((json.dumps(request) + "\n").encode())
        stdin.flush()
        started = self._read(READY_TIMEOUT_S)
        if started is None or "pid" not in started:
            raise ForkServerError(f"the fork server did not start the variant: {started}")
        pid = int(started["pid"])
        try:
            ended = self._read(timeout_s)
        except BaseException:
            self._stop(pid, signal.SIGINT)
            raise
        if ended is None:
            if self.process.poll() is not None:
                raise ForkServerError("the fork server exited while a variant ran")
            self._stop(pid, signal.SIGTERM)
            return None
        _signal_session(pid, signal.SIGKILL)  # workers the variant left in its session
        return int(ended["status"])

    def _stop(self, pid: int, first: int) -> None:
        """End the child's session: ``first``, then SIGKILL if it has not ended in
        ``KILL_GRACE_S``; read the status the server then reports."""
        for signum in (first, signal.SIGKILL):
            _signal_session(pid, signum)
            if self._read(KILL_GRACE_S) is not None:
                break
        _signal_session(pid, signal.SIGKILL)

    def close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=10.0)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            self._log.close()


def _signal_session(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
