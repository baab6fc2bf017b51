"""GIVEN a launcher (torchrun, python -m torch.distributed.run) after 'aiprof run --' WHEN it
runs THEN it is refused in one line naming --nproc and the form that profiles the workers."""

from __future__ import annotations

import pytest

from aiprof.cli.main import main


@pytest.mark.parametrize("launcher", [
    ["torchrun", "--nproc-per-node", "2", "train.py"],
    ["/usr/bin/torchrun", "train.py"],
    ["python", "-m", "torch.distributed.run", "--nproc-per-node=2", "train.py"],
    ["python3", "-m", "torch.distributed.launch", "train.py"],
])
def test_launchers_are_refused_with_the_forms_that_work(launcher, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--", *launcher]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--nproc N" in err and "-m aiprof.cli.main run" in err
    assert not (tmp_path / "runs").exists()  # refused before any run record was started
