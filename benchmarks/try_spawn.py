"""What the fork server saves per variant process: ``aiprof try`` on one script with
``--spawn fork`` and ``--spawn exec``, interleaved, in the same run.

    python benchmarks/try_spawn.py [--repeat 3] [--rounds 3] [SCRIPT]

Prints per mode the median wall time of a variant process (from the try document's ``runs``)
and of the whole trial, and the ratio exec/fork. The default script is the CLI tests' small
training loop (tests/trial/workloads/tiny.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SCRIPT = REPO / "tests" / "trial" / "workloads" / "tiny.py"


def trial(script: Path, spawn: str, rounds: int, out: Path) -> tuple[list[float], float]:
    """(wall seconds of each variant process, wall seconds of the whole command)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "aiprof.cli.main", "try", "--json", "--out", str(out),
         "--spawn", spawn, "--fix", "fused_optimizer", "--rounds", str(rounds),
         "--steps", "5", "--warmup", "3", "--", "python", str(script)],
        capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"aiprof try --spawn {spawn} failed: {done.stderr.strip()[-400:]}")
    doc = json.loads(done.stdout)
    return [float(run["wall_s"]) for run in doc["runs"]], wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("script", nargs="?", type=Path, default=DEFAULT_SCRIPT)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    per_process: dict[str, list[float]] = {"fork": [], "exec": []}
    whole: dict[str, list[float]] = {"fork": [], "exec": []}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.repeat):
            order = ("fork", "exec") if index % 2 == 0 else ("exec", "fork")
            for spawn in order:
                walls, total = trial(args.script, spawn, args.rounds, Path(tmp))
                per_process[spawn] += walls
                whole[spawn].append(total)
    print(f"aiprof try --fix fused_optimizer --rounds {args.rounds} on {args.script.name}, "
          f"{args.repeat} repeats each, interleaved; {os.cpu_count()} cores")
    print(f"{'spawn':6} {'process median s':>17} {'trial median s':>15}")
    for spawn in ("fork", "exec"):
        print(f"{spawn:6} {statistics.median(per_process[spawn]):17.2f} "
              f"{statistics.median(whole[spawn]):15.2f}")
    ratio = statistics.median(per_process["exec"]) / statistics.median(per_process["fork"])
    total_ratio = statistics.median(whole["exec"]) / statistics.median(whole["fork"])
    print(f"exec / fork: {ratio:.2f}x per process, {total_ratio:.2f}x per trial")
    return 0


if __name__ == "__main__":
    sys.exit(main())
