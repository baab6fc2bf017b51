"""Why a whole-step CUDA graph of a workload fails, recipe by recipe, each in its own process.

    OUT=dir PYTHONPATH=src python3 scripts/h200/graph_probe.py WORKLOAD [...] [--recipes a,b]

The suite's graphs of ``llama_fp32_empty_cache_train`` and ``unet_bn_nchw_empty_cache_train``
without their ``empty_cache`` hit an illegal memory access on the H200 (2026-12-02), so their
``cpu_bound`` claims (37.8% and 2.6%) have no truth. For each workload this captures the step
with ``no_empty_cache`` and ``cuda_graph`` under each recipe of ``RECIPES``, replays it 20
times and reports the first error (with ``CUDA_LAUNCH_BLOCKING=1``: at the kernel that failed),
each recipe in a fresh process (an illegal access ends the CUDA context). Writes
``$OUT/graph_probe/graph_probe.json``.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import custom, hf, vision  # noqa: E402
from counterfactual.knobs import Ctx, set_tf32  # noqa: E402

RECIPES = ("suite", "settled", "settled_grads_kept", "then_planted_step", "then_empty_cache")
"""``suite``: ``protocol.graphed`` (3 warm-up steps on a side stream, then the capture);
``settled``: 11 warm-up steps, then a synchronize and a garbage collection before the
capture; ``settled_grads_kept``: the same, the gradients zeroed in place rather than set to
None (their memory then outlives each replay); ``then_planted_step``: the suite's capture,
then one step of the planted base (its ``empty_cache()`` included) built in the same process
before the replays, as the suite's interleaved blocks do; ``then_empty_cache``: the suite's
capture, then ``torch.cuda.empty_cache()`` alone before the replays."""
REPLAYS = 20


def graphed(step: object, tf32: str, recipe: str) -> object:
    set_tf32(tf32)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3 if recipe == "suite" else 11):
            step()  # type: ignore[operator]
    torch.cuda.current_stream().wait_stream(stream)
    if recipe != "suite":
        torch.cuda.synchronize()
        gc.collect()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()  # type: ignore[operator]
    torch.cuda.synchronize()
    return graph.replay


def probe(name: str, recipe: str) -> dict[str, object]:
    """One recipe in this process: build, capture, replay; the error if any."""
    known = {w.name: w for w in hf.WORKLOADS + vision.WORKLOADS + custom.WORKLOADS}
    w = known[name]
    knobs = w.graph_knobs()
    from dataclasses import replace
    knobs = replace(knobs, no_empty_cache=True)
    if recipe == "settled_grads_kept":
        original = torch.optim.Optimizer.zero_grad

        def zero_in_place(self: torch.optim.Optimizer, set_to_none: bool = True) -> None:
            original(self, set_to_none=False)
        torch.optim.Optimizer.zero_grad = zero_in_place  # type: ignore[method-assign]
    began = time.monotonic()
    try:
        torch.manual_seed(0)
        step = w.build(Ctx(knobs, "cuda", False))
        planted = w.build(Ctx(w.base, "cuda", False)) if recipe == "then_planted_step" else None
        replay = graphed(step, knobs.tf32, "suite" if recipe.startswith("then_") else recipe)
        replay()  # type: ignore[operator]
        torch.cuda.synchronize()
        if planted is not None:
            planted()  # type: ignore[operator]
        elif recipe == "then_empty_cache":
            torch.cuda.empty_cache()
        for _ in range(REPLAYS):
            replay()  # type: ignore[operator]
        torch.cuda.synchronize()
        return {"workload": name, "recipe": recipe, "ok": True,
                "wall_s": round(time.monotonic() - began, 1)}
    except Exception as error:  # the point: which recipe fails, and where
        return {"workload": name, "recipe": recipe, "ok": False,
                "error": f"{error!r}"[:300], "where": traceback.format_exc()[-1500:],
                "wall_s": round(time.monotonic() - began, 1)}


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "--one":
        print(json.dumps(probe(argv[1], argv[2])))
        return 0
    out = Path(os.environ.get("OUT", ".")) / "graph_probe"
    out.mkdir(parents=True, exist_ok=True)
    recipes = RECIPES
    if "--recipes" in argv:
        at = argv.index("--recipes")
        recipes, argv = tuple(argv[at + 1].split(",")), argv[:at] + argv[at + 2:]
    rows = []
    for name in argv:
        for recipe in recipes:
            env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
            done = subprocess.run([sys.executable, __file__, "--one", name, recipe],
                                  capture_output=True, text=True, env=env, timeout=240,
                                  check=False)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
            rows.append(json.loads(lines[-1]) if lines else
                        {"workload": name, "recipe": recipe, "ok": False,
                         "error": f"exit {done.returncode}", "where": done.stderr[-1500:]})
            print(json.dumps(rows[-1])[:600], flush=True)
            (out / "graph_probe.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
