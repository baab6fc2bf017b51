"""Alignment lint: GEMM/convolution dimensions off the multiples tensor cores need, and large
tensors whose data pointer is aligned to less than 256 bytes.

Multiples (NVIDIA Deep Learning Performance Guide, "Matrix Multiplication Background User's
Guide", section "Tensor Core Requirements"): 8 elements for FP16/BF16, 16 for INT8/FP8, 4 for
TF32 (16 bytes in every case). Allocation alignment: the CUDA runtime returns 256-byte aligned
pointers (CUDA C++ Programming Guide, "Device Memory Accesses"), and the chapter asks for
256-byte alignment of tensor-core operands.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from aiprof.tensor.ceilings_model import Ceilings
from aiprof.tensor.costmodel import op_cost
from aiprof.tensor.opcall import OpCall
from aiprof.tensor.roofline import place

REQUIRED_MULTIPLE = {"fp16": 8, "bf16": 8, "int8": 16, "fp8": 16, "fp32": 4}
"""Elements per tensor-core-friendly dimension (fp32 assumes TF32 math)."""
POINTER_ALIGNMENT_BYTES = 256
LARGE_TENSOR_BYTES = 1 << 20
"""Pointer alignment is checked on tensors of at least 1 MiB (small ones do not matter)."""


@dataclass(frozen=True)
class AlignmentFinding:
    """One GEMM/conv with misaligned dimensions, or one misaligned large tensor."""

    index: int
    op: str
    kind: str
    """``dimension`` or ``pointer``."""
    dims: dict[str, int]
    """The op's GEMM view: M, N, K (or N, C_in, C_out for a convolution)."""
    misaligned: tuple[str, ...]
    required_multiple: int
    padded_dims: dict[str, int]
    extra_flops_pct: float
    """FLOPs added by padding, in % of the op's FLOPs."""
    roof_us: float | None
    padded_roof_us: float | None
    """Roof time of the padded op on the target (a lower bound on the aligned op's time)."""
    measured_us: float | None
    max_gain_us: float | None
    """Measured time minus the padded op's roof time: the most padding can gain."""
    data_ptr_mod_256: int | None = None


def gemm_dims(call: OpCall) -> dict[str, int] | None:
    """M, N, K of a matmul op, or N, C_in/groups, C_out of a convolution; None otherwise."""
    a_pos, b_pos = {"addmm": (1, 2), "baddbmm": (1, 2)}.get(call.op, (0, 1))
    a, b = call.tensor(a_pos), call.tensor(b_pos)
    if a is None or b is None:
        return None
    if call.op in ("mm", "addmm", "bmm", "baddbmm", "matmul", "_scaled_mm"):
        return {"M": math.prod(a.shape[:-1]), "N": b.shape[-1], "K": a.shape[-1]}
    if call.op == "linear":
        return {"M": math.prod(a.shape[:-1]), "N": b.shape[0], "K": b.shape[1]}
    if (
        call.op in ("convolution", "_convolution", "cudnn_convolution", "conv2d")
        and len(b.shape) > 2
    ):
        return {"C_in": b.shape[1], "C_out": b.shape[0]}
    return None


def lint_alignment(
    calls: Sequence[OpCall],
    ceilings: Ceilings | None = None,
    measured_us: Sequence[float | None] | None = None,
    *,
    check_pointers: bool = True,
) -> tuple[AlignmentFinding, ...]:
    """Every matmul/conv with a dimension off its dtype's multiple, and (``check_pointers``, for
    CUDA tensors: CPU allocators align to 64 bytes only) misaligned large operands."""
    found: list[AlignmentFinding] = []
    for index, call in enumerate(calls):
        time_us = measured_us[index] if measured_us is not None else None
        finding = _dimension_finding(index, call, ceilings, time_us)
        if finding is not None:
            found.append(finding)
        if check_pointers and gemm_dims(call) is not None:
            found.extend(_pointer_findings(index, call))
    return tuple(found)


def _dimension_finding(
    index: int, call: OpCall, ceilings: Ceilings | None, time_us: float | None
) -> AlignmentFinding | None:
    dims = gemm_dims(call)
    cost = op_cost(call)
    multiple = REQUIRED_MULTIPLE.get(cost.precision)
    if dims is None or multiple is None:
        return None
    bad = tuple(name for name, size in dims.items() if size % multiple)
    if not bad:
        return None
    padded = {
        name: _round_up(size, multiple) if name in bad else size for name, size in dims.items()
    }
    extra = 100.0 * (math.prod(padded.values()) / math.prod(dims.values()) - 1.0)
    roof = padded_roof = gain = None
    if ceilings is not None:
        roof = place(cost, ceilings).roof_time_us
        scale = math.prod(padded.values()) / math.prod(dims.values())
        padded_cost = type(cost)(**{**cost.__dict__, "flops": int(cost.flops * scale)})
        padded_roof = place(padded_cost, ceilings).roof_time_us
        gain = max(0.0, time_us - padded_roof) if time_us is not None else None
    return AlignmentFinding(
        index=index,
        op=call.op,
        kind="dimension",
        dims=dims,
        misaligned=bad,
        required_multiple=multiple,
        padded_dims=padded,
        extra_flops_pct=extra,
        roof_us=roof,
        padded_roof_us=padded_roof,
        measured_us=time_us,
        max_gain_us=gain,
    )


def _pointer_findings(index: int, call: OpCall) -> list[AlignmentFinding]:
    found = []
    for tensor in call.tensors():
        if tensor.data_ptr is None or tensor.nbytes < LARGE_TENSOR_BYTES:
            continue
        offset = tensor.data_ptr % POINTER_ALIGNMENT_BYTES
        if offset:
            found.append(
                AlignmentFinding(
                    index=index,
                    op=call.op,
                    kind="pointer",
                    dims={},
                    misaligned=("data_ptr",),
                    required_multiple=POINTER_ALIGNMENT_BYTES,
                    padded_dims={},
                    extra_flops_pct=0.0,
                    roof_us=None,
                    padded_roof_us=None,
                    measured_us=None,
                    max_gain_us=None,
                    data_ptr_mod_256=offset,
                )
            )
    return found


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def padded_conv_channels(channels: int, precision: str) -> int:
    """Channel count padded to the multiple of ``precision`` (e.g. 3 -> 8 for fp16)."""
    return _round_up(channels, REQUIRED_MULTIPLE.get(precision, 1))
