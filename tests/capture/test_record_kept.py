"""GIVEN scripts that change directory, are killed, or fail on one rank of several
WHEN they run under ``aiprof run`` (or ``aiprof.profile``) THEN the record is where it was
announced, ``latest`` points to it from the start, ``meta.json`` says how the run ended
("unknown" after SIGKILL), and the job's exit status is the ranks' own (130, 143, 3)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiprof.capture.launch import job_status
from aiprof.cli.main import main
from aiprof.record.runrecord import load_run, read_meta

torch = pytest.importorskip("torch")


def test_a_script_that_changes_to_root_keeps_its_whole_record(tmp_path, workload, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--out", "runs", "--skip", "1", "--warmup", "0", "--active", "2",
                 "--", "python", workload("chdir_root.py")])
    os.chdir(tmp_path)  # the script moved this process to /
    assert code == 0
    record = (tmp_path / "runs" / "latest").resolve()
    meta = read_meta(record)
    assert meta.ended == "completed" and meta.exit_code == 0
    assert "trained in /" in (record / "stdout.log").read_text()
    loaded = load_run(record)
    assert loaded.traces is not None and len(loaded.traces[0].steps) == 2


def _start_run(tmp_path: Path, workload, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aiprof.cli.main", "run", "--out", str(tmp_path / "runs"),
         *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def _wait_for_line(process: subprocess.Popen[str], text: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if text in line:
            return
        assert line or process.poll() is None, f"ended before {text!r}"
    raise AssertionError(f"no {text!r} within {timeout_s} s")


def test_after_sigkill_latest_is_the_killed_run_and_it_says_unknown(tmp_path, workload, capsys):
    runs = tmp_path / "runs"
    assert main(["run", "--out", str(runs), "--skip", "0", "--warmup", "0", "--active", "1",
                 "--", "python", workload("train_loop.py"), "--steps", "2"]) == 0
    previous = (runs / "latest").resolve()
    process = _start_run(tmp_path, workload, "--skip", "50", "--", "python",
                         workload("sleeps.py"))
    _wait_for_line(process, "sleeping")
    process.kill()
    process.communicate(timeout=30)
    killed = (runs / "latest").resolve()
    assert killed != previous and killed.parent == runs.resolve()
    meta = read_meta(killed)
    assert meta.ended == "unknown" and meta.exit_code is None
    assert any("killed" in note for note in meta.notes)
    capsys.readouterr()
    assert main(["summary", str(runs)]) == 2  # no trace in it: said, not the previous run's
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(killed) in err and "unknown" in err


def test_profile_into_a_directory_leaves_nothing_beside_it(tmp_path):
    import aiprof

    out = tmp_path / "parent" / "mine"
    with aiprof.profile(out, skip_steps=0, warmup_steps=0, active_steps=1) as p:
        torch.nn.Linear(4, 4)(torch.randn(2, 4)).sum()
        p.step()
    assert sorted(x.name for x in (tmp_path / "parent").iterdir()) == ["mine"]
    assert read_meta(out).ended == "completed"


@pytest.mark.parametrize(
    ("status", "codes", "received", "expected"),
    [
        (0, {0: 0, 1: 0}, [], 0),
        (1, {0: 143, 1: 3}, [], 3),  # rank 1 failed; torchrun stopped rank 0 with SIGTERM
        (1, {0: 143, 1: None}, [], 137),  # rank 1 was killed with SIGKILL
        (1, {0: 143, 1: 143}, [], 143),  # a rank got SIGTERM from outside
        (1, {0: 130, 1: 130}, [signal.SIGINT], 130),
        (1, {0: 143, 1: 143}, [signal.SIGTERM], 143),
        (1, {0: 0, 1: 0}, [], 1),  # torchrun itself failed
    ],
)
def test_job_status_rules(status, codes, received, expected):
    assert job_status(status, codes, received) == expected


@pytest.mark.cpu_hog
def test_nproc_job_exits_with_the_failing_ranks_status(tmp_path, workload):
    done = subprocess.run(
        [sys.executable, "-m", "aiprof.cli.main", "run", "--out", str(tmp_path / "runs"),
         "--nproc", "2", "--skip", "1", "--", "python", workload("ddp_rank_fails.py"), "3"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    assert read_meta((tmp_path / "runs" / "latest").resolve()).world_size == 2


@pytest.mark.cpu_hog
@pytest.mark.slow
@pytest.mark.parametrize(("signum", "expected"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_nproc_job_passes_on_sigterm_and_ctrl_c(tmp_path, workload, signum, expected):
    process = _start_run(tmp_path, workload, "--nproc", "2", "--skip", "1", "--", "python",
                         workload("ddp_rank_fails.py"), "wait")
    _wait_for_line(process, "ready")
    time.sleep(1.0)
    if signum == signal.SIGINT:  # Ctrl-C in a terminal reaches the whole process group
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    process.communicate(timeout=120)
    assert process.returncode == expected
