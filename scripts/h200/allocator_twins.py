"""The caching allocator's own record of a step and of its fixed variants, for the allocator's
replay (``aiprof.diagnose.allocation_replay``) to be checked against.

    OUT=dir PYTHONPATH=src python3 scripts/h200/allocator_twins.py                # the defaults
    OUT=dir PYTHONPATH=src python3 scripts/h200/allocator_twins.py --smoke        # CPU, tiny

The fix twins (``fix_twins.py``) are plain torch.profiler traces without ``[memory]`` events, so
the replay's claim that ``channels_last`` makes the UNet's step call ``cudaMalloc`` more often
after ``empty_cache()`` (34 segments a step against 25 on the suite's recording; the twins
counted 41 against 29 cudaMalloc calls in another session) could only be checked by count.
For each ``workload:fix`` this builds the base and the fixed variant in one process, warms both
as the suite does, and records a torch.profiler trace of ``STEPS`` steps of each with
``profile_memory=True`` and ``record_shapes=True``: ``$OUT/allocator_twins/<workload>.<variant>
.trace.json.gz``. Then it replays: the base's events as recorded, the base without the
converting convolutions' scratch blocks (the model of ``channels_last``), and the fixed
variant's own events, and writes the new segments per step of each to
``$OUT/allocator_twins/allocator_twins.json``. No timing: about a minute on one H200.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import torch

from aiprof.analysis.layout import layout_conversions
from aiprof.diagnose.allocation_replay import allocation_events, replayed, scratch_inside
from aiprof.trace import load_trace

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import custom, hf, protocol, vision  # noqa: E402
from counterfactual.knobs import FIX_BY_NAME, Step, turned  # noqa: E402
from counterfactual.workload import Workload  # noqa: E402

DEFAULT = ["unet_bn_nchw_empty_cache_train:channels_last",
           "unet_bn_nchw_empty_cache_train:no_empty_cache"]
STEPS = 2
"""Steps traced (after one profiler warm-up step), as the suite's records."""


def memory_trace(step: Step, warmup: int, path: Path, device: str) -> None:
    """A torch.profiler trace of ``STEPS`` steps with the allocator's ``[memory]`` events."""
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    protocol.warm(step, warmup, device)
    with tempfile.TemporaryDirectory() as folder:
        raw = Path(folder) / "trace.json"
        with profile(activities=activities, record_shapes=True, profile_memory=True,
                     schedule=schedule(wait=0, warmup=1, active=STEPS, repeat=1),
                     on_trace_ready=lambda prof: prof.export_chrome_trace(str(raw))) as prof:
            for _ in range(1 + STEPS):
                step()
                prof.step()
        protocol.sync(device)
        protocol.gzip_to(raw, path)


def segments(path: Path) -> dict[str, Any]:
    """New segments per step: recorded, replayed, and replayed without the converting
    convolutions' scratch blocks."""
    trace = load_trace(path)
    events = allocation_events(trace)
    steps = max(len(trace.steps), 1)
    if events is None:
        return {"error": "no [memory] events"}
    layout = layout_conversions(trace)
    ops = trace.gpu_ops.op_row[layout.rows]
    scratch = scratch_inside(trace, events, ops[ops >= 0])
    return {"recorded_per_step": events.num_mallocs / steps,
            "replayed_per_step": replayed(events).num_mallocs / steps,
            "replay_agrees_on_events": int((replayed(events).new_segment
                                            == (events.new_segment_bytes > 0)).sum()),
            "events": len(events.rows),
            "without_conversion_scratch_per_step": replayed(events, scratch).num_mallocs / steps,
            "scratch_events": int(scratch.sum())}


def measure(w: Workload, fix: str, device: str, smoke: bool, out: Path) -> dict[str, Any]:
    torch.manual_seed(0)
    knobs = turned(w.base, FIX_BY_NAME[fix])
    variants = {"base": protocol.build_variant(w.build, w.base, device, smoke),
                fix: protocol.build_variant(w.build, knobs, device, smoke)}
    warmup = max(w.warmup(w.base), w.warmup(knobs))
    row: dict[str, Any] = {"workload": w.name, "fix": fix}
    for name, step in variants.items():
        path = out / f"{w.name}.{name}.trace.json.gz"
        memory_trace(step, warmup, path, device)
        row[name] = segments(path)
    return row


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="*", help=f"workload:fix (default: {' '.join(DEFAULT)})")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes")
    args = parser.parse_args(argv)
    known = {w.name: w for w in hf.WORKLOADS + vision.WORKLOADS + custom.WORKLOADS}
    pairs = [p.partition(":")[::2] for p in (args.pairs or DEFAULT)]
    if bad := [f"{n}:{f}" for n, f in pairs if n not in known or f not in FIX_BY_NAME]:
        print(f"unknown workload or fix: {', '.join(bad)}", file=sys.stderr)
        return 2
    device = "cpu" if args.smoke or not torch.cuda.is_available() else "cuda"
    out = Path(os.environ.get("OUT", ".")) / "allocator_twins"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for name, fix in pairs:
        try:
            rows.append(measure(known[name], fix, device, args.smoke, out))
        except Exception as error:  # one pair failing never stops the others
            traceback.print_exc()
            rows.append({"workload": name, "fix": fix, "error": f"{error!r}"[:400]})
        doc = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
               "torch": torch.__version__, "pairs": rows}
        (out / "allocator_twins.json").write_text(json.dumps(doc, indent=1))
        print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
