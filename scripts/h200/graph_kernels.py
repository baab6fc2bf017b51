"""What a suite workload's CUDA graph runs, against its eager step: the GPU work of each, and
the masks its attention calls get eager and while the stream captures.

    OUT=dir PYTHONPATH=src python3 scripts/h200/graph_kernels.py bert_small_fp32_train   # H200

For a workload whose graphed step is slower than its eager one (bert_small_fp32_train on the
fast hosts of 2026-12-03): is the graph another step? distilbert's was
(``tests/data/diagnose/counterfactual_fourth/distilbert_graph_kernels.json``: transformers
hands SDPA a 4-D mask while a stream captures). The eager variant is the one the suite graphs
(the base, or its ``capturable_after`` fix). Each workload: both variants built, 3 rounds of
interleaved blocks (``protocol.interleaved``), then one step of each under torch.profiler
(CPU and CUDA), GPU time summed over kernels, copies and memsets (the recording of
2026-12-03 10:09 UTC also summed the optimizer's ``gpu_user_annotation``, 1.73 ms, into the
eager step's ``gpu_ms``: its test takes it out; user annotations are skipped since). Writes
``$OUT/graph_kernels.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import custom, hf, protocol, vision  # noqa: E402
from counterfactual.knobs import FIX_BY_NAME, Step, turned  # noqa: E402

WORKLOADS = {w.name: w for w in hf.WORKLOADS + vision.WORKLOADS + custom.WORKLOADS}


def gpu_work(step: Step) -> dict[str, Any]:
    """One step's GPU ops under torch.profiler: their count, time and the costliest names."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    by_name: dict[str, list[float]] = defaultdict(list)
    for event in prof.events():
        if (event.device_type == torch.autograd.DeviceType.CUDA
                and not getattr(event, "is_user_annotation", False)):
            by_name[event.name[:90]].append(event.device_time / 1000.0)
    top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:12]
    return {"gpu_ops": sum(len(v) for v in by_name.values()),
            "gpu_ms": round(sum(sum(v) for v in by_name.values()), 3),
            "top_ops": [{"name": n, "ms": round(sum(v), 3), "count": len(v)} for n, v in top]}


def run(name: str) -> dict[str, Any]:
    w = WORKLOADS[name]
    eager_knobs = (turned(w.base, FIX_BY_NAME[w.capturable_after]) if w.capturable_after
                   else w.base)
    calls: list[tuple[bool, str]] = []
    plain = F.scaled_dot_product_attention

    def recorded(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 attn_mask: torch.Tensor | None = None, *args: Any, **kwargs: Any) -> Any:
        mask = "None" if attn_mask is None else f"{attn_mask.dtype} {tuple(attn_mask.shape)}"
        calls.append((torch.cuda.is_current_stream_capturing(), mask))
        return plain(q, k, v, attn_mask, *args, **kwargs)

    F.scaled_dot_product_attention = recorded
    try:
        torch.manual_seed(0)
        eager = protocol.build_variant(w.build, eager_knobs, "cuda", False)
        protocol.warm(eager, 3, "cuda")
        graph = protocol.build_variant(w.build, w.graph_knobs(), "cuda", False)
        protocol.warm(graph, 3, "cuda")
    finally:
        F.scaled_dot_product_attention = plain
    masks = [{"capturing": c, "mask": m, "calls": n} for (c, m), n in Counter(calls).items()]
    times = protocol.interleaved({"eager": (eager, 2), "graphed": (graph, 2)}, 3,
                                 protocol.MEASURE, "cuda", mean=False)
    return {"eager_knobs": {k: v for k, v in vars(eager_knobs).items()},
            "sdpa_calls": masks,
            "block_ms": {k: [round(t, 4) for t in v] for k, v in times.items()},
            "eager": gpu_work(eager), "graphed": gpu_work(graph)}


def main(argv: list[str]) -> int:
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "recorded_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                           "workloads": {}}
    for name in argv or ["bert_small_fp32_train"]:
        try:
            doc["workloads"][name] = run(name)
        except Exception as error:  # one workload failing never stops the others
            doc["workloads"][name] = {"error": repr(error)[:400]}
        (out / "graph_kernels.json").write_text(json.dumps(doc, indent=1) + "\n")
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
