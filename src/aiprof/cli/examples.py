"""``aiprof examples``: the real traces shipped with aiprof, to try any command on."""

from __future__ import annotations

import argparse

from aiprof.cli._command import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from aiprof.jsontext import dumps
    from aiprof.record.examples import examples

    found = examples()
    if args.json:
        print(dumps([{"target": e.target, "path": str(e.path), "size_bytes": e.size_bytes,
                      "what": e.what, "origin": e.origin, "license": e.license} for e in found]))
        return 0
    from rich.table import Table

    from aiprof.report.terminal import console

    table = Table(title="Traces shipped with aiprof: pass TARGET to any command that reads traces",
                  title_justify="left")
    for column in ("target", "size", "what", "license"):
        table.add_column(column, justify="right" if column == "size" else "left")
    for e in found:
        table.add_row(e.target, f"{e.size_bytes / 1024:,.0f} KiB", e.what, e.license)
    out = console()
    out.print(table)
    out.print("where each was recorded: aiprof examples --json (field 'origin')\n"
              "for example: aiprof summary example:a100_nccl")
    return 0


COMMAND = Command(
    name="examples",
    help="list the real traces shipped with aiprof (use them as example:NAME in any command)",
    add_arguments=add_arguments,
    run=run,
    order=2,
)
