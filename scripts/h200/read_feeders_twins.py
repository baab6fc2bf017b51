"""What a scalar read costs apart from the ops that only fed it: three variants timed apart.

    OUT=dir PYTHONPATH=src python3 scripts/h200/read_feeders_twins.py            # H200
    OUT=dir PYTHONPATH=src python3 scripts/h200/read_feeders_twins.py --smoke    # CPU, tiny

``host_sync``'s fix keeps a value on the GPU; the model removes each synchronizing read and,
from the allocator's events, the ops whose outputs only the read used
(``aiprof.analysis.read_feeders``: the ``mean`` of ``reward.mean().item()``, the norm of
``p.grad.norm().item()``). For the suite's two workloads with such reads this times, in
interleaved rounds (``counterfactual/protocol.py``), the planted step (``base``), the step with
the reads gone and their inputs still computed and kept on the GPU (``reads_only``:
``Knobs.reads_kept``), and the sync-free step (``sync_free``, the suite's truth). Then it
records an ``aiprof.profile`` of the base in the same process, so the model's estimate is
checked against a measurement of the same session's host. Writes
``$OUT/read_feeders_twins.json`` and ``$OUT/<workload>.aiprof.tar``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import custom, hf, protocol  # noqa: E402
from counterfactual.workload import Workload  # noqa: E402

WORKLOADS = ("rl_policy_item_sync", "distilbert_sync_train")
TIMED_S = 20.0
"""Rounds continue (up to ``protocol.MAX_ROUNDS``) until a workload's took this long: these
steps sit near the host/GPU balance, where the suite's rounds spread most."""


def measure(w: Workload, device: str, smoke: bool, out: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    knobs = {"base": w.base, "reads_only": replace(w.base, sync_free=True, reads_kept=True),
             "sync_free": replace(w.base, sync_free=True)}
    steps = {n: protocol.build_variant(w.build, k, device, smoke) for n, k in knobs.items()}
    for step in steps.values():
        protocol.warm(step, 3, device)
    times = protocol.interleaved({n: (s, 2) for n, s in steps.items()}, protocol.ROUNDS,
                                 protocol.MEASURE, device, mean=False, timed_s=TIMED_S,
                                 max_rounds=protocol.MAX_ROUNDS)
    with tempfile.TemporaryDirectory() as tmp:
        unprofiled = protocol.aiprof_record(steps["base"], 2, Path(tmp) / "record", w.name,
                                            device)
        with tarfile.open(out / f"{w.name}.aiprof.tar", "w") as tar:
            tar.add(Path(tmp) / "record", arcname=f"{w.name}.aiprof")
    base = statistics.median(times["base"])
    rounds = len(times["base"])
    return {
        "workload": w.name,
        "rounds": rounds,
        "rounds_ms": {n: [round(t, 4) for t in v] for n, v in times.items()},
        "median_ms": {n: round(statistics.median(v), 4) for n, v in times.items()},
        "gain_pct": {n: round(100.0 * (1.0 - statistics.median(v) / base), 2)
                     for n, v in times.items() if n != "base"},
        "round_gain_pct": {n: [round(100.0 * (1.0 - f / b), 2)
                               for f, b in zip(v, times["base"], strict=True)]
                           for n, v in times.items() if n != "base"},
        "capture_unprofiled_step_ms": [round(t, 4) for t in unprofiled],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes")
    args = parser.parse_args(argv)
    device = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    known = {w.name: w for w in hf.WORKLOADS + custom.WORKLOADS}
    doc: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "recorded_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "method": f"interleaved rounds (rotated), {protocol.MEASURE} steps a block after 2, "
                  f"median of each block, at least {protocol.ROUNDS} rounds and up to "
                  f"{protocol.MAX_ROUNDS} while under {TIMED_S:.0f} s; CUDA events",
        "workloads": [],
    }
    for name in WORKLOADS:
        began = time.monotonic()
        doc["workloads"].append(measure(known[name], device, args.smoke, out))
        print(f"{name}: {doc['workloads'][-1]['gain_pct']} in {time.monotonic() - began:.0f} s",
              flush=True)
        (out / "read_feeders_twins.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
