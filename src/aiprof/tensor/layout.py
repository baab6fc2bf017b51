"""Layout lint: half-precision convolutions on NCHW tensors, and copies of permuted tensors.

Why: tensor-core convolutions in cuDNN work on NHWC; an NCHW fp16/bf16 convolution pays
NCHW<->NHWC transposes around the kernel (NVIDIA Deep Learning Performance Guide,
"Convolutional Layers User's Guide", section "Tensor Layouts In Memory: NCHW vs NHWC").
A layout conversion reads and writes the whole tensor once (the chapter's "O(tensor_size)
memory reads and writes"), so its predicted time is ``2 · bytes / memory bandwidth``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aiprof.tensor.ceilings_model import Ceilings
from aiprof.tensor.costmodel import op_cost
from aiprof.tensor.dtypes import canonical_dtype
from aiprof.tensor.opcall import OpCall, TensorMeta
from aiprof.tensor.opcost import unique_bytes

HALF_DTYPES = frozenset({"float16", "bfloat16"})
CONV_OPS = frozenset(
    {"convolution", "_convolution", "conv2d", "cudnn_convolution", "convolution_backward"}
)
COPY_OPS = frozenset({"clone", "contiguous", "copy_", "_to_copy"})
CONVERSION_KERNEL = re.compile(r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|convertTensor", re.I)
"""The layout-conversion kernels cuDNN runs around an NCHW half-precision convolution
(``nchwToNhwcKernel``, ``nhwcToNchwKernel``, ``convertTensor_kernel``): the one matcher, used by
the trace lints here and by ``analysis.layout`` and ``analysis.tensor_cores``."""
CHANNELS_LAST_FIX = "model = model.to(memory_format=torch.channels_last) and the same for the input"
COPY_FIX = "keep the producer's layout (avoid permute/transpose + contiguous), or fuse the copy"


@dataclass(frozen=True)
class LayoutFinding:
    """One op whose data layout costs time."""

    index: int
    """Position of the op in the recorded sequence."""
    kind: str
    """``nchw_half_conv`` or ``strided_copy``."""
    op: str
    shape: tuple[int, ...]
    dtype: str
    converted_bytes: int
    """Bytes a conversion (or the copy) reads plus writes."""
    predicted_us: float | None
    """Conversion time at the target's memory bandwidth (None without a target)."""
    measured_us: float | None
    """Measured time of the copy, or of a convolution's conversion kernels (from a trace)."""
    fix: str


@dataclass(frozen=True)
class LayoutReport:
    """All layout findings of a sequence of ops."""

    num_convs_checked: int
    findings: tuple[LayoutFinding, ...]
    predicted_total_us: float | None
    measured_total_us: float | None


def lint_layout(
    calls: Sequence[OpCall],
    ceilings: Ceilings | None = None,
    measured_us: Sequence[float | None] | None = None,
    conversion_us: Sequence[float | None] | None = None,
) -> LayoutReport:
    """Flag NCHW half-precision convolutions and copies that materialize permuted tensors.

    ``measured_us[i]`` is op i's own time (used for copies); ``conversion_us[i]`` the measured
    time of the NCHW<->NHWC conversion kernels a convolution launched (from a trace)."""
    findings: list[LayoutFinding] = []
    num_convs = 0
    for index, call in enumerate(calls):
        time_us = measured_us[index] if measured_us is not None else None
        if call.op in CONV_OPS:
            num_convs += 1
            converted = conversion_us[index] if conversion_us is not None else None
            finding = _conv_finding(index, call, ceilings, converted)
        elif call.op in COPY_OPS:
            finding = _copy_finding(index, call, ceilings, time_us)
        else:
            finding = None
        if finding is not None:
            findings.append(finding)
    predicted = [f.predicted_us for f in findings if f.predicted_us is not None]
    measured = [f.measured_us for f in findings if f.measured_us is not None]
    return LayoutReport(
        num_convs_checked=num_convs,
        findings=tuple(findings),
        predicted_total_us=sum(predicted) if ceilings is not None else None,
        measured_total_us=sum(measured) if measured else None,
    )


def _conv_finding(
    index: int, call: OpCall, ceilings: Ceilings | None, time_us: float | None
) -> LayoutFinding | None:
    x_pos = 1 if call.op == "convolution_backward" else 0
    x = call.tensor(x_pos)
    if x is None or len(x.shape) != 4 or canonical_dtype(x.dtype) not in HALF_DTYPES:
        return None
    if x.is_channels_last or x.strides is None or x.shape[1] == 1:
        return None
    grad_out = call.tensor(0)
    if call.op == "convolution_backward" and grad_out is not None:
        other = unique_bytes(grad_out)  # grad_output and input are converted
    else:  # input and output (its shape derived by the cost model when not recorded)
        other = op_cost(call).bytes_written
    nbytes = 2 * (unique_bytes(x) + other)
    return _finding(
        index, "nchw_half_conv", call.op, x, nbytes, ceilings, time_us, CHANNELS_LAST_FIX
    )


def _copy_finding(
    index: int, call: OpCall, ceilings: Ceilings | None, time_us: float | None
) -> LayoutFinding | None:
    src_pos = 1 if call.op == "copy_" else 0
    src = call.tensor(src_pos)
    if src is None or not _is_permuted(src):
        return None
    if call.outputs and not call.outputs[0].is_contiguous:
        return None  # the copy keeps the permuted layout: nothing is materialized
    nbytes = 2 * unique_bytes(src)
    return _finding(index, "strided_copy", call.op, src, nbytes, ceilings, time_us, COPY_FIX)


def _finding(
    index: int,
    kind: str,
    op: str,
    tensor: TensorMeta,
    nbytes: int,
    ceilings: Ceilings | None,
    time_us: float | None,
    fix: str,
) -> LayoutFinding:
    predicted = nbytes / ceilings.memory_bytes_per_s * 1e6 if ceilings is not None else None
    return LayoutFinding(
        index, kind, op, tensor.shape, tensor.dtype, nbytes, predicted, time_us, fix
    )


def _is_permuted(tensor: TensorMeta) -> bool:
    """Dense but not row-major: a permute or transpose of a contiguous tensor."""
    if tensor.strides is None or tensor.is_contiguous or len(tensor.shape) < 2:
        return False
    dims = [(st, size) for st, size in zip(tensor.strides, tensor.shape, strict=True) if size > 1]
    expected = 1
    for stride, size in sorted(dims):
        if stride != expected:
            return False
        expected *= size
    return True
