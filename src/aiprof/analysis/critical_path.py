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
    lo, hi, label = _window(trace, step, annotation, instance)
    graph = build_graph(trace, lo, hi)
    path = _longest_path(graph)
    return _result(trace, graph, path, lo, hi, label)


def _window(trace: Trace, step: int | None, annotation: str | None,
            instance: int) -> tuple[float, float, str]:
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


def _longest_path(graph: Graph) -> list[int]:
    """Edge indices of the longest path (a pass over the edges in the order of their
    destination's time, repeated while a tie left an edge unsettled)."""
    if len(graph.src) == 0:
        return []
    order = np.lexsort((graph.node_ts(graph.src), graph.node_ts(graph.dst)))
    src, dst = graph.src[order].tolist(), graph.dst[order].tolist()
    weight = graph.weight_us[order].tolist()
    best = [0.0] * (2 * len(graph.ts_us))
    via = [-1] * len(best)
    for _ in range(len(best)):  # settles in one or two passes; bounded for safety
        changed = False
        for e, (u, v, w) in enumerate(zip(src, dst, weight, strict=True)):
            if best[u] + w > best[v] + 1e-9:
                best[v], via[v], changed = best[u] + w, e, True
        if not changed:
            break
    node = int(np.argmax(best))
    path: list[int] = []
    while via[node] >= 0 and len(path) < len(src):
        path.append(int(order[via[node]]))
        node = src[via[node]]
    return path[::-1]


def _result(trace: Trace, graph: Graph, path: list[int], lo: float, hi: float,
            label: str) -> CriticalPath:
    edges = np.array(path, dtype=np.int64)
    kind = graph.kind[edges]
    event = graph.event[edges]
    names = [trace.name(int(graph.name_id[e])) if e >= 0 else "" for e in event]
    bounds = [_bound(int(k), int(ev), name, graph) for k, ev, name in zip(kind, event, names,
                                                                          strict=True)]
    weight = graph.weight_us[edges]
    by_bound = {b: float(weight[[x == b for x in bounds]].sum()) if len(edges) else 0.0
                for b in BOUNDS}
    totals: dict[tuple[str, str], list[float]] = {}
    for name, bound, w in zip(names, bounds, weight.tolist(), strict=True):
        if bound and w > 0:
            entry = totals.setdefault((name, bound), [0, 0.0])
            entry[0] += 1
            entry[1] += w
    ops = sorted((PathOp(n, b, int(c), t) for (n, b), (c, t) in totals.items()),
                 key=lambda o: (-o.time_us, o.name))
    return CriticalPath(
        rank=trace.rank, window=label, start_us=lo, end_us=hi,
        length_us=float(weight.sum()), by_bound_us=by_bound, ops=ops,
        edge_type=[EDGE_TYPES[int(k)] for k in kind], edge_bound=bounds, edge_name=names,
        edge_start_us=graph.node_ts(graph.src[edges]), edge_end_us=graph.node_ts(graph.dst[edges]),
        edge_weight_us=weight,
    )


def _bound(kind: int, event: int, name: str, graph: Graph) -> str:
    if kind == KERNEL_KERNEL:
        return "gpu_kernel_kernel_overhead"
    if kind == LAUNCH:
        return "gpu_kernel_launch_overhead"
    if kind != OPERATOR or event < 0:
        return ""
    if event < graph.num_cpu:
        return "cpu_bound"
    return "gpu_communication_bound" if COMMUNICATION_KERNEL.search(name) else "gpu_compute_bound"
