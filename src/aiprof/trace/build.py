"""Turn batches of decoded events into columnar tables, one batch at a time.

Events are grouped by category, their ``args`` decoded per kind in one call, and their
fields copied into numpy column chunks; the event objects are then dropped. Nothing
per-event survives a batch.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np

from aiprof.trace import schema as s
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
_ARGS_DECODERS: dict[int, msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(list[args_type])  # type: ignore[valid-type]
    for kind, args_type in _ARGS_TYPE.items()
}
_MEMORY_DECODER = msgspec.json.Decoder(list[s.MemoryArgs])
_NO_DIMS = [s.MISSING] * 3


class TableBuilder:
    """Accumulates column chunks per table across batches."""

    def __init__(self) -> None:
        self.strings = StringTable()
        self.json_texts = StringTable()
        self.chunks: dict[str, list[dict[str, np.ndarray]]] = defaultdict(list)
        self.num_events = 0
        self.num_skipped = 0

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def add(self, batch: list[s.Event] | None) -> None:
        """Add one batch of events; ``None`` discards everything added so far."""
        if batch is None:
            self.reset()
            return
        self.num_events += len(batch)
        for category, events in _group_by(batch, "cat"):
            kind = SPAN_KIND_BY_CATEGORY.get(category)
            if kind is not None and set(map(attrgetter("ph"), events)) == {"X"}:
                self._add_spans(kind, events)
            else:
                self._add_mixed(category, kind, events)

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

    def _common(self, events: list[s.Event], ts: np.ndarray) -> dict[str, np.ndarray]:
        return {
            "ts_us": ts,
            "dur_us": _floats(events, "dur"),
            "name_id": self.strings.ids(map(attrgetter("name"), events)),
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
        args = _ARGS_DECODERS[kind].decode(_joined_args(events))
        columns = self._common(events, ts)
        table = _SPAN_TABLE_OF_KIND[kind]
        if kind in (KERNEL, MEMCPY, MEMSET):
            columns |= self._gpu_columns(args)
        elif kind in (RUNTIME, DRIVER):
            columns |= _runtime_columns(args, kind == DRIVER)
        elif kind == CPU_OP:
            columns |= self._cpu_op_columns(args)
        elif kind in (ANNOTATION, GPU_ANNOTATION):
            columns["external_id"] = _external_ids(args)
        elif kind == PYTHON:
            columns["python_id"] = _ints(args, "python_id")
            parents = [-1 if a.parent_id is None else a.parent_id for a in args]
            columns["parent_id"] = np.array(parents, dtype=np.int64)
        elif kind == SYNC:
            for name in (
                "correlation",
                "device",
                "stream",
                "wait_on_stream",
                "wait_on_event_correlation",
            ):
                columns[name] = _ints(args, name)
        self.chunks[table].append(columns)

    def _gpu_columns(self, args: list[s.GpuOpArgs]) -> dict[str, np.ndarray]:
        grids, blocks = _dims(args, "grid"), _dims(args, "block")
        columns = {
            "device": _ints(args, "device"),
            "stream": _streams(args),
            "correlation": _ints(args, "correlation"),
            "external_id": _external_ids(args),
            "bytes": _ints(args, "bytes"),
            "grid_x": grids[:, 0],
            "grid_y": grids[:, 1],
            "grid_z": grids[:, 2],
            "block_x": blocks[:, 0],
            "block_y": blocks[:, 1],
            "block_z": blocks[:, 2],
            "registers_per_thread": _ints(args, "registers"),
            "shared_mem_bytes": _ints(args, "shared_mem"),
            "est_occupancy_pct": _floats(args, "est_occupancy"),
            "launch_row": np.full(len(args), -1, dtype=np.int64),
            "op_row": np.full(len(args), -1, dtype=np.int64),
        }
        return columns | self._collective_columns(args)

    def _collective_columns(self, args: list[Any]) -> dict[str, np.ndarray]:
        if not any(map(attrgetter("collective"), args)):  # the common case: no collective args
            return {key: np.full(len(args), -1, dtype=np.int64) for key in COLLECTIVE_COLUMNS}
        names = self.strings.ids(map(attrgetter("collective"), args))
        dtypes = self.strings.ids(map(attrgetter("dtype"), args))
        empty = self.strings.id("")
        return {
            "collective_id": np.where(names == empty, -1, names),
            "in_nelems": _ints(args, "in_nelems"),
            "out_nelems": _ints(args, "out_nelems"),
            "group_size": _ints(args, "group_size"),
            "dtype_id": np.where(dtypes == empty, -1, dtypes),
        }

    def _cpu_op_columns(self, args: list[s.CpuOpArgs]) -> dict[str, np.ndarray]:
        columns = {
            "external_id": _external_ids(args),
            "sequence_number": _ints(args, "sequence_number"),
            "fwd_thread_id": _ints(args, "fwd_thread_id"),
        }
        for field, column in (
            ("input_dims", "input_dims_id"),
            ("input_types", "input_types_id"),
            ("input_strides", "input_strides_id"),
            ("concrete_inputs", "concrete_inputs_id"),
        ):
            columns[column] = self._json_ids(list(map(attrgetter(field), args)))
        return columns | self._collective_columns(args)

    def _json_ids(self, raws: list[msgspec.Raw]) -> np.ndarray:
        """Interned JSON text of each value; -1 where the event lacks the field."""
        ids = np.full(len(raws), -1, dtype=np.int64)
        present = np.flatnonzero(
            np.fromiter(map(id, raws), dtype=np.int64, count=len(raws)) != id(s.EMPTY_RAW)
        )
        if len(present):
            texts = [bytes(raws[i]).decode() for i in present.tolist()]
            ids[present] = self.json_texts.ids(texts)
        return ids

    def _add_other(self, category: str, events: list[s.Event]) -> None:
        events, ts = _with_time(events)
        if events:
            columns = self._common(events, ts)
            columns["category_id"] = np.full(len(events), self.strings.id(category), np.int64)
            self.chunks["other_spans"].append(columns)

    def _add_instants(self, events: list[s.Event]) -> None:
        events, ts = _with_time(events)
        groups = dict(_group_by(events, "name"))
        memory = groups.pop("[memory]", [])
        others = [e for group in groups.values() for e in group]
        if memory:
            args = _MEMORY_DECODER.decode(_joined_args(memory))
            columns = {
                name: _ints(args, name)
                for name in (
                    "bytes",
                    "total_allocated",
                    "total_reserved",
                    "device_id",
                    "device_type",
                    "addr",
                )
            }
            columns |= {
                "ts_us": _floats(memory, "ts"),
                "pid": self._ints_or_ids(memory, "pid"),
                "tid": self._ints_or_ids(memory, "tid"),
            }
            self.chunks["memory"].append(columns)
        if others:
            self.chunks["instants"].append(
                {
                    "ts_us": _floats(others, "ts"),
                    "pid": self._ints_or_ids(others, "pid"),
                    "tid": self._ints_or_ids(others, "tid"),
                    "name_id": self.strings.ids(map(attrgetter("name"), others)),
                }
            )

    def _add_flows(self, category: str, events: list[s.Event]) -> None:
        events, ts = _with_time(events)
        if not events:
            return
        phases = map(FLOW_PHASES.__getitem__, map(attrgetter("ph"), events))
        self.chunks["flows"].append(
            {
                "ts_us": ts,
                "pid": self._ints_or_ids(events, "pid"),
                "tid": self._ints_or_ids(events, "tid"),
                "flow_id": _flow_ids(events),
                "phase": np.fromiter(phases, dtype=np.int64, count=len(events)),
                "category_id": np.full(len(events), self.strings.id(category), np.int64),
            }
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
    keys = list(map(attrgetter(field), events))
    distinct = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    if len(distinct) == 1:
        return [(keys[0], events)] if events else []
    codes = np.fromiter(map(distinct.__getitem__, keys), dtype=np.int64, count=len(keys))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(distinct) + 1))
    groups = []
    for key, code in distinct.items():
        rows = order[bounds[code] : bounds[code + 1]].tolist()
        picked = itemgetter(*rows)(events)
        groups.append((key, list(picked) if len(rows) > 1 else [picked]))
    return groups


def _joined_args(events: list[s.Event]) -> bytes:
    return b"[" + b",".join(map(attrgetter("args"), events)) + b"]"


def _floats(objects: list[Any], name: str) -> np.ndarray:
    return np.fromiter(map(attrgetter(name), objects), dtype=np.float64, count=len(objects))


def _ints(objects: list[Any], name: str) -> np.ndarray:
    return np.fromiter(map(attrgetter(name), objects), dtype=np.int64, count=len(objects))


def _external_ids(args: list[Any]) -> np.ndarray:
    new = _ints(args, "external_id")
    old = _ints(args, "external_id_legacy")
    return np.where(new == s.MISSING, old, new)


def _runtime_columns(args: list[s.RuntimeArgs], is_driver: bool) -> dict[str, np.ndarray]:
    return {
        "correlation": _ints(args, "correlation"),
        "external_id": _external_ids(args),
        "is_driver": np.full(len(args), int(is_driver), dtype=np.int64),
        "op_row": np.full(len(args), -1, dtype=np.int64),
    }


COLLECTIVE_COLUMNS = ("collective_id", "in_nelems", "out_nelems", "group_size", "dtype_id")


def _dims(args: list[s.GpuOpArgs], field: str) -> np.ndarray:
    """``grid`` or ``block`` as an (n, 3) array; -1 rows where absent or not a 3-list."""
    values = list(map(attrgetter(field), args))
    try:
        dims = np.array(values, dtype=np.int64)
        if dims.shape == (len(values), 3):
            return dims
    except (TypeError, ValueError):
        pass
    fixed = [v if v.__class__ is list and len(v) == 3 else _NO_DIMS for v in values]
    return np.array(fixed, dtype=np.int64).reshape(-1, 3)


def _streams(args: list[s.GpuOpArgs]) -> np.ndarray:
    try:
        return _ints(args, "stream")
    except (TypeError, ValueError):  # ROCm writes "0x0"
        return np.array([_stream(a.stream) for a in args], dtype=np.int64)


def _stream(value: int | str) -> int:
    if value.__class__ is int:
        return value  # type: ignore[return-value]
    text = str(value).strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text.rsplit(" ", 1)[-1])
    except ValueError:
        return s.MISSING
