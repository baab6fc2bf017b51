"""A Chrome/Perfetto JSON trace of one or several ranks, with aiprof's results on it.

Every rank becomes one process (``rank N``): its CPU threads keep their ids, its GPU streams
become threads ``GPU d stream s``; flows keep their ids, offset per rank so ranks never share
one. Added: counter tracks of each stream's launch queue and of the NVML samples, and one
slice per finding over the time ranges it applies to (``finding_ranges``), on a thread
``aiprof findings``. Times are microseconds on the ranks' common zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from aiprof.analysis.gpu_samples import SampleView
from aiprof.analysis.intervals import Intervals
from aiprof.analysis.queue import QueueResult
from aiprof.diagnose.finding import Finding
from aiprof.trace import Trace
from aiprof.trace.source import iter_blocks

STREAM_TID = 1_000_000_000
"""Thread ids of GPU streams: STREAM_TID + device * 100_000 + stream (above any OS tid)."""
FINDINGS_TID = 2_000_000_000
OVERLAP_TID = 3_000_000_000
"""Thread ids of the extra threads of overlapping slices (``nested``); all tids stay below
2**32, as Perfetto's JSON importer reads them as unsigned 32-bit (json_utils CoerceToUint32)."""
COUNTER_FIELDS = (("gpu_util_pct", "SM util %"), ("mem_util_pct", "mem util %"),
                  ("memory_used_bytes", "memory used bytes"), ("power_w", "power W"),
                  ("sm_clock_mhz", "SM clock MHz"), ("mem_clock_mhz", "mem clock MHz"))
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation",
                            "cuda_sync", "Kernel", "Memcpy", "Memset"})
FLOW_PHASES = frozenset({"s", "t", "f"})


def rank_events(trace: Trace, pid: int, flow_offset: int) -> list[dict[str, Any]]:
    """The rank's own events, moved onto its process and the common clock. A flow's end on
    a GPU stream (Kineto writes it at the device's pid and the stream's tid) goes to that
    stream's thread, where its kernel is."""
    doc = msgspec.json.decode(b"".join(iter_blocks(Path(trace.path))))
    raw = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    out: list[dict[str, Any]] = []
    threads: dict[int, str] = {}
    streams: dict[tuple[Any, Any], int] = {}  # (Kineto pid, tid) of a stream -> its thread
    flows: list[tuple[dict[str, Any], Any, Any]] = []
    for event in raw:  # rewriting JSON objects: one pass over the file's events
        if not isinstance(event, dict) or event.get("ph") == "M" or "ts" not in event:
            continue
        moved = dict(event)
        moved["ts"] = round(float(event["ts"]) - trace.origin_us, 3)
        moved["pid"] = pid
        if event.get("ph") in FLOW_PHASES:
            flows.append((moved, event.get("pid"), event.get("tid")))
            if isinstance(event.get("id"), int):
                moved["id"] = event["id"] + flow_offset
        else:
            moved["tid"] = _tid(event, threads)
            if moved["tid"] >= STREAM_TID:
                streams.setdefault((event.get("pid"), event.get("tid")), moved["tid"])
        out.append(moved)
    for moved, kineto_pid, kineto_tid in flows:
        moved["tid"] = streams.get((kineto_pid, kineto_tid), _int(kineto_tid, 0))
    out += [_meta("thread_name", pid, tid, name) for tid, name in sorted(threads.items())]
    out.append(_meta("process_name", pid, 0, f"rank {trace.rank}"))
    out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                "args": {"sort_index": trace.rank}})
    return out


def queue_counters(result: QueueResult, pid: int) -> list[dict[str, Any]]:
    return [
        {"ph": "C", "name": f"queue GPU {s.device} stream {s.stream}", "pid": pid, "tid": 0,
         "ts": round(float(t), 3), "args": {"ops": float(v)}}
        for s in result.streams for t, v in zip(s.ts_us, s.length, strict=True)
    ]


def sample_counters(view: SampleView, pid: int) -> list[dict[str, Any]]:
    events = []
    for d in view.devices:
        for field, label in COUNTER_FIELDS:
            values = d.curves[field]
            events += [{"ph": "C", "name": f"GPU {d.device} {label}", "pid": pid, "tid": 0,
                        "ts": round(float(t), 3), "args": {"value": float(v)}}
                       for t, v in zip(d.t_us, values, strict=True) if not np.isnan(v)]
    return events


def finding_slices(findings: list[tuple[Finding, Intervals]], pid: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for k, (finding, (starts, ends)) in enumerate(findings):
        tid = FINDINGS_TID + k
        events.append(_meta("thread_name", pid, tid, f"aiprof finding: {finding.category}"))
        events += [{"ph": "X", "cat": "aiprof_finding", "name": finding.title, "pid": pid,
                    "tid": tid, "ts": round(float(s), 3), "dur": round(float(e - s), 3),
                    "args": {"category": finding.category,
                             "estimated_gain_pct": round(finding.estimated_gain_pct, 2),
                             "fix": finding.fix}}
                   for s, e in zip(starts, ends, strict=True)]
    return events


def document(events: list[dict[str, Any]], traces: list[Trace]) -> dict[str, Any]:
    """The output file: Kineto's top-level keys of the first rank, every rank's events."""
    first = traces[0].metadata if traces else {}
    kept = {k: v for k, v in first.items()
            if k in ("schemaVersion", "deviceProperties", "distributedInfo")}
    if traces and traces[0].base_time_ns is not None:  # wall clock of the new zero
        kept["baseTimeNanoseconds"] = traces[0].base_time_ns + round(traces[0].origin_us * 1000)
    return {**kept, "displayTimeUnit": "ms", "traceEvents": nested(events)}


def nested(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events with every thread's ``X`` slices nested, as Perfetto's JSON importer needs
    them (it lays partial overlaps out on an overflow track, or drops them): a slice that
    partially overlaps an open one of its thread (kernels of one stream overlap on Hopper
    with programmatic dependent launch) moves to an extra thread ``<name> (overlap N)``, and
    a flow that ends or starts at its start on that thread moves with it. Times are compared
    in whole nanoseconds, as Perfetto keeps them."""
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in events:
        if e.get("ph") == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    lanes: dict[tuple[int, int, int], int] = {}
    moved: dict[tuple[int, int, int], int] = {}
    for (pid, tid), slices in tracks.items():
        slices.sort(key=lambda e: (_ns(e["ts"]), -_ns(e["dur"])))
        open_ends: list[list[int]] = [[]]
        for e in slices:
            start, end = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
            lane = next((k for k, ends in enumerate(open_ends) if _fits(ends, start, end)),
                        len(open_ends))
            if lane == len(open_ends):
                open_ends.append([])
            open_ends[lane].append(end)
            if lane:
                e["tid"] = lanes.setdefault((pid, tid, lane), OVERLAP_TID + len(lanes))
                moved.setdefault((pid, tid, start), e["tid"])
    for e in events:
        if e.get("ph") in FLOW_PHASES:
            e["tid"] = moved.get((e["pid"], e["tid"], _ns(e["ts"])), e["tid"])
    extra = [_meta("thread_name", pid, new, f"{names.get((pid, tid), f'thread {tid}')} "
                   f"(overlap {lane})") for (pid, tid, lane), new in lanes.items()]
    return events + extra


def _fits(ends: list[int], start: int, end: int) -> bool:
    """Whether a slice nests on a lane whose open slices end at ``ends`` (closing those
    that ended by ``start``)."""
    while ends and ends[-1] <= start:
        ends.pop()
    return not ends or end <= ends[-1]


def _ns(us: Any) -> int:
    return round(float(us) * 1000)


def encode(doc: dict[str, Any]) -> bytes:
    return msgspec.json.encode(doc)


def _tid(event: dict[str, Any], threads: dict[int, str]) -> int:
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    if event.get("cat") in GPU_CATEGORIES or "stream" in (args or {}):
        device = _int((args or {}).get("device"), _int(event.get("pid"), 0))
        stream = _int((args or {}).get("stream"), _int(event.get("tid"), 0))
        tid = STREAM_TID + device * 100_000 + stream
        threads.setdefault(tid, f"GPU {device} stream {stream}")
        return tid
    tid = _int(event.get("tid"), 0)
    threads.setdefault(tid, f"thread {tid}")
    return tid


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _meta(name: str, pid: int, tid: int, value: str) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": {"name": value}}
