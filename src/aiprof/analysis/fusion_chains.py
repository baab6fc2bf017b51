"""Chains of memory-bound kernels between heavier ones: fusion candidates.

A chain is a run of at least ``min_length`` consecutive kernels of one stream that are all
elementwise, reduction or normalization kernels (``kernel_kinds.ELEMENTWISE``, not a GEMM or
conv). Each kernel of such a chain reads its inputs from DRAM and writes its output back;
fused into one kernel (``torch.compile``, a fused op such as ``F.gelu`` or ``F.layer_norm``)
the intermediates stay in registers. Bytes saved are the op cost model's bytes of every
member but the largest (``aiprof.tensor.costmodel``; needs record_shapes, else unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis.gpu_window import gpu_window
from aiprof.analysis.kernel_kinds import ELEMENTWISE, GEMM_OR_CONV
from aiprof.tensor.costmodel import op_cost
from aiprof.tensor.trace_ops import call_from_row
from aiprof.trace import Trace


@dataclass(frozen=True)
class Chain:
    """One run of memory-bound kernels on a stream."""

    rows: np.ndarray
    """Rows of ``trace.gpu_ops``, in order."""
    total_us: float
    longest_us: float
    bytes_saved: int | None


@dataclass(frozen=True)
class FusionChainsResult:
    """Every chain inside the steps, longest total time first."""

    chains: list[Chain]

    @property
    def chain_us(self) -> float:
        return sum(c.total_us for c in self.chains)

    @property
    def num_kernels(self) -> int:
        return sum(len(c.rows) for c in self.chains)


MIN_LENGTH = 2
"""Two memory-bound kernels in a row are one kernel under torch.compile (Inductor fuses every
run of pointwise and reduction ops between the kernels it does not generate)."""


def fusion_chains(trace: Trace, min_length: int = MIN_LENGTH,
                  with_bytes: bool = True) -> FusionChainsResult:
    """Find the chains (see the module docstring); ``with_bytes=False`` leaves their bytes
    saved unknown (no cost model per op: faster)."""
    win = gpu_window(trace)
    ops = trace.gpu_ops
    rows = win.rows[win.rows < len(trace.kernels)]
    ids = ops.name_id[rows]
    light = trace.strings.mask(ids, ELEMENTWISE) & ~trace.strings.mask(ids, GEMM_OR_CONV)
    chains = []
    for stream in np.unique(ops.stream[rows]):
        mine = ops.stream[rows] == stream
        chains.extend(_runs(trace, rows[mine], light[mine], min_length, with_bytes))
    chains.sort(key=lambda c: -c.total_us)
    return FusionChainsResult(chains)


def _runs(trace: Trace, rows: np.ndarray, light: np.ndarray, min_length: int,
          with_bytes: bool) -> list[Chain]:
    edges = np.diff(np.concatenate([[0], light.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    dur = trace.gpu_ops.dur_us
    return [
        Chain(rows[s:e], float(dur[rows[s:e]].sum()), float(dur[rows[s:e]].max()),
              _bytes_saved(trace, rows[s:e]) if with_bytes else None)
        for s, e in zip(starts, ends, strict=True)
        if e - s >= min_length
    ]


def _bytes_saved(trace: Trace, rows: np.ndarray) -> int | None:
    op_rows = trace.gpu_ops.op_row[rows]
    if np.any(op_rows < 0):
        return None
    costs = [op_cost(call_from_row(trace, int(r))) for r in op_rows]
    if not all(c.has_model for c in costs):
        return None
    sizes = [c.bytes_total for c in costs]
    return int(sum(sizes) - max(sizes))
