"""Memory timeline from the allocator's ``[memory]`` events (profile_memory=True).

Input is columns (timestamps, signed byte deltas, addresses, totals), so it works on any
trace table without torch. Lifetimes pair each allocation with the next free of its address.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from aiprof.errors import InputError

if TYPE_CHECKING:
    from aiprof.trace import Trace


@dataclass(frozen=True)
class Allocation:
    """One block: when it was allocated and freed (None if alive at the end)."""

    addr: int
    size_bytes: int
    alloc_us: float
    free_us: float | None

    @property
    def lifetime_us(self) -> float | None:
        """Free time minus allocation time (None while alive)."""
        return None if self.free_us is None else self.free_us - self.alloc_us


@dataclass(frozen=True)
class MemoryTimeline:
    """Allocated bytes over time on one device, its peak and what was alive then."""

    ts_us: np.ndarray
    allocated_bytes: np.ndarray
    """Allocated bytes after each event (the allocator's total when recorded, else the sum)."""
    peak_bytes: int
    peak_us: float
    num_allocations: int
    num_frees: int
    largest_at_peak: tuple[Allocation, ...]
    """The largest blocks alive at the peak, biggest first."""
    lifetimes: tuple[Allocation, ...]


def memory_timeline(
    ts_us: np.ndarray,
    bytes_delta: np.ndarray,
    addr: np.ndarray,
    total_allocated: np.ndarray | None = None,
    *,
    top: int = 10,
) -> MemoryTimeline:
    """Timeline, peak and largest live allocations at the peak from allocator events."""
    ts_us, bytes_delta, addr = (np.asarray(a) for a in (ts_us, bytes_delta, addr))
    if not (len(ts_us) == len(bytes_delta) == len(addr)):
        raise InputError("memory events: ts_us, bytes and addr must have the same length")
    if len(ts_us) == 0:
        raise InputError("no [memory] events: record the trace with profile_memory=True")
    order = np.argsort(ts_us, kind="stable")
    ts_us, bytes_delta, addr = ts_us[order], bytes_delta[order], addr[order]
    allocated = np.cumsum(bytes_delta)
    if total_allocated is not None:
        recorded = np.asarray(total_allocated)[order]
        allocated = np.where(recorded >= 0, recorded, allocated)
    peak_index = int(np.argmax(allocated))
    lifetimes = _lifetimes(ts_us, bytes_delta, addr)
    peak_us = float(ts_us[peak_index])
    alive = [
        a for a in lifetimes if a.alloc_us <= peak_us and (a.free_us is None or a.free_us > peak_us)
    ]
    alive.sort(key=lambda a: (-a.size_bytes, a.alloc_us))
    return MemoryTimeline(
        ts_us=ts_us,
        allocated_bytes=allocated,
        peak_bytes=int(allocated[peak_index]),
        peak_us=peak_us,
        num_allocations=int((bytes_delta > 0).sum()),
        num_frees=int((bytes_delta < 0).sum()),
        largest_at_peak=tuple(alive[:top]),
        lifetimes=tuple(lifetimes),
    )


def _lifetimes(ts_us: np.ndarray, delta: np.ndarray, addr: np.ndarray) -> list[Allocation]:
    open_blocks: dict[int, tuple[float, int]] = {}
    done: list[Allocation] = []
    for t, d, a in zip(ts_us.tolist(), delta.tolist(), addr.tolist(), strict=True):
        if d > 0:
            open_blocks[a] = (t, d)
        elif d < 0 and a in open_blocks:
            start, size = open_blocks.pop(a)
            done.append(Allocation(a, size, start, t))
    done.extend(Allocation(a, size, start, None) for a, (start, size) in open_blocks.items())
    return sorted(done, key=lambda x: (x.alloc_us, x.addr))


def trace_memory_timeline(
    trace: Trace, device_id: int | None = None, *, top: int = 10
) -> MemoryTimeline:
    """The timeline of one device's ``[memory]`` events in a trace (default: the GPU with the
    most events, else the CPU)."""
    memory = trace.memory
    if len(memory) == 0:
        raise InputError(f"{trace.path}: no [memory] events; record with profile_memory=True")
    if device_id is None:
        cuda = memory.device_type == 1
        pool = memory.device_id[cuda] if cuda.any() else memory.device_id
        device_id = int(np.bincount(pool - pool.min()).argmax() + pool.min())
        mask = (memory.device_id == device_id) & (cuda if cuda.any() else True)
    else:
        mask = memory.device_id == device_id
    if not mask.any():
        raise InputError(f"{trace.path}: no [memory] events on device {device_id}")
    return memory_timeline(
        memory.ts_us[mask],
        memory.bytes[mask],
        memory.addr[mask],
        memory.total_allocated[mask],
        top=top,
    )
