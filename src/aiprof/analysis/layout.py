"""Layout conversions: NCHW<->NHWC kernels, transposes, and ``.contiguous()`` copies.

cuDNN runs tensor-core convolutions in NHWC; given NCHW tensors it wraps them in
``nchwToNhwcKernel`` / ``nhwcToNchwKernel`` conversions (NVIDIA Deep Learning Performance
Guide, "Tensor layouts in memory: NCHW vs NHWC"). ``aten::contiguous`` / ``aten::clone``
of a 4-D tensor materialize a permuted copy the same way. The pass counts the GPU time of
both kinds inside the steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from aiprof.analysis.gpu_window import gpu_window
from aiprof.analysis.kernel_kinds import GEMM_OR_CONV, LAYOUT_CONVERSION, TRANSPOSE
from aiprof.trace import Trace

COPY_OP = re.compile(r"^aten::(contiguous|clone|copy_)$")


@dataclass(frozen=True)
class LayoutResult:
    """Conversion kernels inside the steps."""

    rows: np.ndarray
    """Rows of ``trace.gpu_ops``."""
    total_us: float
    num_by_name_kernels: int
    num_by_copy_op: int


def layout_conversions(trace: Trace) -> LayoutResult:
    """Kernels named like a layout conversion, or launched by a 4-D ``contiguous``/``clone``."""
    win = gpu_window(trace)
    ops = trace.gpu_ops
    rows = win.rows[win.rows < len(trace.kernels)]
    ids = ops.name_id[rows]
    transpose = trace.strings.mask(ids, TRANSPOSE) & ~trace.strings.mask(ids, GEMM_OR_CONV)
    by_name = trace.strings.mask(ids, LAYOUT_CONVERSION) | transpose
    op_rows = ops.op_row[rows]
    cpu = trace.cpu_ops
    by_op = np.zeros(len(rows), bool)
    valid = op_rows >= 0
    if valid.any():
        by_op[valid] = trace.strings.mask(cpu.name_id[op_rows[valid]], COPY_OP)
        for i in np.flatnonzero(by_op):
            by_op[i] = _permuting_4d(trace, int(op_rows[i]))
    chosen = rows[by_name | by_op]
    return LayoutResult(
        rows=chosen,
        total_us=float(ops.dur_us[chosen].sum()),
        num_by_name_kernels=int(by_name.sum()),
        num_by_copy_op=int((by_op & ~by_name).sum()),
    )


def _permuting_4d(trace: Trace, row: int) -> bool:
    """A 4-D copy whose source and destination strides differ (a layout change)."""
    dims = trace.json_value(int(trace.cpu_ops.input_dims_id[row])) or []
    strides = trace.json_value(int(trace.cpu_ops.input_strides_id[row])) or []
    if not dims or not isinstance(dims[0], list) or len(dims[0]) != 4:
        return False
    if len(strides) >= 2 and strides[0] and strides[1]:
        return bool(strides[0] != strides[1])
    return trace.name(int(trace.cpu_ops.name_id[row])) != "aten::copy_"
