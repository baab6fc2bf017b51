"""The time between two kernels on one GPU: queued on a stream, and inside a CUDA graph.

    OUT=/some/dir python3 scripts/h200/graph_turnaround.py

``cpu_bound``'s replay of a whole-step CUDA graph needs what a graph leaves between two
kernels once the host is out of the way (docs/diagnose.md, the cpu_bound model). This measures
it on its own, apart from any workload: N tiny kernels (an in-place add on ELEMENTS values)
either launched on a stream behind a long sleep kernel (so they are all queued before the
first runs: the gaps are the GPU's, not the host's launch rate) or replayed from a graph; CUDA
events around the N kernels give the time per kernel, the profiler gives the kernels' own
duration, and the difference is the turnaround. ROUNDS rounds each, medians. Writes
``$OUT/graph_turnaround.json``. Needs only torch.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

KERNELS = 2000
ROUNDS = 7
ELEMENTS = (1, 4096, 1 << 20)
SLEEP_CYCLES = 200_000_000
"""About 0.1 s at the H200's 1.98 GHz: longer than the host needs to queue KERNELS launches."""


def _per_kernel_us(run: Callable[[], object]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(1000.0 * start.elapsed_time(end) / KERNELS)
    return statistics.median(times)


def _kernel_us(run: Callable[[], object]) -> float:
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    durations = [e.device_time for e in prof.events()
                 if e.device_type == torch.autograd.DeviceType.CUDA and "add" in e.name.lower()]
    return statistics.median(durations)


def measure(elements: int) -> dict[str, float | int]:
    x = torch.zeros(elements, device="cuda")

    def queued() -> None:
        for _ in range(KERNELS):
            x.add_(1.0)

    queued()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        queued()  # warm up on the capture stream
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(KERNELS):
                x.add_(1.0)
    torch.cuda.synchronize()
    stream_us = _per_kernel_us(queued)
    graph_us = _per_kernel_us(graph.replay)
    kernel_us = _kernel_us(queued)
    return {"elements": elements, "kernel_us": round(kernel_us, 4),
            "stream_per_kernel_us": round(stream_us, 4),
            "graph_per_kernel_us": round(graph_us, 4),
            "stream_turnaround_us": round(stream_us - kernel_us, 4),
            "graph_turnaround_us": round(graph_us - kernel_us, 4)}


def main() -> int:
    rows = [measure(n) for n in ELEMENTS]
    for row in rows:
        print(row, flush=True)
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "kernels": KERNELS, "rounds": ROUNDS, "rows": rows}
    out = Path(os.environ.get("OUT", ".")) / "graph_turnaround.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
