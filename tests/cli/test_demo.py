"""GIVEN aiprof demo WHEN it runs THEN it leaves no temporary folder behind (--out keeps the
files) and its evidence shows no empty fields."""

from __future__ import annotations

import tempfile

import pytest

from aiprof.cli.main import main
from aiprof.report.diagnose_terminal import _flat


@pytest.fixture()
def private_tmp(tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


@pytest.mark.slow
def test_demo_with_its_workload_leaves_nothing_behind(private_tmp, capsys) -> None:
    pytest.importorskip("torch")
    assert main(["demo"]) == 0
    assert not list(private_tmp.glob("aiprof-demo-*"))  # torch may leave its own caches
    assert "pass --out DIR to keep them" in capsys.readouterr().out


def test_demo_leaves_nothing_behind_and_out_keeps_the_report(private_tmp, tmp_path, capsys):
    assert main(["demo", "--no-workload"]) == 0
    out = capsys.readouterr().out
    assert not list(private_tmp.glob("aiprof-demo-*"))
    assert "after_fixing_first=," not in out and "after_fixing_first=\n" not in out
    kept = tmp_path / "kept"
    assert main(["demo", "--no-workload", "--out", str(kept)]) == 0
    assert (kept / "report.html").is_file()
    assert str(kept / "report.html") in capsys.readouterr().out


def test_empty_evidence_values_are_left_out() -> None:
    evidence = {"gpu_idle_pct": 40.0, "after_fixing_first": [], "note": ""}
    assert _flat(evidence) == "gpu_idle_pct=40.0"
    assert _flat({"after_fixing_first": ["host_sync"]}) == "after_fixing_first=host_sync"
