"""Time the whole-step CUDA graph of the two ``empty_cache`` workloads once ``empty_cache`` is
gone, in a process that never calls it.

    OUT=dir PYTHONPATH=src python3 scripts/h200/graph_after_empty_cache.py [--rounds N]

The suite interleaves each fix's blocks with the planted base's in one process, and there
the graph's replays hit an illegal memory access (2026-12-02); alone they run
(``graph_probe.py``). So here, per workload, one process times the ``no_empty_cache`` step and
it graphed, interleaved (rotated rounds, 6 timed steps a block after 2 warm-up steps), and the
planted base in a process of its own just before, for the points of the planted step:
(no_empty_cache - graphed) / planted. Writes ``$OUT/graph_after_empty_cache/labels-graph-
after-empty-cache.json`` in the suite's labels format (a ``cuda_graph`` fix after
``no_empty_cache``) for pooling.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import custom, hf, protocol, vision  # noqa: E402

WORKLOADS = ("llama_fp32_empty_cache_train", "unet_bn_nchw_empty_cache_train")


def known() -> dict[str, object]:
    return {w.name: w for w in hf.WORKLOADS + vision.WORKLOADS + custom.WORKLOADS}


def planted_blocks(name: str, rounds: int) -> list[float]:
    """The planted base's block times (ms) in this process (which builds nothing else)."""
    w = known()[name]
    torch.manual_seed(0)
    step = protocol.build_variant(w.build, w.base, "cuda", False)
    protocol.warm(step, 3, "cuda")
    return [statistics.median(protocol.block_ms(step, 2, protocol.MEASURE, "cuda"))
            for _ in range(rounds)]


def after_and_graph(name: str, rounds: int) -> dict[str, list[float]]:
    """The no_empty_cache step and it graphed, interleaved, in this process."""
    w = known()[name]
    after = replace(w.base, no_empty_cache=True)
    torch.manual_seed(0)
    eager = protocol.build_variant(w.build, after, "cuda", False)
    protocol.warm(eager, 3, "cuda")
    torch.manual_seed(0)
    graph = protocol.build_variant(w.build, replace(after, cuda_graph=True), "cuda", False)
    protocol.warm(graph, 3, "cuda")
    return protocol.interleaved({"no_empty_cache": (eager, 2), "cuda_graph": (graph, 2)},
                                rounds, protocol.MEASURE, "cuda", mean=False)


def in_child(mode: str, name: str, rounds: int) -> object:
    done = subprocess.run([sys.executable, __file__, "--child", mode, name, str(rounds)],
                          capture_output=True, text=True, timeout=400, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("[", "{"))]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} {name}: exit {done.returncode}: {done.stderr[-800:]}")
    return json.loads(lines[-1])


def row(name: str, rounds: int) -> dict[str, object]:
    began = time.monotonic()
    planted = in_child("planted", name, rounds)
    timed = in_child("after", name, rounds)
    assert isinstance(planted, list) and isinstance(timed, dict)
    base = statistics.median(planted)
    ref, fixed = statistics.median(timed["no_empty_cache"]), statistics.median(timed["cuda_graph"])
    per_round = [100.0 * (r - f) / b for r, f, b in
                 zip(timed["no_empty_cache"], timed["cuda_graph"], planted, strict=False)]
    return {"workload": name, "base_ms": round(base, 4),
            "base_rounds_ms": [round(t, 4) for t in planted],
            "base_note": "timed in a process of its own just before the graph's (its "
                         "empty_cache() breaks a live graph's replays)",
            "fixes": [{"name": "cuda_graph", "category": "cpu_bound", "applicable": True,
                       "after_fixing": "no_empty_cache", "base_ms": round(base, 4),
                       "reference_ms": round(ref, 4), "fixed_ms": round(fixed, 4),
                       "gain_pct": round(100.0 * (ref - fixed) / base, 2),
                       "gain_of": "points of the planted step: (no_empty_cache - "
                                  "no_empty_cache graphed) / planted",
                       "rounds": len(timed["cuda_graph"]),
                       "reference_rounds_ms": [round(t, 4) for t in timed["no_empty_cache"]],
                       "fixed_rounds_ms": [round(t, 4) for t in timed["cuda_graph"]],
                       "round_gain_pct": [round(g, 2) for g in per_round],
                       "spread_pct": [round(min(per_round), 2), round(max(per_round), 2)]}],
            "wall_s": round(time.monotonic() - began, 1)}


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        mode, name, rounds = argv[1], argv[2], int(argv[3])
        out = planted_blocks(name, rounds) if mode == "planted" else after_and_graph(name, rounds)
        print(json.dumps(out))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    out = Path(os.environ.get("OUT", ".")) / "graph_after_empty_cache"
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []
    for name in WORKLOADS:
        try:
            rows.append(row(name, args.rounds))
        except Exception as error:  # one workload failing never stops the other
            rows.append({"workload": name, "error": f"{error!r}"[:600]})
        doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "recorded_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
               "method": __doc__.strip(), "workloads": rows}
        (out / "labels-graph-after-empty-cache.json").write_text(json.dumps(doc, indent=1))
        print(json.dumps(rows[-1])[:800], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
