"""Running real variant processes on the workloads beside these tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

WORKLOADS = Path(__file__).parent / "workloads"
REPO = Path(__file__).resolve().parents[2]


def env() -> dict[str, str]:
    """The environment of a child that imports this checkout's aiprof."""
    return {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep
            + os.environ.get("PYTHONPATH", "")}


def variant_command(fix: str, result: Path, script: str, *args: str, warmup: int = 3,
                    steps: int = 2, steps_from: str | None = None) -> list[str]:
    named = ["--steps-from", steps_from] if steps_from else []
    return [sys.executable, "-m", "aiprof.measure.fixes.variant", "--fix", fix,
            "--warmup", str(warmup), "--steps", str(steps), "--result", str(result), *named,
            "--", str(WORKLOADS / script), *args]


def start_variant(fix: str, folder: Path, **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start the observe workload under ``fix``; it writes ``folder/observed.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    command = variant_command(fix, folder / "result", "observe.py", str(folder / "observed.json"),
                              **kwargs)
    return subprocess.Popen(command, env=env(), stdout=(folder / "log").open("wb"),
                            stderr=subprocess.STDOUT)


def read(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the script observed at its last written step, the variant's result file)."""
    observed = json.loads((folder / "observed.json").read_text())
    result = json.loads((folder / "result" / "rank0.json").read_text())
    return observed, result
