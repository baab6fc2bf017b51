"""``analyze_model``: run a model once under the op recorder, cost every op, predict its time.

The prediction is each op's roofline lower bound on a target device (datasheet or measured
ceilings), so "this model at batch 64 on an H100" needs no GPU. Measured times are those of
the current device, when asked.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiprof.errors import InputError
from aiprof.factory import one_line
from aiprof.measure.tensor.capture import Clock, RecordedOp, record_ops
from aiprof.tensor.ceilings_model import Ceilings, ceilings_for_gpu
from aiprof.tensor.costmodel import CostSummary, op_cost, summarize
from aiprof.tensor.opcost import OpCost
from aiprof.tensor.roofline import RooflinePoint, place


@dataclass(frozen=True)
class OpRecord:
    """One recorded op with its cost and, on a target, its roofline placement."""

    index: int
    op: str
    phase: str
    memory_format: str
    input_shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    cost: OpCost
    roofline: RooflinePoint | None
    """Placement on the target's roofline (None without a target)."""
    measured_us: float | None


@dataclass(frozen=True)
class ModelAnalysis:
    """Every op of one forward (and backward) pass, costed."""

    target: str | None
    ops: tuple[OpRecord, ...]
    summary: CostSummary
    predicted_total_us: float | None
    """Sum of roof times on the target: a lower bound on the pass's time there."""
    measured_total_us: float | None
    recorded: tuple[RecordedOp, ...]
    """The raw recorded calls (strides, data pointers, tensor ids) for the lints."""


def analyze_model(
    model: Any,
    example_inputs: Sequence[Any] | Any,
    *,
    target: str | Ceilings | None = None,
    backward: bool = False,
    measure: bool = False,
    allow_tf32: bool = False,
    clock: Clock = time.perf_counter_ns,
) -> ModelAnalysis:
    """Run ``model(*example_inputs)`` (then backward of the output's sum if ``backward``) under a
    dispatch mode that records every aten op; cost each op; place it on the target's roofline.

    ``target`` is a GPU name from the hardware database (``"H100"``) or measured ``Ceilings``.
    A model that fails to run raises ``InputError`` with the model's error in one line.
    """
    ceilings = ceilings_for_gpu(target) if isinstance(target, str) else target
    inputs = (
        tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    )
    recorded = record_ops(lambda: _run(model, inputs, backward), measure=measure, clock=clock)
    records = tuple(_record(op, ceilings, allow_tf32) for op in recorded)
    predicted = sum(r.roofline.roof_time_us for r in records if r.roofline) if ceilings else None
    measured = sum(r.measured_us or 0.0 for r in records) if measure else None
    return ModelAnalysis(
        target=ceilings.name if ceilings else None,
        ops=records,
        summary=summarize(r.cost for r in records),
        predicted_total_us=predicted,
        measured_total_us=measured,
        recorded=tuple(recorded),
    )


def _run(model: Any, inputs: tuple[Any, ...], backward: bool) -> None:
    try:
        output = model(*inputs)
        if backward:
            _first_tensor(output).sum().backward()
    except InputError:
        raise
    except Exception as error:  # the user's model: any failure is reported, in one line
        raise InputError(f"the model failed to run: {one_line(error)}") from error


def _first_tensor(output: Any) -> Any:
    import torch

    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if isinstance(output, dict) else output
    if hasattr(output, "to_tuple"):
        values = output.to_tuple()
    for value in values:
        if isinstance(value, torch.Tensor):
            return value
    raise InputError("backward needs the model to return a tensor (or a tuple/dict holding one)")


def _record(op: RecordedOp, ceilings: Ceilings | None, allow_tf32: bool) -> OpRecord:
    cost = op_cost(op.call)
    tensors = op.call.tensors()
    point = place(cost, ceilings, op.measured_us, allow_tf32=allow_tf32) if ceilings else None
    return OpRecord(
        index=op.index,
        op=cost.op,
        phase=op.phase,
        memory_format=op.memory_format,
        input_shapes=tuple(t.shape for t in tensors),
        dtypes=tuple(t.dtype for t in tensors),
        cost=cost,
        roofline=point,
        measured_us=op.measured_us,
    )
