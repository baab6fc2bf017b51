"""What ``channels_last`` changes beyond the conversion kernels: BatchNorm and depthwise convs.

**BatchNorm.** In NCHW a training BatchNorm computes per-channel statistics with one block per
channel over strided planes (``batch_norm_collect_statistics_kernel``, grid = channels) and a
backward of one block per channel (``batch_norm_backward_kernel``); with few channels and large
planes they fill a few SMs. In NHWC the channels are the contiguous dimension and PyTorch's
``*_channels_last_kernel``\\ s spread the reduction over every SM
(``aten/src/ATen/native/cuda/Normalization.cuh``). The bytes those kernels move: forward in
training, the statistics read the input and the transform reads it again and writes the output
(3 x the tensor; 2 x in eval mode, the statistics are the running ones); backward, the
reduction reads the input and the output gradient and the elementwise kernel reads both again
and writes the input gradient (5 x). ``nchw_batch_norm_durations`` gives each kernel that
roofline (the bytes over the DRAM bandwidth), the bound ``torch.compile``'s model uses.
``nhwc_batch_norm_durations`` is what ``channels_last`` gives: PyTorch's ``*_channels_last``
kernels do not reach the roofline. On the H200 they move their bytes at
``NHWC_BATCH_NORM_BANDWIDTH_FRACTION`` of the datasheet bandwidth and take
``NHWC_BATCH_NORM_US_PER_KERNEL`` more per kernel (3 kernels a training forward: the running
statistics' update, the statistics, the transform; 2 a backward: reduce, elementwise), a
least-squares fit over the 204 BatchNorm ops of the two channels_last twins in
``tests/data/diagnose/fix_twins/`` (EfficientNet-B0 and DeepLabV3-MobileNetV3 training,
``scripts/h200/fix_twins.py``, 2026-12-01; each workload alone gives 1.95-2.10 TB/s and
3.6-6.8 µs; ``tests/diagnose/test_nhwc_batch_norm.py`` refits it). The roofline alone made the
NHWC BatchNorms 3.3 times faster than they ran there. The tensor's size and layout come from
the op's recorded shapes and strides (record_shapes); without them nothing is modelled. An op
whose kernels already take at most the modelled time keeps their durations.

**Depthwise convolutions.** PyTorch runs an NCHW bf16/FP32 depthwise convolution with its own
kernels (``conv_depthwise2d_*``, ``conv_depthwise3d_*``: ``aten::_conv_depthwise2d``), and a
``channels_last`` one always with cuDNN (``ConvParams::use_cudnn_depthwise`` in
``aten/src/ATen/native/Convolution.cpp``: "always use cudnn_depthwise for channels_last
format"; in NCHW it picks cuDNN only for FP16 shapes it measured faster). So the fix moves these
convolutions to kernels whose time an NCHW trace does not show: ``aten_depthwise_rows`` names
them, and ``layout_conversion`` does not claim a gain where they take as long as it saves.
Measured on one H200 (``tests/data/diagnose/h200_depthwise_layouts.json``, 2026-12-01), cuDNN's
NHWC depthwise kernels and the NHWC BatchNorms are faster than PyTorch's NCHW ones at
EfficientNet-B0's shapes, yet ``channels_last`` measured slower on both depthwise nets of the
counterfactual suite (EfficientNet-B0 inside its noise, DeepLabV3-MobileNetV3 beyond it): what
else changes in NHWC in such a net is not in the NCHW trace either (docs/diagnose.md), so the
withholding stands on that measurement, not on the depthwise kernels' speed.
"""

from __future__ import annotations

import re
from math import prod

import numpy as np

from aiprof.analysis.gpu_window import gpu_window
from aiprof.trace import Trace

BATCH_NORM = re.compile("batch_norm")
ATEN_DEPTHWISE_KERNEL = re.compile(r"conv_depthwise[23]d")
"""PyTorch's own depthwise kernels (``DepthwiseConv2d.cu``, ``DepthwiseConv3d.cu``)."""
TRAINING_PASSES = 3.0
"""Training BatchNorm forward in NHWC: statistics (read x), transform (read x, write y)."""
EVAL_PASSES = 2.0
"""Eval-mode BatchNorm forward: read x, write y (running statistics)."""
BACKWARD_PASSES = 5.0
"""Backward BatchNorm in NHWC: reduce (read x, dy), elementwise (read x, dy, write dx)."""
NHWC_BATCH_NORM_BANDWIDTH_FRACTION = 0.41
"""Share of the datasheet DRAM bandwidth PyTorch's channels_last BatchNorm kernels reach: 1.95
TB/s of the H200's 4.8 (fit over tests/data/diagnose/fix_twins/*.channels_last traces)."""
NHWC_BATCH_NORM_US_PER_KERNEL = 4.9
"""Fixed time per channels_last BatchNorm kernel on the H200 (the same fit)."""
NHWC_KERNELS = {TRAINING_PASSES: 3, EVAL_PASSES: 1, BACKWARD_PASSES: 2}
"""Kernels an NHWC BatchNorm launches, by its passes (the channels_last twins' traces: forward
in training ``unrolled_elementwise`` + ``*_collect_statistics_channels_last`` +
``*_transform_input_channels_last``; backward ``*_backward_reduce_channels_last`` +
``*_backward_elemt_channels_last``; eval mode the transform alone)."""
TRAINING_ARG = 5
"""Index of ``training`` in ``native_batch_norm``/``cudnn_batch_norm``/``batch_norm``'s args."""


def _first(trace: Trace, ids: np.ndarray, row: int) -> list[int]:
    value = trace.json_value(int(ids[row]))
    first = (value or [None])[0]
    return [int(v) for v in first] if isinstance(first, list) else []


def _window_kernel_rows(trace: Trace) -> np.ndarray:
    """Kernels inside the steps with a launching CPU op."""
    ops = trace.gpu_ops
    win = gpu_window(trace)
    rows: np.ndarray = win.rows[(win.rows < len(trace.kernels)) & (ops.op_row[win.rows] >= 0)]
    return rows


def batch_norm_rows(trace: Trace) -> np.ndarray:
    """Kernels of BatchNorm ops inside the steps (any layout)."""
    rows = _window_kernel_rows(trace)
    is_bn = trace.strings.mask(trace.cpu_ops.name_id, BATCH_NORM)
    picked: np.ndarray = rows[is_bn[trace.gpu_ops.op_row[rows]]]
    return picked


def nchw_batch_norm_rows(trace: Trace) -> np.ndarray:
    """Kernels of BatchNorm ops on 4-D NCHW tensors: in NCHW PyTorch launches their
    statistics and backward kernels one block per channel, so a larger batch adds no blocks;
    ``channels_last`` is what spreads them (``layout_conversion``)."""
    rows = batch_norm_rows(trace)
    ops = trace.gpu_ops
    nchw = {op: _nchw_dims(trace, op) is not None for op in np.unique(ops.op_row[rows]).tolist()}
    picked: np.ndarray = rows[np.array([nchw[int(o)] for o in ops.op_row[rows]], dtype=bool)] \
        if len(rows) else rows
    return picked


def nchw_batch_norm_durations(trace: Trace, bandwidth: float) -> dict[int, float]:
    """BatchNorm kernels of 4-D NCHW tensors at their NHWC roofline (where that is shorter)."""
    ops = trace.gpu_ops
    rows = batch_norm_rows(trace)
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


def nhwc_batch_norm_durations(trace: Trace, bandwidth: float) -> dict[int, float]:
    """BatchNorm kernels of 4-D NCHW tensors at the time PyTorch's channels_last kernels take
    for the same op (the module docstring), each op's kernels scaled alike."""
    ops = trace.gpu_ops
    by_op: dict[int, list[int]] = {}
    for row in batch_norm_rows(trace).tolist():
        by_op.setdefault(int(ops.op_row[row]), []).append(row)
    new: dict[int, float] = {}
    for op, rows in by_op.items():
        shape = _bytes_and_passes(trace, op)
        if shape is None:
            continue
        size_bytes, passes = shape
        modelled_us = (passes * size_bytes / (NHWC_BATCH_NORM_BANDWIDTH_FRACTION * bandwidth) * 1e6
                       + NHWC_KERNELS[passes] * NHWC_BATCH_NORM_US_PER_KERNEL)
        now_us = float(ops.dur_us[rows].sum())
        if modelled_us < now_us:
            new.update({row: float(ops.dur_us[row]) * modelled_us / now_us for row in rows})
    return new


def aten_depthwise_rows(trace: Trace) -> np.ndarray:
    """Kernels of PyTorch's own (NCHW) depthwise convolutions inside the steps: under
    ``channels_last`` cuDNN runs these convolutions instead, at a time the trace does not show."""
    rows = _window_kernel_rows(trace)
    is_dw = trace.strings.mask(trace.gpu_ops.name_id, ATEN_DEPTHWISE_KERNEL)
    depthwise: np.ndarray = rows[is_dw[rows]]
    return depthwise


def _passes(trace: Trace, op: int, name: str) -> float:
    if "backward" in name:
        return BACKWARD_PASSES
    concrete = trace.json_value(int(trace.cpu_ops.concrete_inputs_id[op]))
    training = concrete[TRAINING_ARG] if isinstance(concrete, list) and len(
        concrete) > TRAINING_ARG else "True"
    return EVAL_PASSES if training == "False" else TRAINING_PASSES


def _nchw_dims(trace: Trace, op: int) -> list[int] | None:
    """The BatchNorm op's first input's dims, if it is a 4-D NCHW tensor."""
    cpu = trace.cpu_ops
    if "batch_norm" not in trace.name(int(cpu.name_id[op])):
        return None
    dims = _first(trace, cpu.input_dims_id, op)
    strides = _first(trace, cpu.input_strides_id, op)
    if len(dims) != 4 or len(strides) != 4 or strides[1] == 1 or dims[1] <= 1:
        return None  # not 4-D, or already channels_last (the channels are contiguous)
    return dims


def _bytes_and_passes(trace: Trace, op: int) -> tuple[int, float] | None:
    """The op's first input's size in bytes and its passes, if it is a 4-D NCHW tensor."""
    cpu = trace.cpu_ops
    dims = _nchw_dims(trace, op)
    if dims is None:
        return None
    types = trace.json_value(int(cpu.input_types_id[op]))
    elem = 2 if any(t in ("c10::BFloat16", "c10::Half") for t in (types or [])[:1]) else 4
    return prod(dims) * elem, _passes(trace, op, trace.name(int(cpu.name_id[op])))


def _roof_us(trace: Trace, op: int, bandwidth: float) -> float | None:
    """The op's BatchNorm roofline (µs) for its first input, if it is a 4-D NCHW tensor."""
    shape = _bytes_and_passes(trace, op)
    if shape is None:
        return None
    size_bytes, passes = shape
    return passes * size_bytes / bandwidth * 1e6
