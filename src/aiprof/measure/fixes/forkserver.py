"""The fork server of ``aiprof try``: torch (and the script's installed imports) imported once,
then one forked child per variant.

    python -m aiprof.measure.fixes.forkserver --preload torch,transformers

A fresh interpreter spends seconds importing torch and the libraries a training script needs
before its first step; ``aiprof try`` starts one process per variant and round, so that import
was most of its time on the H200 (10.5-16.4 s per process, ``docs/try.md``). Here it is paid
once. Each child is still a fresh process for everything a fix changes: nothing in this server
touches CUDA (a forked child can initialise CUDA only if its parent never did: CUDA
Programming Guide, "Initialization"), sets a torch flag, builds a model or allocates on the
device; each child applies its fix, runs the script and exits. What a child shares with its
siblings is what an import leaves behind: module state, and the hash seed of ``str``; the
``random`` and NumPy generators are reseeded from the OS in each child, as a fresh interpreter
seeds them. Fixes that change the environment before torch is imported
(``expandable_segments``) cannot be applied here: the server lists them, and the client runs
those variants as fresh interpreters.

Before it says ready the server forks one canary child that runs a one-element CUDA kernel
(when there is a device): if a library imported here did initialise CUDA, the canary fails,
the server says not ready, and the client starts every variant as a fresh interpreter.

Protocol, one JSON object per line: the server writes ``{"ready": ...}`` once, then for each
request ``{"argv": [...], "log": PATH, "cwd": DIR}`` on stdin it writes ``{"pid": N}`` when the
child has started and ``{"status": CODE}`` when it has ended (CODE as ``os.waitstatus_to_
exitcode``: negative for a signal). The child is the leader of its own session, so the client
can end it and everything it started with one ``killpg``. End of stdin ends the server.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import signal
import sys
import time
import traceback
from typing import Any

NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
"""Set while preloading: a library that asks ``torch.cuda.is_available()`` at import then asks
NVML, which does not initialise CUDA in this process (torch.cuda docs, ``is_available``)."""


EXEC_ONLY = {
    "cudnn_benchmark": "on the H200 its forked variant measured -3.2% where the hand-edited "
                       "script measured +33.2%, and the same fix by exec +30.3% (one round "
                       "each, 2026-12-01, tests/data/trial/); until a GPU run explains the "
                       "difference it runs as a fresh interpreter",
}
"""Fixes that run as a fresh interpreter although they change no environment, and why."""


def exec_fixes() -> list[str]:
    """Fixes not served here: those that change the environment before torch is imported,
    and ``EXEC_ONLY``."""
    from aiprof.measure.fixes import FIX_CLASSES
    from aiprof.measure.fixes.base import Fix

    return sorted(name for name, cls in FIX_CLASSES.items()
                  if cls.environment is not Fix.environment or name in EXEC_ONLY)


def preload(names: list[str]) -> tuple[list[str], list[str]]:
    """Import each module; (imported, failed). No CUDA is initialised."""
    saved = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    imported, failed = [], []
    try:
        for name in names:
            try:
                importlib.import_module(name)
                imported.append(name)
            except BaseException:  # a library failing at import: the child imports it again
                failed.append(name)
    finally:
        if saved is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = saved
    return imported, failed


def cuda_untouched() -> bool:
    """True when nothing imported so far has initialised CUDA in this process."""
    torch = sys.modules.get("torch")
    return torch is None or not torch.cuda.is_initialized()


def canary() -> bool:
    """A forked child can use CUDA (when there is a device): it runs one tiny kernel."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            import torch

            ok = not torch.cuda.is_available() or float(
                torch.ones(1, device="cuda").sum().item()) == 1.0
            code = 0 if ok else 3
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _reseed() -> None:
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _child(request: dict[str, Any], reply_fd: int) -> None:
    """In the forked child: become a fresh variant process and run it; never returns."""
    code = 1
    try:
        os.setsid()
        os.close(reply_fd)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(devnull)
        os.chdir(request.get("cwd") or os.getcwd())
        _reseed()
        from aiprof.measure.fixes import variant

        argv = [str(word) for word in request["argv"]]
        sys.argv = ["aiprof-try-variant", *argv]
        code = variant.main(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _send(reply_fd: int, message: dict[str, Any]) -> None:
    os.write(reply_fd, (json.dumps(message) + "\n").encode())


def serve(names: list[str]) -> int:
    """Preload, say ready, then fork one child per request until stdin ends."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # prints of preloaded libraries go to the server's log, not the protocol
    start = time.monotonic()
    imported, failed = preload(names)
    ready = {"ready": cuda_untouched() and canary(), "preloaded": imported, "failed": failed,
             "preload_s": round(time.monotonic() - start, 3),
             "exec_fixes": exec_fixes()}
    _send(reply_fd, ready)
    if not ready["ready"]:
        return 1
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, reply_fd)
        _send(reply_fd, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _send(reply_fd, {"status": os.waitstatus_to_exitcode(status)})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aiprof-try-forkserver")
    parser.add_argument("--preload", default="torch",
                        help="comma-separated modules to import once (default torch)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the client ends children and server
    names = [name for name in args.preload.split(",") if name]
    return serve(names)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit: the server holds nothing to write back, and the interpreter's teardown of the
    # preloaded torch costs 0.5-2 s at every end of an ``aiprof try``.
    os._exit(code)
