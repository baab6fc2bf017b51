"""Columnar event tables: one frozen dataclass of equal-length numpy arrays per event kind.

Times are microseconds (float64) relative to ``Trace.origin_us``; integer columns hold
``-1`` where an event does not carry the field; ``*_id`` columns index ``Trace.strings``
(or ``Trace.json_texts`` for JSON-valued args such as ``Input Dims``). Integer columns are
int32 where every value fits, else int64, and a column of one value may be a read-only view
(``narrow.py``): derive new arrays from a column, never write into it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Self

import numpy as np

from aiprof.trace.narrow import concat_columns

F8 = np.float64
I8 = np.int64


@dataclass(frozen=True, eq=False)
class Table:
    """Base of every table: equal-length columns, filterable by a mask or index array."""

    def __len__(self) -> int:
        first = fields(self)[0]
        return len(getattr(self, first.name))

    def take(self, index: np.ndarray) -> Self:
        """Rows selected by a boolean mask or an integer index array, in that order."""
        return replace(self, **{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def columns(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def empty(cls) -> Self:
        return cls(**{f.name: np.zeros(0, dtype=_dtype(f.name)) for f in fields(cls)})

    @classmethod
    def concat(cls, parts: list[dict[str, np.ndarray]]) -> Self:
        """One table of ``parts`` (column dictionaries, handed over: each column is popped
        from them once built, so the parts and the table are not held whole together).
        Empty parts are skipped; a single part's arrays are used as they are."""
        names = [f.name for f in fields(cls)]
        parts = [part for part in parts if len(part[names[0]])]
        if not parts:
            return cls.empty()
        times = tuple(name for name in names if name.endswith("_us"))
        return cls(**concat_columns(names, parts, keep=times))


def _dtype(name: str) -> type:
    """Float columns are times and percentages; every other column is an int64."""
    return F8 if name.endswith(("_us", "_pct")) else I8


@dataclass(frozen=True, eq=False)
class SpanTable(Table):
    """Complete (``ph: X``) events: the columns every kind of span has."""

    ts_us: np.ndarray  # float64
    dur_us: np.ndarray  # float64
    name_id: np.ndarray  # into Trace.strings
    pid: np.ndarray  # GPU events: device index; non-numeric pids: NAMED_ID_BASE + CRC-32
    tid: np.ndarray  # GPU events: stream id

    @property
    def end_us(self) -> np.ndarray:
        return np.asarray(self.ts_us + self.dur_us)


@dataclass(frozen=True, eq=False)
class GpuOpTable(SpanTable):
    """Kernels, memcpys or memsets on a GPU stream."""

    device: np.ndarray
    stream: np.ndarray
    correlation: np.ndarray
    external_id: np.ndarray
    bytes: np.ndarray  # memcpy/memset bytes; -1 for kernels
    grid_x: np.ndarray
    grid_y: np.ndarray
    grid_z: np.ndarray
    block_x: np.ndarray
    block_y: np.ndarray
    block_z: np.ndarray
    registers_per_thread: np.ndarray
    shared_mem_bytes: np.ndarray
    est_occupancy_pct: np.ndarray  # float64, -1 when absent
    collective_id: np.ndarray  # Trace.strings id of "Collective name", -1 when absent
    in_nelems: np.ndarray
    out_nelems: np.ndarray
    group_size: np.ndarray
    dtype_id: np.ndarray
    launch_row: np.ndarray  # row in Trace.runtime of the launching call, -1 when unknown
    op_row: np.ndarray  # row in Trace.cpu_ops of the launching CPU op, -1 when unknown

    @property
    def threads_per_block(self) -> np.ndarray:
        return np.asarray(self.block_x.astype(I8) * self.block_y * self.block_z)

    @property
    def blocks(self) -> np.ndarray:
        """int64: the product of three int32 dimensions may not fit in 32 bits."""
        return np.asarray(self.grid_x.astype(I8) * self.grid_y * self.grid_z)


@dataclass(frozen=True, eq=False)
class RuntimeTable(SpanTable):
    """CUDA/HIP runtime and driver API calls on CPU threads."""

    correlation: np.ndarray
    external_id: np.ndarray
    is_driver: np.ndarray  # 1 for cuda_driver (cuLaunchKernel ...), else 0
    op_row: np.ndarray  # row in Trace.cpu_ops of the enclosing CPU op, -1 when unknown


@dataclass(frozen=True, eq=False)
class CpuOpTable(SpanTable):
    """ATen ops, autograd nodes, c10d ops and ``record_param_comms`` on CPU threads."""

    external_id: np.ndarray
    sequence_number: np.ndarray
    fwd_thread_id: np.ndarray
    input_dims_id: np.ndarray  # Trace.json_texts ids, -1 without record_shapes
    input_types_id: np.ndarray
    input_strides_id: np.ndarray
    concrete_inputs_id: np.ndarray
    collective_id: np.ndarray
    in_nelems: np.ndarray
    out_nelems: np.ndarray
    group_size: np.ndarray
    dtype_id: np.ndarray


@dataclass(frozen=True, eq=False)
class AnnotationTable(SpanTable):
    """``record_function`` ranges (CPU) or their projection on a GPU stream."""

    external_id: np.ndarray


@dataclass(frozen=True, eq=False)
class PythonTable(SpanTable):
    """``python_function`` frames (with_stack)."""

    python_id: np.ndarray
    parent_id: np.ndarray


@dataclass(frozen=True, eq=False)
class SyncTable(SpanTable):
    """``cuda_sync`` events: stream/event/context synchronization seen from the GPU."""

    correlation: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    wait_on_stream: np.ndarray
    wait_on_event_correlation: np.ndarray


@dataclass(frozen=True, eq=False)
class OtherSpanTable(SpanTable):
    """Complete events of any other category (profiler spans, overhead, other backends)."""

    category_id: np.ndarray


@dataclass(frozen=True, eq=False)
class FlowTable(Table):
    """Flow endpoints (``ac2g`` launch links, ``fwdbwd`` forward/backward links)."""

    ts_us: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    flow_id: np.ndarray
    phase: np.ndarray  # 0 start (s), 1 finish (f), 2 step (t)
    category_id: np.ndarray


@dataclass(frozen=True, eq=False)
class MemoryTable(Table):
    """Allocator events (``[memory]``); ``bytes`` is negative for frees."""

    ts_us: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    bytes: np.ndarray
    total_allocated: np.ndarray
    total_reserved: np.ndarray
    device_id: np.ndarray
    device_type: np.ndarray  # 0 CPU, 1 CUDA
    addr: np.ndarray


@dataclass(frozen=True, eq=False)
class InstantTable(Table):
    """Instant events other than ``[memory]``."""

    ts_us: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    name_id: np.ndarray


@dataclass(frozen=True, eq=False)
class StepTable(Table):
    """Iterations: ``ProfilerStep#N`` spans, or the documented fallback (see ``steps.py``)."""

    number: np.ndarray  # int64 step number (N of ProfilerStep#N, else 0..k-1)
    cpu_start_us: np.ndarray  # float64, the CPU span
    cpu_end_us: np.ndarray
    start_us: np.ndarray  # float64, clamped to the previous step's end
    end_us: np.ndarray  # extended to the end of the last GPU op launched inside the step

    @property
    def duration_us(self) -> np.ndarray:
        return np.asarray(self.end_us - self.start_us)
