"""Typed msgspec schema of Kineto/Chrome trace events.

An event's ``args`` stay undecoded (``msgspec.Raw``) until the event's kind is known;
then all ``args`` of one kind are decoded together into a small struct holding only the
fields that kind carries. Fields whose type differs between PyTorch versions or vendors
are unions (pid/tid can be ``"Spans"`` or ``"stream 7"``; ROCm writes ``"stream": "0x0"``;
Triton launchers write ``"grid": "grid(100,)"``).
Reference: ../shared/reference/kineto-trace-format.md §2-5.
"""

from __future__ import annotations

from typing import Literal

import msgspec

MISSING = -1
"""Value of an integer column where the event does not carry the field."""

EMPTY_RAW = msgspec.Raw(b"{}")
"""Default of undecoded fields; identity tells 'absent' apart from any real value."""


# fmt: off
# Chrome Trace Event Format, "Event Descriptions": every phase it defines
Phase = Literal[
    "B", "E", "X", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "N", "O", "D", "M",
    "V", "v", "R", "c", "S", "T", "p", "F", "(", ")", "",
]
# Kineto's writer table (ActivityType.h), then the categories found in files
# (reference: kineto-trace-format.md §4)
Category = Literal[
    "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset",
    "kernel", "external_correlation", "cuda_runtime", "cuda_driver", "cpu_instant_event",
    "python_function", "overhead", "mtia_runtime", "mtia_ccp_events", "mtia_insight",
    "cuda_sync", "cuda_event", "mtia_counters", "glow_runtime", "cuda_profiler_range",
    "hpu_op", "xpu_runtime", "xpu_driver", "collective_comm", "privateuse1_runtime",
    "privateuse1_driver", "xpu_scope_profiler", "xpu_sync", "hardware_counters", "Trace",
    "ac2g", "fwdbwd", "critical_path", "async", "async_cpu_to_gpu", "Operator", "Runtime",
    "Kernel", "Memcpy", "Memset", "",
]
# fmt: on


class Event(msgspec.Struct, gc=False):
    """One element of ``traceEvents``; ``args`` is decoded later, per kind."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = MISSING
    tid: int | str = MISSING
    ts: float = float("nan")
    dur: float = 0.0
    id: int | str | None = None
    s: str | None = None
    args: msgspec.Raw = EMPTY_RAW
    ts_residual: float = msgspec.field(default=0.0, name="aiprof:ts_residual")
    """Not in the file: what parsing ``ts`` as a float lost (set by ``precise.attach``)."""


class KnownEvent(Event, gc=False):
    """An ``Event`` whose ``ph`` and ``cat`` are among the known values.

    Decoded as literals, they are one shared string per value instead of a new string per
    event: about a fifth less decoding time, and grouping by them compares identical
    objects. A batch with a phase or category not listed is decoded again as ``Event``.
    """

    ph: Phase = ""
    cat: Category = ""


def _f(name: str, default: object = MISSING) -> object:
    return msgspec.field(default=default, name=name)


class CollectiveArgs(msgspec.Struct, gc=False):
    """Collective fields on ``record_param_comms`` ops and NCCL kernels (§5.7)."""

    collective: str = _f("Collective name", "")  # type: ignore[assignment]
    in_nelems: int = _f("In msg nelems")  # type: ignore[assignment]
    out_nelems: int = _f("Out msg nelems")  # type: ignore[assignment]
    group_size: int = _f("Group size")  # type: ignore[assignment]
    dtype: str = ""
    pg_name: str = _f("Process Group Name", "")  # type: ignore[assignment]


class GpuOpArgs(CollectiveArgs, gc=False):
    """Kernel, memcpy and memset args (§5.1, §5.4)."""

    external_id: int = _f("External id")  # type: ignore[assignment]
    external_id_legacy: int = _f("external id")  # type: ignore[assignment]
    correlation: int = MISSING
    device: int = MISSING
    stream: int | str = MISSING
    registers: int = _f("registers per thread")  # type: ignore[assignment]
    shared_mem: int = _f("shared memory")  # type: ignore[assignment]
    grid: list[int] | str | None = None
    block: list[int] | None = None
    est_occupancy: float = _f("est. achieved occupancy %", -1.0)  # type: ignore[assignment]
    bytes: int = MISSING


class RuntimeArgs(msgspec.Struct, gc=False):
    """cuda_runtime / cuda_driver args (§5.3); ROCm launches carry grid and kernel name."""

    external_id: int = _f("External id")  # type: ignore[assignment]
    external_id_legacy: int = _f("external id")  # type: ignore[assignment]
    correlation: int = MISSING
    kernel: str = ""


class CpuOpArgs(CollectiveArgs, gc=False):
    """cpu_op args (§5.2); shapes are kept as undecoded JSON text."""

    external_id: int = _f("External id")  # type: ignore[assignment]
    external_id_legacy: int = _f("external id")  # type: ignore[assignment]
    sequence_number: int = _f("Sequence number")  # type: ignore[assignment]
    fwd_thread_id: int = _f("Fwd thread id")  # type: ignore[assignment]
    input_dims: msgspec.Raw = _f("Input Dims", EMPTY_RAW)  # type: ignore[assignment]
    input_types: msgspec.Raw = _f("Input type", EMPTY_RAW)  # type: ignore[assignment]
    input_strides: msgspec.Raw = _f("Input Strides", EMPTY_RAW)  # type: ignore[assignment]
    concrete_inputs: msgspec.Raw = _f("Concrete Inputs", EMPTY_RAW)  # type: ignore[assignment]


class AnnotationArgs(msgspec.Struct, gc=False):
    external_id: int = _f("External id")  # type: ignore[assignment]
    external_id_legacy: int = _f("external id")  # type: ignore[assignment]


class MemoryArgs(msgspec.Struct, gc=False):
    """``[memory]`` allocator events (§5.6); ``Bytes`` is negative for frees."""

    bytes: int = _f("Bytes", 0)  # type: ignore[assignment]
    total_allocated: int = _f("Total Allocated")  # type: ignore[assignment]
    total_reserved: int = _f("Total Reserved")  # type: ignore[assignment]
    device_id: int = _f("Device Id")  # type: ignore[assignment]
    device_type: int = _f("Device Type")  # type: ignore[assignment]
    addr: int = _f("Addr")  # type: ignore[assignment]


class PythonArgs(msgspec.Struct, gc=False):
    python_id: int = _f("Python id")  # type: ignore[assignment]
    parent_id: int | None = _f("Python parent id", None)  # type: ignore[assignment]


class SyncArgs(msgspec.Struct, gc=False):
    """cuda_sync args (§5.5)."""

    correlation: int = MISSING
    device: int = MISSING
    stream: int = MISSING
    wait_on_stream: int = MISSING
    wait_on_event_correlation: int = _f("wait_on_cuda_event_record_corr_id")  # type: ignore[assignment]
