"""What a torch.compile'd step of the counterfactual suite still launches and costs the host.

    OUT=dir PYTHONPATH=src python3 scripts/h200/compiled_steps.py                # the defaults
    OUT=dir PYTHONPATH=src python3 scripts/h200/compiled_steps.py bert_small_fp32_train
    OUT=dir PYTHONPATH=src python3 scripts/h200/compiled_steps.py --smoke        # CPU, tiny

``diagnose/compiled.py`` models the compiled step from the eager trace. On the suite it is too
high where the compiled step stayed host-bound (bert_small, deeplabv3), and the eager trace
cannot say why: the compiled program (its graphs, graph breaks, recompilations, kernels and
host time per kernel) is not in it. For each workload this builds the planted base and its
``compile`` fix, records Dynamo's counters over the first steps (graphs, graph breaks and
their reasons, recompilations), times both interleaved (``counterfactual/protocol.py``: 3
rounds of 6 steps), then writes a plain torch.profiler trace of one compiled step
(record_shapes). Writes ``$OUT/compiled/compiled_steps.json`` (rewritten after each workload),
the timed pairs as suite labels, ``$OUT/compiled/labels-compiled.json`` (copied into the suite's
folder, they are pooled with its own rounds of ``compile``),
and ``$OUT/compiled/<w>.compiled.trace.json.gz``. Stops starting workloads after
``--budget-s`` (default 480 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from aiprof.evaluation.labels import timed_pairs_as_suite

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import calls, custom, hf, large, protocol, vision  # noqa: E402
from counterfactual.knobs import FIX_BY_NAME, FIXES, turned  # noqa: E402
from counterfactual.workload import Workload  # noqa: E402

DEFAULT = ["bert_small_fp32_train", "deeplabv3_mnv3_mask_train", "llama_tiny_b2_infer",
           "resnet50_pageable_bf16_infer", "vit_small_fp32_train", "conv_misaligned_bf16_infer"]
"""The compile truths the model misses or only just meets (docs/diagnose.md), and
llama_tiny, a host-bound one it meets."""


def dynamo_counters() -> dict[str, Any]:
    """Dynamo's counters so far: graphs compiled, graph breaks by reason, recompilations."""
    from torch._dynamo.utils import counters

    return {
        "stats": dict(counters["stats"]),
        "graph_breaks": dict(counters["graph_break"]),
        "recompiles": dict(counters.get("recompiles", {})),
    }


def measure(w: Workload, device: str, smoke: bool, out: Path) -> dict[str, Any]:
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    torch._dynamo.reset()
    counters.clear()  # per workload (reset() keeps them)
    base = protocol.build_variant(w.build, w.base, device, smoke)
    protocol.warm(base, 3, device)
    knobs = turned(w.base, FIX_BY_NAME["compile"])
    began = time.monotonic()
    compiled = protocol.build_variant(w.build, knobs, device, smoke)
    first_s = protocol.warm(compiled, 3, device)
    counters = dynamo_counters()
    build_s = time.monotonic() - began
    warmup = w.warmup(w.base)
    times = protocol.interleaved({"base": (base, warmup), "compile": (compiled, warmup)},
                                 protocol.ROUNDS, protocol.MEASURE, device, mean=w.alternates)
    after = dynamo_counters()  # recompilations during the timed rounds show here
    trace = out / f"{w.name}.compiled.trace.json.gz"
    protocol.torch_trace(compiled, warmup, trace, device)
    base_ms, compiled_ms = statistics.median(times["base"]), statistics.median(times["compile"])
    return {
        "workload": w.name, "first_steps_s": round(first_s, 2), "build_s": round(build_s, 2),
        "dynamo_after_first_steps": counters, "dynamo_after_rounds": after,
        "base_rounds_ms": [round(t, 4) for t in times["base"]],
        "compile_rounds_ms": [round(t, 4) for t in times["compile"]],
        "gain_pct": round(100.0 * (1.0 - compiled_ms / base_ms), 2),
        "trace": trace.name,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", help=f"names (default: {' '.join(DEFAULT)})")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes")
    parser.add_argument("--budget-s", type=float, default=480.0)
    args = parser.parse_args(argv)
    known = {w.name: w for w in (hf.WORKLOADS + vision.WORKLOADS + custom.WORKLOADS
                                 + calls.WORKLOADS + large.WORKLOADS + large.LATER)}
    names = args.workloads or DEFAULT
    if unknown := [n for n in names if n not in known]:
        print(f"unknown workloads: {', '.join(unknown)}", file=sys.stderr)
        return 2
    device = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    out = Path(os.environ.get("OUT", ".")) / "compiled"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    began = time.monotonic()
    for name in names:
        if time.monotonic() - began > args.budget_s:
            rows.append({"workload": name, "error": "skipped: time budget"})
            continue
        try:
            rows.append(measure(known[name], device, args.smoke, out))
        except Exception as error:  # one workload failing never stops the others
            traceback.print_exc()
            rows.append({"workload": name, "error": f"{error!r}"[:400]})
        doc = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
               "torch": torch.__version__, "workloads": rows}
        (out / "compiled_steps.json").write_text(json.dumps(doc, indent=1))
        labels = timed_pairs_as_suite(doc, {f.name: f.category for f in FIXES})
        (out / "labels-compiled.json").write_text(json.dumps(labels, indent=1) + "\n")
        print(json.dumps(rows[-1])[:400], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
