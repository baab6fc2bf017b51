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
    from aiprof.report.examples_terminal import render_examples
    from aiprof.report.terminal import console

    render_examples(console(), found)
    return 0


COMMAND = Command(
    name="examples",
    help="list the real traces shipped with aiprof (use them as example:NAME in any command)",
    add_arguments=add_arguments,
    run=run,
    order=2,
)
