"""A 2-rank gloo DDP run on the CPU, captured with ``aiprof run --nproc 2``, analyzed end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiprof.cli.main import main

pytestmark = pytest.mark.cpu_hog

WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.fixture(scope="module")
def straggler_run(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    run_dir = tmp_path_factory.mktemp("ddp") / "run"
    argv = [
        sys.executable,
        "-m",
        "aiprof.cli.main",
        "run",
        "--nproc",
        "2",
        "--skip",
        "1",
        "--warmup",
        "1",
        "--active",
        "3",
        "--no-gpu-samples",
        "--run-dir",
        str(run_dir),
        "--",
        "python",
        str(WORKER),
        str(run_dir / "unused"),
        "--no-profile",
        "--steps",
        "7",
        "--sleep-rank",
        "1",
        "--sleep-ms",
        "150",
    ]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


def _params() -> int:
    sys.path.insert(0, str(WORKER.parent))
    from ddp_worker import small_resnet

    return sum(p.numel() for p in small_resnet().parameters())


def test_straggler_is_named_and_overlap_reported(straggler_run, capsys):
    assert main(["distributed", str(straggler_run), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["num_ranks"] == 2 and report["backend"] == "gloo"
    # Stragglers come most-waited-for first; only rank 1 makes the other wait (on a shared
    # 2-core CPU rank 0 may also show up as a compute outlier, never as a late arrival).
    straggler = report["stragglers"][0]
    assert straggler["rank"] == 1 and "late arrival" in straggler["reason"]
    late = [s["rank"] for s in report["stragglers"] if "late arrival" in s["reason"]]
    assert late == [1]
    # Rank 0 waits for rank 1's 150 ms sleep in every step (less what rank 1 itself waits).
    assert straggler["others_wait_us_per_step"] > 0.5 * 150_000
    for rank in report["ranks"]:
        assert rank["num_steps"] >= 3
        assert 0 <= rank["overlap_pct"] <= 100
        assert rank["exposed_comm_us_per_step"] <= rank["comm_us_per_step"] + 1e-6
    # Every step all-reduces each fp32 gradient once (one bucket): bytes are a multiple of 4·Ψ.
    allreduce = [c for c in report["collectives"] if c["collective"] == "allreduce"]
    grad_bytes = 4 * _params()
    for c in allreduce:
        assert c["total_bytes"] > 0 and c["total_bytes"] % grad_bytes == 0


def test_scaling_what_if_from_the_run(straggler_run, capsys):
    assert (
        main(["scaling", str(straggler_run), "--ranks", "2,8,64", "--link", "infiniband", "--json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "aiprof.scaling/1"
    assert report["inputs"]["grad_bytes"] == pytest.approx(4 * _params())
    effs = [p["efficiency_pct"] for p in report["points"]]
    assert effs == sorted(effs, reverse=True) and all(0 < e <= 100 for e in effs)
