"""Independent counts of a trace, computed with orjson over the raw events (not aiprof's reader)."""

from __future__ import annotations

import gzip
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

KERNEL_CATS = {"kernel", "Kernel"}
RUNTIME_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
CPU_OP_CATS = {"cpu_op", "Operator"}


def raw_document(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return orjson.loads(data)


def independent_counts(path: Path) -> dict[str, Any]:
    doc = raw_document(path)
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and math.isfinite(e["ts"])]
    spans = [e for e in timed if e.get("ph") == "X"]
    cats = Counter(e.get("cat") for e in spans)
    kernels = [e for e in spans if e.get("cat") in KERNEL_CATS]
    step_names = {e["name"] for e in spans if re.fullmatch(r"ProfilerStep#\d+", e.get("name", ""))}
    info = doc.get("distributedInfo") or {}
    return {
        "events": len(events),
        "kernels": len(kernels),
        "kernel_dur_us": sum(float(e.get("dur", 0)) for e in kernels),
        "memcpy": sum(cats[c] for c in ("gpu_memcpy", "Memcpy")),
        "memset": sum(cats[c] for c in ("gpu_memset", "Memset")),
        "runtime": sum(cats[c] for c in RUNTIME_CATS),
        "cpu_ops": sum(cats[c] for c in CPU_OP_CATS),
        "python": cats["python_function"],
        "flows": sum(1 for e in timed if e.get("ph") in ("s", "f", "t")),
        "memory": sum(
            1 for e in timed if e.get("ph") in ("i", "I") and e.get("name") == "[memory]"
        ),
        "steps": len(step_names),
        "rank": info.get("rank"),
        "first_ts": min(float(e["ts"]) for e in timed),
    }
