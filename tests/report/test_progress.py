"""GIVEN work that takes a while WHEN it runs in a terminal THEN a progress line shows on
stderr; quick work, --quiet and a non-terminal stderr show nothing."""

from __future__ import annotations

import io
import time

from rich.console import Console

from aiprof.cli.main import main
from aiprof.report.progress import busy, wanted


def _terminal() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=True, width=80), buffer


def test_long_work_shows_the_label() -> None:
    console, buffer = _terminal()
    with busy("reading traces", enabled=True, console=console, delay_s=0.05):
        time.sleep(0.5)
    assert "reading traces" in buffer.getvalue()


def test_quick_work_and_disabled_progress_show_nothing() -> None:
    console, buffer = _terminal()
    with busy("reading traces", enabled=True, console=console, delay_s=5.0):
        pass
    with busy("reading traces", enabled=False, console=console, delay_s=0.0):
        time.sleep(0.2)
    assert buffer.getvalue() == ""


def test_not_a_terminal_or_quiet_means_no_progress(capsys) -> None:
    assert not wanted(quiet=True)
    assert not wanted()  # pytest's stderr is not a terminal
    assert main(["summary", "example:a100_nccl", "--json", "--quiet"]) == 0
    assert main(["diagnose", "example:two_ranks"]) == 0
    assert capsys.readouterr().err == ""
