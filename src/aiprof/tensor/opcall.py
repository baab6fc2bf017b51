"""One call of an aten op, as recorded by a profiler trace or a dispatch mode.

The same record feeds the cost model whatever its origin: positional arguments as in the
op's ATen schema, tensors described by shape, dtype and strides, other arguments as values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeAlias

from aiprof.tensor.dtypes import element_bytes


@dataclass(frozen=True)
class TensorMeta:
    """Shape, dtype and strides (in elements) of one tensor argument."""

    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] | None = None
    """Strides in elements; None when not recorded."""
    data_ptr: int | None = None
    """Address of the first element, when visible (dispatch capture)."""
    tensor_id: int | None = None
    """Identity of the tensor value, linking producer and consumer ops (dispatch capture)."""

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the logical tensor (numel × element size)."""
        return self.numel * element_bytes(self.dtype)

    @property
    def is_contiguous(self) -> bool:
        """Row-major dense (the default strides for its shape); True when strides are unknown."""
        return self.strides is None or self.strides == contiguous_strides(self.shape)

    @property
    def is_channels_last(self) -> bool:
        """A 4-D tensor stored NHWC (channels innermost), as torch.channels_last makes it."""
        if len(self.shape) != 4 or self.strides is None:
            return False
        n, c, h, w = self.shape
        expected = (h * w * c, 1, w * c, c)
        return c > 1 and all(
            size == 1 or s == e
            for size, s, e in zip(self.shape, self.strides, expected, strict=True)
        )


Arg: TypeAlias = (
    "TensorMeta | tuple[TensorMeta, ...] | int | float | bool | str | tuple[Any, ...] | None"
)


@dataclass(frozen=True)
class OpCall:
    """One op call: its aten name and positional arguments; outputs when known."""

    name: str
    """Op name in any spelling: ``aten::mm``, ``aten.mm.default``, ``mm``."""
    args: tuple[Arg, ...]
    outputs: tuple[TensorMeta, ...] | None = None
    """Output tensors; None when the source (a trace) does not record them."""

    @property
    def op(self) -> str:
        """Bare op name: ``aten::addmm`` and ``aten.addmm.default`` give ``addmm``."""
        return normalize_op_name(self.name)

    def tensor(self, index: int) -> TensorMeta | None:
        """The tensor at positional ``index``, or None if absent or not a tensor."""
        if index < len(self.args) and isinstance(self.args[index], TensorMeta):
            return self.args[index]  # type: ignore[return-value]
        return None

    def tensors(self) -> list[TensorMeta]:
        """Every tensor argument, tensor lists flattened, in order."""
        found: list[TensorMeta] = []
        for arg in self.args:
            if isinstance(arg, TensorMeta):
                found.append(arg)
            elif isinstance(arg, tuple):
                found.extend(a for a in arg if isinstance(a, TensorMeta))
        return found


def normalize_op_name(name: str) -> str:
    """``aten::addmm`` / ``aten.addmm.default`` / ``torch.ops.aten.addmm`` -> ``addmm``."""
    text = name.strip().removeprefix("torch.ops.")
    if "::" in text:
        text = text.split("::", 1)[1]
    elif text.startswith("aten."):
        text = text[len("aten.") :]
    return text.split(".", 1)[0]


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides (in elements) of a dense tensor of ``shape``."""
    strides = []
    running = 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))
