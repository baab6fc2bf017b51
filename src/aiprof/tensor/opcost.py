"""The result of costing one op call, and the helpers every family's cost function shares."""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiprof.tensor.dtypes import element_bytes, precision_class
from aiprof.tensor.opcall import OpCall, TensorMeta

FAMILIES = (
    "matmul",
    "convolution",
    "attention",
    "elementwise",
    "reduction",
    "normalization",
    "softmax",
    "embedding",
    "pooling",
    "data_movement",
    "view",
    "factory",
    "no_cost_model",
)
"""Families of ops; ``no_cost_model`` marks an op the model does not know (counted, not guessed)."""

TENSOR_CORE_FAMILIES = frozenset({"matmul", "convolution", "attention"})
"""Families whose FLOPs run on the matrix (tensor-core) path: their roof is the matmul peak."""


@dataclass(frozen=True)
class OpCost:
    """FLOPs and compulsory bytes of one op call (inputs read once, outputs written once)."""

    op: str
    family: str
    flops: int
    bytes_read: int
    bytes_written: int
    precision: str
    """Roofline precision of the op's first tensor: fp32, bf16, fp16, fp8, int8, fp64 or other."""
    has_model: bool = True
    note: str = ""

    @property
    def bytes_total(self) -> int:
        """Compulsory bytes moved: read plus written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity_flop_per_byte(self) -> float | None:
        """Arithmetic intensity FLOPs / compulsory bytes (gpu-models.md §6.1); None if no bytes."""
        return self.flops / self.bytes_total if self.bytes_total else None


def unique_bytes(tensor: TensorMeta) -> int:
    """Bytes a kernel must read at least: broadcast (stride-0) dimensions count once."""
    if tensor.strides is None:
        return tensor.nbytes
    count = math.prod(s for s, st in zip(tensor.shape, tensor.strides, strict=False) if st != 0)
    return count * element_bytes(tensor.dtype) if tensor.numel else 0


def read_all(call: OpCall, skip: tuple[int, ...] = ()) -> int:
    """Compulsory bytes read: every tensor argument (lists flattened) except positions in skip."""
    total = 0
    for index, arg in enumerate(call.args):
        if index in skip:
            continue
        if isinstance(arg, TensorMeta):
            total += unique_bytes(arg)
        elif isinstance(arg, tuple):
            total += sum(unique_bytes(a) for a in arg if isinstance(a, TensorMeta))
    return total


def written(call: OpCall, fallback: list[tuple[tuple[int, ...], str]]) -> int:
    """Bytes written: the recorded outputs, else the fallback (shape, dtype) list."""
    if call.outputs is not None:
        return sum(t.nbytes for t in call.outputs)
    return sum(math.prod(shape) * element_bytes(dtype) for shape, dtype in fallback)


def first_precision(call: OpCall) -> str:
    """Precision class of the first floating tensor argument (or the first tensor)."""
    tensors = call.tensors()
    for tensor in tensors:
        cls = precision_class(tensor.dtype)
        if cls in ("fp64", "fp32", "fp16", "bf16", "fp8"):
            return cls
    return precision_class(tensors[0].dtype) if tensors else "other"


def int_list(value: object, default: tuple[int, ...] = ()) -> tuple[int, ...]:
    """A scalar-list argument as a tuple of ints (an int becomes a 1-tuple; None the default)."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return (int(value),)
    if isinstance(value, (int, float)):
        return (int(value),)
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value if not isinstance(v, TensorMeta))
    return default


def arg(call: OpCall, index: int | None, default: object = None) -> object:
    """Positional argument ``index`` or ``default`` when absent (or when index is None)."""
    if index is None or index >= len(call.args) or call.args[index] is None:
        return default
    return call.args[index]
