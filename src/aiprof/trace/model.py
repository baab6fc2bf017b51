"""``Trace``: one rank's profiler trace as columnar tables; ``TraceSet``: several ranks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any

import msgspec
import numpy as np

from aiprof.trace.devices import DeviceProperties, DistributedInfo
from aiprof.trace.strings import StringTable
from aiprof.trace.tables import (
    AnnotationTable,
    CpuOpTable,
    FlowTable,
    GpuOpTable,
    InstantTable,
    MemoryTable,
    OtherSpanTable,
    PythonTable,
    RuntimeTable,
    StepTable,
    SyncTable,
    Table,
)


@dataclass(frozen=True, eq=False)
class Trace:
    """A PyTorch profiler trace of one process (rank), read into columnar tables.

    All ``*_us`` columns are microseconds relative to ``origin_us`` (a timestamp of the
    file's own clock), or to the common zero of a ``TraceSet`` once aligned.
    """

    path: str
    rank: int
    metadata: dict[str, Any]
    devices: tuple[DeviceProperties, ...]
    distributed: DistributedInfo | None
    strings: StringTable
    json_texts: StringTable
    origin_us: float
    kernels: GpuOpTable
    memcpy: GpuOpTable
    memset: GpuOpTable
    runtime: RuntimeTable
    cpu_ops: CpuOpTable
    annotations: AnnotationTable
    gpu_annotations: AnnotationTable
    python_functions: PythonTable
    syncs: SyncTable
    other_spans: OtherSpanTable
    flows: FlowTable
    memory: MemoryTable
    instants: InstantTable
    steps: StepTable
    step_source: str
    num_events: int

    def name(self, name_id: int) -> str:
        return self.strings[name_id]

    def json_value(self, text_id: int) -> Any:
        """A JSON-valued arg (``Input Dims``, ``Input type`` ...) decoded; None if absent."""
        if text_id < 0:
            return None
        return msgspec.json.decode(self.json_texts[text_id])

    @property
    def device(self) -> DeviceProperties | None:
        """The GPU this rank ran its kernels on (the most used device index), if any."""
        if not self.devices:
            return None
        used = self.kernels.device[self.kernels.device >= 0]
        index = int(np.bincount(used).argmax()) if len(used) else self.devices[0].index
        return next((d for d in self.devices if d.index == index), self.devices[0])

    @property
    def base_time_ns(self) -> int | None:
        value = self.metadata.get("baseTimeNanoseconds")
        return value if isinstance(value, int) else None

    @cached_property
    def gpu_ops(self) -> GpuOpTable:
        """Kernels, memcpys and memsets in one table (kernels first)."""
        parts = [t.columns() for t in (self.kernels, self.memcpy, self.memset)]
        return GpuOpTable.concat(parts)

    @property
    def has_gpu(self) -> bool:
        return len(self.kernels) + len(self.memcpy) + len(self.memset) > 0

    def tables(self) -> Iterator[tuple[str, Table]]:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Table):
                yield f.name, value

    def to_pandas(self, table: str) -> Any:
        """One table (``"kernels"``, ``"cpu_ops"``, ...) as a pandas DataFrame, names resolved:
        ``name_id`` becomes ``name`` (text), ``input_dims_id`` becomes ``input_dims`` (decoded
        JSON). Needs pandas (``pip install pandas``)."""
        from aiprof.trace.frames import table_frame

        return table_frame(self, table)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{name}={len(table):,}" for name, table in self.tables() if len(table))
        device = self.device.name if self.device is not None else "no device properties"
        return (f"Trace(path={self.path!r}, rank={self.rank}, {device}, "
                f"events={self.num_events:,}, {sizes})")

    def without_flows(self) -> Trace:
        """The same trace with an empty flow table: the flows link launches to kernels while
        the trace is built (``trace.links``); no analysis reads them after that, and on a
        launch-heavy trace they hold a third of the tables (``aiprof report`` and
        ``diagnose`` of one large trace let them go; ``to_pandas("flows")`` keeps them)."""
        return replace(self, flows=FlowTable.empty())

    def shifted(self, delta_us: float) -> Trace:
        """The same trace with every timestamp moved by ``delta_us`` (origin moved back)."""
        if delta_us == 0:
            return self
        changes: dict[str, Any] = {"origin_us": self.origin_us - delta_us}
        for name, table in self.tables():
            moved = {
                column: values + delta_us
                for column, values in table.columns().items()
                if column.endswith("_us") and column != "dur_us"
            }
            changes[name] = replace(table, **moved)
        return replace(self, **changes)


@dataclass(frozen=True, eq=False)
class TraceSet:
    """Traces of several ranks (or runs), clocks put on a common zero, ordered by rank."""

    traces: tuple[Trace, ...]
    alignment: str  # how the common zero was found

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.traces)

    def __len__(self) -> int:
        return len(self.traces)

    def __repr__(self) -> str:
        return f"TraceSet(ranks={self.ranks}, alignment={self.alignment!r})"

    def __getitem__(self, index: int) -> Trace:
        return self.traces[index]

    @property
    def ranks(self) -> list[int]:
        return [t.rank for t in self.traces]

    def without_flows(self) -> TraceSet:
        """Every trace's ``Trace.without_flows``."""
        return replace(self, traces=tuple(t.without_flows() for t in self.traces))

    def rank(self, rank: int) -> Trace:
        for trace in self.traces:
            if trace.rank == rank:
                return trace
        raise KeyError(f"no trace of rank {rank}; ranks are {self.ranks}")
