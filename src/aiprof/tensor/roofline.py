"""Roofline of one op: attainable performance, bound class, achieved fraction and time lost.

Model (../shared/reference/gpu-models.md §6.1): ``P = min(P_peak, I × B_peak)``, ridge
``I* = P_peak / B_peak``; the roof time of an op is ``max(FLOPs / P_peak, bytes / B_peak)``.
Bytes are compulsory traffic, so the roof time is a lower bound on the op's time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from aiprof.errors import InputError
from aiprof.tensor.ceilings_model import Ceilings
from aiprof.tensor.opcost import TENSOR_CORE_FAMILIES, OpCost

BOUNDS = ("compute", "memory", "latency", "unknown")


@dataclass(frozen=True)
class RooflinePoint:
    """One op placed on a device's roofline."""

    op: str
    family: str
    precision: str
    flops: int
    bytes_total: int
    intensity_flop_per_byte: float | None
    peak_flops_per_s: float
    """The compute roof used for this op (matrix path for matmul/conv/attention)."""
    ridge_flop_per_byte: float
    roof_time_us: float
    """``max(FLOPs / peak, bytes / bandwidth)``: the op's lower bound on this device."""
    bound: str
    """compute, memory, latency (roof time under the latency floor) or unknown (no cost model)."""
    measured_us: float | None = None
    achieved_flops_per_s: float | None = None
    achieved_gbps: float | None = None
    roof_pct: float | None = None
    """Roof time / measured time × 100: how close the op runs to its attainable performance."""
    time_lost_us: float | None = None
    """Measured time minus roof time (never negative)."""


def place(
    cost: OpCost, ceilings: Ceilings, measured_us: float | None = None, *, allow_tf32: bool = False
) -> RooflinePoint:
    """Place one op cost on the roofline of ``ceilings``, with its measured time when known."""
    if measured_us is not None and measured_us < 0:
        raise InputError(f"{cost.op}: measured time {measured_us} us is negative")
    if cost.family in TENSOR_CORE_FAMILIES:
        peak = ceilings.matmul_peak(cost.precision, allow_tf32=allow_tf32)
    else:
        peak = ceilings.vector_flops_per_s
    bandwidth = ceilings.memory_bytes_per_s
    ridge = peak / bandwidth
    roof_us = max(cost.flops / peak, cost.bytes_total / bandwidth) * 1e6
    intensity = cost.intensity_flop_per_byte
    if not cost.has_model:
        bound = "unknown"
    elif roof_us < ceilings.latency_floor_us:
        bound = "latency"
    elif intensity is None or intensity >= ridge:
        bound = "compute"
    else:
        bound = "memory"
    point = RooflinePoint(
        op=cost.op,
        family=cost.family,
        precision=cost.precision,
        flops=cost.flops,
        bytes_total=cost.bytes_total,
        intensity_flop_per_byte=intensity,
        peak_flops_per_s=peak,
        ridge_flop_per_byte=ridge,
        roof_time_us=roof_us,
        bound=bound,
    )
    if measured_us is None or measured_us == 0 or not cost.has_model:
        return point
    return _with_measurement(point, cost, measured_us)


def _with_measurement(point: RooflinePoint, cost: OpCost, measured_us: float) -> RooflinePoint:
    seconds = measured_us * 1e-6
    return replace(
        point,
        measured_us=measured_us,
        achieved_flops_per_s=cost.flops / seconds,
        achieved_gbps=cost.bytes_total / seconds / 1e9,
        roof_pct=100.0 * point.roof_time_us / measured_us,
        time_lost_us=max(0.0, measured_us - point.roof_time_us),
    )
