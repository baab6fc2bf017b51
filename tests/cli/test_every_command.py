"""GIVEN every command that reads traces and every kind of target (a trace file, a directory
of rank traces, a run record; each real trace there is) WHEN the command runs THEN it succeeds
or says in one line why not; no traceback ever reaches the user."""

from __future__ import annotations

import shutil

import pytest
from tests.conftest import DATA, REAL_TRACES

from aiprof.cli.main import main

COMMANDS = {
    "summary": [],
    "diagnose": [],
    "report": ["-o", "{tmp}/r.html"],
    "distributed": [],
    "roofline": ["--plot", "{tmp}/roof.svg"],
    "memtimeline": [],
    "scaling": ["--ranks", "2,8"],
    "ops": [],
    "queue": [],
    "critical-path": [],
    "hotspots": [],
    "export": ["--perfetto", "-o", "{tmp}/t.json", "--no-findings"],
}
SMALL = 400_000  # bytes: traces below this run by default, the rest with -m slow
RUN = DATA / "capture" / "h200_gpt2_small_timed_run"


def _targets() -> list[object]:
    files = sorted(REAL_TRACES.glob("*/*.json.gz"))
    folders = sorted({f.parent for f in files if len(list(f.parent.glob("*.json.gz"))) > 1})
    found = []
    for path in [*files, *folders]:
        size = sum(p.stat().st_size for p in path.glob("*.json.gz")) if path.is_dir() \
            else path.stat().st_size
        marks = [pytest.mark.slow] if size > SMALL else []
        found.append(pytest.param(path, id=f"{path.parent.name}/{path.name}"[:60], marks=marks))
    return [*found, pytest.param(RUN, id="run-record")]


@pytest.mark.parametrize("target", _targets())
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_on_target_succeeds_or_says_why_in_one_line(command, target, tmp_path, capsys):
    if target == RUN:  # a fresh copy: a command may write into a run record (roofline.svg)
        target = tmp_path / "run"
        shutil.copytree(RUN, target)
    options = [o.format(tmp=tmp_path) for o in COMMANDS[command]]
    code = main([command, str(target), *options])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code != 0:
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith(f"aiprof {command}: error: ")


def test_every_trace_reading_command_is_covered() -> None:
    from aiprof.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if hasattr(a, "choices") and a.choices)
    reads = {name for name, p in sub.choices.items()
             if any(a.metavar == "TRACE" for a in p._actions)}
    assert reads == set(COMMANDS)


@pytest.mark.parametrize("target", ["example:two_ranks", "example:triton", str(RUN)])
def test_diff_takes_the_same_targets(target, capsys) -> None:
    code = main(["diff", target, target, "--json"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and (code == 0 or (code == 2 and err.count("\n") == 1)), err
