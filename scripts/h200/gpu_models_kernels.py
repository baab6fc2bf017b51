"""``aiprof kernels --ncu`` on a real PyTorch workload (one encoder layer), for the docs.

Runs, from the repo root with PYTHONPATH=src:
    python3 -m aiprof.cli.main kernels --ncu --launch-count 15 --nvprof-metrics ... \
        --save-csv $OUT/gpu_models/kernels_example.csv \
        -- python3 scripts/h200/gpu_models_workload.py
and keeps its terminal output in $OUT/gpu_models/kernels_example.txt. If aiprof's dependencies
(numpy, msgspec, rich) are missing on this machine, it runs the same ncu command line directly
(taken from aiprof.cli.kernels) so the CSV can be rendered later with
``aiprof kernels --csv-input tests/data/gpu_models/kernels_example.csv``.
    OUT=/tmp/out python3 scripts/h200/gpu_models_kernels.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import types
from pathlib import Path

import gpu_models_common as common

REPO = common.HERE.parents[1]
NVPROF = "gld_efficiency,achieved_occupancy,warp_execution_efficiency,branch_efficiency"
WORKLOAD = ["python3", str(common.HERE / "gpu_models_workload.py")]


def _env() -> dict[str, str]:
    paths = [str(REPO / "src"), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p), COLUMNS="110")
    return env


def _aiprof_importable() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import aiprof.cli.main"], env=_env(),
                           capture_output=True, check=False)
    return probe.returncode == 0


def _direct_ncu(csv: Path) -> str:
    # Load only the dependency-free modules (no numpy/msgspec/rich): stub the package inits.
    src = REPO / "src" / "aiprof"
    for name, path in (("aiprof", src), ("aiprof.gpu", src / "gpu"), ("aiprof.cli", src / "cli")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    from aiprof.cli.kernels import ncu_command
    from aiprof.gpu.ncu_metrics import default_metrics, translate

    args = argparse.Namespace(launch_count=15, launch_skip=0, kernel_regex=None,
                              cmd=["--", *WORKLOAD])
    extra = [name for metric in translate(NVPROF.split(",")) for name in metric.ncu]
    metrics = list(dict.fromkeys([*default_metrics(), *extra]))  # what --nvprof-metrics adds
    command = ncu_command("ncu", metrics, args, csv)
    done = common.run(command, timeout=80)
    if not csv.exists() or '"ID"' not in csv.read_text(errors="replace"):
        csv.write_text(done.stdout)  # this ncu printed the CSV to stdout despite --log-file
    return f"aiprof not importable here; ran ncu directly, CSV in {csv.name}"


def kernels_example(out: Path) -> str:
    csv = out / "kernels_example.csv"
    if not _aiprof_importable():
        return _direct_ncu(csv)
    command = [sys.executable, "-m", "aiprof.cli.main", "kernels", "--ncu", "--launch-count",
               "15", "--nvprof-metrics", NVPROF, "--save-csv", str(csv), "--", *WORKLOAD]
    print("+", " ".join(command), flush=True)
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=80,
                          check=False)
    (out / "kernels_example.txt").write_text(done.stdout + done.stderr[-3000:])
    return f"exit {done.returncode}; output in kernels_example.txt, CSV in {csv.name}"


if __name__ == "__main__":
    sys.exit(common.main(kernels_example))
