"""Roofline of a trace: ops recorded with shapes, joined with their kernels' device time.

Each launching op gets FLOPs and bytes from the cost model; with its kernels' time that gives
achieved FLOP/s and GB/s, the % of the roof on the trace's device, a bound class and the time
lost to the roof. Ops with the same name, shapes and dtypes are aggregated into one row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from aiprof.errors import UnsupportedDeviceError
from aiprof.tensor.ceilings_model import Ceilings, ceilings_for_gpu
from aiprof.tensor.costmodel import op_cost
from aiprof.tensor.opcall import OpCall
from aiprof.tensor.opcost import OpCost
from aiprof.tensor.roofline import RooflinePoint, place
from aiprof.tensor.trace_ops import launching_calls

if TYPE_CHECKING:
    from aiprof.trace import Trace

COMMUNICATION_PREFIXES = ("record_param_comms", "c10d::", "nccl:")


@dataclass(frozen=True)
class RooflineRow:
    """Calls of one op with one set of shapes and dtypes, aggregated."""

    op: str
    shapes: str
    """Input shapes, as text."""
    dtypes: str
    """Input dtypes, as text."""
    num_calls: int
    point: RooflinePoint
    """Totals over the calls: FLOPs, bytes, measured and roof times."""


@dataclass(frozen=True)
class TraceRoofline:
    """Every op of a trace that launched GPU work, on the device's roofline."""

    device: str
    ceilings: Ceilings
    rows: tuple[RooflineRow, ...]
    """Sorted by time lost to the roof, largest first."""
    num_ops: int
    num_ops_without_model: int
    device_us: float
    """Device time of all launching ops except collectives (costed or not)."""
    device_us_without_model: float
    """Device time of ops the cost model could not cost (unknown op or no shapes)."""
    device_us_communication: float
    """Device time of collectives (NCCL kernels): not on a roofline, left out of the rows."""
    time_lost_us: float


def trace_roofline(
    trace: Trace, ceilings: Ceilings | None = None, *, allow_tf32: bool = False
) -> TraceRoofline:
    """Place every launching op of ``trace`` on the roofline of its device (or ``ceilings``)."""
    if ceilings is None:
        device = trace.device
        if device is None:
            raise UnsupportedDeviceError(
                "the trace names no GPU (no deviceProperties): pass --gpu NAME or --ceilings FILE"
            )
        ceilings = ceilings_for_gpu(device.name)
    groups: dict[tuple[str, str, str], _Group] = {}
    uncosted_us = comm_us = total_us = 0.0
    num_ops = num_missing = 0
    found = launching_calls(trace)
    # each distinct call costed once; None for collectives
    costed = [None if call.name.startswith(COMMUNICATION_PREFIXES) else _cost_and_key(call)
              for call in found.calls]
    for index, device_us in _pairs(found.call_index, found.device_us):
        known = costed[index]
        if known is None:
            comm_us += device_us
            continue
        num_ops += 1
        total_us += device_us
        cost, key = known
        if not cost.has_model:
            num_missing += 1
            uncosted_us += device_us
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(cost)
        group.add(cost, device_us)
    rows = [_row(key, group, ceilings, allow_tf32) for key, group in groups.items()]
    rows.sort(key=lambda r: (-(r.point.time_lost_us or 0.0), r.op, r.shapes))
    return TraceRoofline(
        device=ceilings.name,
        ceilings=ceilings,
        rows=tuple(rows),
        num_ops=num_ops,
        num_ops_without_model=num_missing,
        device_us=total_us,
        device_us_without_model=uncosted_us,
        device_us_communication=comm_us,
        time_lost_us=sum(r.point.time_lost_us or 0.0 for r in rows),
    )


def _cost_and_key(call: OpCall) -> tuple[OpCost, tuple[str, str, str]]:
    """The cost of one call and its row key (op, shapes, dtypes)."""
    cost = op_cost(call)
    tensors = call.tensors()
    return cost, (cost.op, str([t.shape for t in tensors]), ",".join(t.dtype for t in tensors))


CHUNK = 1 << 16
"""Ops turned into Python numbers at a time (``_pairs``): a trace's millions at once would
cost 64 bytes each."""


def _pairs(index: np.ndarray, device_us: np.ndarray) -> Iterator[tuple[int, float]]:
    """``zip(index.tolist(), device_us.tolist())``, ``CHUNK`` values at a time."""
    for lo in range(0, len(index), CHUNK):
        yield from zip(index[lo:lo + CHUNK].tolist(), device_us[lo:lo + CHUNK].tolist(),
                       strict=True)


class _Group:
    """The running totals of one row's calls, added in the ops' order (the sums a list of
    every call gave, without keeping a tuple per op)."""

    def __init__(self, first: OpCost) -> None:
        self.first = first
        self.num_calls = 0
        self.flops = self.bytes_read = self.bytes_written = 0
        self.measured_us = 0.0

    def add(self, cost: OpCost, device_us: float) -> None:
        self.num_calls += 1
        self.flops += cost.flops
        self.bytes_read += cost.bytes_read
        self.bytes_written += cost.bytes_written
        self.measured_us += device_us


def _row(
    key: tuple[str, str, str],
    group: _Group,
    ceilings: Ceilings,
    allow_tf32: bool,
) -> RooflineRow:
    first = group.first
    total = OpCost(
        op=first.op,
        family=first.family,
        flops=group.flops,
        bytes_read=group.bytes_read,
        bytes_written=group.bytes_written,
        precision=first.precision,
        has_model=first.has_model,
        note=first.note,
    )
    point = place(total, ceilings, group.measured_us, allow_tf32=allow_tf32)
    per_call = place(first, ceilings, allow_tf32=allow_tf32)  # latency is judged per call
    point = replace(point, bound=per_call.bound)
    op, shapes, dtypes = key
    return RooflineRow(op=op, shapes=shapes, dtypes=dtypes, num_calls=group.num_calls,
                       point=point)
