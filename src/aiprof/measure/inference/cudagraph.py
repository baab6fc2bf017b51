"""A model step with and without CUDA graph replay, and the gain.

Capture follows the PyTorch CUDA graphs recipe (torch.cuda.graphs documentation, "Whole-network
capture"): warm up on a side stream, capture one forward into ``torch.cuda.CUDAGraph`` with static
input and output tensors, then replay after copying new inputs into the static input. Replay
launches the whole kernel sequence with one call, removing per-kernel CPU launch overhead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiprof.errors import UnsupportedDeviceError
from aiprof.measure.inference.bench import import_torch
from aiprof.measure.timing import Timing, is_cuda, time_calls, wall_us


@dataclass(frozen=True, kw_only=True)
class CudaGraphReport:
    """Eager against graph-replayed forward, per step."""

    device: str
    batch_size: int
    capture_us: float
    eager: Timing
    graph: Timing
    speedup: float
    """Eager P50 over graph P50."""
    max_abs_diff: float
    """Largest difference between eager and replayed outputs (should be ~0)."""


def measure_cuda_graph(model: Any, example: Any, *, device: str = "cuda", warmup: int = 5,
                       iters: int = 50) -> CudaGraphReport:
    """Time ``model(example)`` eagerly and as a replayed CUDA graph."""
    if not is_cuda(device):
        raise UnsupportedDeviceError("CUDA graphs need a CUDA device; pass --device cuda")
    torch = import_torch()
    if not torch.cuda.is_available():
        raise UnsupportedDeviceError("no CUDA device is available for CUDA graph capture")
    model = model.to(device).eval()
    static_in = example.to(device)
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()

        def capture() -> Any:
            with torch.cuda.graph(graph):
                return model(static_in)

        capture_us, static_out = wall_us(capture, device)
        eager = Timing.of(time_calls(lambda: model(static_in), device=device, warmup=warmup,
                                     iters=iters))
        replayed = Timing.of(time_calls(graph.replay, device=device, warmup=warmup,
                                        iters=iters))
        graph.replay()
        reference = model(static_in)
        torch.cuda.synchronize(device)
        diff = float((_first(reference).float() - _first(static_out).float()).abs().max())
    return CudaGraphReport(device=device, batch_size=int(static_in.shape[0]),
                           capture_us=capture_us, eager=eager, graph=replayed,
                           speedup=eager.p50_us / replayed.p50_us, max_abs_diff=diff)


def _first(output: Any) -> Any:
    if isinstance(output, (tuple, list)):
        return output[0]
    if hasattr(output, "last_hidden_state"):
        return output.last_hidden_state
    return output
