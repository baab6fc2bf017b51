"""Helpers shared by the gpu_models_* ground-truth scripts (not a script itself).

The scripts need only python3, nvcc and ncu; results go to $OUT/gpu_models/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARCH = os.environ.get("GPU_MODELS_ARCH", "sm_90")


def run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``cmd``; raise on failure or timeout; return its captured output."""
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, timeout=timeout, check=True, capture_output=True, text=True)


def build(source: str, binary: Path) -> None:
    """Compile ``source`` (next to this file) with nvcc for ``ARCH``."""
    run(["nvcc", "-O2", f"-arch={ARCH}", "-std=c++17", "-o", str(binary), str(HERE / source)],
        timeout=40)


def out_dir() -> Path:
    """``$OUT/gpu_models`` (created)."""
    out = Path(os.environ.get("OUT", "out")) / "gpu_models"
    (out / "build").mkdir(parents=True, exist_ok=True)
    return out


def main(step: Callable[[Path], str]) -> int:
    """Run one step, print a one-line summary, never raise (the batch goes on)."""
    out = out_dir()
    start = time.monotonic()
    try:
        print(f"{step.__name__}: {step(out)} ({time.monotonic() - start:.1f} s)")
    except (subprocess.SubprocessError, OSError) as error:
        detail = getattr(error, "stderr", "") or ""
        print(f"{step.__name__} FAILED: {error}\n{str(detail)[-2000:]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    print("helper module: run gpu_models_occupancy.py, gpu_models_probes.py and "
          "gpu_models_kernels.py instead")
