"""``--steps-from`` a Python function: sys.monitoring (3.12+) or sys.setprofile (3.11)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

STEPS_PY = Path(__file__).resolve().parents[2] / "src" / "aiprof" / "capture" / "steps.py"

SCRIPT = f'''
import importlib.util, sys
spec = importlib.util.spec_from_file_location("steps", {str(STEPS_PY)!r})
steps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(steps)


def helper(x):
    return x * 2


def train_step(x):
    return helper(x) + 1


class Loop:
    def train_step(self):
        return 0


seen = []
uninstall = steps.install_function_hook("train_step", lambda: seen.append("a"))
for i in range(5):
    train_step(i)
Loop().train_step()
uninstall()
train_step(0)  # after uninstall: not counted
# a second session watching a function the first one had switched off
uninstall = steps.install_function_hook("Loop.train_step", lambda: seen.append("b"))
train_step(0)
Loop().train_step()
uninstall()
print(seen.count("a"), seen.count("b"), hasattr(sys, "monitoring"))
'''


def run_with(python: str) -> str:
    done = subprocess.run([python, "-c", SCRIPT], capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout.split()


def test_function_returns_are_steps_with_this_python():
    import sys

    counted_a, counted_b, _ = run_with(sys.executable)
    # 5 calls of the function plus one method with the same co_name; then the qualname
    assert (counted_a, counted_b) == ("6", "1")


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_function_returns_are_steps_with_sys_monitoring(version):
    python = shutil.which(f"python{version}")
    if python is None:
        pytest.skip(f"python{version} not on PATH")
    try:
        counted_a, counted_b, monitoring = run_with(python)
    except subprocess.CalledProcessError as error:
        pytest.skip(f"python{version} unusable here: {error.stderr[-200:]}")
    assert monitoring == "True" and (counted_a, counted_b) == ("6", "1")
