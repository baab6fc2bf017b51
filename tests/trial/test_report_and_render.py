"""The try document in the terminal table and in ``aiprof report`` beside the findings."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

from rich.console import Console
from test_schedule_and_verdict import FakeClock, FakeLauncher, specs

from aiprof.cli.main import main
from aiprof.report.try_terminal import render_try
from aiprof.trial.orchestrate import run_trial
from aiprof.trial.plan import BASE, Protocol
from aiprof.trial.record import read_try_record, write_try_record
from aiprof.trial.result import summarize
from aiprof.trial.runs import FAILED

DATA = Path(__file__).resolve().parents[1] / "data" / "capture"


def _document() -> dict[str, object]:
    clock = FakeClock()
    launcher = FakeLauncher(clock, {BASE: 1.0, "tf32": 0.7, "compile": 0.95},
                            status={"dataloader": FAILED}, noise=0.001)
    launcher.speed["dataloader"] = 1.0
    variants = specs("tf32", "compile", "dataloader")
    trial = run_trial(variants, 5, launcher, clock=clock)
    return summarize(("train.py",), variants, trial, Protocol(),
                     estimates={"tf32": 35.0}, code_categories=["host_sync"]).document()


def test_the_table_has_the_six_columns_and_says_what_failed() -> None:
    out = io.StringIO()
    render_try(Console(file=out, width=160), _document())
    text = out.getvalue()
    for column in ("fix", "estimated", "measured", "spread", "peak memory", "verdict"):
        assert column in text
    tf32_line = next(line for line in text.splitlines() if line.startswith("│ tf32"))
    assert "35.0%" in tf32_line and "faster" in tf32_line
    assert re.search(r"│ \+(2[7-9]|3[0-3])\.\d% \[", tf32_line)  # 30% faster, some drift
    assert "failed" in text and "planted failed" in text
    assert "not applied (host_sync: needs a code change)" in text


def test_aiprof_report_shows_the_try_record_beside_the_findings(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "h200_resnet50_run", run)
    write_try_record(run, _document())
    assert read_try_record(run) is not None
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    findings, trial = page.index("<h2>Findings</h2>"), page.index("Fixes measured (aiprof try)")
    assert findings < trial < page.index("GPU timeline")
    assert re.search(r"<td>tf32</td><td>35.0%</td><td>\+(2[7-9]|3[0-3])\.\d%", page)


def test_a_run_without_a_try_record_has_no_try_section(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "h200_resnet50_run", run)
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0
    assert "aiprof try" not in (tmp_path / "r.html").read_text()


def test_a_host_that_changed_speed_is_said_with_the_probe_range() -> None:
    from aiprof.trial.result import host_probe_document

    quiet = host_probe_document([10_000.0, 10_400.0, 9_900.0])
    assert quiet is not None and not quiet["varies"]
    noisy = host_probe_document([10_000.0, 19_000.0, 11_000.0])
    assert noisy is not None and noisy["varies"] and noisy["ratio"] == 1.9
    assert host_probe_document([]) is None
    document = _document()
    for probe, said in ((quiet, False), (noisy, True)):
        document["host_probe"] = probe
        out = io.StringIO()
        render_try(Console(file=out, width=200), document)
        assert ("the host changed speed during the trial" in out.getvalue()) is said
        if said:
            assert "10.0-19.0 ms (1.9x)" in out.getvalue()
            assert "--statistic floor" in out.getvalue()
