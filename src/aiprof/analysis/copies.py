"""Memory copies inside the steps: direction, bytes, achieved GB/s, host memory kind, overlap.

Kineto names copies ``Memcpy HtoD (Pageable -> Device)``, ``Memcpy DtoH (Device -> Pinned)``
... (kineto-trace-format.md §3): the direction and whether the host side is pageable or
pinned come from the name. A copy is synchronous when the host memory is pageable or when it
was issued by the blocking ``cudaMemcpy`` (see ``sync.py``). Overlap is the share of the
copy's time that runs under a kernel (of any stream).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.classify import spans
from aiprof.analysis.gpu_window import gpu_window
from aiprof.analysis.sync import SYNC_COPY_CALL
from aiprof.trace import Trace
from aiprof.trace.links import gather

DIRECTION = re.compile(r"\b(HtoD|DtoH|DtoD|PtoP|HtoH)\b")
HOST_KIND = re.compile(r"Pageable|Pinned|Managed", re.I)


@dataclass(frozen=True)
class CopyGroup:
    """Copies of one direction and host-memory kind."""

    direction: str
    host_memory: str
    """``pageable``, ``pinned``, ``managed``, or ``-`` (device to device)."""
    num_copies: int
    total_bytes: int
    total_us: float
    achieved_gbps: float
    num_synchronous: int
    overlapped_pct: float


@dataclass(frozen=True)
class CopiesResult:
    """Copy groups (largest time first) and the rows of the copies, for the rules."""

    groups: list[CopyGroup]
    rows: np.ndarray
    """Rows of ``trace.gpu_ops`` of the copies inside the steps."""
    direction: list[str]
    host_memory: list[str]
    synchronous: np.ndarray


def copies(trace: Trace) -> CopiesResult:
    """Every memcpy that starts inside the steps, grouped by direction and host memory."""
    win = gpu_window(trace)
    ops = trace.gpu_ops
    first, last = len(trace.kernels), len(trace.kernels) + len(trace.memcpy)
    rows = win.rows[(win.rows >= first) & (win.rows < last)]
    names = [trace.name(int(i)) for i in ops.name_id[rows]]
    direction = [_match(DIRECTION, n, "other") for n in names]
    host = [_match(HOST_KIND, n, "-").lower() for n in names]
    launch = ops.launch_row[rows]
    sync_call = trace.strings.mask(gather(trace.runtime.name_id, launch, -1), SYNC_COPY_CALL)
    synchronous = (np.array([h == "pageable" for h in host], bool) | (sync_call & (launch >= 0)))
    kernels = spans(trace.kernels)
    groups = []
    for key in sorted(set(zip(direction, host, strict=True))):
        mine = np.array([(d, h) == key for d, h in zip(direction, host, strict=True)], bool)
        sel = rows[mine]
        nbytes = int(np.maximum(ops.bytes[sel], 0).sum())
        total = float(ops.dur_us[sel].sum())
        covered = iv.length(iv.intersect(iv.union(ops.ts_us[sel], ops.end_us[sel]), kernels))
        busy = iv.length(iv.union(ops.ts_us[sel], ops.end_us[sel]))
        groups.append(
            CopyGroup(
                direction=key[0],
                host_memory=key[1],
                num_copies=int(mine.sum()),
                total_bytes=nbytes,
                total_us=total,
                achieved_gbps=nbytes / total / 1e3 if total > 0 else 0.0,
                num_synchronous=int(synchronous[mine].sum()),
                overlapped_pct=100.0 * covered / busy if busy > 0 else 0.0,
            )
        )
    groups.sort(key=lambda g: (-g.total_us, g.direction, g.host_memory))
    return CopiesResult(groups, rows, direction, host, synchronous)


def _match(pattern: re.Pattern[str], text: str, default: str) -> str:
    found = pattern.search(text)
    return found.group(0) if found else default
