"""What ``channels_last`` changes beyond the conversion kernels: NHWC BatchNorm kernels.

In NCHW a training BatchNorm computes per-channel statistics over strided planes and reads its
input again to normalize it (``batch_norm_collect_statistics_kernel`` then
``batch_norm_transform_input_kernel``; cuDNN's ``bn_fw_tr_1C11_kernel_NCHW``); in NHWC the
channels are the contiguous dimension and the kernels read the tensor in one pass. The model
(aiprof's): with ``channels_last`` a BatchNorm kernel takes at most its roofline time, the
bytes it must move over the DRAM bandwidth: the input read and the output written (2 x the
tensor) forward, the input and the output gradient read and the input gradient written (3 x)
backward. The tensor's size and layout come from the op's recorded shapes and strides
(record_shapes); without them nothing is modelled. A kernel already at or under that time
keeps its duration. The NCHW convolutions' own algorithms (other than the conversions around
them) are not modelled.
"""

from __future__ import annotations

import re
from math import prod

import numpy as np

from aiprof.analysis.gpu_window import gpu_window
from aiprof.trace import Trace

BATCH_NORM = re.compile("batch_norm")
FORWARD_PASSES = 2.0
"""Forward BatchNorm: read x, write y."""
BACKWARD_PASSES = 3.0
"""Backward BatchNorm: read x and dy, write dx."""


def _first(trace: Trace, ids: np.ndarray, row: int) -> list[int]:
    value = trace.json_value(int(ids[row])) if ids[row] >= 0 else None
    first = (value or [None])[0]
    return [int(v) for v in first] if isinstance(first, list) else []


def nchw_batch_norm_durations(trace: Trace, bandwidth: float) -> dict[int, float]:
    """BatchNorm kernels of 4-D NCHW tensors at their NHWC roofline (where that is shorter)."""
    ops = trace.gpu_ops
    win = gpu_window(trace)
    rows = win.rows[(win.rows < len(trace.kernels)) & (ops.op_row[win.rows] >= 0)]
    is_bn = trace.strings.mask(trace.cpu_ops.name_id, BATCH_NORM)
    rows = rows[is_bn[ops.op_row[rows]]]
    new: dict[int, float] = {}
    cache: dict[int, float | None] = {}
    for row in rows.tolist():
        op = int(ops.op_row[row])
        if op not in cache:
            cache[op] = _roof_us(trace, op, bandwidth)
        roof = cache[op]
        if roof is not None and roof < float(ops.dur_us[row]):
            new[row] = roof
    return new


def _roof_us(trace: Trace, op: int, bandwidth: float) -> float | None:
    """The op's BatchNorm roofline (µs) for its first input, if it is a 4-D NCHW tensor."""
    cpu = trace.cpu_ops
    name = trace.name(int(cpu.name_id[op]))
    if "batch_norm" not in name:
        return None
    dims = _first(trace, cpu.input_dims_id, op)
    strides = _first(trace, cpu.input_strides_id, op)
    if len(dims) != 4 or len(strides) != 4 or strides[1] == 1 or dims[1] <= 1:
        return None  # not 4-D, or already channels_last (the channels are contiguous)
    types = trace.json_value(int(cpu.input_types_id[op])) if cpu.input_types_id[op] >= 0 else []
    elem = 2 if any(t in ("c10::BFloat16", "c10::Half") for t in (types or [])[:1]) else 4
    passes = BACKWARD_PASSES if "backward" in name else FORWARD_PASSES
    return passes * prod(dims) * elem / bandwidth * 1e6
