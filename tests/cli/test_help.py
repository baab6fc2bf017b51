"""GIVEN aiprof and every command and sub-command WHEN asked for --help THEN the text reads
without the book at hand (no chapter numbers or section signs) and exits 0."""

from __future__ import annotations

import argparse
import re

import pytest

from aiprof.cli.main import build_parser, main

CITES_THE_BOOK = re.compile(r"chapter|\b33\.\d|§", re.IGNORECASE)


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    found = [("aiprof", build_parser())]
    for name, parser in found:  # grows while it is walked: commands, then their verbs
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.extend((f"{name} {verb}", child) for verb, child in action.choices.items())
    return found


PARSERS = _parsers()


def test_every_command_is_walked() -> None:
    names = {name for name, _ in PARSERS}
    assert {"aiprof summary", "aiprof comm bench", "aiprof reuse conv", "aiprof examples"} <= names


@pytest.mark.parametrize(("name", "parser"), PARSERS, ids=[n for n, _ in PARSERS])
def test_help_reads_without_the_chapter(name: str, parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    assert not CITES_THE_BOOK.search(text), CITES_THE_BOOK.search(text)


def test_help_exits_0(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["summary", "--help"])
    assert done.value.code == 0 and "example:NAME" in capsys.readouterr().out
