"""Host-device synchronization points and the GPU idle time that follows each.

Sync points (CUDA Runtime API reference, "API synchronization behavior"):
- ``cudaDeviceSynchronize`` / ``cudaStreamSynchronize`` / ``cudaEventSynchronize`` (and the
  HIP names): the CPU blocks until the GPU work is done;
- blocking copies: ``cudaMemcpy`` (not ``Async``), and any copy to or from pageable host
  memory (device-to-pageable copies return only once complete; pageable-to-device copies
  wait for the stream before staging);
- ``aten::item`` / ``aten::_local_scalar_dense`` are reported as the call sites that caused
  them (``.item()``, ``.cpu()``, ``print(tensor)``, Python control flow on a tensor).
The GPU idle after a sync point is the time from the sync's end back to the end of the last
GPU op before it, up to the start of the next GPU op: the queue drained and refilled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from aiprof.analysis import intervals as iv
from aiprof.analysis.gpu_window import gpu_window
from aiprof.analysis.step_breakdown import in_window
from aiprof.trace import Trace

SYNC_CALL = re.compile(r"^(cuda|hip)(Device|Stream|Event|Ctx)Synchronize$|^cuCtxSynchronize$")
SYNC_COPY_CALL = re.compile(r"^(cuda|hip)Memcpy(2D|3D)?$|^cuMemcpy[DH]to[DH]$")
BLOCKING_COPY = re.compile(r"Pageable|DtoH|Device -> Host", re.I)
SCALAR_OP = re.compile(r"^aten::(item|_local_scalar_dense)$")


@dataclass(frozen=True)
class SyncPoints:
    """Every sync point inside the steps, as columns (one row per point)."""

    cpu_start_us: np.ndarray
    cpu_end_us: np.ndarray
    kind: list[str]
    """The runtime call's name, or ``copy: <memcpy name>`` for a blocking copy."""
    site: list[str]
    """The CPU op that issued it (``aten::_local_scalar_dense`` ...), or ``-``."""
    idle_after_us: np.ndarray
    call_row: np.ndarray
    """Row in ``trace.runtime`` of the synchronize call or of the copy's launch call."""
    gpu_row: np.ndarray
    """Row in ``trace.gpu_ops`` of a blocking copy, -1 for a synchronize call."""
    num_scalar_ops: int
    """``aten::item`` / ``aten::_local_scalar_dense`` calls inside the steps."""
    num_steps: int

    @property
    def blocked_us(self) -> float:
        return float(np.sum(self.cpu_end_us - self.cpu_start_us))

    @property
    def idle_after_total_us(self) -> float:
        return float(np.sum(self.idle_after_us))


def sync_points(trace: Trace) -> SyncPoints:
    """Synchronize calls and blocking copies that start inside the steps."""
    win = gpu_window(trace)
    rt, ops = trace.runtime, trace.gpu_ops
    is_sync = trace.strings.mask(rt.name_id, SYNC_CALL)
    calls = np.flatnonzero(is_sync & in_window(rt.ts_us, win.window))
    copy_rows = win.rows[(win.rows >= len(trace.kernels)) & (ops.launch_row[win.rows] >= 0)]
    blocking = trace.strings.mask(ops.name_id[copy_rows], BLOCKING_COPY)
    blocking |= trace.strings.mask(rt.name_id[ops.launch_row[copy_rows]], SYNC_COPY_CALL)
    copy_rows = copy_rows[blocking]
    call_rows = np.concatenate([calls, ops.launch_row[copy_rows]])
    gpu_rows = np.concatenate([np.full(len(calls), -1), copy_rows])
    order = np.argsort(rt.ts_us[call_rows], kind="stable")
    call_rows, gpu_rows = call_rows[order], gpu_rows[order]
    kinds = [
        trace.name(int(rt.name_id[c])) if g < 0 else f"copy: {trace.name(int(ops.name_id[g]))}"
        for c, g in zip(call_rows, gpu_rows, strict=True)
    ]
    sites = [
        trace.name(int(trace.cpu_ops.name_id[r])) if r >= 0 else "-" for r in rt.op_row[call_rows]
    ]
    scalar = trace.strings.mask(trace.cpu_ops.name_id, SCALAR_OP)
    scalar &= in_window(trace.cpu_ops.ts_us, win.window)
    return SyncPoints(
        cpu_start_us=rt.ts_us[call_rows],
        cpu_end_us=rt.end_us[call_rows],
        kind=kinds,
        site=sites,
        idle_after_us=_idle_after(trace, win.rows, rt.end_us[call_rows]),
        call_row=call_rows,
        gpu_row=gpu_rows,
        num_scalar_ops=int(scalar.sum()),
        num_steps=win.num_steps,
    )


def scalar_reads(trace: Trace, at_us: np.ndarray) -> iv.Intervals:
    """CPU spans of the scalar reads (``aten::item`` with its ``_local_scalar_dense``, merged)
    that contain one of the times ``at_us`` (sync calls): the reads that synchronized."""
    ops = trace.cpu_ops
    scalar = trace.strings.mask(ops.name_id, SCALAR_OP)
    starts, ends = iv.union(ops.ts_us[scalar], ops.end_us[scalar])
    if len(starts) == 0 or len(at_us) == 0:
        return iv.EMPTY
    hit = np.searchsorted(starts, at_us, side="right") - 1
    keep = np.unique(hit[iv.contains((starts, ends), at_us)])
    return starts[keep], ends[keep]


def _idle_after(trace: Trace, rows: np.ndarray, at_us: np.ndarray) -> np.ndarray:
    """GPU idle around each time: next op start minus the last end before it (>= 0)."""
    ops = trace.gpu_ops
    if len(rows) == 0 or len(at_us) == 0:
        return np.zeros(len(at_us))
    starts = ops.ts_us[rows]
    reach = np.maximum.accumulate(ops.end_us[rows])
    before = np.searchsorted(starts, at_us, side="right") - 1
    after = before + 1
    last_end = np.where(before >= 0, reach[np.maximum(before, 0)], np.nan)
    next_start = np.where(after < len(rows), starts[np.minimum(after, len(rows) - 1)], np.nan)
    idle = next_start - np.maximum(last_end, 0.0)
    return np.asarray(np.nan_to_num(np.maximum(idle, 0.0)))
