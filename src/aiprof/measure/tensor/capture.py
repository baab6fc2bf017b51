"""Record every aten op a model runs, with shapes, dtypes, strides and memory format.

torch is imported inside the functions: this is the only part of ``aiprof.tensor`` that runs a
model. The recorder is a ``TorchDispatchMode``, so it sees the ops after autograd and
decomposition, the same ops FlopCounterMode counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiprof.tensor.opcall import Arg, OpCall, TensorMeta

Clock = Callable[[], int]
"""Returns nanoseconds (``time.perf_counter_ns``); injected so tests can control it."""


@dataclass(frozen=True)
class RecordedOp:
    """One op call seen by the recorder."""

    index: int
    call: OpCall
    phase: str
    """``forward`` or ``backward``."""
    memory_format: str
    """Of the first tensor input: ``channels_last``, ``contiguous`` or ``strided``."""
    measured_us: float | None = None
    """Wall time of the op on the current device (synchronized), when measuring."""


class _Ids:
    """Sequential ids for tensor objects, held weakly."""

    def __init__(self) -> None:
        from torch.utils.weak import WeakIdKeyDictionary

        self._ids: Any = WeakIdKeyDictionary()
        self._next = 0

    def of(self, tensor: Any) -> int:
        found = self._ids.get(tensor)
        if found is None:
            found = self._next
            self._next += 1
            self._ids[tensor] = found
        return int(found)


def _meta(tensor: Any, ids: _Ids) -> TensorMeta:
    try:
        pointer: int | None = int(tensor.data_ptr())
    except (RuntimeError, NotImplementedError):
        pointer = None
    return TensorMeta(
        shape=tuple(int(s) for s in tensor.shape),
        dtype=str(tensor.dtype).removeprefix("torch."),
        strides=tuple(int(s) for s in tensor.stride()),
        data_ptr=pointer,
        tensor_id=ids.of(tensor),
    )


def _convert(value: Any, ids: _Ids) -> Arg:
    import torch

    if isinstance(value, torch.Tensor):
        return _meta(value, ids)
    if isinstance(value, (list, tuple)):
        return tuple(_convert(v, ids) for v in value)
    if isinstance(value, (int, float, bool, str)) or value is None:
        return value
    return str(value)


def memory_format_of(tensor: Any) -> str:
    """channels_last, contiguous or strided (torch tensor in)."""
    import torch

    if tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last):
        if not tensor.is_contiguous() or tensor.shape[1] == 1:
            return "channels_last"
    return "contiguous" if tensor.is_contiguous() else "strided"


def _phase() -> str:
    import torch

    return "backward" if torch._C._current_graph_task_id() != -1 else "forward"


def _synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def make_recorder(measure: bool = False, clock: Clock = time.perf_counter_ns) -> Any:
    """A TorchDispatchMode that appends a ``RecordedOp`` per aten call to its ``ops`` list."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[RecordedOp] = []
            self.ids = _Ids()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            converted = tuple(_convert(a, self.ids) for a in args)
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            if measure:
                _synchronize()
                start = clock()
            result = func(*args, **kwargs)
            elapsed = None
            if measure:
                _synchronize()
                elapsed = (clock() - start) / 1e3
            flat = result if isinstance(result, (list, tuple)) else (result,)
            outputs = tuple(_meta(t, self.ids) for t in flat if isinstance(t, torch.Tensor))
            self.ops.append(
                RecordedOp(
                    index=len(self.ops),
                    call=OpCall(str(func), converted, outputs),
                    phase=_phase(),
                    memory_format=memory_format_of(first) if first is not None else "none",
                    measured_us=elapsed,
                )
            )
            return result

    return Recorder()


def record_ops(
    run: Callable[[], Any], *, measure: bool = False, clock: Clock = time.perf_counter_ns
) -> list[RecordedOp]:
    """Run ``run()`` under the recorder and return every op it dispatched, in order."""
    recorder = make_recorder(measure=measure, clock=clock)
    with recorder:
        run()
    ops: list[RecordedOp] = recorder.ops
    return ops
