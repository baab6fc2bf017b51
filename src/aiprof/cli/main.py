"""``aiprof`` entry point: ``main(argv) -> exit code``.

Commands are discovered: every module of this package that defines ``COMMAND`` is one.
Only here do aiprof's exceptions become exit codes and one line on stderr.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import pkgutil
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

from aiprof.cli._command import Command
from aiprof.errors import AiprofError, Terminated
from aiprof.trace.source import DEFAULT_MAX_BYTES, DEFAULT_MAX_RATIO, MAX_BYTES_ENV, MAX_RATIO_ENV
from aiprof.trace.validate import TraceRepairWarning

EXIT_USAGE = 2


class UsageError(Exception):
    """Raised by the parser instead of printing usage and exiting."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def discover_commands() -> list[Command]:
    """Every ``COMMAND`` defined by a module of ``aiprof.cli``, in help order."""
    import aiprof.cli as package

    commands = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_") or info.name == "main":
            continue
        module = importlib.import_module(f"aiprof.cli.{info.name}")
        command = getattr(module, "COMMAND", None)
        if isinstance(command, Command):
            commands.append(command)
    return sorted(commands, key=lambda c: (c.order, c.name))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="aiprof",
        description="Explain the performance of PyTorch workloads and say what to change.",
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument(
        "--gzip-max-ratio",
        type=float,
        metavar="N",
        help="refuse a .json.gz that inflates more than N times its size, once past 64 MiB "
        f"(default {DEFAULT_MAX_RATIO:g}; 0: no limit; or set {MAX_RATIO_ENV})",
    )
    parser.add_argument(
        "--gzip-max-bytes",
        type=int,
        metavar="BYTES",
        help=f"refuse a .json.gz that inflates beyond BYTES (default {DEFAULT_MAX_BYTES:,}; "
        f"0: no limit; or set {MAX_BYTES_ENV})",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in discover_commands():
        child = sub.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(child)
        child.set_defaults(_run=command.run)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"aiprof {version('aiprof')}"
    except PackageNotFoundError:
        return "aiprof (not installed)"


def _one_line_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """aiprof's own warnings (trace repairs) as one line, without Python's source location."""
    if issubclass(category, TraceRepairWarning):
        print(f"aiprof: warning: {message}", file=file or sys.stderr)
    else:
        _python_showwarning(message, category, filename, lineno, file, line)


_python_showwarning = warnings.showwarning


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``aiprof`` with ``argv`` (without the program name); return the exit code.

    SIGTERM ends the command as Ctrl-C does (every ``finally`` runs: helper processes and
    temporary files are removed) and exits 143; Ctrl-C exits 130.
    """
    with warnings.catch_warnings(), _sigterm_raises():
        warnings.showwarning = _one_line_warning
        return _main(argv)


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
EXIT_TERMINATED = 143  # 128 + SIGTERM


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While a command runs in the main thread, SIGTERM raises ``Terminated``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except (ValueError, OSError):  # not allowed here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


@contextmanager
def _limits_in_environment(args: argparse.Namespace) -> Iterator[None]:
    """``--gzip-max-*`` as environment variables, so helper processes see them too."""
    given = {
        MAX_RATIO_ENV: args.gzip_max_ratio,
        MAX_BYTES_ENV: args.gzip_max_bytes,
    }
    saved = {name: os.environ.get(name) for name in given}
    try:
        for name, value in given.items():
            if value is not None:
                os.environ[name] = str(value)
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The parser, built once per process (building it imports and wires every command)."""
    return build_parser()


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    try:
        args = _parse(parser, list(argv) if argv is not None else sys.argv[1:])
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        with _limits_in_environment(args):
            return int(run(args))
    except AiprofError as error:
        print(f"aiprof {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except Terminated:
        print("aiprof: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("aiprof: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except (MemoryError, RecursionError) as error:
        print(
            f"aiprof {args.command}: error: the input is too large or too deeply nested "
            f"for this machine ({type(error).__name__})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except OSError as error:  # a file that could not be opened, read or written
        where = f"{error.filename}: " if error.filename else ""
        print(f"aiprof {args.command}: error: {where}{error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE


def _parse(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace:
    """``parser.parse_args(words)``, except that a command which takes a command after ``--``
    beside a positional of its own (``diagnose RUN --try ... -- python train.py``) gets the
    words after the first ``--`` whole: argparse fills every positional from the first run of
    them (``RUN``, and the command with nothing) and then refuses the rest."""
    if "--" in words:
        cut = words.index("--")
        try:
            head = parser.parse_args(words[:cut])
        except UsageError:
            head = None
        if head is not None and hasattr(head, "try_command"):
            head.try_command = [*head.try_command, *words[cut + 1:]]
            return head
    return parser.parse_args(words)


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
