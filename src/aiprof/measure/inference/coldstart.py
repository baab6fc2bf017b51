"""Cold start of a model: file read, deserialization, construction, move to device, first
inference, against a warm inference (chapter 33.3 "model loading and initialization").

The weights are written once as a ``state_dict`` with ``torch.save`` and read back, so the read
comes from the OS page cache unless the cache was dropped: it is a lower bound of a read from disk.
"""

from __future__ import annotations

import io
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiprof.measure.inference.bench import import_torch
from aiprof.measure.timing import Timing, is_cuda, time_calls, wall_us


@dataclass(frozen=True, kw_only=True)
class ColdStartReport:
    """Each step of bringing a model up, in microseconds, and the warm steady state."""

    device: str
    file_bytes: int
    read_us: float
    deserialize_us: float
    construct_us: float
    """Building the module and loading the state dict into it."""
    to_device_us: float
    first_inference_us: float
    warm: Timing
    cold_total_us: float
    first_over_warm: float
    """First inference time over warm P50: the one-time cost (allocation, kernel selection, lazy
    loading of kernels) paid by the first request."""
    cuda_init_us: float | None = None
    """Creating the CUDA context, when this process had not yet touched the GPU (None: it had,
    or no GPU). Not part of ``cold_total_us``, which starts with the context in place."""


def measure_coldstart(factory: Callable[[], Any], make_input: Callable[[int], Any], *,
                      device: str = "cpu", batch_size: int = 1, iters: int = 20,
                      workdir: str | None = None) -> ColdStartReport:
    """Run every cold-start step once, then time warm inference."""
    torch = import_torch()
    source = factory().eval()
    with tempfile.TemporaryDirectory(dir=workdir) as folder:
        path = Path(folder) / "model.pt"
        torch.save(source.state_dict(), path)
        size = path.stat().st_size
        read_us, data = wall_us(path.read_bytes)
    deserialize_us, state = wall_us(lambda: torch.load(io.BytesIO(data), weights_only=True))

    def construct() -> Any:
        model = factory().eval()
        model.load_state_dict(state)
        return model

    construct_us, model = wall_us(construct)
    cuda_init_us = _cuda_init_us(torch, device)
    to_device_us, model = wall_us(lambda: model.to(device), device)
    x = make_input(batch_size).to(device)

    def infer() -> Any:
        with torch.inference_mode():
            return model(x)

    first_us, _ = wall_us(infer, device)
    warm = Timing.of(time_calls(infer, device=device, warmup=2, iters=iters))
    total = read_us + deserialize_us + construct_us + to_device_us + first_us
    return ColdStartReport(device=device, file_bytes=size, read_us=read_us,
                           deserialize_us=deserialize_us, construct_us=construct_us,
                           to_device_us=to_device_us, first_inference_us=first_us, warm=warm,
                           cold_total_us=total, first_over_warm=first_us / warm.p50_us,
                           cuda_init_us=cuda_init_us)


def _cuda_init_us(torch: Any, device: str) -> float | None:
    """Time to create the CUDA context with a first synchronize, if not created yet."""
    if not is_cuda(device) or torch.cuda.is_initialized():
        return None
    begin = time.perf_counter_ns()
    torch.cuda.synchronize(device)
    return (time.perf_counter_ns() - begin) / 1e3



@dataclass(frozen=True, kw_only=True)
class CompileReport:
    """``torch.compile``: what the first call pays, and the steady-state gain over eager."""

    device: str
    first_call_us: float
    """First call of the compiled model: tracing, graph lowering, kernel code generation."""
    compiled: Timing
    eager: Timing
    speedup: float
    """Eager P50 over compiled P50."""
    calls_to_repay: float | None
    """Warm calls after which the compile time is paid back (None: compiled is not faster)."""


def measure_compile(model: Any, example: Any, *, device: str = "cpu", iters: int = 20,
                    mode: str | None = None) -> CompileReport:
    """Time the first call of ``torch.compile(model)`` and compiled against eager warm calls."""
    torch = import_torch()
    model = model.to(device).eval()
    x = example.to(device)
    compiled_model = torch.compile(model, mode=mode)

    def eager() -> Any:
        with torch.inference_mode():
            return model(x)

    def compiled() -> Any:
        with torch.inference_mode():
            return compiled_model(x)

    first_us, _ = wall_us(compiled, device)
    fast = Timing.of(time_calls(compiled, device=device, warmup=2, iters=iters))
    slow = Timing.of(time_calls(eager, device=device, warmup=2, iters=iters))
    saved = slow.p50_us - fast.p50_us
    return CompileReport(device=device, first_call_us=first_us, compiled=fast, eager=slow,
                         speedup=slow.p50_us / fast.p50_us,
                         calls_to_repay=first_us / saved if saved > 0 else None)
