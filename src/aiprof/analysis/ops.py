"""Operator view: self and total time per CPU op, CPU and GPU, by name and input shapes.

Rows are every CPU span torch.profiler's ``key_averages()`` counts: ATen ops and autograd
nodes (``cpu_ops``), ``record_function`` ranges and ``ProfilerStep#N`` (``annotations``) and
CUDA runtime calls (``runtime``). Within a thread, spans nest (``cputree``):

- total CPU = the span's duration; self CPU = total minus its direct children's totals;
- self GPU = the GPU time of the kernels, copies and memsets the op launched itself (the op
  a launch's ``External id`` names, else the runtime call's); total GPU = self GPU of the op
  and every op nested inside it.

These are ``key_averages()``'s ``cpu_time_total``, ``self_cpu_time_total``,
``self_device_time_total`` and ``device_time_total`` (a test records a real workload and
compares every op). As there, a span that is its parent's only child and has its name (a
dispatcher re-entry: ``aten::sum`` inside ``aten::sum``) is folded into its parent, its
children and GPU time moved up. The view covers the whole trace, as ``key_averages()`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from aiprof.analysis.cpu_forest import cpu_forest
from aiprof.analysis.frames import data_frame
from aiprof.trace import Trace

KINDS = ("op", "annotation", "runtime")


@dataclass(frozen=True)
class OpRow:
    """One op name (and input shapes, when grouped by them)."""

    name: str
    kind: str
    input_shapes: str | None
    count: int
    total_cpu_us: float
    self_cpu_us: float
    self_gpu_us: float
    total_gpu_us: float

    @property
    def mean_cpu_us(self) -> float:
        return self.total_cpu_us / self.count if self.count else 0.0


@dataclass(frozen=True)
class OpView:
    """Rows sorted by self CPU time, largest first."""

    rank: int
    path: str
    by_shape: bool
    rows: list[OpRow]

    def to_pandas(self) -> Any:
        names = [f.name for f in fields(OpRow)]
        return data_frame({n: [getattr(r, n) for r in self.rows] for n in names})


@dataclass(frozen=True, eq=False)
class OpSpans:
    """Every CPU span of the view with its times (rows: ops, annotations, runtime calls)."""

    ts_us: np.ndarray
    name_id: np.ndarray
    kind: np.ndarray  # index into KINDS
    shapes_id: np.ndarray  # Trace.json_texts id of Input Dims, -1 when absent
    total_cpu_us: np.ndarray
    self_cpu_us: np.ndarray
    self_gpu_us: np.ndarray
    total_gpu_us: np.ndarray


def op_spans(trace: Trace) -> OpSpans:
    """Self and total times of every CPU span (see the module docstring)."""
    forest = cpu_forest(trace)
    ops, notes, calls = trace.cpu_ops, trace.annotations, trace.runtime
    tree, keep, dur = forest.tree, forest.keep, forest.dur_us
    gpu = trace.gpu_ops
    owner = np.where(gpu.op_row >= 0, gpu.op_row,
                     np.where(gpu.launch_row >= 0, forest.offsets[2] + gpu.launch_row, -1))
    linked = owner >= 0
    owner = forest.kept_owner(owner[linked])  # GPU time of folded spans: their kept ancestor
    self_gpu = np.zeros(len(dur))
    np.add.at(self_gpu, owner, gpu.dur_us[linked])
    kind = np.concatenate([np.full(len(t), k) for k, t in enumerate((ops, notes, calls))])
    shapes = np.concatenate([ops.input_dims_id, np.full(len(notes) + len(calls), -1)])
    kept_dur = np.where(keep, dur, 0.0)
    return OpSpans(
        ts_us=forest.ts_us[keep],
        name_id=forest.name_id[keep],
        kind=kind[keep],
        shapes_id=shapes[keep],
        total_cpu_us=dur[keep],
        self_cpu_us=(dur - tree.sum_children(kept_dur))[keep],
        self_gpu_us=self_gpu[keep],
        total_gpu_us=tree.sum_subtree(self_gpu)[keep],
    )


def op_view(trace: Trace, *, by_shape: bool = False) -> OpView:
    """Per op name (and input shapes with ``by_shape``): counts and the four times."""
    spans = op_spans(trace)
    shapes = spans.shapes_id if by_shape else np.full(len(spans.name_id), -1)
    if len(shapes) == 0:
        return OpView(trace.rank, trace.path, by_shape, [])
    name_id = spans.name_id.astype(np.int64)  # int32 columns: the key needs 64 bits
    keys = (name_id * len(KINDS) + spans.kind) * (int(shapes.max()) + 2) + shapes + 1
    unique_keys, first, group = np.unique(keys, return_index=True, return_inverse=True)
    distinct = np.stack([spans.name_id[first], spans.kind[first], shapes[first]], axis=1)
    count = np.bincount(group)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values, minlength=len(distinct))

    times = [total(v) for v in (spans.total_cpu_us, spans.self_cpu_us, spans.self_gpu_us,
                                spans.total_gpu_us)]
    rows = [
        OpRow(
            name=trace.name(int(name_id)),
            kind=KINDS[int(kind)],
            input_shapes=trace.json_texts[int(shape)] if shape >= 0 else None,
            count=int(count[g]),
            total_cpu_us=float(times[0][g]),
            self_cpu_us=float(times[1][g]),
            self_gpu_us=float(times[2][g]),
            total_gpu_us=float(times[3][g]),
        )
        for g, (name_id, kind, shape) in enumerate(distinct)
    ]
    rows.sort(key=lambda r: (-r.self_cpu_us, -r.self_gpu_us, r.name))
    return OpView(trace.rank, trace.path, by_shape, rows)

