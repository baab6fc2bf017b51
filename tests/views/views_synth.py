"""Small hand-built Kineto traces for the views' tests (times in µs, known answers)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Builder:
    events: list[dict[str, Any]] = field(default_factory=list)
    correlation: int = 100
    external: int = 0

    def span(self, cat: str, name: str, ts: float, dur: float, *, pid: int = 1, tid: int = 1,
             **args: Any) -> dict[str, Any]:
        event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts,
                 "dur": dur, "args": args}
        self.events.append(event)
        return event

    def step(self, number: int, ts: float, dur: float) -> None:
        self.span("user_annotation", f"ProfilerStep#{number}", ts, dur)

    def op(self, name: str, ts: float, dur: float, *, tid: int = 1, **args: Any) -> int:
        self.external += 1
        self.span("cpu_op", name, ts, dur, tid=tid, **{"External id": self.external, **args})
        return self.external

    def kernel(self, name: str, launch_ts: float, start: float, dur: float, *,
               external: int = 0, stream: int = 7, call: str = "cudaLaunchKernel") -> int:
        self.correlation += 1
        self.span("cuda_runtime", call, launch_ts, 2.0, correlation=self.correlation,
                  **{"External id": external})
        self.span("kernel", name, start, dur, pid=0, tid=stream, device=0, stream=stream,
                  correlation=self.correlation, **{"External id": external})
        return self.correlation

    def write(self, path: Path, *, rank: int | None = None, world_size: int = 2) -> Path:
        """The trace as a Kineto JSON file (of rank ``rank`` of ``world_size``, if given)."""
        doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": self.events}
        if rank is not None:
            doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
        path.write_text(json.dumps(doc))
        return path
