"""Check what the analyses read from a trace, column by column, and repair it by rule.

Every rule is vectorized over a table's columns (no per-event Python). A value no analysis
could use is repaired and counted; each rule that fired becomes one ``TraceRepairWarning``
naming the file, the field and the first event it touched. The rules (docs/reliability.md):

- durations that are negative, NaN or infinite become 0; durations above ``MAX_SPAN_US``
  drop their event, as do timestamps farther than ``MAX_SPAN_US`` from the trace's median;
- integer args outside their physical range become -1 (absent): device indices outside
  ``[0, MAX_DEVICES)``, grid/block dimensions outside ``[1, 2**31)``, registers per thread
  outside ``[0, MAX_REGISTERS]``, shared memory outside ``[0, MAX_SHARED_MEM_BYTES]``,
  negative correlations, byte counts and element counts, occupancy outside ``[0, 100]``;
- ``Input Dims`` holding a negative size is treated as absent.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import replace
from typing import Any

import msgspec
import numpy as np

from aiprof.trace.strings import StringTable
from aiprof.trace.tables import CpuOpTable, GpuOpTable, SpanTable, SyncTable

MAX_SPAN_US = 1e12
"""About 11.6 days. A profiler trace covers seconds to minutes (torch.profiler's schedule
records a few steps); an event this far from the rest is a broken clock, not a measurement."""
MAX_DEVICES = 4096
"""Device indices at or above this are not GPUs of one host (the largest NVLink domain,
GB200 NVL72, has 72 GPUs; NVIDIA GB200 NVL72 product brief, 2024)."""
MAX_REGISTERS = 255
"""Registers per thread (CUDA C++ Programming Guide, "Compute Capabilities", table 21)."""
MAX_SHARED_MEM_BYTES = 1 << 24
"""16 MiB: 70x the largest shared memory per SM (228 KiB on H100/H200, same guide)."""
MAX_DIM = 1 << 31
"""Grid x is at most 2**31 - 1 (same guide); anything at or above is not a launch."""


class TraceRepairWarning(UserWarning):
    """A trace held values no analysis can use; they were repaired by a documented rule."""


class Repairs:
    """Collects what was repaired in one file, then warns once per rule."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.notes: list[str] = []

    def note(
        self, table: str, field: str, count: int, rule: str, example: Any, unit: str = "event"
    ) -> None:
        """Record that ``count`` rows of ``table`` had ``field`` repaired by ``rule``."""
        if count:
            self.notes.append(
                f"{self.file}: {table}, field {field}: {count:,} {unit}(s) {rule} "
                f"(first: {_clip(str(example), 80)})"
            )

    def warn(self) -> None:
        for note in self.notes:
            warnings.warn(note, TraceRepairWarning, stacklevel=4)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_times(
    tables: dict[str, Any], repairs: Repairs, residuals: dict[str, np.ndarray | None]
) -> None:
    """Durations, then absurd timestamps and durations, in every table (in place; rows
    dropped from a table are dropped from its ``residuals`` too)."""
    stamps = [t.ts_us for t in tables.values() if len(t)]
    # the concatenation is ours: sorting it in place saves median's own copy (the same value)
    center = float(np.median(np.concatenate(stamps), overwrite_input=True)) if stamps else 0.0
    del stamps
    for name, table in list(tables.items()):
        if isinstance(table, SpanTable) and len(table):
            dur = table.dur_us
            bad = ~np.isfinite(dur) | (dur < 0)
            if bad.any():
                repairs.note(
                    name, "dur", int(bad.sum()), "negative or not a number: set to 0", dur[bad][0]
                )
                table = tables[name] = replace(table, dur_us=np.where(bad, 0.0, dur))
        if not len(table):
            continue
        far = np.abs(table.ts_us - center) > MAX_SPAN_US
        if isinstance(table, SpanTable):
            far |= table.dur_us > MAX_SPAN_US
        if far.any():
            repairs.note(
                name,
                "ts or dur",
                int(far.sum()),
                f"more than {MAX_SPAN_US:g} µs from the rest: dropped",
                table.ts_us[far][0],
            )
            tables[name] = table.take(~far)
            residual = residuals.get(name)
            if residual is not None:
                residuals[name] = residual[~far]


def _range(column: np.ndarray, low: float, high: float) -> np.ndarray:
    """Rows holding a value (not -1) outside ``[low, high]``."""
    return np.asarray((column != -1) & ((column < low) | (column > high)))


def _absent(
    tables: dict[str, Any], name: str, field: str, column: str, bad: np.ndarray,
    repairs: Repairs, label: str,
) -> None:
    """``column`` of table ``name`` with its ``bad`` rows -1 (a new array: a column may be a
    read-only view, ``narrow.compact``)."""
    values = getattr(tables[name], column)
    if bad.any():
        repairs.note(name, field, int(bad.sum()), f"{label}: treated as absent", values[bad][0])
        tables[name] = replace(tables[name], **{column: np.where(bad, -1, values)})


def check_args(tables: dict[str, Any], repairs: Repairs) -> None:
    """Integer args outside their physical range become -1 (in ``tables``; each repaired column
    a new array)."""
    for name in ("kernels", "memcpy", "memset"):
        gpu: GpuOpTable = tables[name]
        if not len(gpu):
            continue
        _absent(
            tables,
            name,
            "device",
            "device",
            _range(gpu.device, 0, MAX_DEVICES - 1),
            repairs,
            f"outside 0-{MAX_DEVICES - 1}",
        )
        dims = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
        bad_dims = np.zeros(len(gpu), dtype=bool)
        for column in dims:
            bad_dims |= _range(getattr(gpu, column), 1, MAX_DIM - 1)
        if bad_dims.any():
            repairs.note(
                name,
                "grid/block",
                int(bad_dims.sum()),
                f"outside 1-{MAX_DIM - 1}: treated as absent",
                gpu.grid_x[bad_dims][0],
            )
            tables[name] = replace(
                tables[name],
                **{column: np.where(bad_dims, -1, getattr(gpu, column)) for column in dims},
            )
        _absent(
            tables,
            name,
            "registers per thread",
            "registers_per_thread",
            _range(gpu.registers_per_thread, 0, MAX_REGISTERS),
            repairs,
            f"outside 0-{MAX_REGISTERS}",
        )
        _absent(
            tables,
            name,
            "shared memory",
            "shared_mem_bytes",
            _range(gpu.shared_mem_bytes, 0, MAX_SHARED_MEM_BYTES),
            repairs,
            f"outside 0-{MAX_SHARED_MEM_BYTES}",
        )
        occupancy = gpu.est_occupancy_pct
        bad = (occupancy != -1) & ~((occupancy >= 0) & (occupancy <= 100))
        if bad.any():
            repairs.note(
                name,
                "est. achieved occupancy %",
                int(bad.sum()),
                "outside 0-100: treated as absent",
                occupancy[bad][0],
            )
            tables[name] = replace(tables[name], est_occupancy_pct=np.where(bad, -1.0, occupancy))
        for column, field in (("correlation", "correlation"), ("bytes", "bytes")):
            _absent(tables, name, field, column, getattr(tables[name], column) < -1, repairs,
                    "negative")
    for name in ("kernels", "memcpy", "memset", "cpu_ops"):
        for column in ("in_nelems", "out_nelems", "group_size"):
            _absent(tables, name, column, column, getattr(tables[name], column) < -1, repairs,
                    "negative")
    syncs: SyncTable = tables["syncs"]
    _absent(
        tables,
        "syncs",
        "device",
        "device",
        _range(syncs.device, 0, MAX_DEVICES - 1),
        repairs,
        f"outside 0-{MAX_DEVICES - 1}",
    )
    runtime = tables["runtime"]
    _absent(
        tables,
        "runtime",
        "correlation",
        "correlation",
        runtime.correlation < -1,
        repairs,
        "negative",
    )


_NEGATIVE_NUMBER = re.compile(r"-\s*\d")


def check_shapes(cpu_ops: CpuOpTable, json_texts: StringTable, repairs: Repairs) -> CpuOpTable:
    """``Input Dims`` with a negative size (or not a list of lists) is treated as absent."""
    ids = cpu_ops.input_dims_id
    if not len(ids):
        return cpu_ops
    distinct = np.unique(ids[ids >= 0])
    texts = json_texts.values
    bad_ids = [int(i) for i in distinct.tolist() if _bad_dims(texts[i])]
    if not bad_ids:
        return cpu_ops
    bad = np.isin(ids, bad_ids)
    repairs.note(
        "cpu_ops",
        "Input Dims",
        int(bad.sum()),
        "negative or not sizes: treated as absent",
        texts[bad_ids[0]],
    )
    return replace(cpu_ops, input_dims_id=np.where(bad, -1, ids))


def _bad_dims(text: str) -> bool:
    if text[:1] == "[" and not _NEGATIVE_NUMBER.search(text) and text.count("[") < 64:
        return False
    if _depth(text) > MAX_DIMS_DEPTH:
        return True
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return True
    return not isinstance(value, list) or _any_negative(value)


MAX_DIMS_DEPTH = 4
"""``Input Dims`` is a list of shapes; a list of tensors nests one level more (depth 3)."""


def _depth(text: str) -> int:
    depth = deepest = 0
    for char in re.findall(r"[\[\]]", text):
        depth += 1 if char == "[" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_DIMS_DEPTH:
            break
    return deepest


def _any_negative(value: list[Any]) -> bool:
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and item < 0:
            return True
    return False
