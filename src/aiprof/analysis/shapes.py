"""GEMM/conv ops whose dimensions are off the multiples tensor cores need.

Tensor-core GEMMs want M, N, K (and conv channels) to be multiples of 8 elements for
FP16/BF16 and 16 for INT8/FP8 (NVIDIA Deep Learning Performance Guide, "Matrix
multiplication: tensor core requirements"); the table and the GEMM view of an op are
``aiprof.tensor.alignment``'s (``REQUIRED_MULTIPLE``, ``gemm_dims``). Needs record_shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from aiprof.analysis.tensor_cores import gemm_kernel_rows
from aiprof.tensor.alignment import REQUIRED_MULTIPLE, gemm_dims
from aiprof.tensor.costmodel import op_cost
from aiprof.tensor.trace_ops import call_from_row
from aiprof.trace import Trace


@dataclass(frozen=True)
class MisalignedOp:
    """One CPU op (all its calls with the same shapes are separate rows) and its kernels."""

    op_row: int
    name: str
    precision: str
    dims: dict[str, int]
    misaligned: tuple[str, ...]
    required_multiple: int
    padded_dims: dict[str, int]
    padded_flops: int
    """FLOPs of the op with its dimensions padded."""
    bytes_total: int
    kernel_rows: np.ndarray
    kernel_us: float


@dataclass(frozen=True)
class ShapesResult:
    """Misaligned GEMM/conv ops inside the steps (largest kernel time first)."""

    ops: list[MisalignedOp]
    num_checked_ops: int
    """GEMM/conv ops whose shapes were recorded (0: no record_shapes)."""
    aligned_flops_per_s: dict[str, float] = field(default_factory=dict)
    """Per precision, the highest rate (FLOPs over kernel time) an aligned GEMM/conv op of the
    trace reached: what tensor-core kernels of that precision deliver in this run."""

    @property
    def kernel_us(self) -> float:
        return sum(o.kernel_us for o in self.ops)


def misaligned_shapes(trace: Trace) -> ShapesResult:
    """Check every op that launched a GEMM/conv kernel inside the steps."""
    gpu = trace.gpu_ops
    rows = gemm_kernel_rows(trace)
    rows = rows[gpu.op_row[rows] >= 0]
    found, checked = [], 0
    aligned: dict[str, float] = {}
    for op_row in np.unique(gpu.op_row[rows]):
        call = call_from_row(trace, int(op_row))
        dims = gemm_dims(call)
        cost = op_cost(call)
        multiple = REQUIRED_MULTIPLE.get(cost.precision)
        if dims is None or multiple is None:
            continue
        checked += 1
        bad = tuple(name for name, size in dims.items() if size % multiple)
        kernels = rows[gpu.op_row[rows] == op_row]
        if not bad:
            kernel_us = float(gpu.dur_us[kernels].sum())
            if kernel_us > 0 and cost.flops > 0:
                rate = cost.flops / (kernel_us * 1e-6)
                aligned[cost.precision] = max(aligned.get(cost.precision, 0.0), rate)
            continue
        padded = {k: (-(-v // multiple) * multiple if k in bad else v) for k, v in dims.items()}
        scale = math.prod(padded.values()) / max(math.prod(dims.values()), 1)
        found.append(
            MisalignedOp(
                op_row=int(op_row),
                name=call.name,
                precision=cost.precision,
                dims=dims,
                misaligned=bad,
                required_multiple=multiple,
                padded_dims=padded,
                padded_flops=int(cost.flops * scale),
                bytes_total=cost.bytes_total,
                kernel_rows=kernels,
                kernel_us=float(gpu.dur_us[kernels].sum()),
            )
        )
    found.sort(key=lambda o: -o.kernel_us)
    return ShapesResult(found, checked, aligned)
