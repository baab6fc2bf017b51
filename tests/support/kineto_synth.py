"""Build small Kineto traces by hand: steps of launches with known CPU and GPU times."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

H200_PROPS = {
    "id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000, "computeMajor": 9,
    "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
    "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
    "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472, "numSms": 132,
    "sharedMemPerBlockOptin": 232448,
}


@dataclass
class TraceBuilder:
    """Append CPU ops, launches, kernels, copies and syncs; ``write`` a .json.gz."""

    events: list[dict[str, Any]] = field(default_factory=list)
    correlation: int = 1000
    external: int = 1

    def step(self, number: int, ts: float, dur: float) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}",
                            "pid": 1, "tid": 1, "ts": ts, "dur": dur})

    def cpu_op(self, name: str, ts: float, dur: float, **args: Any) -> int:
        self.external += 1
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": {"External id": self.external, **args}})
        return self.external

    def annotation(self, name: str, ts: float, dur: float) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1,
                            "tid": 1, "ts": ts, "dur": dur})

    def runtime(self, name: str, ts: float, dur: float, external: int = 0) -> int:
        self.correlation += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": {"correlation": self.correlation,
                                                           "External id": external}})
        return self.correlation

    def kernel(self, name: str, launch_ts: float, start: float, dur: float, *, stream: int = 7,
               launch_dur: float = 5.0, grid: tuple[int, int, int] = (1024, 1, 1),
               external: int = 0) -> None:
        corr = self.runtime("cudaLaunchKernel", launch_ts, launch_dur, external)
        self.events.append({
            "ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": start,
            "dur": dur, "args": {"device": 0, "stream": stream, "correlation": corr,
                                 "External id": external, "grid": list(grid),
                                 "block": [256, 1, 1], "registers per thread": 32,
                                 "shared memory": 0}})

    def memcpy(self, name: str, launch_ts: float, launch_dur: float, start: float, dur: float,
               nbytes: int, *, stream: int = 7) -> None:
        corr = self.runtime("cudaMemcpyAsync", launch_ts, launch_dur)
        self.events.append({
            "ph": "X", "cat": "gpu_memcpy", "name": name, "pid": 0, "tid": stream, "ts": start,
            "dur": dur, "args": {"device": 0, "stream": stream, "correlation": corr,
                                 "bytes": nbytes}})

    def synced_steps(self, ops: list[tuple[str, str, dict[str, Any], float]],
                     steps: int = 3) -> None:
        """``steps`` steps of ``(kernel, op, op args, kernel µs)``: each op a 6 µs CPU op whose
        kernel is launched 1 µs in, ops 8 µs apart, kernels queued back to back (1 µs gaps)
        from 9 µs into the step; then ``cudaDeviceSynchronize`` until the last kernel ends,
        and the step's span 5 µs past it."""
        t = 0.0
        for s in range(steps):
            start, gpu = t, t + 9.0
            for kernel, op, args, dur in ops:
                ext = self.cpu_op(op, t, 6.0, **args)
                self.kernel(kernel, t + 1.0, gpu + 1.0, dur, external=ext)
                gpu += 1.0 + dur
                t += 8.0
            self.runtime("cudaDeviceSynchronize", t, gpu - t + 2.0)
            self.step(s, start, gpu - start + 5.0)
            t = gpu + 6.0

    def write(self, path: Path, **metadata: Any) -> Path:
        doc = {"schemaVersion": 1, "deviceProperties": [H200_PROPS], "traceEvents": self.events,
               **metadata}
        with gzip.open(path, "wt") as f:
            json.dump(doc, f)
        return path


def launch_bound(path: Path, steps: int = 3, kernels: int = 50, cpu_gap: float = 20.0,
                 kernel_us: float = 4.0) -> Path:
    """Tiny kernels launched every ``cpu_gap`` µs: the GPU waits for the host."""
    b = TraceBuilder()
    t = 0.0
    for s in range(steps):
        start = t
        for _ in range(kernels):
            b.kernel("void at::native::vectorized_elementwise_kernel<4, AddFunctor>", t + 1,
                     t + 1 + 5 + 5, kernel_us)
            t += cpu_gap
        b.step(s, start, t - start)
        t += 1
    return b.write(path)


def gpu_bound(path: Path, steps: int = 3, kernels: int = 20, kernel_us: float = 500.0) -> Path:
    """Big GEMMs launched far ahead: the queue never empties (a healthy step)."""
    b = TraceBuilder()
    t, gpu = 0.0, 20.0
    for s in range(steps):
        start = t
        for _ in range(kernels):
            gpu = max(gpu, t + 10)
            b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", t, gpu,
                     kernel_us, launch_dur=4.0)
            gpu += kernel_us + 1.0
            t += 10.0
        end = gpu
        b.step(s, start, end - start)
        t = end + 1
    return b.write(path)


def cpu_bound_with_ops(path: Path, steps: int = 3, launches: int = 20, ops_per_launch: int = 4,
                       op_gap_us: float = 10.0, **metadata: Any) -> tuple[Path, int]:
    """Each launch preceded by ``ops_per_launch`` recorded CPU ops ``op_gap_us`` apart: a
    launch-bound step whose CPU time is all in recorded events. Returns the path and the
    number of recorded CPU-side events per step (ops and launch calls)."""
    b = TraceBuilder()
    t = 0.0
    for s in range(steps):
        start = t
        for _ in range(launches):
            for _ in range(ops_per_launch):
                b.cpu_op("aten::add", t, 2.0)
                t += op_gap_us
            b.kernel("void at::native::vectorized_elementwise_kernel<4, AddFunctor>", t,
                     t + 4.0 + 2.0, 3.0, launch_dur=4.0)
            t += 5.0
        b.step(s, start, t - start + 10.0)
        t += 11.0
    return b.write(path, **metadata), launches * (ops_per_launch + 1)
