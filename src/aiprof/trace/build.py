"""Turn batches of decoded events into columnar tables, one batch at a time.

Events are grouped by category, their ``args`` decoded per kind in one call, and their
fields copied into numpy column chunks; the event objects are then dropped. Nothing
per-event survives a batch.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from aiprof.trace import fields, precise
from aiprof.trace import schema as s
from aiprof.trace.arg_columns import ArgColumns
from aiprof.trace.narrow import Repeated, compact_chunk, is_view, narrow, packable, unpacked
from aiprof.trace.strings import StringTable

(KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER, CPU_OP, ANNOTATION, GPU_ANNOTATION, PYTHON, SYNC) = range(
    10
)

SPAN_KIND_BY_CATEGORY = {
    # 2.x names, then the PyTorch 1.8/1.9 names (kineto-trace-format.md §4, §7)
    "kernel": KERNEL,
    "Kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "Memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "Memset": MEMSET,
    "cuda_runtime": RUNTIME,
    "Runtime": RUNTIME,
    "xpu_runtime": RUNTIME,
    "privateuse1_runtime": RUNTIME,
    "mtia_runtime": RUNTIME,
    "cuda_driver": DRIVER,
    "xpu_driver": DRIVER,
    "privateuse1_driver": DRIVER,
    "cpu_op": CPU_OP,
    "Operator": CPU_OP,
    "user_annotation": ANNOTATION,
    "gpu_user_annotation": GPU_ANNOTATION,
    "python_function": PYTHON,
    "cuda_sync": SYNC,
}
FLOW_PHASES = {"s": 0, "f": 1, "t": 2}

_ARGS_TYPE: dict[int, type] = {
    KERNEL: s.GpuOpArgs,
    MEMCPY: s.GpuOpArgs,
    MEMSET: s.GpuOpArgs,
    RUNTIME: s.RuntimeArgs,
    DRIVER: s.RuntimeArgs,
    CPU_OP: s.CpuOpArgs,
    ANNOTATION: s.AnnotationArgs,
    GPU_ANNOTATION: s.AnnotationArgs,
    PYTHON: s.PythonArgs,
    SYNC: s.SyncArgs,
}


Columns = dict[str, np.ndarray]

STRING_ID_COLUMNS = ("name_id", "category_id", "collective_id", "dtype_id")
"""Columns holding ids into ``TableBuilder.strings``."""
JSON_ID_COLUMNS = ("input_dims_id", "input_types_id", "input_strides_id", "concrete_inputs_id")
"""Columns holding ids into ``TableBuilder.json_texts``."""


@dataclass(frozen=True)
class BuiltPart:
    """What one process built from its share of a file's batches (see ``TableBuilder.merge``)."""

    chunks: dict[str, list[tuple[int, dict[str, np.ndarray | Repeated]]]]
    strings: list[str]
    json_texts: list[str]
    num_events: int
    num_skipped: int


class TableBuilder:
    """Accumulates column chunks per table across batches.

    Each chunk remembers the index of the batch it came from, so batches may be built out
    of order or by several processes (``export``/``merge``) and still concatenate in file
    order (``take_ordered_chunks``).
    """

    def __init__(self) -> None:
        self.strings = StringTable()
        self.json_texts = StringTable()
        self.chunks: dict[str, list[tuple[int, Columns]]] = defaultdict(list)
        self.num_events = 0
        self.num_skipped = 0
        self._batch_index = 0
        self._precise = False

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def add(self, batch: list[s.Event] | None, index: int = 0) -> None:
        """Add batch number ``index`` of a file; ``None`` discards everything added so far."""
        if batch is None:
            self.reset()
            return
        self._batch_index = index
        self._precise = isinstance(batch, precise.Batch)
        self.num_events += len(batch)
        for category, events in _group_by(batch, "cat"):
            kind = SPAN_KIND_BY_CATEGORY.get(category)
            if kind is not None and set(map(attrgetter("ph"), events)) == {"X"}:
                self._add_spans(kind, events)
            else:
                self._add_mixed(category, kind, events)

    def export(self) -> BuiltPart:
        """What this builder holds, to pickle (one-value columns as ``narrow.Repeated``)."""
        return BuiltPart(
            {table: [(index, packable(columns)) for index, columns in chunks]
             for table, chunks in self.chunks.items()},
            self.strings.values,
            self.json_texts.values,
            self.num_events,
            self.num_skipped,
        )

    def merge(self, part: BuiltPart) -> None:
        """Take in a part built elsewhere, its string ids renumbered into this builder's."""
        string_ids = self.strings.ids(part.strings)
        json_ids = self.json_texts.ids(part.json_texts)
        for table, chunks in part.chunks.items():
            for index, packed in chunks:
                columns = unpacked(packed)
                for name in STRING_ID_COLUMNS:
                    if name in columns:
                        columns[name] = _renumber(columns[name], string_ids)
                for name in JSON_ID_COLUMNS:
                    if name in columns:
                        columns[name] = _renumber(columns[name], json_ids)
                self.chunks[table].append((index, columns))
        part.chunks.clear()  # this builder holds the columns now, and frees them as it goes
        self.num_events += part.num_events
        self.num_skipped += part.num_skipped

    def take_ordered_chunks(self) -> dict[str, list[Columns]]:
        """Each table's chunks in file order, handed over (the builder keeps none)."""
        ordered = {}
        for table in list(self.chunks):
            chunks = self.chunks.pop(table)
            ordered[table] = [columns for _, columns in sorted(chunks, key=itemgetter(0))]
        return ordered

    def _emit(self, table: str, columns: Columns) -> None:
        self.chunks[table].append((self._batch_index, compact_chunk(columns)))

    def _add_mixed(self, category: str, kind: int | None, events: list[s.Event]) -> None:
        for phase, group in _group_by(events, "ph"):
            if phase == "X":
                if kind is None:
                    self._add_other(category, group)
                else:
                    self._add_spans(kind, group)
            elif phase in ("i", "I"):
                self._add_instants(group)
            elif phase in FLOW_PHASES:
                self._add_flows(category, group)
            else:  # M (metadata), C (counters), B/E and others carry nothing analysed
                self.num_skipped += len(group)

    def _residual(self, events: list[s.Event]) -> Columns:
        """The ``precise.RESIDUAL`` column of events whose timestamps lost digits, else none."""
        if not self._precise:
            return {}
        residual = _floats(events, "ts_residual")
        return {precise.RESIDUAL: residual} if residual.any() else {}

    def _common(self, events: list[s.Event], ts: np.ndarray) -> dict[str, np.ndarray]:
        return self._residual(events) | {
            "ts_us": ts,
            "dur_us": _floats(events, "dur"),
            "name_id": self.strings.ids_of(events, "name"),
            "pid": self._ints_or_ids(events, "pid"),
            "tid": self._ints_or_ids(events, "tid"),
        }

    def _ints_or_ids(self, objects: list[Any], field: str) -> np.ndarray:
        """pid/tid: integers as they are, "stream 7" as 7, other strings hashed (NAMED_ID_BASE)."""
        try:
            return _ints(objects, field)
        except (TypeError, ValueError, OverflowError):
            values = map(attrgetter(field), objects)
            out = [v if v.__class__ is int else self._string_pid(v) for v in values]
            return np.array(out, dtype=np.int64)

    def _string_pid(self, value: object) -> int:
        text = str(value).strip()
        tail = text.rsplit(" ", 1)[-1]
        if tail.isdigit():
            return int(tail)
        return _named_id(text)

    def _add_spans(self, kind: int, events: list[s.Event]) -> None:
        events, ts = _with_time(events)
        if not events:
            return
        args = ArgColumns(_ARGS_TYPE[kind], _joined_args(events))
        columns = self._common(events, ts)
        table = _SPAN_TABLE_OF_KIND[kind]
        if kind in (KERNEL, MEMCPY, MEMSET):
            columns |= self._gpu_columns(args)
        elif kind in (RUNTIME, DRIVER):
            columns |= _runtime_columns(args, kind == DRIVER)
        elif kind == CPU_OP:
            columns |= self._cpu_op_columns(args)
        elif kind in (ANNOTATION, GPU_ANNOTATION):
            columns["external_id"] = args.external_ids()
        elif kind == PYTHON:
            columns["python_id"] = args.ints("python_id")
            parents = [-1 if a.parent_id is None else a.parent_id for a in args.objects]
            columns["parent_id"] = np.array(parents, dtype=np.int64)
        elif kind == SYNC:
            for name in (
                "correlation",
                "device",
                "stream",
                "wait_on_stream",
                "wait_on_event_correlation",
            ):
                columns[name] = args.ints(name)
        self._emit(table, columns)

    def _gpu_columns(self, args: ArgColumns) -> Columns:
        grids, blocks = args.dims("grid"), args.dims("block")
        n = len(args)
        columns = {
            "device": args.ints("device"),
            "stream": args.streams(),
            "correlation": args.ints("correlation"),
            "external_id": args.external_ids(),
            "bytes": args.ints("bytes"),
            "grid_x": grids[:, 0],
            "grid_y": grids[:, 1],
            "grid_z": grids[:, 2],
            "block_x": blocks[:, 0],
            "block_y": blocks[:, 1],
            "block_z": blocks[:, 2],
            "registers_per_thread": args.ints("registers"),
            "shared_mem_bytes": args.ints("shared_mem"),
            "est_occupancy_pct": args.floats("est_occupancy"),
            "launch_row": np.full(n, -1, dtype=np.int64),
            "op_row": np.full(n, -1, dtype=np.int64),
        }
        return columns | self._collective_columns(args)

    def _collective_columns(self, args: ArgColumns) -> Columns:
        objects = args.objects
        if not args.strings_present("collective"):  # the common case: no collective args
            return {key: np.full(len(args), -1, dtype=np.int64) for key in COLLECTIVE_COLUMNS}
        names = self.strings.ids_of(objects, "collective")
        dtypes = self.strings.ids_of(objects, "dtype")
        empty = self.strings.id("")
        return {
            "collective_id": np.where(names == empty, -1, names),
            "in_nelems": args.ints("in_nelems"),
            "out_nelems": args.ints("out_nelems"),
            "group_size": args.ints("group_size"),
            "dtype_id": np.where(dtypes == empty, -1, dtypes),
        }

    def _cpu_op_columns(self, args: ArgColumns) -> Columns:
        columns = {
            "external_id": args.external_ids(),
            "sequence_number": args.ints("sequence_number"),
            "fwd_thread_id": args.ints("fwd_thread_id"),
        }
        for field, column in (
            ("input_dims", "input_dims_id"),
            ("input_types", "input_types_id"),
            ("input_strides", "input_strides_id"),
            ("concrete_inputs", "concrete_inputs_id"),
        ):
            columns[column] = self._json_ids(args, field)
        return columns | self._collective_columns(args)

    def _json_ids(self, args: ArgColumns, field: str) -> np.ndarray:
        """Interned JSON text of each value; -1 where the event lacks the field."""
        ids = np.full(len(args), -1, dtype=np.int64)
        present = np.flatnonzero(fields.present(args.objects, field, s.EMPTY_RAW))
        if len(present):
            texts = [bytes(getattr(args.objects[i], field)).decode() for i in present.tolist()]
            ids[present] = self.json_texts.ids(texts)
        return ids

    def _add_other(self, category: str, events: list[s.Event]) -> None:
        events, ts = _with_time(events)
        if events:
            columns = self._common(events, ts)
            columns["category_id"] = np.full(len(events), self.strings.id(category), np.int64)
            self._emit("other_spans", columns)

    def _add_instants(self, events: list[s.Event]) -> None:
        events, ts = _with_time(events)
        groups = dict(_group_by(events, "name"))
        memory = groups.pop("[memory]", [])
        others = [e for group in groups.values() for e in group]
        if memory:
            args = ArgColumns(s.MemoryArgs, _joined_args(memory))
            columns = {
                name: args.ints(name)
                for name in (
                    "bytes",
                    "total_allocated",
                    "total_reserved",
                    "device_id",
                    "device_type",
                    "addr",
                )
            }
            columns |= self._residual(memory) | {
                "ts_us": _floats(memory, "ts"),
                "pid": self._ints_or_ids(memory, "pid"),
                "tid": self._ints_or_ids(memory, "tid"),
            }
            self._emit("memory", columns)
        if others:
            self._emit(
                "instants",
                self._residual(others)
                | {
                    "ts_us": _floats(others, "ts"),
                    "pid": self._ints_or_ids(others, "pid"),
                    "tid": self._ints_or_ids(others, "tid"),
                    "name_id": self.strings.ids_of(others, "name"),
                },
            )

    def _add_flows(self, category: str, events: list[s.Event]) -> None:
        events, ts = _with_time(events)
        if not events:
            return
        phases = map(FLOW_PHASES.__getitem__, map(attrgetter("ph"), events))
        self._emit(
            "flows",
            self._residual(events)
            | {
                "ts_us": ts,
                "pid": self._ints_or_ids(events, "pid"),
                "tid": self._ints_or_ids(events, "tid"),
                "flow_id": _flow_ids(events),
                "phase": np.fromiter(phases, dtype=np.int64, count=len(events)),
                "category_id": np.full(len(events), self.strings.id(category), np.int64),
            },
        )


_SPAN_TABLE_OF_KIND = {
    KERNEL: "kernels",
    MEMCPY: "memcpy",
    MEMSET: "memset",
    RUNTIME: "runtime",
    DRIVER: "runtime",
    CPU_OP: "cpu_ops",
    ANNOTATION: "annotations",
    GPU_ANNOTATION: "gpu_annotations",
    PYTHON: "python_functions",
    SYNC: "syncs",
}


NAMED_ID_BASE = 1 << 62
"""Non-numeric pids, tids and flow ids ("Spans", "Traces") become NAMED_ID_BASE + CRC-32."""


def _named_id(text: str) -> int:
    return NAMED_ID_BASE + zlib.crc32(text.encode())


def _flow_ids(events: list[s.Event]) -> np.ndarray:
    """Flow ids as integers; see ``NAMED_ID_BASE`` for non-numeric ones."""
    try:
        return _ints(events, "id")
    except (TypeError, ValueError, OverflowError):
        ids = map(attrgetter("id"), events)
        out = [v if v.__class__ is int else _named_id(str(v)) for v in ids]
        return np.array(out, dtype=np.int64)


def _with_time(events: list[s.Event]) -> tuple[list[s.Event], np.ndarray]:
    """The events that carry a timestamp (``M`` metadata events may not), and their times."""
    ts = _floats(events, "ts")
    finite = np.isfinite(ts)
    if finite.all():
        return events, ts
    return [e for e, keep in zip(events, finite.tolist(), strict=True) if keep], ts[finite]


def _group_by(events: list[s.Event], field: str) -> list[tuple[str, list[s.Event]]]:
    """Events grouped by the value of a string field, file order kept inside each group."""
    distinct: dict[str, int] = {}
    codes = fields.string_ids(events, field, distinct)
    if len(distinct) <= 1:
        return [(next(iter(distinct)), events)] if events else []
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(distinct) + 1))
    groups = []
    for key, code in distinct.items():
        rows = order[bounds[code] : bounds[code + 1]].tolist()
        picked = itemgetter(*rows)(events)
        groups.append((key, list(picked) if len(rows) > 1 else [picked]))
    return groups


def _renumber(ids: np.ndarray, new_ids: np.ndarray) -> np.ndarray:
    """Map an id column through ``new_ids``; -1 (absent) stays -1. Narrowed; a one-value
    view stays one."""
    if not len(new_ids):
        return ids
    if is_view(ids):
        return np.broadcast_to(_renumber(ids[:1], new_ids), ids.shape)
    return narrow(np.where(ids >= 0, new_ids[np.maximum(ids, 0)], ids))


def _joined_args(events: list[s.Event]) -> bytes:
    return b"[" + b",".join(map(attrgetter("args"), events)) + b"]"


_floats = fields.floats
_ints = fields.ints


def _runtime_columns(args: ArgColumns, is_driver: bool) -> Columns:
    n = len(args)
    return {
        "correlation": args.ints("correlation"),
        "external_id": args.external_ids(),
        "is_driver": np.full(n, int(is_driver), dtype=np.int64),
        "op_row": np.full(n, -1, dtype=np.int64),
    }


COLLECTIVE_COLUMNS = ("collective_id", "in_nelems", "out_nelems", "group_size", "dtype_id")
