"""``aiprof`` entry point: ``main(argv) -> exit code``.

Commands are discovered: every module of this package that defines ``COMMAND`` is one.
Only here do aiprof's exceptions become exit codes and one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from aiprof.cli._command import Command
from aiprof.errors import AiprofError
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
    """Run ``aiprof`` with ``argv`` (without the program name); return the exit code."""
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(run(args))
    except AiprofError as error:
        print(f"aiprof {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("aiprof: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
