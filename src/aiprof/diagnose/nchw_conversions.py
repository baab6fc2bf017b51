"""What cuDNN's layout conversions add to an NCHW convolution that moves to tensor cores.

cuDNN's tensor-core convolution kernels read and write NHWC. For NCHW tensors it runs
conversion kernels around each one (``tensor.layout.CONVERSION_KERNEL``: ``nchwToNhwcKernel``,
``nhwcToNchwKernel``). The suite's NCHW nets show two or three around a forward convolution
(input, weight, output) and two to six around a backward one, in bf16 and with TF32 alike:
resnet18_b4, FP32 with cuDNN's TF32 allowed, runs ``tf32`` NHWC kernels with 152 conversions
in two steps. The FP32 CUDA-core kernels in an FP32 trace read NCHW directly and need none, so
the TF32 and bf16 paths (``precision.py``) add them: read and write once each tensor the op
moves (``op_cost``'s bytes, at the new path's element size), at the share of the DRAM
bandwidth the recorded conversions reach (``CONVERSION_BANDWIDTH_FRACTION``).
"""

from __future__ import annotations

import numpy as np

from aiprof.tensor.costmodel import op_cost
from aiprof.tensor.layout import CONV_OPS, CONVERSION_KERNEL
from aiprof.tensor.opcall import Arg, TensorMeta
from aiprof.tensor.trace_ops import call_from_row
from aiprof.trace import Trace

CONVERSION_BANDWIDTH_FRACTION = 0.32
"""Share of the datasheet DRAM bandwidth cuDNN's conversions reach, counted as two passes over
the op's tensors (``conversion_rates``): the median over the 332 conv ops with conversions in
the seventh recording's five NCHW conv nets (H200, 2026-12-03), 1.52 TB/s of the H200's 4.8;
per workload 0.83 (resnet18_b4's batch of 4) to 1.77 TB/s
(``tests/diagnose/test_nchw_conversions.py`` recomputes it)."""
PASSES = 2.0
"""Each tensor read once and written once in the other layout."""


def conversion_rates(trace: Trace) -> np.ndarray:
    """Per conv op that launched conversion kernels: ``PASSES`` x its tensors' bytes over the
    conversions' time (bytes per second)."""
    gpu = trace.gpu_ops
    rows = np.flatnonzero(trace.strings.mask(gpu.name_id, CONVERSION_KERNEL) & (gpu.op_row >= 0))
    if not len(rows):
        return np.zeros(0)
    op_rows, inverse = np.unique(gpu.op_row[rows], return_inverse=True)
    spent_us = np.bincount(inverse, weights=gpu.dur_us[rows], minlength=len(op_rows))
    rates = []
    for op, us in zip(op_rows.tolist(), spent_us.tolist(), strict=True):
        call = call_from_row(trace, op)
        if call.op not in CONV_OPS or us <= 0:
            continue
        cost = op_cost(call)
        if cost.has_model and cost.bytes_total > 0:
            rates.append(PASSES * cost.bytes_total / (us * 1e-6))
    return np.asarray(rates)


def conversion_durations(trace: Trace, rows: np.ndarray, element_factor: float,
                         bandwidth_bytes_per_s: float) -> dict[int, float]:
    """Per conv op of the GPU ops ``rows`` (FP32 kernels a precision path moves) whose first
    input is NCHW: the conversions' time, µs, put on its first kernel among ``rows``;
    ``element_factor`` is the new element size over the recorded one (1 for TF32's FP32
    storage, 0.5 for bf16)."""
    gpu = trace.gpu_ops
    rate = CONVERSION_BANDWIDTH_FRACTION * bandwidth_bytes_per_s
    out: dict[int, float] = {}
    seen: set[int] = set()
    for row in rows.tolist():
        op = int(gpu.op_row[row])
        if op < 0 or op in seen:
            continue
        seen.add(op)
        call = call_from_row(trace, op)
        if call.op not in CONV_OPS or not call.args or not _nchw(call.args[0]):
            continue
        cost = op_cost(call)
        if cost.has_model and cost.bytes_total > 0:
            out[int(row)] = PASSES * cost.bytes_total * element_factor / rate * 1e6
    return out


def _nchw(arg: Arg) -> bool:
    """A 4-D tensor not stored channels_last (without recorded strides: NCHW, the default)."""
    return isinstance(arg, TensorMeta) and len(arg.shape) == 4 and not arg.is_channels_last
