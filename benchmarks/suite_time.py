"""The default test run against an earlier commit's, timed in turn on this machine.

    python benchmarks/suite_time.py --base f9a4849          # the commit issue 14 was filed at
    python benchmarks/suite_time.py --base REV --pairs 3

A test run's wall time depends on the machine as much as on the code: the same commit's suite
can take a third longer on one day than on another. So the earlier suite is timed again here,
in turn with today's (base, current, base, current ...), and the ratio of each pair is what
says whether the test run got slower. The base is checked out into a temporary git worktree
(its optional C helpers built with this interpreter) and run with its own ``src`` first on
``PYTHONPATH``; both runs use this interpreter's packages and the README's test command
(``python -m pytest -q``, each tree's own pytest settings). Prints one line per run and the
pairs' ratios, and removes the worktree.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"^=*\s*(.*\b(?:passed|failed)\b.*?)\s*=*$")


def run_suite(tree: Path, public_traces: str | None) -> tuple[float, str]:
    """Wall seconds of ``python -m pytest -q`` in ``tree``, and its summary line."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    if public_traces:
        env["AIPROF_PUBLIC_TRACES"] = public_traces
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=tree, env=env, capture_output=True, text=True, check=False)
    wall_s = time.monotonic() - start
    lines = [m.group(1) for line in done.stdout.splitlines() if (m := SUMMARY.match(line))]
    return wall_s, lines[-1] if lines else f"exit {done.returncode}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--pairs", type=int, default=2, help="base/current pairs (default 2)")
    parser.add_argument("--public-traces", default=os.environ.get("AIPROF_PUBLIC_TRACES"),
                        help="the public traces folder, for both trees (default: each tree's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aiprof-suite-base-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(base),
                        args.base], check=True)
        try:
            subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"],
                           cwd=base, capture_output=True, check=False)
            ratios = []
            for pair in range(args.pairs):
                walls = []
                for label, tree in (("base", base), ("current", REPO)):
                    load = os.getloadavg()[0]
                    wall_s, summary = run_suite(tree, args.public_traces)
                    walls.append(wall_s)
                    print(f"pair {pair + 1} {label:7s} {wall_s:7.1f} s  (load {load:.2f} at "
                          f"the start)  {summary}", flush=True)
                ratios.append(walls[1] / walls[0])
            print("current / base per pair: " + ", ".join(f"{r:.2f}" for r in ratios)
                  + f"; median {statistics.median(ratios):.2f}")
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                           check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
