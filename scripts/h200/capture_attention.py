"""What attention runs inside a CUDA graph capture: two probes behind distilbert's graph truth.

    OUT=dir PYTHONPATH=src python3 scripts/h200/capture_attention.py      # H200

The suite's graph of distilbert_sync_train runs FP32 SIMT GEMMs its eager step does not
(``tests/data/diagnose/counterfactual_fourth/distilbert_graph_kernels.json``). Two probes:

1. ``F.scaled_dot_product_attention`` alone (bf16, 24x12x256x64, forward and backward), with
   dropout 0 and 0.1, each backend allowed alone and the default choice: the kernels eager and
   replayed from a graph, the step's time each way. Does a capture change the backend?
2. distilbert_sync_train's sync-free step built as the suite builds it, with every call to
   ``scaled_dot_product_attention`` recorded: the mask it got, and whether a stream was
   capturing. transformers takes another branch while a stream captures (its ``is_tracing``
   includes ``torch.cuda.is_current_stream_capturing()``).

Writes ``$OUT/capture_attention.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from counterfactual import hf, protocol  # noqa: E402

BACKENDS = {"default": None, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}


def kernels(run: Callable[[], None]) -> list[tuple[str, int]]:
    """The GPU ops one call runs, by name (90 characters), most frequent first."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    names = Counter(e.name[:90] for e in prof.events()
                    if e.device_type == torch.autograd.DeviceType.CUDA)
    return names.most_common(8)


def ms_per_call(run: Callable[[], None], calls: int = 20) -> float:
    for _ in range(3):
        run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / calls


def attention_alone() -> list[dict[str, Any]]:
    q, k, v = (torch.randn(24, 12, 256, 64, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    cases = []
    for dropout in (0.0, 0.1):
        def step(p: float = dropout) -> None:
            F.scaled_dot_product_attention(q, k, v, dropout_p=p).sum().backward()
        for name, backend in BACKENDS.items():
            case: dict[str, Any] = {"dropout": dropout, "backend": name}
            allowed = sdpa_kernel([backend]) if backend is not None else sdpa_kernel(
                list(BACKENDS.values())[1:] + [SDPBackend.MATH])
            with allowed:
                try:
                    case["eager_ms"] = round(ms_per_call(step), 4)
                    case["eager_kernels"] = kernels(step)
                    replay = protocol.graphed(step, "default")  # PyTorch's TF32 defaults
                    case["graph_ms"] = round(ms_per_call(replay), 4)
                    case["graph_kernels"] = kernels(replay)
                except RuntimeError as error:
                    case["error"] = str(error).splitlines()[0][:200]
            cases.append(case)
    return cases


def distilbert_masks() -> dict[str, list[dict[str, Any]]]:
    calls: list[tuple[bool, bool, str]] = []
    plain = F.scaled_dot_product_attention

    def recorded(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 attn_mask: torch.Tensor | None = None, *args: Any, **kwargs: Any) -> Any:
        mask = "None" if attn_mask is None else f"{attn_mask.dtype} {tuple(attn_mask.shape)}"
        calls.append((attn_mask is None, torch.cuda.is_current_stream_capturing(), mask))
        return plain(q, k, v, attn_mask, *args, **kwargs)

    F.scaled_dot_product_attention = recorded
    try:
        workload = {w.name: w for w in hf.WORKLOADS}["distilbert_sync_train"]
        knobs = replace(workload.base, sync_free=True)
        torch.manual_seed(0)
        protocol.warm(protocol.build_variant(workload.build, knobs, "cuda", False), 3, "cuda")
        eager = list(calls)
        calls.clear()
        protocol.build_variant(workload.build, replace(knobs, cuda_graph=True), "cuda", False)
        graph = list(calls)
    finally:
        F.scaled_dot_product_attention = plain

    def counted(seen: list[tuple[bool, bool, str]]) -> list[dict[str, Any]]:
        return [{"mask_is_none": none, "capturing": capturing, "mask": mask, "calls": count}
                for (none, capturing, mask), count in Counter(seen).items()]
    return {"eager_warmup": counted(eager), "graph_warmup_and_capture": counted(graph)}


def main() -> int:
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "recorded_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
           "attention_alone": attention_alone(), "distilbert_sdpa_calls": distilbert_masks()}
    (out / "capture_attention.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
