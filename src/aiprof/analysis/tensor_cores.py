"""GEMM and convolution kernels on CUDA cores where tensor cores were available.

A matmul/conv kernel runs without tensor cores when its name says so (``sgemm``, ``simt``,
``implicit_convolve_sgemm``, ``f32f32_f32f32`` without ``tf32``: cuBLAS/cuDNN/CUTLASS naming,
see ``kernel_kinds``) or when it carries no tensor-core marker and the CPU op that launched it
had only float32 inputs (``Input type`` with record_shapes). On sm_80+ such FP32 math could
run as TF32 (``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.cudnn.allow_tf32``)
or BF16/FP16 under autocast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiprof.analysis.gpu_window import gpu_window
from aiprof.analysis.kernel_kinds import (
    FP32_CUDA_CORE,
    GEMM_OR_CONV,
    LAYOUT_CONVERSION,
    TENSOR_CORE,
)
from aiprof.trace import Trace

FP32_TYPES = frozenset({"float", "float32", "c10::float"})
HALF_TYPES = frozenset({"c10::Half", "c10::BFloat16", "half", "bfloat16", "float16"})


@dataclass(frozen=True)
class TensorCoreResult:
    """Matmul/conv kernels inside the steps, split by whether they used tensor cores."""

    gemm_rows: np.ndarray
    """Rows of ``trace.gpu_ops``: every GEMM/conv kernel inside the steps."""
    fp32_rows: np.ndarray
    """The subset that ran on CUDA cores in FP32."""
    gemm_us: float
    fp32_us: float

    @property
    def fp32_pct_of_gemm(self) -> float:
        return 100.0 * self.fp32_us / self.gemm_us if self.gemm_us > 0 else 0.0


def tensor_core_usage(trace: Trace) -> TensorCoreResult:
    """Find the FP32 CUDA-core GEMM/conv kernels (see the module docstring)."""
    ops = trace.gpu_ops
    rows = gemm_kernel_rows(trace)
    ids = ops.name_id[rows]
    tensor_core = trace.strings.mask(ids, TENSOR_CORE)
    named_fp32 = trace.strings.mask(ids, FP32_CUDA_CORE)
    op_rows, inverse = np.unique(ops.op_row[rows], return_inverse=True)
    typed_fp32 = np.array([fp32_op(trace, int(r)) for r in op_rows], dtype=bool)[inverse]
    fp32 = ~tensor_core & (named_fp32 | typed_fp32)
    return TensorCoreResult(
        gemm_rows=rows,
        fp32_rows=rows[fp32],
        gemm_us=float(ops.dur_us[rows].sum()),
        fp32_us=float(ops.dur_us[rows[fp32]].sum()),
    )


def gemm_kernel_rows(trace: Trace) -> np.ndarray:
    """Rows of ``trace.gpu_ops``: the matmul/conv kernels that start inside the steps."""
    win = gpu_window(trace)
    rows = win.rows[win.rows < len(trace.kernels)]
    ids = trace.gpu_ops.name_id[rows]
    gemm = trace.strings.mask(ids, GEMM_OR_CONV) & ~trace.strings.mask(ids, LAYOUT_CONVERSION)
    return np.asarray(rows[gemm])


def fp32_op(trace: Trace, op_row: int) -> bool:
    """The op's tensor inputs are all float32 (False when the types were not recorded)."""
    if op_row < 0:
        return False
    types = trace.json_value(int(trace.cpu_ops.input_types_id[op_row])) or []
    tensor_types = [t for t in types if isinstance(t, str) and t]
    if not tensor_types or any(t in HALF_TYPES for t in tensor_types):
        return False
    return any(t in FP32_TYPES for t in tensor_types)
