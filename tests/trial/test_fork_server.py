"""The fork server: torch imported once, each variant a forked child that is still a fresh
process for every fix (flags, environment), ended with its whole session on timeout.

GIVEN a real fork server (``aiprof.measure.fixes.forkserver``) WHEN real variants of the
workloads beside these tests run through it THEN each sees only its own fix, a timeout or a
crash is reported as the exec path reports it, and what is preloaded is the installed imports
of the script, never its own modules.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from trial_helpers import WORKLOADS, env

from aiprof.trial.forkserver import ForkServer, preload_names, script_imports
from aiprof.trial.launcher import launch
from aiprof.trial.plan import Protocol, VariantSpec
from aiprof.trial.runs import FAILED, OK, TIMEOUT, VariantRun

pytestmark = pytest.mark.cpu_hog


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    log = tmp_path_factory.mktemp("server") / "forkserver.log"
    forks = ForkServer(preload_names([(str(WORKLOADS / "observe.py"),)]), env(), log)
    yield forks
    forks.close()


def _observe(server: ForkServer, fix: str, folder: Path) -> tuple[dict[str, Any], VariantRun]:
    folder.mkdir(parents=True)
    spec = VariantSpec(fix, fix, (str(WORKLOADS / "observe.py"), str(folder / "observed.json")))
    run = launch(spec, 0, Protocol(rounds=1, steps=2, warmup_steps=3), folder, server=server)
    observed = json.loads((folder / "observed.json").read_text())
    return observed, run


def test_the_server_preloads_torch_without_touching_cuda(server: ForkServer) -> None:
    assert "torch" in server.ready.preloaded and not server.ready.failed
    assert "aiprof.measure.fixes.variant" in server.ready.preloaded
    assert "torch._dynamo" in server.ready.preloaded  # the first optimizer step imports it
    assert server.ready.exec_fixes == ("cudnn_benchmark", "expandable_segments")
    assert not server.serves("expandable_segments") and server.serves("tf32")


def test_a_fix_in_one_child_does_not_reach_the_next(server: ForkServer, tmp_path: Path) -> None:
    tf32, tf32_run = _observe(server, "tf32", tmp_path / "tf32")
    base, base_run = _observe(server, "none", tmp_path / "base")
    assert tf32["matmul_allow_tf32"] is True and tf32["cudnn_allow_tf32"] is True
    assert base["matmul_allow_tf32"] is False  # torch's default (cuDNN's TF32 is on by default)
    assert base_run.status == OK and len(base_run.step_us) == 2
    assert tf32_run.status != FAILED  # not applicable on CPU, but it ran its steps
    assert tf32["pid"] != base["pid"] != server.process.pid


def test_each_child_draws_fresh_random_numbers(server: ForkServer, tmp_path: Path) -> None:
    first, _ = _observe(server, "none", tmp_path / "a")
    second, _ = _observe(server, "none", tmp_path / "b")
    assert first["python_random"] != second["python_random"]


@pytest.mark.timing
def test_a_variant_past_its_timeout_is_ended_with_its_session(server: ForkServer,
                                                             tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    spec = VariantSpec("base", "none", (str(WORKLOADS / "spin.py"), str(pids)))
    start = time.monotonic()
    run = launch(spec, 0, Protocol(rounds=1, steps=50, warmup_steps=3, timeout_s=4.0),
                 tmp_path, server=server)
    assert run.status == TIMEOUT and "4 s" in run.reason
    assert time.monotonic() - start < 4.0 + 12.0
    child = int(next(pids.glob("*.pid")).read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)
    assert server.process.poll() is None  # the server serves on


def test_a_crash_is_reported_with_its_last_lines(server: ForkServer, tmp_path: Path) -> None:
    spec = VariantSpec("tf32", "tf32", (str(WORKLOADS / "crash.py"),))
    run = launch(spec, 0, Protocol(rounds=1, steps=3, warmup_steps=3), tmp_path, server=server)
    assert run.status == FAILED
    assert "planted failure under tf32" in "\n".join(run.tail)


def test_only_installed_modules_are_preloaded(tmp_path: Path) -> None:
    (tmp_path / "mymodel.py").write_text("raise SystemExit('imported!')\n")
    script = tmp_path / "train.py"
    script.write_text("from __future__ import annotations\nimport json, mymodel\n"
                      "from torch import nn\nimport torch.nn.functional as F\n"
                      "def f():\n    import csv\n")
    assert script_imports(script) == ["json", "mymodel", "torch"]
    names = preload_names([(str(script), "--lr", "1"), ("-m", "pkg")])
    assert "json" in names and "torch" in names and "mymodel" not in names
    assert "csv" not in names  # not a top-level import


def test_the_try_record_says_how_variants_started(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "aiprof.cli.main", "try", "--fix", "no_empty_cache",
         "--spawn", "fork", "--rounds", "1", "--steps", "2", "--warmup", "3",
         "--out", str(tmp_path), "--json", "--", "python", str(WORKLOADS / "tiny.py")],
        env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["spawn"]["mode"] == "fork" and doc["spawn"]["preload_s"] > 0
    assert doc["spawn"]["exec_fixes"] == ["cudnn_benchmark", "expandable_segments"]
    assert "fork server imported torch" in done.stderr
    assert doc["protocol"]["spawn"] == "fork" and doc["protocol"]["warmup_s"] == 0.5
