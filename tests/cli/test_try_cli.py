"""``aiprof try`` end to end: bad input, a real run's JSON and table, a failing variant,
Ctrl-C ending every child."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiprof.cli.main import main
from aiprof.trial.catalog import CODE_CHANGES, fixes_for_categories

pytestmark = pytest.mark.cpu_hog

WORKLOADS = Path(__file__).resolve().parents[1] / "trial" / "workloads"
REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "capture"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO / "src")}


@pytest.mark.parametrize(("argv", "message"), [
    (["try", "--fix", "tf64", "--", "python", str(WORKLOADS / "tiny.py")], "unknown fix 'tf64'"),
    (["try", "--auto"], "nothing to run"),
    (["try", "--", "python", str(WORKLOADS / "tiny.py")], "choose what to try"),
    (["try", "--auto", "--fix", "tf32", "--", str(WORKLOADS / "tiny.py")], "not both"),
    (["try", "--auto", "--", "python", "missing.py"], "script missing.py not found"),
    (["try", "--auto", "--rounds", "0", "--", str(WORKLOADS / "tiny.py")], "--rounds"),
    (["try", "--auto", "--warmup", "1", "--", str(WORKLOADS / "tiny.py")], "--warmup"),
    (["try", "--edited", "oops", "--", str(WORKLOADS / "tiny.py")], "LABEL=SCRIPT"),
    (["diagnose"], "give a trace or run record, or --try"),
    (["diagnose", "--try"], "--try needs the script after --"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv[:1], "--out", str(tmp_path), *argv[1:]]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_real_run_gives_the_document_and_a_failing_variant_does_not_stop_the_others(
        tmp_path: Path) -> None:
    script = WORKLOADS / "crash.py"  # fails at step 2 when TF32 is on
    done = subprocess.run(
        [sys.executable, "-m", "aiprof.cli.main", "try", "--fix", "tf32,fused_optimizer",
         "--edited", "same=" + str(script), "--rounds", "2", "--steps", "3", "--warmup", "3",
         "--out", str(tmp_path), "--json", "--", "python", str(script)],
        env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "aiprof.try/1" and doc["command"] == [str(script)]
    assert doc["protocol"]["rounds"] == 2 and doc["protocol"]["clock"] == "host"
    assert len(doc["base"]["round_median_step_us"]) == 2
    rows = {row["name"]: row for row in doc["fixes"]}
    assert rows["tf32"]["status"] == "failed"
    assert "planted failure under tf32" in "\n".join(rows["tf32"]["tail"])
    assert "after 2 of the 6 steps" in rows["tf32"]["reason"]
    fused = rows["fused_optimizer"]
    assert fused["status"] == "measured" and len(fused["round_gains_pct"]) == 2
    assert fused["verdict"] == "too few rounds" and fused["facts"]["fused"] == 1
    assert fused["numerics"]["flagged"] is False
    assert rows["same"]["edited"] is True and rows["same"]["status"] == "measured"
    assert doc["num_processes"] == 2 + 1 + 2 + 2  # tf32 is not run again after failing
    record = next(tmp_path.glob("crash-try-*"))
    assert json.loads((record / "try" / "record.json").read_text()) == doc
    assert len(list((record / "try").glob("r*-*.log"))) == doc["num_processes"]
    assert doc["spawn"]["mode"] == "fork" and "torch" in doc["spawn"]["preloaded"]
    assert (record / "try" / "forkserver.log").is_file()


@pytest.mark.slow
def test_diagnose_try_measures_the_fixes_of_the_findings_into_the_run_record(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "h200_resnet50_run", run)  # layout_conversion, low_occupancy, ...
    done = subprocess.run(
        [sys.executable, "-m", "aiprof.cli.main", "diagnose", str(run), "--try", "--json",
         "--rounds", "1", "--steps", "2", "--warmup", "3", "--",
         "python", str(WORKLOADS / "tiny.py")],
        env=_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    estimates = {f["category"]: f["estimated_gain_pct"] for f in doc["diagnosis"]["findings"]}
    rows = {row["name"]: row for row in doc["try"]["fixes"]}
    # every fix the catalog has for the findings' categories (unfused_elementwise: the fused
    # optimizer and compile; tensor_cores_unused: tf32 and bf16; layout_conversion)
    assert set(rows) == set(fixes_for_categories(list(estimates))) == {
        "tf32", "bf16", "channels_last", "fused_optimizer", "compile"}
    assert rows["channels_last"]["estimated_gain_pct"] == estimates["layout_conversion"]
    assert rows["channels_last"]["status"] == "not_applicable"  # tiny.py has no conv
    assert rows["bf16"]["status"] == "measured"
    assert {"category": "low_occupancy", "change": CODE_CHANGES["low_occupancy"]} in \
        doc["try"]["not_applied"]
    assert json.loads((run / "try" / "record.json").read_text()) == doc["try"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_ends_every_child_and_prints_what_was_measured(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    parent = subprocess.Popen(
        [sys.executable, "-m", "aiprof.cli.main", "try", "--fix", "tf32", "--rounds", "3",
         "--out", str(tmp_path), "--", "python", str(WORKLOADS / "spin.py"), str(pids)],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(pids.glob("*.pid")) and time.monotonic() < deadline:
        time.sleep(0.2)
    child = int(next(pids.glob("*.pid")).read_text())
    assert _alive(child)
    os.killpg(parent.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    out, err = parent.communicate(timeout=60)
    assert parent.returncode == 130, err
    assert "interrupted" in out and "Traceback" not in err
    assert not _alive(child)
    record = next(tmp_path.glob("spin-try-*"))
    assert json.loads((record / "try" / "record.json").read_text())["interrupted"] is True


def test_aa_runs_the_unfixed_script_again_and_states_the_noise(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aiprof.cli.main", "try", "--aa", "--rounds", "5", "--steps",
         "3", "--warmup", "3", "--out", str(tmp_path), "--", "python",
         str(WORKLOADS / "tiny.py")],
        env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "aa (unfixed again)" in done.stdout
    assert "A/A (the unfixed script against itself, 5 rounds)" in done.stdout
    record = next(tmp_path.glob("tiny-try-*"))
    doc = json.loads((record / "try" / "record.json").read_text())
    (row,) = doc["fixes"]
    assert row["name"] == "aa" and row["status"] == "measured"
    noise = doc["noise"]
    assert noise["round_gains_pct"] == row["round_gains_pct"] and len(noise["round_gains_pct"]) == 5
    assert noise["half_width_pct"] == max(abs(g) for g in row["round_gains_pct"])
    assert noise["verdict"] == row["verdict"]
    runs = [r for r in doc["runs"] if r["label"] == "aa"]
    assert len(runs) == 5 and all(r["status"] == "ok" for r in runs)


@pytest.mark.parametrize(("words", "target", "command"), [
    (["diagnose", "RUN", "--try", "--json", "--rounds", "1", "--", "python", "t.py", "--lr",
      "1"], "RUN", ["python", "t.py", "--lr", "1"]),
    (["diagnose", "--try", "--", "python", "t.py"], None, ["python", "t.py"]),
    (["diagnose", "RUN", "--", "python", "-m", "pkg"], "RUN", ["python", "-m", "pkg"]),
])
def test_diagnose_takes_the_command_after_the_double_dash_beside_its_run(
        words: list[str], target: str | None, command: list[str]) -> None:
    """argparse alone fills TRACE and the command from the first run of positionals (``RUN``)
    and then refuses the words after ``--``; the command line is split there first."""
    from aiprof.cli.main import _parse, build_parser

    args = _parse(build_parser(), words)
    assert (args.target, args.try_command) == (target, command)
