"""What a fix changes in a step of the counterfactual suite: both variants traced, side by side.

    OUT=dir PYTHONPATH=src python3 scripts/h200/fix_twins.py                    # the defaults
    OUT=dir PYTHONPATH=src python3 scripts/h200/fix_twins.py vit_small_fp32_train:tf32
    OUT=dir PYTHONPATH=src python3 scripts/h200/fix_twins.py --smoke            # CPU, tiny

The suite traces only the planted base of each workload, so where a fix measured something the
base's trace cannot explain, nothing shows what the fixed step ran. For each ``workload:fix``
this builds the base and the fixed variant, times both interleaved
(``counterfactual/protocol.py``: 3 rounds of 6 steps, CUDA events) and, apart, the host's own
time per step (wall clock of ``HOST_STEPS`` steps launched without a synchronization between
them, then one), then records a plain torch.profiler trace of one step of each (record_shapes)
and sums it: GPU kernel time per step, kernels per step, the kernels whose time changed most
between the variants (by name), and the trace's step span on the host. Writes
``$OUT/fix_twins/fix_twins.json`` (rewritten after each pair) and
``$OUT/fix_twins/<workload>.<variant>.trace.json.gz``, and the timed pairs as suite labels,
``$OUT/fix_twins/labels-twins.json`` (``aiprof.evaluation.labels.timed_pairs_as_suite``): copied
into the suite's folder as ``labels-twins-HHMM.json``, they are pooled with its own rounds.
Stops starting pairs after ``--budget-s`` (default 300 s).

The defaults are the truths docs/diagnose.md cannot explain from the base traces:
channels_last on the two depthwise nets (slower, though their depthwise convolutions and
BatchNorms are faster in NHWC on the H200: tests/data/diagnose/h200_depthwise_layouts.json),
TF32 on the FP32 ViT-S (5.2% measured where the replay says the step becomes host-bound at
20%), TF32 on the launch-bound 48-layer MLP (13.2% pooled, where TF32 changes no GPU time
that matters: do the FP32 split-K reduce kernels go?).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from aiprof.evaluation.labels import timed_pairs_as_suite

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import custom, hf, protocol, vision  # noqa: E402
from counterfactual.knobs import FIX_BY_NAME, FIXES, Step, turned  # noqa: E402
from counterfactual.workload import Workload  # noqa: E402

DEFAULT = ["efficientnet_b0_pageable_nchw_train:channels_last",
           "deeplabv3_mnv3_mask_train:channels_last", "vit_small_fp32_train:tf32",
           "mlp_deep_b32_infer:tf32"]
HOST_STEPS = 6
TOP = 15


def host_ms(step: Step, device: str) -> list[float]:
    """Wall-clock ms per step of ``HOST_STEPS`` steps launched back to back, three times."""
    out = []
    for _ in range(3):
        protocol.sync(device)
        began = time.perf_counter()
        for _ in range(HOST_STEPS):
            step()
        out.append(1e3 * (time.perf_counter() - began) / HOST_STEPS)
        protocol.sync(device)
    return out


def kernel_summary(path: Path) -> dict[str, Any]:
    """GPU kernel time and count of the trace's steps, per kernel name, and its step span."""
    doc = json.loads(gzip.open(path, "rt").read())
    events = doc.get("traceEvents", [])
    steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(
        "ProfilerStep#")]
    lo = min((float(e["ts"]) for e in steps), default=float("-inf"))
    hi = max((float(e["ts"]) + float(e["dur"]) for e in steps), default=float("inf"))
    per_name: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "kernel" and lo <= float(e["ts"]) <= hi:
            row = per_name[str(e["name"])[:160]]
            row[0] += 1
            row[1] += float(e["dur"])
    return {"host_step_span_ms": round((hi - lo) / 1e3, 3) if steps else None,
            "kernels": {n: [int(c), round(us, 1)] for n, (c, us) in per_name.items()}}


def compare(base: dict[str, Any], fixed: dict[str, Any]) -> dict[str, Any]:
    """Totals of both and the kernels whose time changed most (µs per step, fixed - base)."""
    kb, kf = base["kernels"], fixed["kernels"]
    delta = {n: round(kf.get(n, [0, 0.0])[1] - kb.get(n, [0, 0.0])[1], 1) for n in {*kb, *kf}}
    top = sorted(delta.items(), key=lambda kv: -abs(kv[1]))[:TOP]
    return {
        "gpu_ms": [round(sum(v[1] for v in k.values()) / 1e3, 3) for k in (kb, kf)],
        "kernels_per_step": [sum(v[0] for v in k.values()) for k in (kb, kf)],
        "host_step_span_ms": [base["host_step_span_ms"], fixed["host_step_span_ms"]],
        "changed_kernels_us": [{"name": n, "delta_us": d, "base": kb.get(n), "fixed": kf.get(n)}
                               for n, d in top],
    }


def measure(w: Workload, fix: str, device: str, smoke: bool, out: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    knobs = turned(w.base, FIX_BY_NAME[fix])
    variants = {"base": protocol.build_variant(w.build, w.base, device, smoke),
                fix: protocol.build_variant(w.build, knobs, device, smoke)}
    warmup = max(w.warmup(w.base), w.warmup(knobs))
    for step in variants.values():
        protocol.warm(step, 3, device)
    times = protocol.interleaved({n: (s, warmup) for n, s in variants.items()}, protocol.ROUNDS,
                                 protocol.MEASURE, device, mean=w.alternates)
    hosts = {n: host_ms(s, device) for n, s in variants.items()}
    summaries = {}
    for name, step in variants.items():
        trace = out / f"{w.name}.{name}.trace.json.gz"
        protocol.torch_trace(step, warmup, trace, device)
        summaries[name] = kernel_summary(trace)
    base_ms, fixed_ms = statistics.median(times["base"]), statistics.median(times[fix])
    return {
        "workload": w.name, "fix": fix,
        "rounds_ms": {n: [round(t, 4) for t in v] for n, v in times.items()},
        "gain_pct": round(100.0 * (1.0 - fixed_ms / base_ms), 2),
        "host_ms_per_step": {n: [round(t, 3) for t in v] for n, v in hosts.items()},
        **compare(summaries["base"], summaries[fix]),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="*", help=f"workload:fix (default: {' '.join(DEFAULT)})")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes")
    parser.add_argument("--budget-s", type=float, default=300.0)
    args = parser.parse_args(argv)
    known = {w.name: w for w in hf.WORKLOADS + vision.WORKLOADS + custom.WORKLOADS}
    pairs = [p.partition(":")[::2] for p in (args.pairs or DEFAULT)]
    if bad := [f"{n}:{f}" for n, f in pairs if n not in known or f not in FIX_BY_NAME]:
        print(f"unknown workload or fix: {', '.join(bad)}", file=sys.stderr)
        return 2
    device = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    out = Path(os.environ.get("OUT", ".")) / "fix_twins"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    began = time.monotonic()
    for name, fix in pairs:
        if time.monotonic() - began > args.budget_s:
            rows.append({"workload": name, "fix": fix, "error": "skipped: time budget"})
            continue
        try:
            rows.append(measure(known[name], fix, device, args.smoke, out))
        except Exception as error:  # one pair failing never stops the others
            traceback.print_exc()
            rows.append({"workload": name, "fix": fix, "error": f"{error!r}"[:400]})
        doc = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
               "torch": torch.__version__, "pairs": rows}
        (out / "fix_twins.json").write_text(json.dumps(doc, indent=1))
        labels = timed_pairs_as_suite(doc, {f.name: f.category for f in FIXES})
        (out / "labels-twins.json").write_text(json.dumps(labels, indent=1) + "\n")
        print(json.dumps(rows[-1])[:400], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
