"""GIVEN 10,000 mutated traces (truncations, type swaps, missing keys, huge numbers, NaN, deep
nesting) WHEN each is loaded and summarized THEN the result is a summary or a TraceFormatError,
never another exception."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiprof import TraceFormatError, load_trace, summary

SEED: dict[str, Any] = {
    "schemaVersion": 1,
    "deviceProperties": [
        {
            "id": 0,
            "name": "NVIDIA H200",
            "computeMajor": 9,
            "computeMinor": 0,
            "numSms": 132,
            "warpSize": 32,
        }
    ],
    "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
    "traceEvents": [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#3",
            "pid": 1,
            "tid": 1,
            "ts": 100.5,
            "dur": 500,
            "args": {"External id": 1},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 110,
            "dur": 40,
            "args": {
                "External id": 2,
                "Input Dims": [[4, 8], [8, 4]],
                "Input type": ["float", "float"],
            },
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 120,
            "dur": 5,
            "args": {"External id": 2, "correlation": 9, "cbid": 211},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 130,
            "dur": 60,
            "args": {
                "External id": 2,
                "correlation": 9,
                "device": 0,
                "stream": 7,
                "grid": [4, 1, 1],
                "block": [128, 1, 1],
                "registers per thread": 32,
                "shared memory": 0,
            },
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ncclDevKernel_AllReduce",
            "pid": 0,
            "tid": 20,
            "ts": 150,
            "dur": 90,
            "args": {
                "correlation": 10,
                "stream": 20,
                "Collective name": "allreduce",
                "In msg nelems": 10,
            },
        },
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": 7,
            "ts": 200,
            "dur": 10,
            "args": {"bytes": 4096, "correlation": 11},
        },
        {"ph": "s", "id": 9, "pid": 1, "tid": 1, "ts": 120, "cat": "ac2g", "name": "ac2g"},
        {
            "ph": "f",
            "id": 9,
            "pid": 0,
            "tid": 7,
            "ts": 130,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        },
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "s": "t",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": 115,
            "args": {"Bytes": 64, "Total Allocated": 64, "Device Type": 1, "Device Id": 0},
        },
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
    ],
    "baseTimeNanoseconds": 1700000000000000000,
}

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
KEYS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args", "s", "bp"]
ARG_KEYS = [
    "External id",
    "correlation",
    "stream",
    "device",
    "grid",
    "block",
    "bytes",
    "registers per thread",
    "Input Dims",
    "Collective name",
    "Bytes",
    "Total Allocated",
]


@st.composite
def mutated_traces(draw: st.DrawFn) -> bytes:
    doc = json.loads(json.dumps(SEED))
    events = doc["traceEvents"]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["swap", "drop", "arg", "top", "dup", "nest"]))
        event = events[draw(st.integers(0, len(events) - 1))]
        if kind == "swap":
            event[draw(st.sampled_from(KEYS))] = draw(JSON_VALUES)
        elif kind == "drop":
            event.pop(draw(st.sampled_from(KEYS)), None)
        elif kind == "arg" and isinstance(event.get("args"), dict):
            event["args"][draw(st.sampled_from(ARG_KEYS))] = draw(JSON_VALUES)
        elif kind == "top":
            key = draw(
                st.sampled_from(
                    ["deviceProperties", "distributedInfo", "traceEvents", "baseTimeNanoseconds"]
                )
            )
            doc[key] = draw(JSON_VALUES)
        elif kind == "dup":
            events.extend([dict(event)] * draw(st.integers(1, 50)))
        else:
            depth = draw(st.integers(1, 5000))
            event["args"] = json.loads("[" * min(depth, 500) + "]" * min(depth, 500))
    text = json.dumps(doc).encode()
    special = draw(st.sampled_from(["none", "nan", "huge", "truncate", "gzip", "gzip_truncate"]))
    if special == "nan":
        text = text.replace(b"60", b"NaN", 1)
    elif special == "huge":
        text = text.replace(b"130", b"1e400", 1)
    elif special == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif special == "gzip":
        text = gzip.compress(text)
    elif special == "gzip_truncate":
        packed = gzip.compress(text)
        text = packed[: draw(st.integers(0, len(packed)))]
    return text


_DIR = Path(tempfile.mkdtemp(prefix="aiprof-fuzz-"))


@pytest.mark.slow  # 10,000 cases: about 70 s on a 2-core VM
@settings(
    max_examples=10_000,
    derandomize=True,  # the same 10,000 cases in every run: CI must not depend on luck
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated_traces())
def test_mutated_traces_give_a_result_or_trace_format_error(data: bytes) -> None:
    path = _DIR / ("t.json.gz" if data[:2] == b"\x1f\x8b" else "t.json")
    path.write_bytes(data)
    try:
        trace = load_trace(path)
    except TraceFormatError:
        return
    summary(trace)
