"""Joins between tables (kineto-trace-format.md §6).

- runtime call -> GPU op: equal ``correlation`` (unique per process; preferred over flows).
- CPU op -> runtime call: equal ``External id`` (the innermost op active at launch); where a
  call has none, the latest-starting op on the same thread that contains it.
- GPU op -> CPU op: through its launching runtime call, else its own ``External id``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from aiprof.trace.tables import CpuOpTable, GpuOpTable, RuntimeTable


def lookup(keys: np.ndarray, table_keys: np.ndarray) -> np.ndarray:
    """For each key, the row of ``table_keys`` holding it (the first if repeated), else -1."""
    if len(table_keys) == 0 or len(keys) == 0:
        return np.full(len(keys), -1, dtype=np.int64)
    order = np.argsort(table_keys, kind="stable")
    sorted_keys = table_keys[order]
    pos = np.searchsorted(sorted_keys, keys)
    pos = np.minimum(pos, len(sorted_keys) - 1)
    found = (sorted_keys[pos] == keys) & (keys >= 0)
    return np.where(found, order[pos], -1)


def gather(values: np.ndarray, rows: np.ndarray, fill: float = -1) -> np.ndarray:
    """``values[rows]`` where ``rows >= 0``, ``fill`` elsewhere (safe on empty ``values``)."""
    if len(values) == 0:
        return np.full(len(rows), fill, dtype=np.result_type(values.dtype, type(fill)))
    return np.where(rows >= 0, values[np.maximum(rows, 0)], fill)


def enclosing_rows(
    ts_us: np.ndarray, end_us: np.ndarray, tid: np.ndarray, ops: CpuOpTable
) -> np.ndarray:
    """Row of the latest-starting op on the same thread containing each interval, else -1."""
    if len(ops) == 0 or len(ts_us) == 0:
        return np.full(len(ts_us), -1, dtype=np.int64)
    rows = np.full(len(ts_us), -1, dtype=np.int64)
    for thread in np.unique(tid):
        mine = np.flatnonzero(tid == thread)
        candidates = np.flatnonzero(ops.tid == thread)
        if len(candidates) == 0:
            continue
        order = candidates[np.argsort(ops.ts_us[candidates], kind="stable")]
        pos = np.searchsorted(ops.ts_us[order], ts_us[mine], side="right") - 1
        valid = pos >= 0
        row = order[np.maximum(pos, 0)]
        contains = valid & (ops.end_us[row] >= end_us[mine])
        rows[mine] = np.where(contains, row, -1)
    return rows


def link_runtime(runtime: RuntimeTable, ops: CpuOpTable) -> RuntimeTable:
    rows = lookup(runtime.external_id, ops.external_id)
    missing = rows < 0
    if missing.any():
        rows = rows.copy()
        rows[missing] = enclosing_rows(
            runtime.ts_us[missing], runtime.end_us[missing], runtime.tid[missing], ops
        )
    return replace(runtime, op_row=rows)


def link_gpu_ops(gpu: GpuOpTable, runtime: RuntimeTable, ops: CpuOpTable) -> GpuOpTable:
    launch = lookup(gpu.correlation, runtime.correlation)
    op_row = gather(runtime.op_row, launch)
    missing = op_row < 0
    if missing.any():
        op_row = np.where(missing, lookup(gpu.external_id, ops.external_id), op_row)
    return replace(gpu, launch_row=launch, op_row=op_row)
