"""Collectives and compute spans of one rank's trace.

Collectives come from, in order of preference:
- NCCL kernels: ``ncclKernel_<Coll>_<ALGO>_<PROTO>_...`` (NCCL < 2.19) and ``ncclDevKernel_...``
  (NCCL ≥ 2.19); sizes from the kernel's collective args (``In/Out msg nelems``, ``dtype``,
  ``Group size``, PyTorch ≥ 2.2) or from the launching ``record_param_comms`` CPU op;
- on CPU-only (gloo) traces: the ``gloo:<op>`` annotations of the worker thread, sized from the
  ``c10d::<op>_`` CPU ops issued in the same order (their ``Input Dims``).
Compute is every other GPU kernel, or on CPU-only traces every ``aten::`` CPU op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from aiprof.analysis.classify import communication_kernels
from aiprof.distributed.busbw import canonical_collective
from aiprof.errors import InputError

if TYPE_CHECKING:
    from aiprof.trace import Trace

NCCL_KERNEL = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_ALGOS = ("RING", "TREE", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS_TREE", "NVLS", "PAT")
_PROTOS = ("LL128", "LL", "SIMPLE")
# Element sizes of the dtype names profilers write (c10 ScalarType names and C type names).
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "c10::half": 2,
    "bfloat16": 2,
    "c10::bfloat16": 2,
    "long": 8,
    "long int": 8,
    "int64": 8,
    "int": 4,
    "int32": 4,
    "short": 2,
    "int16": 2,
    "char": 1,
    "signed char": 1,
    "byte": 1,
    "unsigned char": 1,
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
_GLOO = re.compile(r"^gloo:(.+)$")
_C10D = re.compile(r"^c10d::(.+?)_?$")


@dataclass(frozen=True, kw_only=True)
class CollectiveCalls:
    """The collectives of one rank, in start order."""

    ts_us: np.ndarray
    dur_us: np.ndarray
    kind: list[str]
    """Canonical collective name (``allreduce`` ...) or ``other``."""
    num_bytes: np.ndarray
    """nccl-tests' S: max(in, out) elements × element size; -1 when unknown."""
    group_size: np.ndarray
    """Ranks in the group; -1 when unknown."""
    algorithm: list[str]
    """NCCL algorithm/protocol from the kernel name (``RING_LL``), or ''."""
    source: str
    """``nccl kernels``, ``gloo annotations`` or ``none``."""


def parse_nccl_kernel(name: str) -> tuple[str, str] | None:
    """(collective, ALGO_PROTO) of an NCCL kernel name, None if it is not one."""
    match = NCCL_KERNEL.match(name)
    if match is None:
        return None
    words = re.split(r"[_(]", name)
    algo = next((a for a in _ALGOS if f"_{a}_" in name or name.endswith(f"_{a}")), "")
    proto = next((p for p in _PROTOS if p in words), "")
    return _kind(match.group(1)), "_".join(x for x in (algo, proto) if x)


def _kind(word: str) -> str:
    try:
        return canonical_collective(re.sub(r"(?<!^)(?=[A-Z])", "_", word).lower())
    except InputError:
        return "other"


def _elem_bytes(name: str) -> int:
    return DTYPE_BYTES.get(name.strip().lower(), -1)


def _sized(in_n: np.ndarray, out_n: np.ndarray, dtypes: list[str]) -> np.ndarray:
    elems = np.maximum(in_n, out_n).astype(float)
    size = np.array([_elem_bytes(d) for d in dtypes], dtype=float)
    return np.where((elems >= 0) & (size > 0), elems * size, -1.0)


def _name(trace: Trace, ids: np.ndarray) -> list[str]:
    return [trace.strings[int(i)] if i >= 0 else "" for i in ids]


def nccl_calls(trace: Trace) -> CollectiveCalls | None:
    """NCCL kernels of the trace, or None if it has none."""
    k = trace.kernels
    by_id = _parsed_names(trace, k.name_id)
    rows = np.flatnonzero(np.isin(k.name_id, np.fromiter(by_id, dtype=np.int64, count=len(by_id))))
    if len(rows) == 0:
        return None
    parsed = {i: by_id[int(k.name_id[i])] for i in rows}
    kinds = [parsed[i][0] for i in rows]
    args_kind = _name(trace, k.collective_id[rows])
    kinds = [_kind_from_arg(a) or kind for a, kind in zip(args_kind, kinds, strict=True)]
    in_n, out_n = k.in_nelems[rows].astype(np.int64), k.out_nelems[rows].astype(np.int64)
    group, dtypes = k.group_size[rows].astype(np.int64), _name(trace, k.dtype_id[rows])
    _fill_from_cpu_op(trace, k.op_row[rows], in_n, out_n, group, dtypes)
    return CollectiveCalls(
        ts_us=k.ts_us[rows],
        dur_us=k.dur_us[rows],
        kind=kinds,
        num_bytes=_sized(in_n, out_n, dtypes),
        group_size=group,
        algorithm=[parsed[i][1] for i in rows],
        source="nccl kernels",
    )


def _kind_from_arg(value: str) -> str | None:
    if not value:
        return None
    kind = _kind(value.replace("_", " ").title().replace(" ", ""))
    return None if kind == "other" else kind


def _fill_from_cpu_op(
    trace: Trace,
    op_rows: np.ndarray,
    in_n: np.ndarray,
    out_n: np.ndarray,
    group: np.ndarray,
    dtypes: list[str],
) -> None:
    """Kernels without collective args take them from the launching record_param_comms op."""
    ops = trace.cpu_ops
    for i, row in enumerate(op_rows):
        if in_n[i] >= 0 or row < 0 or ops.in_nelems[row] < 0:
            continue
        in_n[i], out_n[i], group[i] = ops.in_nelems[row], ops.out_nelems[row], ops.group_size[row]
        dtypes[i] = trace.strings[int(ops.dtype_id[row])] if ops.dtype_id[row] >= 0 else ""


def gloo_calls(trace: Trace) -> CollectiveCalls | None:
    """``gloo:<op>`` annotations, sized from the matching ``c10d::<op>_`` CPU ops."""
    a = trace.annotations
    names = _name(trace, a.name_id)
    rows = [i for i, n in enumerate(names) if _GLOO.match(n)]
    if not rows:
        return None
    kinds = [_kind(_GLOO.match(names[i]).group(1).title().replace("_", "")) for i in rows]  # type: ignore[union-attr]
    sizes = _c10d_sizes(trace)
    seen: dict[str, int] = {}
    num_bytes = np.full(len(rows), -1.0)
    for j, kind in enumerate(kinds):
        index = seen.get(kind, 0)
        seen[kind] = index + 1
        if index < len(sizes.get(kind, [])):
            num_bytes[j] = sizes[kind][index]
    world = (
        trace.distributed.world_size if trace.distributed and trace.distributed.world_size else -1
    )
    order = np.asarray(rows, dtype=np.int64)
    return CollectiveCalls(
        ts_us=a.ts_us[order],
        dur_us=a.dur_us[order],
        kind=kinds,
        num_bytes=num_bytes,
        group_size=np.full(len(rows), world),
        algorithm=[""] * len(rows),
        source="gloo annotations",
    )


def _c10d_sizes(trace: Trace) -> dict[str, list[float]]:
    """Bytes of each c10d:: collective op in start order (float32 assumed: TensorList inputs)."""
    ops = trace.cpu_ops
    out: dict[str, list[float]] = {}
    for row in np.argsort(ops.ts_us, kind="stable"):
        match = _C10D.match(trace.strings[int(ops.name_id[row])])
        if match is None:
            continue
        kind = _kind(match.group(1).title().replace("_", ""))
        dims = trace.json_value(int(ops.input_dims_id[row]))
        out.setdefault(kind, []).append(_tensor_bytes(dims))
    return out


def _tensor_bytes(dims: Any) -> float:
    """4 × elements of the first input (a tensor or a list of tensors); -1 if unknown."""
    if not dims or not isinstance(dims, list):
        return -1.0
    first = dims[0]
    shapes = first if first and isinstance(first[0], list) else [first]
    elems = sum(int(np.prod(s)) for s in shapes if isinstance(s, list))
    return 4.0 * elems


def collective_calls(trace: Trace) -> CollectiveCalls:
    """NCCL kernels if any, else gloo annotations, else an empty table."""
    found = nccl_calls(trace) or gloo_calls(trace)
    if found is not None:
        order = np.argsort(found.ts_us, kind="stable")
        return CollectiveCalls(
            ts_us=found.ts_us[order],
            dur_us=found.dur_us[order],
            kind=[found.kind[i] for i in order],
            num_bytes=found.num_bytes[order],
            group_size=found.group_size[order],
            algorithm=[found.algorithm[i] for i in order],
            source=found.source,
        )
    empty = np.empty(0)
    return CollectiveCalls(
        ts_us=empty,
        dur_us=empty,
        kind=[],
        num_bytes=empty,
        group_size=np.empty(0, dtype=np.int64),
        algorithm=[],
        source="none",
    )


def compute_spans(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of compute: kernels that are not communication (the one classifier,
    ``analysis.classify.communication_kernels``), or ``aten::`` CPU ops without GPU events."""
    if len(trace.kernels):
        k = trace.kernels
        keep = ~communication_kernels(trace)
        return k.ts_us[keep], k.ts_us[keep] + k.dur_us[keep]
    ops = trace.cpu_ops
    ids = np.unique(ops.name_id)
    aten = ids[[trace.strings[int(i)].startswith("aten::") for i in ids]]
    keep = np.isin(ops.name_id, aten)
    return ops.ts_us[keep], ops.ts_us[keep] + ops.dur_us[keep]


def _parsed_names(trace: Trace, name_ids: np.ndarray) -> dict[int, tuple[str, str]]:
    """NCCL kernel names among ``name_ids``, parsed once per distinct name."""
    out = {}
    for i in np.unique(name_ids):
        parsed = parse_nccl_kernel(trace.strings[int(i)])
        if parsed is not None:
            out[int(i)] = parsed
    return out
