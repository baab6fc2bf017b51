"""``aiprof try --nproc 2``: each variant is a torchrun job; the step is the slowest rank's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from trial_helpers import WORKLOADS, env

pytestmark = pytest.mark.cpu_hog


@pytest.mark.slow
def test_two_gloo_ranks_report_the_slowest_rank(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aiprof.cli.main", "try", "--nproc", "2", "--fix",
         "fused_optimizer", "--rounds", "1", "--steps", "4", "--warmup", "3", "--json",
         "--out", str(tmp_path), "--", "python", str(WORKLOADS / "ddp_slow_rank.py")],
        env=env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["protocol"]["nproc"] == 2
    record = next(tmp_path.glob("ddp_slow_rank-try-*"))
    ranks = sorted((record / "try" / "r0-base").glob("rank*.json"))
    assert [p.name for p in ranks] == ["rank0.json", "rank1.json"]
    # the sleeping rank sets the pace; the document's step is at least its 30 ms
    assert doc["base"]["median_step_us"] >= 30_000
    fused = doc["fixes"][0]
    assert fused["status"] == "measured" and fused["facts"]["fused"] == 1
