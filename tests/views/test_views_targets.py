"""GIVEN a directory of rank traces, a run record and a missing path WHEN each view's command
reads them THEN it accepts what ``summary`` accepts (exit 0) and refuses the rest in one line
(exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import DATA
from views_synth import Builder

from aiprof.cli.main import main

RUN = DATA / "capture" / "h200_resnet50_run"
COMMANDS = (["queue"], ["ops"], ["ops", "--kernels"], ["ops", "--memory"], ["critical-path"],
            ["hotspots"])


def _rank_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    for rank in (0, 1):
        b = Builder()
        b.step(1, 0, 100)
        op = b.op("aten::mm", 5, 20)
        b.kernel("gemm_kernel", 10, 20, 30 + 10 * rank, external=op)
        path = b.write(folder / f"rank{rank}.json")
        doc = json.loads(path.read_text())
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
        path.write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_directories_and_run_records(command: list[str], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--json", str(_rank_dir(tmp_path))]) == 0
    assert len(json.loads(capsys.readouterr().out)["ranks"]) == 2
    assert main([*command, "--json", str(RUN)]) == 0
    assert json.loads(capsys.readouterr().out)["ranks"]
    assert main([*command, str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_diff_export_and_samples_take_targets(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    job = _rank_dir(tmp_path)
    assert main(["diff", "--json", str(job), str(job)]) == 0
    assert len(json.loads(capsys.readouterr().out)["pairs"]) == 2
    assert main(["export", "--perfetto", str(job), "-o", str(tmp_path / "x.json"),
                 "--no-findings"]) == 0
    assert main(["gpu-samples", str(job)]) == 2
    assert "not a run record" in capsys.readouterr().err
