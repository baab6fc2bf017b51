"""What the profiler costs an eager step and its torch.compile'd twin, per kind of event.

    OUT=dir PYTHONPATH=src python3 scripts/h200/compiled_profiler_cost.py             # defaults
    OUT=dir PYTHONPATH=src python3 scripts/h200/compiled_profiler_cost.py distilbert_sync_train
    OUT=dir PYTHONPATH=src python3 scripts/h200/compiled_profiler_cost.py --smoke     # CPU, tiny

The compile model's host costs are read off profiled compiled steps in units of each trace's
launch call and applied in the eager trace's (``diagnose/compiled_host.py``); counted exactly as
the compiled steps show, they still miss (docs/diagnose.md, the tenth pass): what differs is how
much of the profiler each trace's intervals and launch calls hold. Under the profiler Inductor
records every Triton launch with its arguments (``CachingAutotuner.run``), ATen records every
op, CUPTI every runtime call. For each workload this builds the planted base and its
``compile`` fix and times both, interleaved (3 rounds; a block 2 warm-up and 6 timed steps with
CUDA events), in four settings a round: no profiler; CUDA activity only (CUPTI's runtime calls
and kernels, no CPU op recorded); CPU and CUDA without shapes; CPU and CUDA with
``record_shapes`` (the suite's traces). After the rounds each profiled setting records one
more block and counts its events a step by kind (CPU ops, Triton launches among them, runtime
and driver calls, annotations) from its exported trace, so that the cost of each kind is
(the setting's step - the step without it) / its events. Writes
``$OUT/compiled_profiler_cost/profiler_cost.json`` (rewritten after each workload). Stops
starting workloads after ``--budget-s`` (default 480 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import custom, hf, protocol, vision  # noqa: E402
from counterfactual.knobs import FIX_BY_NAME, Step, turned  # noqa: E402
from counterfactual.workload import Workload  # noqa: E402

DEFAULT = ["distilbert_sync_train", "resnet34_nchw_bf16_train", "bert_small_fp32_train",
           "efficientnet_b0_pageable_nchw_train", "gpt2_vocab_bf16_train", "rl_policy_item_sync"]
"""The two compile misses of the tenth pass and four workloads that pin the host costs
(docs/diagnose.md: the hits and the false positive that bound one factor on them)."""
SETTINGS = ("none", "cuda_only", "cpu_cuda", "cpu_cuda_shapes")
WARMUP, MEASURE, ROUNDS = 2, protocol.MEASURE, protocol.ROUNDS


@contextmanager
def profiled(setting: str, device: str, export: Path | None = None) -> Iterator[None]:
    """The profiler as ``setting`` says (none: no profiler); ``export``: its trace there."""
    from torch.profiler import ProfilerActivity, profile

    if setting == "none":
        with nullcontext():
            yield
        return
    cuda = [ProfilerActivity.CUDA] if device == "cuda" else []
    activities = cuda if setting == "cuda_only" and cuda else [ProfilerActivity.CPU] + cuda
    with profile(activities=activities, record_shapes=setting == "cpu_cuda_shapes") as prof:
        yield
    if export is not None:
        prof.export_chrome_trace(str(export))


def timed_block(step: Step, setting: str, device: str) -> float:
    """The median step (ms) of one block under ``setting``."""
    with profiled(setting, device):
        return statistics.median(protocol.block_ms(step, WARMUP, MEASURE, device))


def counted_events(step: Step, setting: str, device: str) -> dict[str, float]:
    """Events a step of one block under ``setting``, by kind, from its exported trace."""
    with tempfile.TemporaryDirectory() as folder:
        raw = Path(folder) / "trace.json"
        with profiled(setting, device, raw):
            protocol.block_ms(step, 0, MEASURE, device)
        events = json.loads(raw.read_text()).get("traceEvents", [])
    kinds: dict[str, float] = {}
    for event in events:
        if event.get("ph") != "X":
            continue
        cat = str(event.get("cat", ""))
        kind = "triton" if cat == "cpu_op" and str(event.get("name", "")).startswith(
            "triton_") else cat
        kinds[kind] = kinds.get(kind, 0.0) + 1.0
    return {k: round(v / MEASURE, 1) for k, v in sorted(kinds.items())}


def measure(w: Workload, device: str, smoke: bool) -> dict[str, Any]:
    torch.manual_seed(0)
    torch._dynamo.reset()
    steps: dict[str, Step] = {"base": protocol.build_variant(w.build, w.base, device, smoke)}
    protocol.warm(steps["base"], 3, device)
    steps["compile"] = protocol.build_variant(w.build, turned(w.base, FIX_BY_NAME["compile"]),
                                              device, smoke)
    protocol.warm(steps["compile"], 3, device)
    rounds: dict[str, dict[str, list[float]]] = {v: {s: [] for s in SETTINGS} for v in steps}
    for _ in range(ROUNDS):
        for variant, step in steps.items():
            for setting in SETTINGS:
                rounds[variant][setting].append(round(timed_block(step, setting, device), 4))
    events = {variant: {s: counted_events(step, s, device) for s in SETTINGS if s != "none"}
              for variant, step in steps.items()}
    return {"workload": w.name, "rounds_ms": rounds, "events_per_step": events,
            "median_ms": {v: {s: round(statistics.median(t), 4) for s, t in r.items()}
                          for v, r in rounds.items()}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", help=f"names (default: {' '.join(DEFAULT)})")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes")
    parser.add_argument("--budget-s", type=float, default=480.0)
    args = parser.parse_args(argv)
    known = {w.name: w for w in hf.WORKLOADS + vision.WORKLOADS + custom.WORKLOADS}
    names = args.workloads or DEFAULT
    if unknown := [n for n in names if n not in known]:
        print(f"unknown workloads: {', '.join(unknown)}", file=sys.stderr)
        return 2
    device = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    out = Path(os.environ.get("OUT", ".")) / "compiled_profiler_cost"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    began = time.monotonic()
    for name in names:
        if time.monotonic() - began > args.budget_s:
            rows.append({"workload": name, "error": "skipped: time budget"})
            continue
        try:
            rows.append(measure(known[name], device, args.smoke))
        except Exception as error:  # one workload failing never stops the others
            traceback.print_exc()
            rows.append({"workload": name, "error": f"{error!r}"[:400]})
        doc = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
               "torch": torch.__version__, "settings": list(SETTINGS), "workloads": rows}
        (out / "profiler_cost.json").write_text(json.dumps(doc, indent=1))
        print(json.dumps(rows[-1])[:400], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
