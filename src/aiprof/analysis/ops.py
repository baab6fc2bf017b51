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

from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from aiprof.analysis.cpu_forest import CpuForest, cpu_forest
from aiprof.analysis.frames import data_frame
from aiprof.analysis.groups import groups
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
    keep = forest.keep
    kind = np.concatenate([np.full(len(t), k) for k, t in enumerate((ops, notes, calls))])
    shapes = np.concatenate([ops.input_dims_id, np.full(len(notes) + len(calls), -1)])
    total_cpu, self_cpu, self_gpu, total_gpu = (t[keep] for t in _span_times(trace, forest))
    return OpSpans(
        ts_us=forest.ts_us[keep],
        name_id=forest.name_id[keep],
        kind=kind[keep],
        shapes_id=shapes[keep],
        total_cpu_us=total_cpu,
        self_cpu_us=self_cpu,
        self_gpu_us=self_gpu,
        total_gpu_us=total_gpu,
    )


def _span_times(trace: Trace, forest: CpuForest) -> Iterator[np.ndarray]:
    """Total CPU, self CPU, self GPU and total GPU time of every span of ``forest`` (folded
    ones too), one array at a time: a caller that sums each as it comes holds one, not four."""
    tree, keep, dur = forest.tree, forest.keep, forest.dur_us
    yield dur
    yield dur - tree.sum_children(np.where(keep, dur, 0.0))
    gpu = trace.gpu_ops
    owner = np.where(gpu.op_row >= 0, gpu.op_row,
                     np.where(gpu.launch_row >= 0, forest.offsets[2] + gpu.launch_row, -1))
    linked = owner >= 0
    owner = forest.kept_owner(owner[linked])  # GPU time of folded spans: their kept ancestor
    self_gpu = np.zeros(len(dur))
    np.add.at(self_gpu, owner, gpu.dur_us[linked])
    del owner, linked
    yield self_gpu
    yield tree.sum_subtree(self_gpu)


def op_view(trace: Trace, *, by_shape: bool = False) -> OpView:
    """Per op name (and input shapes with ``by_shape``): counts and the four times.

    Each span's key is its group's, the folded spans' a group of their own that is dropped;
    the four times are summed per group one at a time, in span order (the sums of the kept
    spans' times, as ``op_spans`` gives them)."""
    forest = cpu_forest(trace)
    keep = forest.keep
    if not keep.any():
        return OpView(trace.rank, trace.path, by_shape, [])
    ops = trace.cpu_ops
    kind = np.repeat(np.arange(len(KINDS), dtype=np.int64),
                     [len(ops), len(trace.annotations), len(trace.runtime)])
    if by_shape:
        shapes = np.concatenate([ops.input_dims_id,
                                 np.full(len(keep) - len(ops), -1)]).astype(np.int64)
    else:
        shapes = np.full(len(keep), -1, dtype=np.int64)
    radix = int(shapes[keep].max()) + 2
    name_id = forest.name_id.astype(np.int64)  # int32 columns: the key needs 64 bits
    keys = (name_id * len(KINDS) + kind) * radix + shapes + 1
    del name_id, kind, shapes
    present, group = groups(np.where(keep, keys, -1))
    del keys
    folded = int(present[0] < 0)  # the folded spans' group (key -1) comes first
    present = present[folded:]
    count = np.bincount(group)[folded:]
    times = [np.bincount(group, weights=t)[folded:] for t in _span_times(trace, forest)]
    rows = [
        OpRow(
            name=trace.name(int(key) // (len(KINDS) * radix)),
            kind=KINDS[int(key) // radix % len(KINDS)],
            input_shapes=trace.json_texts[shape] if (shape := int(key) % radix - 1) >= 0
            else None,
            count=int(count[g]),
            total_cpu_us=float(times[0][g]),
            self_cpu_us=float(times[1][g]),
            self_gpu_us=float(times[2][g]),
            total_gpu_us=float(times[3][g]),
        )
        for g, key in enumerate(present.tolist())
    ]
    rows.sort(key=lambda r: (-r.self_cpu_us, -r.self_gpu_us, r.name))
    return OpView(trace.rank, trace.path, by_shape, rows)
