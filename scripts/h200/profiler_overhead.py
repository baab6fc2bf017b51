"""What torch.profiler adds to the host time of common calls, on this machine's CPU and GPU.

    OUT=/some/dir python3 scripts/h200/profiler_overhead.py

For each call (one op as a model would issue it, shapes from the diagnose suite): issue it
ITERS times and time the host from the first call until the last one returns, before any
synchronize (the GPU queue never fills: at most a few hundred launches are pending), once
plainly and once under torch.profiler with the diagnose suite's settings (CPU + CUDA
activities, record_shapes). Modes alternate (plain, profiled, plain, ...) REPEATS times; the
medians are kept. The profiled run also counts, per iteration, the CPU ops and the CUDA
runtime/driver calls the trace records. Writes $OUT/profiler_overhead.json. Needs only torch.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812
from torch.profiler import ProfilerActivity, profile

DEV = "cuda"
ITERS = 150
REPEATS = 5
Call = Callable[[], object]


def calls() -> dict[str, Call]:
    bf16 = torch.bfloat16
    big = torch.randn(4096, 4096, device=DEV, dtype=bf16)
    weight = torch.randn(4096, 4096, device=DEV, dtype=bf16)
    small = torch.randn(64, 64, device=DEV, dtype=bf16)
    vec = torch.randn(1024, device=DEV)
    images = torch.randn(8, 64, 32, 32, device=DEV, dtype=bf16)
    kernel = torch.randn(64, 64, 3, 3, device=DEV, dtype=bf16)
    rows = torch.randn(64, 1024, device=DEV)
    pinned = torch.randn(1024).pin_memory()
    return {
        "mm_4096_bf16": lambda: torch.mm(big, weight),
        "mm_64_bf16": lambda: torch.mm(small, small),
        "linear_4096_bf16": lambda: F.linear(big, weight),
        "item": lambda: big[0, 0].item(),
        "add": lambda: vec + vec,
        "mul_": lambda: vec.mul_(1.0),
        "select": lambda: big.select(0, 0),
        "t": lambda: weight.t(),
        "conv2d_bf16": lambda: F.conv2d(images, kernel, padding=1),
        "layer_norm": lambda: F.layer_norm(rows, (1024,)),
        "gelu": lambda: F.gelu(rows),
        "empty": lambda: torch.empty(4096, device=DEV),
        "copy_h2d_pinned": lambda: vec.copy_(pinned, non_blocking=True),
        "sum": lambda: rows.sum(),
        "item_sync_layer": lambda: _layer_with_checks(big, weight),
    }


def _layer_with_checks(x: torch.Tensor, weight: torch.Tensor) -> None:
    """One layer of the diagnose suite's item_sync case: a GEMM, then two element reads."""
    h = F.linear(x, weight)
    if h[0, 0].item() != h[0, 0].item():
        raise FloatingPointError("NaN")


def issue_us(call: Call) -> float:
    """Host microseconds per call over ITERS calls, the queue drained before and after."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(ITERS):
        call()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return 1e6 * elapsed / ITERS


def profiled_us(call: Call) -> tuple[float, float, float]:
    """Per call: host microseconds under the profiler, CPU ops and runtime calls recorded."""
    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=acts, record_shapes=True) as prof:
        us = issue_us(call)
    ops = runtime = 0
    for event in prof.key_averages():
        name = event.key
        if name.startswith(("cuda", "cu")) and not name.startswith("cudnn"):
            runtime += event.count
        elif "::" in name:
            ops += event.count
    # the two synchronize calls around the loop are recorded too
    return us, ops / ITERS, max(runtime - 2, 0) / ITERS


def main() -> None:
    out = Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, call in calls().items():
        try:
            for _ in range(20):
                call()
            plain, prof, ops, runtime = [], [], [], []
            for _ in range(REPEATS):
                plain.append(issue_us(call))
                us, n_ops, n_rt = profiled_us(call)
                prof.append(us)
                ops.append(n_ops)
                runtime.append(n_rt)
            results[name] = {
                "plain_us": statistics.median(plain),
                "profiled_us": statistics.median(prof),
                "overhead_us": statistics.median(p - q for p, q in zip(prof, plain, strict=True)),
                "cpu_ops_per_call": statistics.median(ops),
                "runtime_calls_per_call": statistics.median(runtime),
                "plain_runs_us": plain,
                "profiled_runs_us": prof,
            }
            print(name, json.dumps({k: v for k, v in results[name].items() if "runs" not in k}))
        except Exception as error:  # noqa: BLE001 (one call's failure must not stop the others)
            results[name] = {"error": repr(error)}
            print(name, "error", error)
    document = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "method": f"host time of {ITERS} calls issued back to back, plain vs torch.profiler "
        f"(CPU+CUDA, record_shapes), alternating, median of {REPEATS}",
        "calls": results,
    }
    (out / "profiler_overhead.json").write_text(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
