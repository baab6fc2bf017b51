"""The counterfactual suite's script on CPU (--smoke): what it writes is what the score reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from aiprof.evaluation import load_suite

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "scripts" / "h200" / "counterfactual_suite.py"


@pytest.mark.slow
def test_smoke_run_writes_labels_and_traces_the_score_reads(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "mlp_deep_b32_infer"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    out = tmp_path / "counterfactual"
    assert sorted(p.name for p in out.iterdir()) == [
        "labels-smoke.json", "plain-smoke.tar", "traces-smoke.tar"]
    for name in ("plain-smoke.tar", "traces-smoke.tar"):
        with tarfile.open(out / name) as tar:
            tar.extractall(out, filter="data")
    (only,) = load_suite(out)
    fixes = {f.name: f for f in only.fixes}
    assert len(fixes) == 12 and fixes["tf32"].gain_pct is not None
    assert fixes["cuda_graph"].gain_pct is None  # no CUDA device
    assert fixes["loader_workers"].gain_pct == 0.0  # nothing to change: no DataLoader
    assert only.plain_trace is not None and only.plain_trace.is_file()
    assert (only.trace / "rank0.trace.json.gz").is_file()
    row = json.loads((out / "labels-smoke.json").read_text())["workloads"][0]
    assert row["causes"] == ["cuda_graph"] and len(row["base_rounds_ms"]) == 2
