"""Memory by op, from ``profile_memory`` events: live bytes over time per device, the peak,
the ops and tensors alive at the peak, and allocations attributed to the op that made them.

An allocator event belongs to the innermost CPU span of its thread that contains it (ATen
op, autograd node, ``record_function`` range or runtime call, nested as in the op view,
re-entries folded), as torch.profiler attributes memory: ``self_cpu_memory_usage`` in
``key_averages()`` is the signed sum of an op's own events, and events outside every op are
its ``[memory]`` row. An allocation's block lives
until the next event of its address on its device (the free); blocks never freed live to
the end. Live bytes are the allocator's ``Total Allocated`` when the trace records it, else
the running sum of the events.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from aiprof.analysis.cpu_forest import cpu_forest
from aiprof.analysis.frames import data_frame
from aiprof.trace import Trace


@dataclass(frozen=True)
class OpMemory:
    """Allocator events of one op name (its own, not its children's)."""

    name: str
    num_allocations: int
    allocated_bytes: int
    num_frees: int
    freed_bytes: int
    net_bytes: int
    """Allocated minus freed: torch's ``self_*_memory_usage``."""
    alive_at_peak_bytes: int
    """Bytes of this op's blocks still allocated at the device's peak."""


@dataclass(frozen=True, eq=False)
class DeviceMemory:
    """One device (``device_type`` 0 CPU, 1 CUDA; ``device`` its index)."""

    device_type: int
    device: int
    ts_us: np.ndarray
    live_bytes: np.ndarray
    peak_bytes: int
    peak_us: float
    num_alive_at_peak: int
    ops: list[OpMemory]
    """By bytes alive at the peak, then allocated bytes."""
    ops_at_peak: list[str]
    """The CPU op stack running at the peak, outermost first."""

    @property
    def label(self) -> str:
        """``CPU``, ``CUDA 0`` ... (Kineto's ``Device Type``: 0 CPU, 1 CUDA)."""
        kind = {0: "CPU", 1: "CUDA"}.get(self.device_type, f"device type {self.device_type}")
        return kind if self.device < 0 else f"{kind} {self.device}"

    def to_pandas(self) -> Any:
        names = [f.name for f in fields(OpMemory)]
        return data_frame({n: [getattr(o, n) for o in self.ops] for n in names})


@dataclass(frozen=True, eq=False)
class MemoryView:
    rank: int
    path: str
    devices: list[DeviceMemory]


UNATTRIBUTED = "[memory]"
"""The row of events outside every op (torch.profiler's name for it)."""


def memory_by_op(trace: Trace) -> MemoryView:
    """Every device's curve, peak and ops (see the module docstring)."""
    mem = trace.memory
    if len(mem) == 0:  # no curve: the CPU forest is not searched for owners
        return MemoryView(trace.rank, trace.path, [])
    order = np.argsort(mem.ts_us, kind="stable")
    ts, nbytes, addr = mem.ts_us[order], mem.bytes[order], mem.addr[order]
    names = _owner_names(trace, order)
    devices = []
    keys = mem.device_type[order].astype(np.int64) * (1 << 32) + (mem.device_id[order] + 1)
    for key in np.unique(keys):
        mine = keys == key
        devices.append(_device(trace, int(key >> 32), int(key & 0xFFFFFFFF) - 1, ts[mine],
                               nbytes[mine], addr[mine], mem.total_allocated[order][mine],
                               names[mine], mem.tid[order][mine]))
    return MemoryView(trace.rank, trace.path, devices)


def _owner_names(trace: Trace, order: np.ndarray) -> np.ndarray:
    """Name id of the span each memory event (in ``order``) belongs to, -1 for none."""
    mem = trace.memory
    forest = cpu_forest(trace)
    pids = np.concatenate([trace.cpu_ops.pid, trace.annotations.pid, trace.runtime.pid])
    tids = np.concatenate([trace.cpu_ops.tid, trace.annotations.tid, trace.runtime.tid])
    thread = _thread_of(pids, tids, forest.thread, mem.pid[order], mem.tid[order])
    owner = forest.kept_owner(forest.innermost(thread, mem.ts_us[order]))
    return np.where(owner >= 0, forest.name_id[np.maximum(owner, 0)], -1)


def _thread_of(span_pid: np.ndarray, span_tid: np.ndarray, span_thread: np.ndarray,
               pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """The forest's thread key of each (pid, tid), -1 for a thread without spans."""
    pids = np.unique(np.concatenate([span_pid, pid]))
    tids = np.unique(np.concatenate([span_tid, tid]))

    def key(p: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.searchsorted(pids, p) * len(tids) + np.searchsorted(tids, t)

    span_keys, first = np.unique(key(span_pid, span_tid), return_index=True)
    wanted = key(pid, tid)
    if len(span_keys) == 0:
        return np.full(len(wanted), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(span_keys, wanted), len(span_keys) - 1)
    return np.where(span_keys[pos] == wanted, span_thread[first[pos]], -1)


def _device(trace: Trace, device_type: int, device: int, ts: np.ndarray, nbytes: np.ndarray,
            addr: np.ndarray, total: np.ndarray, names: np.ndarray,
            tid: np.ndarray) -> DeviceMemory:
    live = np.where(total >= 0, total, np.cumsum(nbytes))
    peak = int(np.argmax(live))
    peak_us = float(ts[peak])
    free_at = _free_times(ts, addr)
    alive = (nbytes > 0) & (np.arange(len(ts)) <= peak) & (free_at > peak_us)
    ops = _by_op(trace, names, nbytes, alive)
    stack_rows = _stack(trace, peak_us, int(tid[peak]))
    return DeviceMemory(device_type, device, ts, live, int(live[peak]), peak_us,
                        int(alive.sum()), ops, [trace.name(int(r)) for r in stack_rows])


def _free_times(ts: np.ndarray, addr: np.ndarray) -> np.ndarray:
    """Per event: the time of the next event of its address (inf for the last)."""
    order = np.lexsort((np.arange(len(ts)), addr))
    same = np.concatenate([addr[order][1:] == addr[order][:-1], [False]])
    nxt = np.where(same, ts[np.concatenate([order[1:], [0]])], np.inf)
    out = np.empty(len(ts))
    out[order] = nxt
    return out


def _by_op(
    trace: Trace, names: np.ndarray, nbytes: np.ndarray, alive: np.ndarray
) -> list[OpMemory]:
    distinct, group = np.unique(names, return_inverse=True)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values, minlength=len(distinct))

    allocs, frees = nbytes > 0, nbytes < 0
    columns = [total(allocs.astype(float)), total(np.where(allocs, nbytes, 0)),
               total(frees.astype(float)), total(np.where(frees, -nbytes, 0)),
               total(nbytes.astype(float)), total(np.where(alive, nbytes, 0))]
    rows = [
        OpMemory(trace.name(int(n)) if n >= 0 else UNATTRIBUTED,
                 *(int(round(c[g])) for c in columns))
        for g, n in enumerate(distinct)
    ]
    rows.sort(key=lambda r: (-r.alive_at_peak_bytes, -r.allocated_bytes, r.name))
    return rows


def _stack(trace: Trace, at_us: float, tid: int) -> list[int]:
    """Name ids of the CPU ops of thread ``tid`` running at ``at_us``, outermost first."""
    ops = trace.cpu_ops
    running = np.flatnonzero((ops.tid == tid) & (ops.ts_us <= at_us) & (ops.end_us >= at_us))
    running = running[np.lexsort((-ops.dur_us[running], ops.ts_us[running]))]
    return list(ops.name_id[running].tolist())
