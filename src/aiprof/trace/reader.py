"""Read PyTorch profiler traces: ``load_trace(path)`` and ``load_traces(dir_or_paths)``."""

from __future__ import annotations

import gc
import os
import re
import stat
import warnings
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import numpy as np

from aiprof.errors import InputError, TraceFormatError
from aiprof.forked import can_fork, map_forked, usable_cores
from aiprof.trace import links, narrow, parcel, precise, split, validate
from aiprof.trace.build import TableBuilder
from aiprof.trace.decode import CutFailed, Splitter, decode_batch, decode_whole, describe_error
from aiprof.trace.devices import DeviceProperties, DistributedInfo
from aiprof.trace.heap import release_freed
from aiprof.trace.model import Trace, TraceSet
from aiprof.trace.steps import find_steps
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
    SyncTable,
    Table,
)

TableT = TypeVar("TableT", bound=Table)
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def load_trace(
    path: str | os.PathLike[str],
    *,
    step_annotation: str | None = None,
    parts: int | None = None,
) -> Trace:
    """Read one trace file (Kineto/Chrome JSON, plain or gzip) into a ``Trace``.

    ``step_annotation`` names a ``record_function`` whose spans delimit iterations when the
    trace has no ``ProfilerStep#N``. A large file is decoded by ``parts`` processes, each
    taking every ``parts``-th batch (default: one process below 128 MiB of JSON, else one per
    core and per 64 MiB, at most 4). Raises ``TraceFormatError`` for anything unreadable.
    """
    file = Path(path)
    if path_kind(file) == "directory":
        raise TraceFormatError(f"{file}: is a directory (use load_traces for a directory)")
    builder = TableBuilder()
    try:
        with _gc_paused():
            metadata = _read_events(file, builder, _parts_for(file) if parts is None else parts)
    except (msgspec.ValidationError, msgspec.DecodeError) as error:
        raise TraceFormatError(f"{file}: {describe_error(error)}") from None
    except RecursionError:
        raise TraceFormatError(f"{file}: JSON nested too deeply to be a trace") from None
    except OverflowError:
        raise TraceFormatError(f"{file}: an integer field does not fit in 64 bits") from None
    return _assemble(file, metadata, builder, step_annotation)


def _read_events(file: Path, builder: TableBuilder, parts: int) -> dict[str, Any]:
    """Stream the file into ``builder`` batch by batch; decode it whole if it cannot be cut.

    With ``parts`` > 1, helper processes build batches ``part``, ``part + parts``, ... and
    this process builds batches 0, ``parts``, ... plus the tail, then merges theirs.
    """
    helpers = split.start(file, parts)
    try:
        splitter = Splitter(file)
        count = len(helpers) + 1
        index = -1
        for index, payload in enumerate(splitter.payloads()):
            if index % count == 0:
                builder.add(decode_batch(payload), index)
        builder.add(splitter.tail_events(), index + 1)
        metadata = splitter.metadata()
        for part in split.collect(helpers):
            builder.merge(part)
        return metadata
    except CutFailed:
        split.stop(helpers)
        builder.reset()
        return decode_whole(file, builder.add)
    finally:
        split.stop(helpers)


@contextmanager
def _gc_paused() -> Any:
    """Decoding allocates millions of short-lived objects; collecting them mid-way is waste."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _assemble(
    file: Path, metadata: dict[str, Any], builder: TableBuilder, step_annotation: str | None
) -> Trace:
    if builder.num_events == 0:
        raise TraceFormatError(f"{file}: the trace has no events ('traceEvents' is empty)")
    chunks = builder.take_ordered_chunks()
    residuals = {name: precise.residuals(parts) for name, parts in chunks.items()}
    tables = _concat_tables(chunks)
    repairs = validate.Repairs(str(file))
    validate.check_times(tables, repairs, residuals)
    validate.check_args(tables, repairs)
    tables["cpu_ops"] = validate.check_shapes(tables["cpu_ops"], builder.json_texts, repairs)
    origin = _first_timestamp(tables.values())
    for name, table in tables.items():
        _shift_in_place(table, -origin, residuals.get(name))
    cpu_ops = tables["cpu_ops"]
    runtime = links.link_runtime(tables["runtime"], cpu_ops)
    gpu = {
        k: links.link_gpu_ops(tables[k], runtime, cpu_ops) for k in ("kernels", "memcpy", "memset")
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", validate.TraceRepairWarning)
        steps, step_source = find_steps(
            builder.strings,
            [tables["annotations"], cpu_ops],
            list(gpu.values()),
            runtime,
            step_annotation,
        )
    for warning in caught:
        repairs.notes.append(f"{file}: {warning.message}")
    distributed = _distributed(metadata.get("distributedInfo"), repairs)
    devices = _devices(file, metadata.get("deviceProperties"), repairs)
    repairs.warn()
    linked = tables | gpu | {"runtime": runtime}
    complete: dict[str, Any] = {name: _compacted(table) for name, table in linked.items()}
    del tables, gpu, runtime, linked
    release_freed()  # the chunks', the links' and the wide columns' memory
    return Trace(
        path=str(file),
        rank=_rank(file, distributed),
        metadata=metadata,
        devices=devices,
        distributed=distributed,
        strings=builder.strings,
        json_texts=builder.json_texts,
        origin_us=origin,
        **complete,
        steps=steps,
        step_source=step_source,
        num_events=builder.num_events,
    )


GPU_TABLES = ("kernels", "memcpy", "memset")
TABLE_TYPES: dict[str, type[Table]] = {
    "kernels": GpuOpTable,
    "memcpy": GpuOpTable,
    "memset": GpuOpTable,
    "runtime": RuntimeTable,
    "cpu_ops": CpuOpTable,
    "annotations": AnnotationTable,
    "gpu_annotations": AnnotationTable,
    "python_functions": PythonTable,
    "syncs": SyncTable,
    "other_spans": OtherSpanTable,
    "flows": FlowTable,
    "memory": MemoryTable,
    "instants": InstantTable,
}


def _concat_tables(chunks: dict[str, list[dict[str, np.ndarray]]]) -> dict[str, Any]:
    """One table per kind; each kind's chunks are released as soon as it is concatenated, and
    their memory given back (``heap.release_freed``), so the peak holds one kind twice, not
    every kind."""
    tables = {}
    for name, kind in TABLE_TYPES.items():
        tables[name] = kind.concat(chunks.pop(name, []))
        release_freed()
    return tables


def _compacted(table: TableT) -> TableT:
    """The table with its integer columns narrowed and its one-value columns as views
    (``narrow.compact``); times and durations kept as they are."""
    columns = table.columns()
    times = tuple(name for name in columns if name.endswith("_us"))
    return replace(table, **narrow.compact_columns(columns, skip=times))


def _first_timestamp(tables: Iterable[Any]) -> float:
    firsts = [float(np.min(t.ts_us)) for t in tables if len(t)]
    return min(firsts) if firsts else 0.0


def _shift_in_place(table: Table, delta_us: float, residual_us: np.ndarray | None = None) -> None:
    """Move timestamps by ``delta_us``; add back what parsing them as floats lost."""
    for column, values in table.columns().items():
        if column.endswith("_us") and column != "dur_us":
            values += delta_us
            if residual_us is not None and column == "ts_us":
                values += residual_us


def _devices(file: Path, entries: Any, repairs: validate.Repairs) -> tuple[DeviceProperties, ...]:
    if entries is None:
        return ()
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise TraceFormatError(f"{file}: 'deviceProperties' must be a list of objects")
    devices = []
    for position, entry in enumerate(entries):
        device, dropped = DeviceProperties.checked(entry)
        for key in dropped:
            repairs.note(
                "deviceProperties",
                f"'{key}'",
                1,
                "not a plausible number: ignored",
                f"entry {position}: {key}={entry.get(key)!r}",
                unit="entry",
            )
        devices.append(device)
    return tuple(devices)


def _distributed(info: Any, repairs: validate.Repairs) -> DistributedInfo | None:
    if info is None:
        return None
    if not isinstance(info, dict):
        repairs.note(
            "distributedInfo", "the whole object", 1, "not an object: ignored", info, unit="value"
        )
        return None
    distributed, dropped = DistributedInfo.checked(info)
    for key in dropped:
        repairs.note(
            "distributedInfo",
            f"'{key}'",
            1,
            "not a plausible value: ignored",
            f"{key}={info.get(key)!r}",
            unit="value",
        )
    return distributed


def _rank(file: Path, distributed: DistributedInfo | None) -> int:
    """``distributedInfo.rank``; else a ``rank<N>`` in the file name; else 0."""
    if distributed is not None and distributed.rank is not None:
        return distributed.rank
    match = _RANK_IN_NAME.search(file.name)
    return int(match.group(1)) if match else 0


def path_kind(path: Path) -> str:
    """ "file" or "directory"; anything else, or what cannot be read, is an ``InputError``."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise TraceFormatError(f"{path}: no such file or directory") from None
    except OSError as error:
        raise TraceFormatError(f"{path}: cannot be read: {error.strerror}") from None
    if stat.S_ISDIR(mode):
        kind, needed = "directory", os.R_OK | os.X_OK
    elif stat.S_ISREG(mode):
        kind, needed = "file", os.R_OK
    else:
        raise TraceFormatError(
            f"{path}: not a regular file or directory (a device, pipe or socket); "
            "pass a trace file or the directory that holds them"
        )
    if not os.access(path, needed):
        raise TraceFormatError(f"{path}: permission denied (the {kind} is not readable)")
    return kind


def load_traces(
    files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    step_annotation: str | None = None,
    workers: int | None = None,
) -> TraceSet:
    """Read trace files (not directories) on a common clock; see ``read_traces``.

    Directories, run records and ``example:NAME`` are resolved by ``aiprof.load_traces``
    (``aiprof.record.targets``), the one place that knows what a run directory holds.
    """
    items = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    for item in items:
        if path_kind(Path(item)) == "directory":
            raise InputError(f"{item}: is a directory; read it with aiprof.load_traces, which "
                             "knows run records and directories of rank traces")
    return read_traces([Path(item) for item in items], step_annotation=step_annotation,
                       workers=workers)


def read_traces(
    files: Sequence[Path], *, step_annotation: str | None = None, workers: int | None = None
) -> TraceSet:
    """Read trace files, several ranks in parallel processes (``workers``, default one per
    core), and put their clocks on a common zero: through ``baseTimeNanoseconds`` (wall clock)
    when every trace has it, else by aligning each trace's first event (as HTA does).
    """
    traces = _read_all(list(files), step_annotation, workers)
    return align(traces)


def _read_all(files: list[Path], step_annotation: str | None, workers: int | None) -> list[Trace]:
    count = min(workers or usable_cores(), len(files))
    if count <= 1 or not can_fork():
        return [load_trace(f, step_annotation=step_annotation) for f in files]
    parcel.remove_stale()
    session = parcel.Session()
    try:
        parcels = map_forked(
            partial(_load_one, step_annotation=step_annotation, session=session),
            files,
            workers=count,
            discard=parcel.discard,
        )
        return [parcel.unpack(p) for p in parcels]
    finally:
        session.remove_all()


def _load_one(file: Path, step_annotation: str | None, session: parcel.Session) -> parcel.Parcel:
    return parcel.pack(load_trace(file, step_annotation=step_annotation, parts=1), session)


def _parts_for(file: Path) -> int:
    """Processes worth using on one file: one below ``split.SPLIT_FROM_BYTES`` of JSON, else
    one per core and per ``split.PART_BYTES``, at most ``split.MAX_PARTS``."""
    size = split.json_bytes(file)
    if size < split.SPLIT_FROM_BYTES:
        return 1
    return max(1, min(usable_cores(), split.MAX_PARTS, size // split.PART_BYTES))


def align(traces: Iterable[Trace]) -> TraceSet:
    """Put traces on a common zero; see ``load_traces``."""
    ordered = sorted(traces, key=lambda t: (t.rank, t.path))
    shifts, how = clock_shifts([(t.base_time_ns, t.origin_us) for t in ordered])
    return TraceSet(tuple(t.shifted(s) for t, s in zip(ordered, shifts, strict=True)), how)


def clock_shifts(clocks: Sequence[tuple[int | None, float]]) -> tuple[list[float], str]:
    """Per rank (``baseTimeNanoseconds``, ``origin_us``) in rank order: what ``Trace.shifted``
    adds to put each on the common zero, and how that zero was found."""
    bases = [b for b, _ in clocks]
    if len(clocks) > 1 and all(b is not None for b in bases):
        starts = [b / 1000.0 + origin for b, origin in clocks]  # type: ignore[operator]
        how = "baseTimeNanoseconds (wall clock)"
    else:
        starts = [origin for _, origin in clocks]
        how = (
            "the traces' own clocks, earliest event as zero" if len(clocks) > 1 else "single trace"
        )
    zero = min(starts, default=0.0)
    return [s - zero for s in starts], how
