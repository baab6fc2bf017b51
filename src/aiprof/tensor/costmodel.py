"""The op cost model: an op call in, FLOPs and compulsory bytes out. Pure; no torch.

Unknown ops are never guessed: they get the family ``no_cost_model`` and are counted so that a
report can say how much of a workload the model covers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from aiprof.errors import InputError
from aiprof.tensor.compute_ops import COMPUTE_COSTS
from aiprof.tensor.memory_ops import FACTORY_OPS, memory_costs
from aiprof.tensor.opcall import OpCall
from aiprof.tensor.opcost import OpCost, first_precision

_COSTS = {**memory_costs(), **COMPUTE_COSTS}


def has_cost_model(op_name: str) -> bool:
    """Whether the bare op name (``addmm``, ``relu_``...) has a cost model."""
    return op_name in _COSTS


def op_cost(call: OpCall) -> OpCost:
    """FLOPs, minimum bytes read and written, and intensity of one op call.

    An op without a model, or a record too incomplete to cost (a trace without shapes),
    comes back with ``has_model=False`` and zero FLOPs and bytes, and a note saying why.
    """
    cost_fn = _COSTS.get(call.op)
    if cost_fn is None:
        return _uncosted(call, "no cost model for this op")
    if not call.tensors() and call.op not in FACTORY_OPS:
        return _uncosted(
            call, "record incomplete: no input shapes (profile with record_shapes=True)"
        )
    try:
        return cost_fn(call)
    except (InputError, IndexError, TypeError, ValueError, ZeroDivisionError) as error:
        return _uncosted(call, f"record incomplete: {error}")


def _uncosted(call: OpCall, note: str) -> OpCost:
    try:
        precision = first_precision(call)
    except InputError:
        precision = "other"
    return OpCost(call.op, "no_cost_model", 0, 0, 0, precision, has_model=False, note=note)


@dataclass(frozen=True)
class CostSummary:
    """Totals over many op calls, and which ops had no cost model."""

    num_ops: int
    num_ops_without_model: int
    total_flops: int
    total_bytes: int
    flops_by_family: dict[str, int]
    bytes_by_family: dict[str, int]
    ops_without_model: dict[str, int]
    """Op name -> number of calls the model could not cost."""


def summarize(costs: Iterable[OpCost]) -> CostSummary:
    """Aggregate op costs by family; count (never guess) the ops without a model."""
    flops: Counter[str] = Counter()
    nbytes: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    count = 0
    for cost in costs:
        count += 1
        flops[cost.family] += cost.flops
        nbytes[cost.family] += cost.bytes_total
        if not cost.has_model:
            missing[cost.op] += 1
    return CostSummary(
        num_ops=count,
        num_ops_without_model=sum(missing.values()),
        total_flops=sum(flops.values()),
        total_bytes=sum(nbytes.values()),
        flops_by_family=dict(sorted(flops.items())),
        bytes_by_family=dict(sorted(nbytes.items())),
        ops_without_model=dict(sorted(missing.items())),
    )
