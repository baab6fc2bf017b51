"""The critical path of a step: the longest path through its dependency graph
(``critical_graph``), its share by what bounds it, and the ops on it.

Each edge of the path is ``bound_by`` (HTA 0.5's classes): ``cpu_bound`` (CPU op or runtime
call time), ``gpu_compute_bound``, ``gpu_communication_bound`` (NCCL/RCCL kernels),
``gpu_kernel_kernel_overhead`` (gaps between queued ops of a stream),
``gpu_kernel_launch_overhead`` (launch to start of an op on an empty stream); dependency and
sync edges weigh nothing. The path's length is at most the window's: gaps between top-level
CPU ops and time in blocking calls are not on it by construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from aiprof.analysis.classify import COMMUNICATION_KERNEL
from aiprof.analysis.critical_graph import (
    EDGE_TYPES,
    KERNEL_KERNEL,
    LAUNCH,
    OPERATOR,
    Graph,
    build_graph,
)
from aiprof.analysis.frames import data_frame
from aiprof.errors import InputError
from aiprof.trace import Trace
from aiprof.trace.tables import SpanTable

BOUNDS = ("cpu_bound", "gpu_compute_bound", "gpu_communication_bound",
          "gpu_kernel_kernel_overhead", "gpu_kernel_launch_overhead")


@dataclass(frozen=True)
class PathOp:
    """Time on the path attributed to one name, by what bounds it."""

    name: str
    bound_by: str
    count: int
    time_us: float


@dataclass(frozen=True, eq=False)
class CriticalPath:
    """The longest path of one window; ``edges_*`` are parallel arrays, in path order."""

    rank: int
    window: str
    start_us: float
    end_us: float
    length_us: float
    by_bound_us: dict[str, float]
    ops: list[PathOp]
    """Names on the path, most time first."""
    edge_type: list[str]
    edge_bound: list[str]
    edge_name: list[str]
    edge_start_us: np.ndarray
    edge_end_us: np.ndarray
    edge_weight_us: np.ndarray

    @property
    def window_us(self) -> float:
        return self.end_us - self.start_us

    def pct(self, bound: str) -> float:
        return 100.0 * self.by_bound_us.get(bound, 0.0) / self.length_us if self.length_us else 0.0

    def to_pandas(self) -> Any:
        return data_frame({"type": self.edge_type, "bound_by": self.edge_bound,
                           "name": self.edge_name, "start_us": self.edge_start_us,
                           "end_us": self.edge_end_us, "weight_us": self.edge_weight_us})


def critical_path(trace: Trace, *, step: int | None = None, annotation: str | None = None,
                  instance: int = 0) -> CriticalPath:
    """The critical path of step number ``step`` (default: the second step, or the only one),
    or of the ``instance``-th span of the ``record_function`` named ``annotation``
    (``""``: the whole trace)."""
    lo, hi, label = path_window(trace, step, annotation, instance)
    graph = build_graph(trace, lo, hi)
    path = longest_path(graph.src, graph.dst, graph.weight_us, graph.node_ts(graph.src),
                        graph.node_ts(graph.dst), 2 * len(graph.ts_us))
    return _result(trace, graph, path, lo, hi, label)


def path_window(trace: Trace, step: int | None, annotation: str | None,
                instance: int) -> tuple[float, float, str]:
    """(start, end, label) of the window ``critical_path`` analyzes (its arguments)."""
    if annotation is not None:
        if annotation == "":
            tables = [t for _, t in trace.tables() if isinstance(t, SpanTable) and len(t)]
            lo = min(float(t.ts_us.min()) for t in tables)
            hi = max(float((t.ts_us + t.dur_us).max()) for t in tables)
            return lo, hi, "whole trace"
        notes = trace.annotations
        rows = np.flatnonzero(trace.strings.mask(notes.name_id, re.escape(annotation)))
        rows = rows[np.argsort(notes.ts_us[rows], kind="stable")]
        if instance >= len(rows) or instance < 0:
            raise InputError(f"{trace.path}: annotation {annotation!r} has {len(rows)} "
                             f"instances; asked for #{instance}")
        r = rows[instance]
        return float(notes.ts_us[r]), float(notes.end_us[r]), f"{annotation} #{instance}"
    steps = trace.steps
    if len(steps) == 0:
        raise InputError(f"{trace.path}: no steps to analyze")
    numbers = steps.number.tolist()
    index = (1 if len(steps) > 1 else 0) if step is None else _step_index(trace, numbers, step)
    label = f"step {numbers[index]}"
    return float(steps.cpu_start_us[index]), float(steps.cpu_end_us[index]), label


def _step_index(trace: Trace, numbers: list[int], step: int) -> int:
    if step not in numbers:
        raise InputError(f"{trace.path}: no step {step}; steps are {numbers[0]}..{numbers[-1]}")
    return numbers.index(step)


def longest_path(src_nodes: np.ndarray, dst_nodes: np.ndarray, weight_us: np.ndarray,
                 src_ts_us: np.ndarray, dst_ts_us: np.ndarray, num_nodes: int) -> list[int]:
    """Edge indices of the longest path of an acyclic graph: a pass over the edges in the
    order of their destination's time; where a tie (or an edge against the clock) left an
    edge unsettled (checked over all edges at once), another pass."""
    if len(src_nodes) == 0:
        return []
    order = np.lexsort((src_ts_us, dst_ts_us))
    src_array, dst_array = src_nodes[order], dst_nodes[order]
    weight_array = weight_us[order]
    src, dst, weight = src_array.tolist(), dst_array.tolist(), weight_array.tolist()
    best = [0.0] * num_nodes
    via = [-1] * len(best)
    reached = np.zeros(num_nodes)
    for _ in range(len(best)):  # settles in one pass but for ties; bounded for safety
        for e, (u, v, w) in enumerate(zip(src, dst, weight, strict=True)):
            if best[u] + w > best[v] + 1e-9:
                best[v], via[v] = best[u] + w, e
        reached = np.array(best)
        if not np.any(reached[src_array] + weight_array > reached[dst_array] + 1e-9):
            break
    node = int(np.argmax(reached))
    path: list[int] = []
    while via[node] >= 0 and len(path) < len(src):
        path.append(int(order[via[node]]))
        node = src[via[node]]
    return path[::-1]


def _result(trace: Trace, graph: Graph, path: list[int], lo: float, hi: float,
            label: str) -> CriticalPath:
    edges = np.array(path, dtype=np.int64)
    kind, event, weight = graph.kind[edges], graph.event[edges], graph.weight_us[edges]
    name_id = np.where(event >= 0, graph.name_id[np.maximum(event, 0)], -1)
    ids, which = np.unique(name_id, return_inverse=True)
    distinct = [trace.name(int(i)) if i >= 0 else "" for i in ids]
    names = [distinct[j] for j in which.tolist()]
    bound = edge_bounds(trace, graph, kind, event, name_id)
    by_bound = {b: float(weight[bound == k].sum()) for k, b in enumerate(BOUNDS)}
    counted = (bound >= 0) & (weight > 0)
    keys = which[counted] * len(BOUNDS) + bound[counted]
    groups, group = np.unique(keys, return_inverse=True)
    counts = np.bincount(group, minlength=len(groups))
    times = np.bincount(group, weights=weight[counted], minlength=len(groups))
    ops = sorted((PathOp(distinct[int(k) // len(BOUNDS)], BOUNDS[int(k) % len(BOUNDS)],
                         int(c), float(t)) for k, c, t in zip(groups, counts, times, strict=True)),
                 key=lambda o: (-o.time_us, o.name))
    return CriticalPath(
        rank=trace.rank, window=label, start_us=lo, end_us=hi,
        length_us=float(weight.sum()), by_bound_us=by_bound, ops=ops,
        edge_type=[EDGE_TYPES[int(k)] for k in kind],
        edge_bound=[BOUNDS[b] if b >= 0 else "" for b in bound.tolist()], edge_name=names,
        edge_start_us=graph.node_ts(graph.src[edges]), edge_end_us=graph.node_ts(graph.dst[edges]),
        edge_weight_us=weight,
    )


def edge_bounds(trace: Trace, graph: Graph, kind: np.ndarray, event: np.ndarray,
                name_id: np.ndarray) -> np.ndarray:
    """Index into ``BOUNDS`` of each edge, -1 for dependency and sync edges."""
    cpu, compute, comm, kernel_kernel, launch = range(len(BOUNDS))
    span = (kind == OPERATOR) & (event >= 0)
    is_comm = trace.strings.mask(np.maximum(name_id, 0), COMMUNICATION_KERNEL)
    gpu = np.where(is_comm, comm, compute)
    out = np.where(span, np.where(event < graph.num_cpu, cpu, gpu), -1)
    out = np.where(kind == KERNEL_KERNEL, kernel_kernel, out)
    return np.where(kind == LAUNCH, launch, out)
